"""Pure decoders: Chat Completions SSE bytes (or one ``chat.completion`` JSON) → neutral
``ModelEvent``s.

``ChatStreamDecoder`` is fed raw network chunks in arrival order (lines may be
split anywhere, even inside a UTF-8 character: the shared SSE splitter,
``providers/sse.py``, cuts them on ``\\n``, ``\\r\\n`` or ``\\r`` and they are decoded
as whole JSON documents) and returns the events each chunk completes. ``close()`` ends the stream
and returns the last events, always
ending in exactly one ``Finish``.

Tool calls: upstreams send ``delta.tool_calls[]`` pieces keyed by ``index``;
the first piece of a call normally carries ``id`` and ``function.name``, later
ones ``function.arguments`` fragments. Some servers send the name later than
the id, the whole call in one piece, or no ``index`` at all; all are handled.
A call that ends without any arguments (a tool without parameters, as vLLM's
hermes parser streams it) gets ``{}``. Usage is ``usage``, or Groq's ``x_groq.usage``.
The neutral contract wants call ``i`` complete before ``ToolCallStart`` of call
``i+1``. The first call streams live; when a piece of another call arrives,
the live call is closed only if its arguments already parse as JSON (the
usual sequential upstream) and the next call then streams live too.
Otherwise the upstream interleaves: the later calls are buffered and flushed
in order at the end. Neutral indexes count calls from 0 in emission order.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar

import orjson

from orgate.neutral import (
    Finish,
    FinishReason,
    ModelEvent,
    ReasoningDelta,
    RefusalDelta,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    Usage,
    token_count,
)
from orgate.neutral.logprobs import LogProb, logprob_list
from orgate.protocol.errors import ApiError, ErrorCode, upstream_invalid_response
from orgate.providers.openai_chat.errors import stream_error
from orgate.providers.sse import LineTooLong, SseLines

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
    # non-OpenAI spellings seen on compatible servers
    "max_tokens": "length",
    "model_length": "length",
    "eos": "stop",
    "eos_token": "stop",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
}


def invalid_response(name: str, detail: str) -> ApiError:
    return upstream_invalid_response(f"upstream '{name}'", detail)


def parse_usage(usage: Any) -> Usage | None:
    """OpenAI usage (with DeepSeek's cache-hit spelling as a fallback) → neutral ``Usage``
    (None for a ``usage`` that is not an object)."""
    if not isinstance(usage, dict):
        return None
    return Usage(
        input_tokens=token_count(usage, "prompt_tokens"),
        output_tokens=token_count(usage, "completion_tokens"),
        cached_tokens=token_count(usage.get("prompt_tokens_details"), "cached_tokens")
        or token_count(usage, "prompt_cache_hit_tokens"),
        reasoning_tokens=token_count(usage.get("completion_tokens_details"), "reasoning_tokens"),
    )


def _reason(raw: Any) -> str:
    """A truthy ``finish_reason`` as text (a server's non-string one is an ordinary stop)."""
    return raw if isinstance(raw, str) else "stop"


def _text_of(content: Any) -> str:
    """Content that is not a plain string: a list of ``{"type": "text",
    "text"}`` parts (Mistral style)."""
    if isinstance(content, list):
        return "".join(
            p.get("text") or "" for p in content if isinstance(p, dict) and p.get("type") == "text"
        )
    return ""


class _StreamedCall:
    """One tool call as its pieces arrive: what is known of it and whether it went out."""

    __slots__ = ("index", "call_id", "name", "args", "started", "closed")

    def __init__(self, index: int) -> None:
        self.index = index  # neutral index
        self.call_id = ""
        self.name = ""
        self.args: list[str] = []  # all pieces received so far
        self.started = False
        self.closed = False


class ChatStreamDecoder:
    """Incremental decoder of one Chat Completions SSE stream (an ``upstream.UpstreamDecoder``):
    the answer is ``complete`` at its ``finish_reason`` (or ``[DONE]``); the usage chunk and
    ``[DONE]`` may follow, and the stream has ``ended`` with them."""

    __slots__ = (
        "name",
        "ended",
        "complete",
        "error",
        "failed",
        "recognized",
        "finish_reason",
        "usage",
        "_split",
        "_data",
        "_out",
        "_calls",
        "_by_id",
        "_order",
        "_active",
        "_closed",
        "_logprobs",
    )

    skipped: ClassVar[Mapping[str, int]] = MappingProxyType({})  # every chunk has its events

    def __init__(self, name: str = "openai-chat", *, logprobs: bool = False) -> None:
        self.name = name  # the deployment, for error messages
        self._logprobs = (
            logprobs  # asked for: each choice's ``logprobs.content`` goes with its text
        )
        self.ended = False  # ``data: [DONE]`` or the usage chunk after the finish: stop reading
        self.complete = False  # the finish_reason (or ``[DONE]``) came: the answer is whole
        #: An upstream error that came after some output in the same read: raised by ``close``
        #: once that output is delivered (``feed`` returns the output, sets ``ended`` and
        #: ``failed``).
        self.error: ApiError | None = None
        self.failed = False
        self.recognized = False  # a chunk with choices came: the body is this wire format
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self._split = SseLines()
        self._data: list[bytes] = []  # data lines of the current SSE event
        self._out: list[ModelEvent] = []
        self._calls: dict[int, _StreamedCall] = {}  # upstream index → call
        self._by_id: dict[str, _StreamedCall] = {}
        self._order: list[_StreamedCall] = []  # neutral order
        self._active = 0  # position in _order of the call streaming live
        self._closed = False

    # -- bytes → lines → events -------------------------------------------------

    def feed(self, chunk: bytes) -> list[ModelEvent]:
        """Decode one network chunk; returns the events it completes (often empty or one)."""
        out: list[ModelEvent] = []
        self._out = out
        if self.ended:
            return out
        try:
            lines = self._split.feed(chunk)
        except LineTooLong as exc:
            raise invalid_response(self.name, str(exc)) from None
        if not lines:
            return out
        try:
            self._lines(lines)
        except ApiError as error:
            if not out:
                raise
            self.error = error
            self.ended = self.failed = True
        return out

    def _lines(self, lines: list[bytes]) -> None:
        loads = orjson.loads
        pending = self._data  # the one list of the current event's data lines (never replaced)
        for line in lines:
            if not pending:
                # Fast path: one complete JSON object on one `data: ` line (what servers send).
                # A line that is not complete JSON falls back to the general SSE rules below.
                if line[:7] == b"data: {":
                    try:
                        obj = loads(line[6:])
                    except orjson.JSONDecodeError:
                        pass
                    else:
                        if type(obj) is dict:
                            self.chunk(obj)
                            if self.ended:
                                break
                            continue
                elif not line:
                    continue  # the blank line after an event already dispatched
            self._line(line)
            if self.ended:
                break

    def _line(self, line: bytes) -> None:
        if not line:
            if self._data:
                self._dispatch()
        elif line.startswith(b"data:"):
            value = line[5:]
            self._data.append(value[1:] if value.startswith(b" ") else value)
        elif line.startswith(b"{") and not self._data:
            # a bare JSON line (some servers forget the SSE framing): take it as an event
            self._data.append(line)
            self._dispatch()
        # ":" comments, event:, id:, retry: are ignored

    def _dispatch(self) -> None:
        pending = self._data
        data = pending[0] if len(pending) == 1 else b"\n".join(pending)
        pending.clear()
        if data == b"[DONE]":
            self.ended = self.complete = True
            return
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            if b"\n" in data:  # several events without blank lines between them
                for piece in data.split(b"\n"):
                    self._data.append(piece)
                    self._dispatch()
                    if self.ended:
                        break
                return
            raise invalid_response(self.name, f"non-JSON data line {data[:80]!r}") from None
        if type(obj) is not dict:
            raise invalid_response(self.name, f"data line is not a JSON object: {data[:80]!r}")
        self.chunk(obj)

    # -- one chat.completion.chunk ----------------------------------------------

    def chunk(self, obj: dict[str, Any]) -> None:
        """Apply one parsed ``chat.completion.chunk`` (events go to the current output list)."""
        if "error" in obj:  # a membership test, not a get: nearly no chunk holds one
            error = obj["error"]
            if error is not None:
                raise stream_error(error, self.name)
        choices = obj.get("choices")
        if choices:
            self.recognized = True
            for choice in choices:
                if choice.get("index", 0) == 0:
                    delta = choice.get("delta")
                    if self._logprobs:
                        self._delta(delta or {}, _choice_logprobs(choice))
                    elif delta:
                        content = delta.get("content")
                        if len(delta) == 1 and type(content) is str:
                            if content:  # the common chunk: text only
                                self._out.append(TextDelta(content))
                        else:
                            self._delta(delta)
                    reason = choice.get("finish_reason")
                    if reason:
                        self.finish_reason = _reason(reason)
                        self.complete = True
        usage = obj.get("usage")
        if not usage and self.complete:
            # Groq: the streamed usage is in ``x_groq.usage`` of the finish chunk (only looked
            # for once the answer finished, not on every chunk)
            groq = obj.get("x_groq")
            usage = groq.get("usage") if type(groq) is dict else None
        if usage:
            self.usage = parse_usage(usage)
            if not choices and self.complete:
                # the usage chunk is the last one: ended, even if no [DONE] nor end of body follows
                self.ended = True

    def _delta(self, delta: dict[str, Any], logprobs: list[LogProb] | None = None) -> None:
        _content_events(delta, self._out, logprobs)
        tool_calls = delta.get("tool_calls")
        if tool_calls:
            for piece in tool_calls:
                self._tool_piece(piece)
        elif delta.get("function_call"):  # legacy function calling: one call, no id
            self._tool_piece({"index": 0, "function": delta["function_call"]})

    # -- tool calls -----------------------------------------------------------------

    def _call_for(self, piece: dict[str, Any]) -> _StreamedCall:
        index = piece.get("index")
        raw_id = piece.get("id")
        call_id = raw_id if raw_id is None or isinstance(raw_id, str) else str(raw_id)
        if index is None:
            if call_id and call_id in self._by_id:
                return self._by_id[call_id]
            function = piece.get("function") or {}
            if (call_id or function.get("name")) or not self._order:
                index = max(self._calls, default=-1) + 1
            else:
                return self._order[-1]
        call = self._calls.get(index)
        if call is None:
            call = _StreamedCall(len(self._order))
            self._calls[index] = call
            self._order.append(call)
        if call_id and not call.call_id:
            call.call_id = call_id
            self._by_id[call_id] = call
        return call

    def _tool_piece(self, piece: dict[str, Any]) -> None:
        call = self._call_for(piece)
        function = piece.get("function") or {}
        name = function.get("name")
        if name and not call.name:
            call.name = name if isinstance(name, str) else str(name)
        args = function.get("arguments")
        if args is not None and type(args) is not str:
            args = orjson.dumps(args).decode()  # some servers send an object
        if call.closed:
            if args and args.strip():
                raise invalid_response(
                    self.name, f"arguments for tool call {call.index} after it was complete"
                )
            return
        if args:
            call.args.append(args)
        order = self._order
        active = order[self._active]
        if call is active:
            if call.started:
                if args:
                    self._out.append(ToolCallDelta(call.index, args))
            else:
                self._start(call)
            return
        # A piece of a later call: the live call ends here if its arguments are complete JSON.
        if active.started and _complete(active):
            active.closed = True
            self._active += 1
            while self._active < len(order):
                nxt = order[self._active]
                if not nxt.name:
                    break
                self._start(nxt)
                if nxt is call or not _complete(nxt):
                    break
                nxt.closed = True
                self._active += 1

    def _start(self, call: _StreamedCall) -> None:
        """Open ``call`` if its name is known, with everything buffered so far."""
        if not call.name:
            return
        call.started = True
        self._out.append(ToolCallStart(call.index, call.call_id, call.name))
        if call.args:
            joined = "".join(call.args)
            call.args = [joined]
            if joined:
                self._out.append(ToolCallDelta(call.index, joined))

    def _flush_calls(self) -> None:
        cut = _FINISH.get(self.finish_reason or "") == "length"
        for call in self._order[self._active :]:
            if call.closed:
                continue
            if not call.started:
                if not call.name:
                    raise invalid_response(
                        self.name, f"tool call {call.index} has no function name"
                    )
                self._start(call)
            if not cut and not "".join(call.args).strip():
                # a tool without parameters: some servers (vLLM's hermes parser...) send no
                # arguments
                call.args.append("{}")
                self._out.append(ToolCallDelta(call.index, "{}"))
            call.closed = True
        self._active = len(self._order)

    # -- end of stream ----------------------------------------------------------------

    def close(self) -> list[ModelEvent]:
        """End of the upstream body: the remaining events and the one ``Finish``.

        Raises the pending upstream error (``failed``), ``ApiError`` 502
        ``upstream_invalid_response`` if no chunk with ``choices`` came (a 200 that is
        not this wire format), 502 ``upstream_stream_truncated`` if the body ended
        with neither a ``finish_reason`` nor ``[DONE]``.
        """
        if self.error is not None:
            raise self.error
        out: list[ModelEvent] = []
        self._out = out
        if self._closed:
            return out
        if not self.ended:
            for line in self._split.close():
                self._line(line)
            if self._data and not self.ended:
                self._dispatch()
        if self.finish_reason is None and not self.recognized:
            # junk, or a bare [DONE]: a 200 that is not an answer, not an empty one
            raise invalid_response(self.name, "a 200 without any chat.completion.chunk")
        if not self.ended and self.finish_reason is None:
            raise ApiError.of(
                ErrorCode.UPSTREAM_STREAM_TRUNCATED,
                f"upstream '{self.name}' ended the stream before the answer was complete",
            )
        self._closed = True
        self._flush_calls()
        out.append(Finish(self.reason(), self.usage))
        return out

    def reason(self) -> FinishReason:
        """The neutral finish reason (tool calls made under ``stop`` count as ``tool_calls``)."""
        return _finish_reason(self.finish_reason, bool(self._order), self.name)


def _choice_logprobs(choice: dict[str, Any]) -> list[LogProb] | None:
    """A choice's token log probabilities of its content (``logprobs.content``), if it has any."""
    raw = choice.get("logprobs")
    return logprob_list(raw.get("content")) if type(raw) is dict else None


def _content_events(
    delta: dict[str, Any], out: list[ModelEvent], logprobs: list[LogProb] | None = None
) -> None:
    """The events of a delta's (or a message's) reasoning, text and refusal, in that order;
    ``logprobs`` go with the text (alone when it is empty: a token that is part of a character)."""
    reasoning = delta.get("reasoning_content") or delta.get("reasoning")
    if reasoning:
        out.append(ReasoningDelta(reasoning if type(reasoning) is str else _text_of(reasoning)))
    content = delta.get("content")
    if content and type(content) is not str:
        content = _text_of(content)
    if content or logprobs:
        out.append(TextDelta(content or "", logprobs or None))
    refusal = delta.get("refusal")
    if refusal:
        out.append(RefusalDelta(refusal))


def _finish_reason(raw: str | None, called: bool, name: str) -> FinishReason:
    """An upstream ``finish_reason`` as the neutral one (``called``: the answer made tool calls)."""
    if raw == "error":
        raise ApiError.of(
            ErrorCode.UPSTREAM_ERROR,
            f"upstream '{name}' reported an error mid-stream",
        )
    reason = _FINISH.get(raw, "stop") if raw else "stop"
    if reason == "stop" and called:
        return "tool_calls"
    return reason


def _complete(call: _StreamedCall) -> bool:
    """Whether the call's arguments so far are one complete JSON value."""
    if not call.args:
        return False
    text = call.args[0] if len(call.args) == 1 else "".join(call.args)
    call.args = [text]
    if not text.strip():
        return False
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    return True


def decode_completion(obj: Any, name: str = "openai-chat") -> list[ModelEvent]:
    """Events for one non-streamed ``chat.completion`` object (same ordering as the stream)."""
    if not isinstance(obj, dict):
        raise invalid_response(name, "the body is not a JSON object")
    error = obj.get("error")
    if error is not None:
        raise stream_error(error, name)
    choices = obj.get("choices")
    if not choices:
        raise invalid_response(name, "no choices in chat.completion")
    choice = choices[0]
    message = choice.get("message") or {}
    out: list[ModelEvent] = []
    logprobs = _choice_logprobs(choice)
    if not (message.get("tool_calls") or message.get("function_call")):
        # No tool calls (most answers): the events without a decoder's call bookkeeping.
        _content_events(message, out, logprobs)
        usage = obj.get("usage")
        reason = _finish_reason(_reason(choice.get("finish_reason") or "stop"), False, name)
        out.append(Finish(reason, parse_usage(usage) if usage else None))
        return out
    decoder = ChatStreamDecoder(name)
    decoder._out = out
    decoder._delta(message, logprobs)
    decoder.finish_reason = _reason(choice.get("finish_reason") or "stop")
    if obj.get("usage"):
        decoder.usage = parse_usage(obj["usage"])
    decoder.ended = True
    out.extend(decoder.close())
    return out
