"""The neutral request every provider is asked (the provider interface: neutral/provider.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from orgate.neutral.dialects import SchemaDialect
from orgate.neutral.items import OpaqueItem
from orgate.neutral.ledger import Ledger

if TYPE_CHECKING:
    from orgate.protocol.items import ItemParam

#: One item of the conversation a provider is asked: a protocol input item, or an extension
#: item of the history (``OpaqueItem``, another origin's item carried through).
InputItem: TypeAlias = "ItemParam | OpaqueItem"


@dataclass(slots=True)
class TextFormat:
    """The requested output format. ``schema`` only for ``json_schema``."""

    type: Literal["text", "json_object", "json_schema"] = "text"
    name: str | None = None
    schema: dict[str, Any] | None = None
    strict: bool | None = None
    description: str | None = None
    # How the provider sends a ``json_schema`` format upstream (neutral/dialects.py): None is
    # its standard way; the safety net sets another where the upstream constrains decoding so.
    dialect: SchemaDialect | None = None


@dataclass(slots=True)
class ModelRequest:
    """One model call, provider-neutral.

    ``input`` holds the resolved conversation as protocol input item models
    (``orgate.protocol`` item params: messages of every role, ``function_call``,
    ``function_call_output``, ``reasoning``...), oldest first, with
    ``previous_response_id`` history and ``item_reference`` already expanded.
    A string input has been turned into one user message.
    ``tools`` are protocol ``FunctionToolParam`` models; ``tool_choice`` is
    ``"auto" | "required" | "none"``, a ``SpecificFunctionParam`` or an
    ``AllowedToolsParam`` (or None = provider default).
    """

    model: str  # the upstream model name
    input: list[InputItem]
    instructions: str | None = None
    tools: list[Any] = field(default_factory=list)
    # Tools the upstream runs itself (``web_search``…, as the client sent them): only a
    # deployment whose ``capabilities.hosted_tools`` is set gets any (see engine/turn_tools.py).
    hosted_tools: list[dict[str, Any]] = field(default_factory=list)
    tool_choice: Any = None
    temperature: float | None = None
    top_p: float | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    max_output_tokens: int | None = None
    parallel_tool_calls: bool | None = None
    max_tool_calls: int | None = None
    text_format: TextFormat | None = None
    reasoning_effort: str | None = None
    reasoning_summary: str | None = None
    user: str | None = None  # the ``user`` extension field
    safety_identifier: str | None = None
    prompt_cache_key: str | None = None
    verbosity: str | None = None  # ``text.verbosity``
    service_tier: str | None = None
    metadata: dict[str, str] | None = None
    stop: list[str] | None = None  # only from the chat adapter
    # Token log probabilities asked for (``include: ["message.output_text.logprobs"]`` or
    # ``top_logprobs`` > 0), and how many alternatives per token.
    logprobs: bool = False
    top_logprobs: int | None = None
    # How many leading items of ``input`` are the stored history the turn continues (the same
    # decoded objects every turn): a provider may keep what it made of them for the next turn.
    history_length: int = 0
    # What the engine, a provider's mapping and its decoder translated on the way to the
    # upstream and back (``orgate.neutral.ledger``). Shared, not copied, by
    # ``dataclasses.replace``: the entries of a wrapper's rewritten request reach the turn.
    ledger: Ledger = field(default_factory=Ledger)
