"""A fake Anthropic Messages API server over loopback, speaking the real wire format.

``POST /v1/messages``: with ``"stream": true`` the named SSE events
(``message_start``, ``ping``, ``content_block_start`` / ``_delta`` / ``_stop``,
``message_delta``, ``message_stop``), otherwise one ``message`` JSON object.
Errors use Anthropic's body ``{"type": "error", "error": {"type", "message"}}``.
What it answers is scripted per test: queue ``Script`` / ``Raw`` replies
(``fake.enqueue(...)``) or set a ``handler(body) -> reply``; with neither, it
echoes the last user text. Every request is recorded (``fake.requests``: path,
headers, parsed body, whether the client went away early).

Async use::

    async with FakeAnthropic(text("Hello there")) as fake:
        fake.base_url  # "http://127.0.0.1:<port>" (the client appends /v1/messages)

Sync use (a server-level test running orgate in a subprocess)::

    with FakeAnthropic.start_in_thread(text("hi")) as fake:
        ...

``LoopbackFake`` (the server lifecycle, recording and failure plumbing) is
shared with ``responses_upstream``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, ClassVar

import orjson
from aiohttp import web

from tests.fakes._base import (
    ClientGone,
    LoopbackFake,
    Raw,
    RecordedRequest,
    sse_frame,
)
from tests.fakes._base import split_evenly as _split
from tests.fakes._base import words as _words

MODEL = "claude-fake-1"


@dataclass
class Script:
    """A scripted Messages API answer, streamed or not, with failure knobs.

    Blocks come in this order: redacted thinking, thinking (with ``signature``),
    text, tool uses. ``tool_uses`` are ``(name, arguments_json)`` pairs whose
    JSON is streamed as ``input_json_delta`` in ``fragments`` pieces. Failure
    knobs count SSE events sent before acting.
    """

    text: str | None = "Hello!"
    thinking: str | None = None
    signature: str = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"
    redacted: list[str] = field(default_factory=list)
    tool_uses: list[tuple[str, str]] = field(default_factory=list)
    fragments: int = 3
    stop_reason: str | None = None  # default: "tool_use" if tool uses else "end_turn"
    input_tokens: int | None = None  # default: counted from the request
    output_tokens: int | None = None  # default: counted from the answer
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    ping: bool = True
    delay: float = 0.0  # seconds between events
    status: int = 200
    error: dict[str, Any] | None = None  # inner error object of a non-200 reply
    headers: dict[str, str] = field(default_factory=dict)
    stall_before_headers: float = 0.0
    stall_after: int | None = None  # stop sending after N events (connection held open)
    stall_seconds: float = 30.0
    cut_after: int | None = None  # abort the TCP connection after N events
    error_after: int | None = None  # send an ``error`` event after N events, then end
    stream_error: dict[str, Any] = field(
        default_factory=lambda: {"type": "overloaded_error", "message": "Overloaded"}
    )


Reply = Script | Raw


def text(content: str, **kw: Any) -> Script:
    """Plain text, streamed word by word."""
    return Script(text=content, **kw)


def tool_use(*calls: tuple[str, str], content: str | None = None, **kw: Any) -> Script:
    """One or more tool uses, their JSON split across ``input_json_delta`` events."""
    return Script(text=content, tool_uses=list(calls), **kw)


def thinking(reasoning: str, answer: str = "Done.", **kw: Any) -> Script:
    """A thinking block (with signature) followed by text."""
    return Script(thinking=reasoning, text=answer, **kw)


def http_error(
    status: int, message: str, *, type: str, headers: dict[str, str] | None = None
) -> Script:
    """An HTTP error reply with an Anthropic error body."""
    return Script(status=status, error={"type": type, "message": message}, headers=headers or {})


def rate_limited(retry_after: str = "7") -> Script:
    return http_error(
        429,
        "Number of request tokens has exceeded your per-minute rate limit",
        type="rate_limit_error",
        headers={"retry-after": retry_after},
    )


def overloaded() -> Script:
    return http_error(529, "Overloaded", type="overloaded_error")


def bad_request(message: str = "messages: roles must alternate") -> Script:
    return http_error(400, message, type="invalid_request_error")


def server_error(status: int = 500) -> Script:
    return http_error(status, "Internal server error", type="api_error")


def overloaded_mid_stream(content: str = "one two three four", *, after: int = 4) -> Script:
    """Start answering, then send an ``overloaded_error`` event (as Anthropic does under load)."""
    return Script(text=content, error_after=after)


def stall(seconds: float = 30.0, *, after: int = 3) -> Script:
    return Script(text="one two three four", stall_after=after, stall_seconds=seconds)


def cut(content: str = "one two three four", *, after: int = 4) -> Script:
    """Abort the connection after ``after`` events: no message_stop."""
    return Script(text=content, cut_after=after)


def _block_text(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    out: list[str] = []
    for block in content or ():
        if isinstance(block, dict) and block.get("type") == "text":
            out.append(str(block.get("text", "")))
    return out


def last_user_text(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages") or ()):
        if message.get("role") == "user":
            return " ".join(_block_text(message.get("content")))
    return ""


def _input_tokens(body: dict[str, Any]) -> int:
    count = len(str(body.get("system") or "").split())
    for message in body.get("messages") or ():
        count += sum(len(t.split()) for t in _block_text(message.get("content")))
    return count + 3


class FakeAnthropic(LoopbackFake):
    """The fake Anthropic upstream. Use as ``async with``, or ``start_in_thread()`` for sync
    tests."""

    thread_name = "fake-anthropic"
    default_model = MODEL

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/messages", self.serve)
        app.router.add_post("/v1/messages/count_tokens", self.serve_count)
        return app

    def _default(self, body: dict[str, Any]) -> Reply:
        return text(f"You said: {last_user_text(body)}")

    not_json_error: ClassVar[dict[str, Any]] = {
        "type": "invalid_request_error",
        "message": "not JSON",
    }

    def error_response(
        self, status: int, error: dict[str, Any], headers: dict[str, str]
    ) -> web.Response:
        return _error_response(status, error, headers)

    def refuse(self, request: web.Request, body: dict[str, Any]) -> web.Response | None:
        if not request.headers.get("x-api-key") and not request.headers.get("authorization"):
            return _error_response(
                401, {"type": "authentication_error", "message": "x-api-key header is required"}, {}
            )
        if "max_tokens" not in body:
            return _error_response(
                400, {"type": "invalid_request_error", "message": "max_tokens: Field required"}, {}
            )
        unthought = _unthought_tool_use(body)
        if unthought is not None:
            return _error_response(400, {"type": "invalid_request_error", "message": unthought}, {})
        return None

    async def stream_reply(
        self, request: web.Request, body: dict[str, Any], reply: Script, record: RecordedRequest
    ) -> web.StreamResponse:
        frames = [sse_frame(e) for e in self.events(body, reply)]
        return await self.send_script(request, record, frames, reply)

    def json_reply(self, body: dict[str, Any], reply: Script) -> dict[str, Any]:
        return self.message(body, reply)

    # -- wire format -----------------------------------------------------------------

    def _usage(self, body: dict[str, Any], reply: Script, output: int) -> dict[str, Any]:
        return {
            "input_tokens": reply.input_tokens
            if reply.input_tokens is not None
            else _input_tokens(body),
            "cache_creation_input_tokens": reply.cache_creation_input_tokens,
            "cache_read_input_tokens": reply.cache_read_input_tokens,
            "output_tokens": reply.output_tokens if reply.output_tokens is not None else output,
        }

    @staticmethod
    def _stop_reason(reply: Script) -> str:
        return reply.stop_reason or ("tool_use" if reply.tool_uses else "end_turn")

    def message(self, body: dict[str, Any], reply: Script) -> dict[str, Any]:
        """The non-streaming ``message`` object."""
        content: list[dict[str, Any]] = [
            {"type": "redacted_thinking", "data": data} for data in reply.redacted
        ]
        if reply.thinking is not None:
            content.append(
                {"type": "thinking", "thinking": reply.thinking, "signature": reply.signature}
            )
        if reply.text:
            content.append({"type": "text", "text": reply.text})
        for name, args in reply.tool_uses:
            content.append(
                {
                    "type": "tool_use",
                    "id": f"toolu_{uuid.uuid4().hex[:24]}",
                    "name": name,
                    "input": orjson.loads(args) if args else {},
                }
            )
        output = len(_words(reply.text or "")) + len(_words(reply.thinking or ""))
        return {
            "id": f"msg_{uuid.uuid4().hex[:24]}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model") or self.model,
            "content": content,
            "stop_reason": self._stop_reason(reply),
            "stop_sequence": None,
            "usage": self._usage(body, reply, output + 10 * len(reply.tool_uses)),
        }

    def events(self, body: dict[str, Any], reply: Script) -> list[dict[str, Any]]:
        """The SSE event payloads of a streamed answer."""
        usage = self._usage(body, reply, 1)
        start_usage = {**usage, "output_tokens": 1}
        events: list[dict[str, Any]] = [
            {
                "type": "message_start",
                "message": {
                    "id": f"msg_{uuid.uuid4().hex[:24]}",
                    "type": "message",
                    "role": "assistant",
                    "model": body.get("model") or self.model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": start_usage,
                },
            }
        ]
        if reply.ping:
            events.append({"type": "ping"})
        index = 0
        output = 0

        def block(start: dict[str, Any], deltas: list[dict[str, Any]]) -> None:
            nonlocal index
            events.append({"type": "content_block_start", "index": index, "content_block": start})
            events.extend(
                {"type": "content_block_delta", "index": index, "delta": d} for d in deltas
            )
            events.append({"type": "content_block_stop", "index": index})
            index += 1

        for data in reply.redacted:
            block({"type": "redacted_thinking", "data": data}, [])
        if reply.thinking is not None:
            pieces = _words(reply.thinking)
            output += len(pieces)
            block(
                {"type": "thinking", "thinking": "", "signature": ""},
                [{"type": "thinking_delta", "thinking": p} for p in pieces]
                + [{"type": "signature_delta", "signature": reply.signature}],
            )
        if reply.text:
            pieces = _words(reply.text)
            output += len(pieces)
            block(
                {"type": "text", "text": ""},
                [{"type": "text_delta", "text": p} for p in pieces],
            )
        for name, args in reply.tool_uses:
            output += 10
            block(
                {
                    "type": "tool_use",
                    "id": f"toolu_{uuid.uuid4().hex[:24]}",
                    "name": name,
                    "input": {},
                },
                [{"type": "input_json_delta", "partial_json": ""}]
                + [
                    {"type": "input_json_delta", "partial_json": frag}
                    for frag in (_split(args, reply.fragments) if args else [])
                ],
            )
        if reply.error_after is not None:
            events = events[: reply.error_after]
            events.append({"type": "error", "error": reply.stream_error})
            return events
        out_tokens = reply.output_tokens if reply.output_tokens is not None else output
        events.append(
            {
                "type": "message_delta",
                "delta": {"stop_reason": self._stop_reason(reply), "stop_sequence": None},
                "usage": {"output_tokens": out_tokens},
            }
        )
        events.append({"type": "message_stop"})
        return events


def _unthought_tool_use(body: dict[str, Any]) -> str | None:
    """Anthropic's rule: with thinking enabled, the final assistant message, when it uses a
    tool, must start with a thinking block. The 400's message when broken, else None."""
    if (body.get("thinking") or {}).get("type") != "enabled":
        return None
    messages = body.get("messages") or []
    index = next(
        (i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "assistant"),
        None,
    )
    if index is None:
        return None
    content = messages[index].get("content")
    blocks = content if isinstance(content, list) else []
    if not any(b.get("type") == "tool_use" for b in blocks):
        return None
    first = blocks[0].get("type")
    if first in ("thinking", "redacted_thinking"):
        return None
    return (
        f"messages.{index}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
        f"`{first}`. When `thinking` is enabled, a final `assistant` message must start with a "
        "thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks)."
    )


def _error_response(status: int, error: dict[str, Any], headers: dict[str, str]) -> web.Response:
    body = {"type": "error", "error": error, "request_id": f"req_{uuid.uuid4().hex[:24]}"}
    return web.Response(
        status=status, body=orjson.dumps(body), content_type="application/json", headers=headers
    )


__all__ = [
    "MODEL",
    "ClientGone",
    "FakeAnthropic",
    "LoopbackFake",
    "Raw",
    "RecordedRequest",
    "Reply",
    "Script",
    "bad_request",
    "cut",
    "http_error",
    "last_user_text",
    "overloaded",
    "overloaded_mid_stream",
    "rate_limited",
    "server_error",
    "sse_frame",
    "stall",
    "text",
    "thinking",
    "tool_use",
]
