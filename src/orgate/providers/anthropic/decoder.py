"""Pure decoders: Anthropic Messages API replies → neutral model events.

``StreamDecoder`` takes the SSE bytes of a ``stream: true`` reply in chunks
split anywhere and yields events; ``decode_message`` turns a non-streaming
JSON reply into the same events. Both end with exactly one ``Finish``.

Anthropic → neutral:

- ``text`` block, ``text_delta`` → ``TextDelta``
- ``tool_use`` block start (``id``, ``name``) → ``ToolCallStart(index, call_id=id, name)`` (index
  counts tool calls from 0)
- ``input_json_delta.partial_json`` → ``ToolCallDelta`` (a call without deltas gets its start
  ``input`` as JSON)
- the first ``thinking`` / ``redacted_thinking`` block of a run (after a text or tool_use block, or
  the first) → ``ReasoningStart``: each run of thinking blocks is one reasoning item
- ``thinking`` block, ``thinking_delta`` → ``ReasoningDelta(part="content")``
- ``signature_delta`` at the block's stop, ``redacted_thinking`` → ``ReasoningEncrypted`` (an
  envelope of the current run of thinking blocks)
- ``message_delta.stop_reason`` → ``Finish.reason``: end_turn / stop_sequence / pause_turn → stop,
  max_tokens / model_context_window_exceeded → length, tool_use → tool_calls, refusal →
  content_filter
- usage → ``input_tokens`` = input + cache read + cache creation, ``cached_tokens`` = cache read
- ``error`` event → ``ApiError`` raised (see ``errors``)

Server-side tool blocks (``server_tool_use``, ``web_search_tool_result``...)
have no neutral event: they are skipped and counted in ``skipped``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from orgate.neutral import (
    Finish,
    FinishReason,
    ModelEvent,
    ReasoningDelta,
    ReasoningEncrypted,
    ReasoningStart,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)
from orgate.protocol.errors import ApiError, upstream_invalid_response
from orgate.providers.anthropic.envelope import encode_blocks
from orgate.providers.anthropic.errors import stream_error
from orgate.providers.sse_decoder import SseStreamDecoder

STOP_REASONS: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}


# The events of a Messages stream before its end (``message_stop``), ``ping`` aside.
_STREAM_EVENTS = frozenset(
    {
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
    }
)


def finish_reason(stop_reason: Any, had_tool_calls: bool) -> FinishReason:
    if isinstance(stop_reason, str) and stop_reason in STOP_REASONS:
        return STOP_REASONS[stop_reason]
    return "tool_calls" if had_tool_calls else "stop"


def bad_stream(name: str, detail: str) -> ApiError:
    return upstream_invalid_response(f"upstream '{name}' (anthropic)", detail, what="stream")


@dataclass(slots=True)
class _Block:
    kind: str
    tool_index: int = -1
    start_input: Any = None
    got_delta: bool = False
    thinking: list[str] = field(default_factory=list)
    signature: str = ""


@dataclass(slots=True)
class _UsageAcc:
    input: int = 0
    cache_read: int = 0
    cache_creation: int = 0
    output: int = 0

    def update(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        for key, attr in (
            ("input_tokens", "input"),
            ("cache_read_input_tokens", "cache_read"),
            ("cache_creation_input_tokens", "cache_creation"),
            ("output_tokens", "output"),
        ):
            value = usage.get(key)
            if isinstance(value, int):
                setattr(self, attr, value)

    def neutral(self) -> Usage:
        return Usage(
            input_tokens=self.input + self.cache_read + self.cache_creation,
            output_tokens=self.output,
            cached_tokens=self.cache_read,
        )


class StreamDecoder(SseStreamDecoder):
    """Incremental decoder of one Anthropic SSE stream. ``name``
    (the deployment) goes into error messages.

    ``feed`` returns the events decoded so far and raises ``ApiError`` on an
    upstream ``error`` event or invalid JSON (when events precede the error in
    the same chunk, they are returned and the error is raised by the next call
    to ``feed`` or ``close``). ``finished`` turns true with the
    ``Finish`` (on ``message_stop``); after ``close`` a stream that is not
    finished was cut short — the caller raises that (it knows the host).
    """

    def __init__(self, name: str = "anthropic") -> None:
        super().__init__(name)
        self._blocks: dict[int, _Block] = {}
        self._tool_count = 0
        # the current run of thinking blocks (one reasoning item)
        self._run: list[dict[str, Any]] | None = None  # the open run of thinking blocks
        self._usage = _UsageAcc()
        self._stop_reason: Any = None

    def _event(self, name: str, data: str, out: list[ModelEvent]) -> None:
        if self.finished:
            return
        try:
            payload = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise bad_stream(self.name, f"event '{name}' is not JSON") from exc
        if not isinstance(payload, dict):
            raise bad_stream(self.name, f"event '{name}' is not a JSON object")
        kind = payload.get("type") or name
        if kind in _STREAM_EVENTS:
            self.recognized = True
        if kind == "message_start":
            message = payload.get("message")
            if isinstance(message, dict):
                self._usage.update(message.get("usage"))
        elif kind == "content_block_start":
            self._block_start(payload, out)
        elif kind == "content_block_delta":
            self._block_delta(payload, out)
        elif kind == "content_block_stop":
            self._block_stop(payload, out)
        elif kind == "message_delta":
            delta = payload.get("delta")
            if isinstance(delta, dict) and delta.get("stop_reason") is not None:
                self._stop_reason = delta["stop_reason"]
            self._usage.update(payload.get("usage"))
        elif kind == "message_stop":
            if not self.recognized:  # a bare terminal event is not an answer
                raise bad_stream(self.name, "message_stop without a message")
            self.finished = True
            out.append(
                Finish(
                    finish_reason(self._stop_reason, self._tool_count > 0), self._usage.neutral()
                )
            )
        elif kind == "error":
            raise stream_error(payload, self.name)
        # ``ping`` and unknown events are ignored.

    def _block_start(self, payload: dict[str, Any], out: list[ModelEvent]) -> None:
        index = payload.get("index")
        block = payload.get("content_block")
        if not isinstance(index, int) or not isinstance(block, dict):
            raise bad_stream(self.name, "content_block_start without index or content_block")
        kind = str(block.get("type"))
        state = _Block(kind)
        self._blocks[index] = state
        if kind in ("thinking", "redacted_thinking") and self._run is None:
            self._run = []  # a new run of thinking blocks: a new reasoning item
            out.append(ReasoningStart())
        if kind == "text":
            self._run = None
            if block.get("text"):
                out.append(TextDelta(block["text"]))
        elif kind == "tool_use":
            self._run = None
            state.tool_index = self._tool_count
            self._tool_count += 1
            state.start_input = block.get("input")
            out.append(
                ToolCallStart(
                    state.tool_index, str(block.get("id") or ""), str(block.get("name") or "")
                )
            )
        elif kind == "thinking":
            if block.get("thinking"):
                state.thinking.append(block["thinking"])
                out.append(ReasoningDelta(block["thinking"], "content"))
            state.signature = str(block.get("signature") or "")
        elif kind == "redacted_thinking":
            assert self._run is not None
            self._run.append({"type": "redacted_thinking", "data": str(block.get("data") or "")})
            out.append(ReasoningEncrypted(encode_blocks(self._run)))
        else:
            self.skipped[kind] += 1

    def _block_delta(self, payload: dict[str, Any], out: list[ModelEvent]) -> None:
        index: Any = payload.get("index")  # as sent: an int when well-formed
        state = self._blocks.get(index)
        delta = payload.get("delta")
        if state is None or not isinstance(delta, dict):
            raise bad_stream(self.name, "content_block_delta for an unknown block")
        kind = delta.get("type")
        if kind == "text_delta":
            if delta.get("text"):
                out.append(TextDelta(delta["text"]))
        elif kind == "input_json_delta":
            partial = delta.get("partial_json")
            if partial and state.kind == "tool_use":
                state.got_delta = True
                out.append(ToolCallDelta(state.tool_index, partial))
        elif kind == "thinking_delta":
            if delta.get("thinking"):
                state.thinking.append(delta["thinking"])
                out.append(ReasoningDelta(delta["thinking"], "content"))
        elif kind == "signature_delta":
            state.signature += str(delta.get("signature") or "")
        # ``citations_delta`` and unknown deltas are ignored.

    def _block_stop(self, payload: dict[str, Any], out: list[ModelEvent]) -> None:
        index: Any = payload.get("index")  # as sent: an int when well-formed
        state = self._blocks.get(index)
        if state is None:
            return
        if state.kind == "tool_use" and not state.got_delta:
            arguments = orjson.dumps(
                state.start_input if isinstance(state.start_input, dict) else {}
            ).decode()
            out.append(ToolCallDelta(state.tool_index, arguments))
        elif state.kind == "thinking" and state.signature:
            if self._run is None:
                self._run = []
            self._run.append(
                {
                    "type": "thinking",
                    "thinking": "".join(state.thinking),
                    "signature": state.signature,
                }
            )
            out.append(ReasoningEncrypted(encode_blocks(self._run)))


@dataclass(slots=True)
class _Reply:
    """A non-streaming reply's events so far and what its blocks leave open."""

    out: list[ModelEvent] = field(default_factory=list)
    run: list[dict[str, Any]] | None = None  # the open run of thinking blocks
    tools: int = 0  # tool calls so far

    def thinking_run(self) -> list[dict[str, Any]]:
        """The open run of thinking blocks, opening one (a new reasoning item) if none is."""
        if self.run is None:
            self.run = []
            self.out.append(ReasoningStart())
        return self.run


def _text_block(reply: _Reply, block: dict[str, Any]) -> None:
    reply.run = None
    if block.get("text"):
        reply.out.append(TextDelta(block["text"]))


def _tool_use_block(reply: _Reply, block: dict[str, Any]) -> None:
    reply.run = None
    index = reply.tools
    reply.out.append(ToolCallStart(index, str(block.get("id") or ""), str(block.get("name") or "")))
    arguments = block.get("input") if isinstance(block.get("input"), dict) else {}
    reply.out.append(ToolCallDelta(index, orjson.dumps(arguments).decode()))
    reply.tools += 1


def _thinking_block(reply: _Reply, block: dict[str, Any]) -> None:
    run = reply.thinking_run()
    if block.get("thinking"):
        reply.out.append(ReasoningDelta(block["thinking"], "content"))
    if block.get("signature"):
        run.append(
            {
                "type": "thinking",
                "thinking": block.get("thinking") or "",
                "signature": block["signature"],
            }
        )
        reply.out.append(ReasoningEncrypted(encode_blocks(run)))


def _redacted_thinking_block(reply: _Reply, block: dict[str, Any]) -> None:
    run = reply.thinking_run()
    run.append({"type": "redacted_thinking", "data": str(block.get("data") or "")})
    reply.out.append(ReasoningEncrypted(encode_blocks(run)))


# Server-side tool blocks and unknown blocks have no event (and leave a thinking run open).
_REPLY_BLOCKS: dict[Any, Callable[[_Reply, dict[str, Any]], None]] = {
    "text": _text_block,
    "tool_use": _tool_use_block,
    "thinking": _thinking_block,
    "redacted_thinking": _redacted_thinking_block,
}


def _message_content(body: Any, name: str) -> list[Any]:
    """The reply's ``content`` blocks; an upstream error when the reply is no message."""
    if not isinstance(body, dict):
        raise bad_stream(name, "the reply is not a JSON object")
    if body.get("type") == "error":
        raise stream_error(body, name)
    if body.get("type") != "message" or not isinstance(body.get("content"), list):
        # a 200 that is not a message (a proxy's status object, another API's answer): no answer
        raise bad_stream(name, "a JSON reply that is not a message (type and content)")
    content: list[Any] = body["content"]
    return content


def decode_message(body: Any, name: str = "anthropic") -> list[ModelEvent]:
    """The events of a non-streaming Messages API reply (``{"type": "message", "content":
    [...], ...}``)."""
    reply = _Reply()
    for block in _message_content(body, name):
        if isinstance(block, dict):
            decode = _REPLY_BLOCKS.get(block.get("type"))
            if decode is not None:
                decode(reply, block)
    usage = _UsageAcc()
    usage.update(body.get("usage"))
    reply.out.append(
        Finish(finish_reason(body.get("stop_reason"), reply.tools > 0), usage.neutral())
    )
    return reply.out
