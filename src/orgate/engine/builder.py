"""The response builder: neutral model events in, spec streaming events and the final response out.

One state machine in one place. The builder owns every id, output index and
``sequence_number``; it emits wire-ready event dicts (never mutated after they
are emitted) and folds them into the final ``ResponseResource`` dict. The
streaming path sends the events; the non-streaming path drains the same
events and returns the terminal event's ``response``.

Lifecycle per item: ``response.output_item.added`` (``in_progress``) →
content events → ``response.output_item.done``; items never interleave.
Terminal: ``response.completed`` | ``response.incomplete`` | (``error`` +)
``response.failed``.

Extension items (``ExtensionItem``: an upstream's own items, such as
``web_search_call``) are not spec output: the official output item union
does not contain them, so they are neither streamed nor put into ``output``.
The builder closes the open item, then keeps them aside with their place
among the spec items (``extensions``); ``output_items()`` is the model's full
output in upstream order, as stored for the next turn
(``orgate.neutral.items``). Given the serving deployment's origin, it also
marks the reasoning items that carry ``encrypted_content`` with that origin
(``ORIGIN_FIELD``: history only, never in an event or ``output``).
"""

from __future__ import annotations

import time
from typing import Any

from orgate.engine import ids
from orgate.engine.padding import PAD_TO, PADDING, padding
from orgate.neutral import (
    CompactionItem,
    ExtensionItem,
    Finish,
    McpApproval,
    McpCallDone,
    McpCallStart,
    McpListDone,
    McpListStart,
    ModelEvent,
    ReasoningDelta,
    ReasoningEncrypted,
    ReasoningStart,
    RefusalDelta,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    Usage,
    extension_wire,
)
from orgate.neutral.items import with_origin
from orgate.protocol.errors import ApiError, ErrorCode

Event = dict[str, Any]

_INCOMPLETE_REASONS = {"length": "max_output_tokens", "content_filter": "content_filter"}


def usage_dict(usage: Usage | None) -> dict[str, Any]:
    usage = usage or Usage()
    return {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_tokens},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.total_tokens,
    }


class _Message:
    __slots__ = ("id", "index", "parts", "kind", "chunks", "logprobs")

    def __init__(self, item_id: str, index: int) -> None:
        self.id = item_id
        self.index = index
        self.parts: list[dict[str, Any]] = []  # finished content parts
        self.kind: str | None = None  # "output_text" | "refusal" for the open part
        self.chunks: list[str] = []
        self.logprobs: list[
            dict[str, Any]
        ] = []  # the open output_text part's token log probabilities


class _ToolCallItem:
    __slots__ = ("id", "index", "call_id", "name", "chunks", "source_index", "custom", "namespace")

    def __init__(
        self,
        item_id: str,
        index: int,
        call_id: str,
        name: str,
        source_index: int,
        custom: bool,
        namespace: str | None = None,
    ) -> None:
        self.id = item_id
        self.index = index
        self.call_id = call_id or ids.call_id()
        self.name = name
        self.chunks: list[str] = []
        self.source_index = source_index
        self.custom = (
            custom  # a ``custom_tool_call``: ``input`` (free-form text) instead of ``arguments``
        )
        self.namespace = namespace  # OpenAI's namespace of the tool, when the upstream named one


class _Reasoning:
    __slots__ = ("id", "index", "content", "summary", "encrypted", "open_part")

    def __init__(self, item_id: str, index: int) -> None:
        self.id = item_id
        self.index = index
        self.content: list[str] = []  # finished reasoning_text parts
        self.summary: list[str] = []  # finished summary_text parts
        self.encrypted: str | None = None
        self.open_part: tuple[str, list[str]] | None = None  # ("content"|"summary", chunks)


def _call_item(call: _ToolCallItem, status: str, text: str) -> dict[str, Any]:
    """A ``function_call`` item, or OpenAI's ``custom_tool_call`` (``input`` instead of
    ``arguments``)."""
    if call.custom:
        item = {
            "id": call.id,
            "type": "custom_tool_call",
            "status": status,
            "call_id": call.call_id,
            "name": call.name,
            "input": text,
        }
    else:
        item = {
            "id": call.id,
            "type": "function_call",
            "status": status,
            "call_id": call.call_id,
            "name": call.name,
            "arguments": text,
        }
    if call.namespace is not None:
        item["namespace"] = call.namespace
    return item


class ResponseBuilder:
    """Folds neutral model events into spec events and one final response.

    ``base`` is the response skeleton: every ``ResponseResource`` field echoed
    from the request (tools, tool_choice, text, sampling values...). The fields
    the builder owns (``id``, ``status``, ``output``, ``usage``...) are set on a
    copy of it; a base that holds them as placeholders fixes their key order.
    """

    def __init__(
        self, base: dict[str, Any], *, response_id: str | None = None, created_at: int | None = None
    ) -> None:
        self.id = response_id or ids.response_id()
        self.created_at = created_at if created_at is not None else int(time.time())
        self.base = base
        self.status = "in_progress"
        self.output: list[dict[str, Any]] = []
        self.usage: Usage | None = None
        self.error: dict[str, Any] | None = None
        self.incomplete_details: dict[str, Any] | None = None
        self.completed_at: int | None = None
        self.events: list[Event] = []  # pending, drained (and numbered) by the caller
        self._emit = self.events.append
        # Extension items in stored form, each with the number of spec output items before it.
        self.extensions: list[tuple[int, dict[str, Any]]] = []
        self.sealed_reasoning = (
            False  # a reasoning item carries encrypted_content (only its origin may read it)
        )
        self._seq = 0
        self._open: _Message | _ToolCallItem | _Reasoning | None = None
        self._mcp_open: dict[str, Any] | None = (
            None  # an MCP item between its start and done events
        )
        self.finished = False  # a terminal event was emitted (read only: the builder sets it)
        self.final: dict[str, Any] | None = (
            None  # the terminal snapshot (shared with its event; never changed)
        )
        # Delta events carry ``obfuscation`` (engine.padding): set by a stream before its first
        # event.
        self.padded = False

    # --- snapshots ------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """The response as it stands; a new dict each time (emitted events never change).

        A copy of ``base`` (the echoed request fields; with placeholders for the
        builder's own fields, the copy keeps the spec's key order) with the builder's
        fields set.
        """
        out = self.base.copy()
        out["id"] = self.id
        out["object"] = "response"
        out["created_at"] = self.created_at
        out["completed_at"] = self.completed_at
        out["status"] = self.status
        out["incomplete_details"] = self.incomplete_details
        out["output"] = list(self.output)
        out["error"] = self.error
        out["usage"] = usage_dict(self.usage) if self.usage is not None else None
        return out

    def unlink_previous(self) -> None:
        """Snapshots from now on say ``previous_response_id: null`` (the previous response
        vanished)."""
        self.base["previous_response_id"] = None
        self.final = None

    @property
    def history_differs(self) -> bool:
        """True when the stored history needs ``output_items()`` rather than the spec ``output``."""
        return bool(self.extensions) or self.sealed_reasoning

    def output_items(self, origin: str | None = None) -> list[dict[str, Any]]:
        """The model's full output: the spec output items and the extension items, in upstream
        order.

        With ``origin`` (the serving deployment's ``origin_of``), reasoning items
        that carry ``encrypted_content`` are copies marked with it.
        """
        output = self.output
        if origin is not None and self.sealed_reasoning:
            output = [
                with_origin(item, origin)
                if item.get("type") == "reasoning" and item.get("encrypted_content")
                else item
                for item in output
            ]
        if not self.extensions:
            return list(output)
        items: list[dict[str, Any]] = []
        done = 0
        for position, item in self.extensions:
            items.extend(output[done:position])
            done = max(done, position)
            items.append(item)
        items.extend(output[done:])
        return items

    # --- emission -------------------------------------------------------------------------

    def drain(self) -> list[Event]:
        """The events emitted since the last drain, numbered (``sequence_number``) in emission
        order."""
        events = self.events.copy()
        self.events.clear()  # the same list: ``_emit`` is its bound ``append``
        start = self._seq
        for seq, event in enumerate(events, start):
            event["sequence_number"] = seq
        self._seq = start + len(events)
        return events

    def _emit_delta(self, event: Event) -> None:
        """A delta event, with its ``obfuscation`` when the stream is padded (the text delta,
        the common one, does this inline)."""
        if self.padded:
            event["obfuscation"] = padding(event["delta"])
        self._emit(event)

    def start(self, *, queued: bool = False) -> None:
        """``response.created`` then ``response.in_progress`` (or ``response.queued`` for
        background)."""
        if queued:
            self.status = "queued"
            self._emit({"type": "response.created", "response": self.snapshot()})
            self._emit({"type": "response.queued", "response": self.snapshot()})
            return
        # Nothing changes between the two events: they carry one snapshot (emitted events are
        # never changed).
        snapshot = self.snapshot()
        self._emit({"type": "response.created", "response": snapshot})
        self._emit({"type": "response.in_progress", "response": snapshot})

    def in_progress(self) -> None:
        """A queued (background) response starts running."""
        self.status = "in_progress"
        self._emit({"type": "response.in_progress", "response": self.snapshot()})

    def feed(self, event: ModelEvent) -> None:
        if self.finished:
            raise ApiError.of(
                ErrorCode.UPSTREAM_INVALID_RESPONSE,
                "the upstream sent events after the end of its answer",
            )
        # The common event, ahead of the match's class patterns and inline: the refusal delta's
        # shape below, without a shared method's call per delta (hot path — see
        # bench/instructions.py).
        if isinstance(event, TextDelta):
            text = event.text
            logprobs = event.logprobs
            if text or logprobs:  # tokens without text (a piece of a character) have a delta too
                message = self._open
                if type(message) is not _Message or message.kind != "output_text":
                    message = self._open_part("output_text")
                message.chunks.append(text)
                if logprobs:
                    message.logprobs += logprobs
                delta = {
                    "type": "response.output_text.delta",
                    "item_id": message.id,
                    "output_index": message.index,
                    "content_index": len(message.parts),
                    "delta": text,
                    "logprobs": logprobs or [],
                }
                if self.padded:  # ``padding(text)`` inline: no call per delta on the hot path
                    delta["obfuscation"] = PADDING[len(text.encode()) % PAD_TO]
                self._emit(delta)
            return
        match event:
            case Finish(reason=reason, usage=usage):  # in every answer: first
                self._finish(reason, usage)
            case RefusalDelta(text=text):
                if text:
                    message = self._open_part("refusal")
                    message.chunks.append(text)
                    self._emit(
                        {
                            "type": "response.refusal.delta",
                            "item_id": message.id,
                            "output_index": message.index,
                            "content_index": len(message.parts),
                            "delta": text,
                        }
                    )
            case ToolCallStart():
                self._close_open("completed")
                self._open_call(event)
            case ToolCallDelta(index=index, arguments=arguments):
                call = self._open
                if not isinstance(call, _ToolCallItem) or call.source_index != index:
                    raise ApiError.of(
                        ErrorCode.UPSTREAM_INVALID_RESPONSE,
                        f"the upstream sent arguments for tool call {index}, which is not the"
                        " open call",
                    )
                if arguments:
                    call.chunks.append(arguments)
                    self._emit_delta(
                        {
                            "type": "response.custom_tool_call_input.delta"
                            if call.custom
                            else "response.function_call_arguments.delta",
                            "item_id": call.id,
                            "output_index": call.index,
                            "delta": arguments,
                        }
                    )
            case ReasoningDelta(text=text, part=part):
                self._reasoning(text, part)
            case ReasoningStart():
                self._open_reasoning()  # closes the open item, a reasoning one too
            case ReasoningEncrypted(data=data):
                reasoning = (
                    self._open if isinstance(self._open, _Reasoning) else self._open_reasoning()
                )
                reasoning.encrypted = data
                self.sealed_reasoning = True
            case McpListStart() | McpListDone() | McpCallStart() | McpCallDone() | McpApproval():
                self._mcp(event)
            case CompactionItem(encrypted_content=sealed):
                self._compaction(sealed)
            case ExtensionItem(item=item, origin=origin):
                self._close_open("completed")
                self.extensions.append(
                    (len(self.output), extension_wire(ids.new_id("ext"), origin, item))
                )
            case _:
                raise TypeError(f"unknown model event {event!r}")

    # --- a compaction the gateway ran (``context_management``) ---------------------------------

    def _compaction(self, sealed: str) -> None:
        """The ``compaction`` output item, with OpenAI's events for a server-side compaction:
        ``output_item.added`` (no content yet), ``response.compaction.compacting``,
        ``output_item.done`` (the sealed content)."""
        self._close_open("completed")
        index = len(self.output)
        item = {
            "id": ids.output_item_id("cmp", self.id, index),
            "type": "compaction",
            "encrypted_content": sealed,
        }
        self._emit(
            {
                "type": "response.output_item.added",
                "output_index": index,
                "item": {**item, "encrypted_content": ""},
            }
        )
        self._emit(
            {"type": "response.compaction.compacting", "item_id": item["id"], "output_index": index}
        )
        self.output.append(item)
        self._emit({"type": "response.output_item.done", "output_index": index, "item": item})

    # --- MCP items (the gateway's own tool loop) ---------------------------------------------

    def _mcp(
        self, event: McpListStart | McpListDone | McpCallStart | McpCallDone | McpApproval
    ) -> None:
        """``mcp_list_tools`` / ``mcp_call`` / ``mcp_approval_request`` items and their events,
        as OpenAI's Responses API streams them (docs/mcp.md)."""
        if isinstance(event, McpListDone | McpCallDone):
            item = self._mcp_open
            if item is None:
                raise TypeError(f"{type(event).__name__} without an open MCP item")
            self._mcp_open = None
            index = len(self.output)
            if isinstance(event, McpListDone):
                item = {**item, "tools": event.tools}
                if event.error is not None:
                    item["error"] = event.error
                name = (
                    "response.mcp_list_tools.failed"
                    if event.error is not None
                    else "response.mcp_list_tools.completed"
                )
            else:
                item = {
                    **item,
                    "output": event.output,
                    "error": event.error,
                    "status": "failed" if event.error is not None else "completed",
                }
                name = (
                    "response.mcp_call.failed"
                    if event.error is not None
                    else "response.mcp_call.completed"
                )
            self._emit({"type": name, "item_id": item["id"], "output_index": index})
            self.output.append(item)
            self._emit({"type": "response.output_item.done", "output_index": index, "item": item})
            return
        self._close_open("completed")
        if self._mcp_open is not None:
            raise TypeError("an MCP item opened while another is open")
        index = len(self.output)
        if isinstance(event, McpApproval):
            item = {
                "id": ids.output_item_id("mcpr", self.id, index),
                "type": "mcp_approval_request",
                "server_label": event.server_label,
                "name": event.name,
                "arguments": event.arguments,
            }
            self._emit({"type": "response.output_item.added", "output_index": index, "item": item})
            self.output.append(item)
            self._emit({"type": "response.output_item.done", "output_index": index, "item": item})
            return
        if isinstance(event, McpListStart):
            item = {
                "id": ids.output_item_id("mcpl", self.id, index),
                "type": "mcp_list_tools",
                "server_label": event.server_label,
                "tools": [],
            }
            self._mcp_open = item
            self._emit({"type": "response.output_item.added", "output_index": index, "item": item})
            self._emit(
                {
                    "type": "response.mcp_list_tools.in_progress",
                    "item_id": item["id"],
                    "output_index": index,
                }
            )
            return
        item = {
            "id": ids.output_item_id("mcp", self.id, index),
            "type": "mcp_call",
            "server_label": event.server_label,
            "name": event.name,
            "arguments": event.arguments,
            "approval_request_id": event.approval_request_id,
            "output": None,
            "error": None,
            "status": "in_progress",
        }
        self._mcp_open = item
        self._emit(
            {
                "type": "response.output_item.added",
                "output_index": index,
                "item": {**item, "arguments": ""},
            }
        )
        self._emit(
            {"type": "response.mcp_call.in_progress", "item_id": item["id"], "output_index": index}
        )
        self._emit_delta(
            {
                "type": "response.mcp_call_arguments.delta",
                "item_id": item["id"],
                "output_index": index,
                "delta": event.arguments,
            }
        )
        self._emit(
            {
                "type": "response.mcp_call_arguments.done",
                "item_id": item["id"],
                "output_index": index,
                "arguments": event.arguments,
            }
        )

    # --- text ----------------------------------------------------------------------------

    def _open_part(self, kind: str) -> _Message:
        """The open message with an open part of ``kind`` (a new message, a new part, as needed)."""
        message = self._open
        if not isinstance(message, _Message):
            self._close_open("completed")
            message = self._open_message()
        if message.kind != kind:
            self._close_part(message)
            message.kind = kind
            part: dict[str, Any] = (
                {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
                if kind == "output_text"
                else {"type": "refusal", "refusal": ""}
            )
            self._emit(
                {
                    "type": "response.content_part.added",
                    "item_id": message.id,
                    "output_index": message.index,
                    "content_index": len(message.parts),
                    "part": part,
                }
            )
        return message

    def _open_message(self) -> _Message:
        index = len(self.output)
        message = _Message(ids.output_item_id("msg", self.id, index), index)
        self._open = message
        self._emit(
            {
                "type": "response.output_item.added",
                "output_index": message.index,
                "item": {
                    "id": message.id,
                    "type": "message",
                    "status": "in_progress",
                    "role": "assistant",
                    "content": [],
                },
            }
        )
        return message

    def _close_part(self, message: _Message) -> None:
        if message.kind is None:
            return
        text = "".join(message.chunks)
        index = len(message.parts)
        if message.kind == "output_text":
            logprobs = message.logprobs
            message.logprobs = []  # the part's list is emitted: the next part gets its own
            part = {"type": "output_text", "text": text, "annotations": [], "logprobs": logprobs}
            self._emit(
                {
                    "type": "response.output_text.done",
                    "item_id": message.id,
                    "output_index": message.index,
                    "content_index": index,
                    "text": text,
                    "logprobs": logprobs,
                }
            )
        else:
            part = {"type": "refusal", "refusal": text}
            self._emit(
                {
                    "type": "response.refusal.done",
                    "item_id": message.id,
                    "output_index": message.index,
                    "content_index": index,
                    "refusal": text,
                }
            )
        self._emit(
            {
                "type": "response.content_part.done",
                "item_id": message.id,
                "output_index": message.index,
                "content_index": index,
                "part": part,
            }
        )
        message.parts.append(part)
        message.kind = None
        message.chunks = []

    # --- tool calls ------------------------------------------------------------------------

    def _open_call(self, start: ToolCallStart) -> None:
        index = len(self.output)
        call = _ToolCallItem(
            ids.output_item_id("ctc" if start.custom else "fc", self.id, index),
            index,
            start.call_id,
            start.name,
            start.index,
            start.custom,
            start.namespace,
        )
        self._open = call
        self._emit(
            {
                "type": "response.output_item.added",
                "output_index": call.index,
                "item": _call_item(call, "in_progress", ""),
            }
        )

    # --- reasoning ------------------------------------------------------------------------

    def _open_reasoning(self) -> _Reasoning:
        self._close_open("completed")
        index = len(self.output)
        item = _Reasoning(ids.output_item_id("rs", self.id, index), index)
        self._open = item
        self._emit(
            {
                "type": "response.output_item.added",
                "output_index": item.index,
                "item": {"id": item.id, "type": "reasoning", "summary": []},
            }
        )
        return item

    def _reasoning(self, text: str, part: str) -> None:
        item = self._open if isinstance(self._open, _Reasoning) else self._open_reasoning()
        if item.open_part is None or item.open_part[0] != part:
            self._close_reasoning_part(item)
            item.open_part = (part, [])
            if part == "summary":
                self._emit(
                    {
                        "type": "response.reasoning_summary_part.added",
                        "item_id": item.id,
                        "output_index": item.index,
                        "summary_index": len(item.summary),
                        "part": {"type": "summary_text", "text": ""},
                    }
                )
            else:
                self._emit(
                    {
                        "type": "response.content_part.added",
                        "item_id": item.id,
                        "output_index": item.index,
                        "content_index": len(item.content),
                        "part": {"type": "reasoning_text", "text": ""},
                    }
                )
        if not text:
            return
        item.open_part[1].append(text)
        if part == "summary":
            self._emit_delta(
                {
                    "type": "response.reasoning_summary_text.delta",
                    "item_id": item.id,
                    "output_index": item.index,
                    "summary_index": len(item.summary),
                    "delta": text,
                }
            )
        else:
            self._emit_delta(
                {
                    "type": "response.reasoning.delta",
                    "item_id": item.id,
                    "output_index": item.index,
                    "content_index": len(item.content),
                    "delta": text,
                }
            )

    def _close_reasoning_part(self, item: _Reasoning) -> None:
        if item.open_part is None:
            return
        part, chunks = item.open_part
        text = "".join(chunks)
        item.open_part = None
        if part == "summary":
            index = len(item.summary)
            self._emit(
                {
                    "type": "response.reasoning_summary_text.done",
                    "item_id": item.id,
                    "output_index": item.index,
                    "summary_index": index,
                    "text": text,
                }
            )
            self._emit(
                {
                    "type": "response.reasoning_summary_part.done",
                    "item_id": item.id,
                    "output_index": item.index,
                    "summary_index": index,
                    "part": {"type": "summary_text", "text": text},
                }
            )
            item.summary.append(text)
        else:
            index = len(item.content)
            self._emit(
                {
                    "type": "response.reasoning.done",
                    "item_id": item.id,
                    "output_index": item.index,
                    "content_index": index,
                    "text": text,
                }
            )
            self._emit(
                {
                    "type": "response.content_part.done",
                    "item_id": item.id,
                    "output_index": item.index,
                    "content_index": index,
                    "part": {"type": "reasoning_text", "text": text},
                }
            )
            item.content.append(text)

    # --- closing -------------------------------------------------------------------------

    def _close_mcp(self) -> None:
        """An MCP item left open when the response ends (a failure, a disconnect) closes as
        ``incomplete``."""
        item = self._mcp_open
        if item is None:
            return
        self._mcp_open = None
        index = len(self.output)
        item = (
            {**item, "status": "incomplete"}
            if item["type"] == "mcp_call"
            else {**item, "error": "the listing was interrupted"}
        )
        self.output.append(item)
        self._emit({"type": "response.output_item.done", "output_index": index, "item": item})

    def _close_open(self, status: str) -> None:
        self._close_mcp()
        item = self._open
        if item is None:
            return
        self._open = None
        done: dict[str, Any]
        if isinstance(item, _Message):
            self._close_part(item)
            done = {
                "id": item.id,
                "type": "message",
                "status": status,
                "role": "assistant",
                "content": item.parts,
            }
        elif isinstance(item, _ToolCallItem):
            arguments = "".join(item.chunks)
            if item.custom:
                self._emit(
                    {
                        "type": "response.custom_tool_call_input.done",
                        "item_id": item.id,
                        "output_index": item.index,
                        "input": arguments,
                    }
                )
            else:
                self._emit(
                    {
                        "type": "response.function_call_arguments.done",
                        "item_id": item.id,
                        "output_index": item.index,
                        "name": item.name,
                        "arguments": arguments,
                    }
                )
            done = _call_item(item, status, arguments)
        else:
            self._close_reasoning_part(item)
            done = {
                "id": item.id,
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": t} for t in item.summary],
            }
            if item.content:
                done["content"] = [{"type": "reasoning_text", "text": t} for t in item.content]
            if item.encrypted is not None:
                done["encrypted_content"] = item.encrypted
        self.output.append(done)
        self._emit({"type": "response.output_item.done", "output_index": item.index, "item": done})

    def _finish(self, reason: str, usage: Usage | None) -> None:
        self.finished = True
        self.usage = usage or Usage()
        incomplete = _INCOMPLETE_REASONS.get(reason)
        self._close_open("incomplete" if incomplete else "completed")
        if incomplete:
            self.status = "incomplete"
            self.incomplete_details = {"reason": incomplete}
            self.final = self.snapshot()
            self._emit({"type": "response.incomplete", "response": self.final})
        else:
            self.status = "completed"
            self.completed_at = int(time.time())
            self.final = self.snapshot()
            self._emit({"type": "response.completed", "response": self.final})

    def fail(self, error: ApiError) -> None:
        """End the response as failed: open item closed ``incomplete``, ``error`` event,
        ``response.failed``."""
        if self.finished:
            return
        self.finished = True
        self._close_open("incomplete")
        self.status = "failed"
        code = error.code or error.type
        self.error = {"code": code, "message": error.message}
        self._emit(
            {
                "type": "error",
                "error": {
                    "type": error.type,
                    "code": code,
                    "message": error.message,
                    "param": error.param,
                },
            }
        )
        self.final = self.snapshot()
        self._emit({"type": "response.failed", "response": self.final})

    def cancel(self) -> None:
        """End a background response as cancelled (no terminal event is defined for it; the
        stored status says it)."""
        if self.finished:
            return
        self.finished = True
        self._close_open("incomplete")
        self.status = "cancelled"
