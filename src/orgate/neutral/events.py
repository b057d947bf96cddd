"""Neutral model events: what a provider yields while the model answers.

A provider's stream is a sequence of these, ending in exactly one ``Finish``.
Text and refusal deltas belong to one assistant message; reasoning deltas to
one reasoning item; tool calls are opened by ``ToolCallStart`` and filled by
``ToolCallDelta`` for the same ``index``. Providers emit tool calls one after
another (all deltas of call ``i`` before ``ToolCallStart`` of call ``i+1``);
a decoder whose upstream interleaves them buffers to keep that order.
``ExtensionItem`` carries a complete upstream item that has no neutral
equivalent (see ``orgate.neutral.items``); it stands between the items
before and after it.
The ``Mcp*`` events come from the gateway's own MCP loop (``orgate.engine.mcp_loop``),
never from a provider. Errors are raised (``orgate.protocol.errors.ApiError``), not yielded.

Events are values: nothing changes one after it was made. They are plain slotted
dataclasses rather than frozen ones all the same: a frozen dataclass's ``__init__``
sets each field through ``object.__setattr__``, a cost paid for several events per
upstream read (hot path — see ``bench/instructions.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

FinishReason = Literal["stop", "length", "tool_calls", "content_filter"]


@dataclass(slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cached_tokens + other.cached_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
        )


def token_count(usage: Any, key: str) -> int:
    """A token count from an upstream's usage object (any JSON): an integer (``12.0`` too),
    else 0 — a response's usage has integers only."""
    value = usage.get(key) if isinstance(usage, dict) else None
    if isinstance(value, int):
        return value
    return int(value) if isinstance(value, float) and value.is_integer() else 0


@dataclass(slots=True)
class TextDelta:
    """A piece of assistant output text; ``logprobs``: its tokens' log probabilities in the
    spec's ``LogProb`` shape (``orgate.neutral.logprobs``), when they were asked for and given."""

    text: str
    logprobs: list[dict[str, Any]] | None = None


@dataclass(slots=True)
class RefusalDelta:
    """A piece of an assistant refusal."""

    text: str


@dataclass(slots=True)
class ReasoningDelta:
    """A piece of reasoning: raw reasoning ``content`` or a ``summary``."""

    text: str
    part: Literal["content", "summary"] = "content"


@dataclass(slots=True)
class ReasoningStart:
    """The model starts a new reasoning item.

    For upstreams whose answer can hold several reasoning items (the Responses
    API): without it, reasoning events continue the open reasoning item (an
    Anthropic run of thinking blocks is one item, with one envelope).
    """


@dataclass(slots=True)
class ReasoningEncrypted:
    """Opaque reasoning state (e.g. an Anthropic thinking signature) for the current reasoning
    item."""

    data: str


@dataclass(slots=True)
class ToolCallStart:
    """The model starts a function call. ``call_id`` may be empty: the builder then makes one.

    ``custom``: a call of a ``custom`` tool (OpenAI's free-form tools): its deltas are pieces
    of the free-form ``input`` string, not of JSON arguments (``orgate.providers.custom_tools``
    turns an upstream's function call of such a tool into one)."""

    index: int
    call_id: str
    name: str
    custom: bool = False
    # OpenAI's ``namespace`` of the tool called (a tool offered inside a ``namespace`` tool, which
    # only a native Responses upstream runs): the client needs it to find the tool.
    namespace: str | None = None


@dataclass(slots=True)
class ToolCallDelta:
    """A piece of the JSON arguments string (a custom call: of the ``input``) of the call opened
    with the same ``index``."""

    index: int
    arguments: str


@dataclass(slots=True)
class ExtensionItem:
    """A complete output item of the upstream's own (``web_search_call``, ``openai:...``):
    kept, never shown.

    ``item`` is the raw item as the upstream sent it; ``origin`` identifies the
    upstream that made it (``orgate.neutral.items.origin_of``), the only one it
    may be sent back to.
    """

    item: dict[str, Any]
    origin: str


@dataclass(slots=True)
class McpListStart:
    """The gateway starts listing an MCP server's tools (an ``mcp_list_tools`` item opens)."""

    server_label: str


@dataclass(slots=True)
class McpListDone:
    """The listing ended: its tools (``mcp_list_tools`` item shape), or why it failed."""

    tools: list[dict[str, Any]]
    error: str | None = None


@dataclass(slots=True)
class McpCallStart:
    """The gateway runs a tool on an MCP server (an ``mcp_call`` item opens, with its arguments)."""

    server_label: str
    name: str
    arguments: str
    approval_request_id: str | None = None


@dataclass(slots=True)
class McpCallDone:
    """The call ended: its output, or its error (OpenAI's ``mcp_call.error`` shapes)."""

    output: str | None = None
    error: dict[str, Any] | None = None


@dataclass(slots=True)
class McpApproval:
    """A call waits for the client's approval (an ``mcp_approval_request`` item;
    the response ends)."""

    server_label: str
    name: str
    arguments: str


@dataclass(slots=True)
class CompactionItem:
    """A compaction the gateway ran before calling the model (a request's ``context_management``):
    the response's ``compaction`` output item, sealed (``encrypted_content``)."""

    encrypted_content: str


@dataclass(slots=True)
class Finish:
    """The last event of every provider stream."""

    reason: FinishReason
    usage: Usage | None = None


ModelEvent = (
    TextDelta
    | RefusalDelta
    | ReasoningStart
    | ReasoningDelta
    | ReasoningEncrypted
    | ToolCallStart
    | ToolCallDelta
    | ExtensionItem
    | McpListStart
    | McpListDone
    | McpCallStart
    | McpCallDone
    | McpApproval
    | CompactionItem
    | Finish
)
