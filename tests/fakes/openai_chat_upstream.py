"""A fake OpenAI-compatible Chat Completions server over loopback, speaking the real wire format.

``/v1/chat/completions`` (streamed ``chat.completion.chunk`` SSE or one
``chat.completion``) and ``/v1/models``. What it answers is scripted per test:
queue ``Script`` / ``Raw`` replies (``fake.enqueue(...)``) or set a
``handler(body) -> reply``; with neither, it echoes the last user message.
Every request is recorded (``fake.requests``: path, headers, parsed body, and
whether the client went away before the reply was complete).

Async use::

    async with FakeOpenAIChat(text("Hello there")) as fake:
        fake.base_url  # "http://127.0.0.1:<port>/v1"

Sync use (a server-level test running orgate in a subprocess)::

    with FakeOpenAIChat.start_in_thread(text("hi")) as fake:
        ...
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from tests.fakes._base import LoopbackFake, Raw, RecordedRequest, sse_frame, token_logprobs
from tests.fakes._base import split_evenly as _split
from tests.fakes._base import words as _words

MODEL = "fake-model"


@dataclass
class Script:
    """A scripted Chat Completions answer, streamed or not, with failure knobs.

    ``tool_calls`` are ``(name, arguments_json)`` pairs; each call's arguments
    are streamed in ``fragments`` pieces after a first piece carrying id and
    name (``interleave`` sends the pieces of parallel calls round-robin,
    ``one_chunk`` sends every call whole in one piece). Text is streamed word
    by word. Failure knobs count content chunks sent before acting.
    """

    content: str | None = "Hello!"
    reasoning: str | None = None
    refusal: str | None = None
    tool_calls: list[tuple[str, str]] = field(default_factory=list)
    finish_reason: str | None = None  # default: "tool_calls" if tool calls else "stop"
    usage: dict[str, Any] | None = None  # default: computed
    fragments: int = 3
    interleave: bool = False
    one_chunk: bool = False
    delay: float = 0.0  # seconds between chunks
    status: int = 200
    error: dict[str, Any] | None = None  # error object of a non-200 reply
    headers: dict[str, str] = field(default_factory=dict)
    stall_before_headers: float = 0.0  # seconds of silence before the status line
    stall_after: int | None = None  # stop sending after N chunks (connection held open)
    stall_seconds: float = 30.0
    cut_after: int | None = None  # abort the TCP connection after N chunks
    garbage_after: int | None = None  # send a non-JSON data line after N chunks
    done: bool = True  # send ``data: [DONE]``


Reply = Script | Raw


def text(content: str, **kw: Any) -> Script:
    """Plain text, streamed word by word."""
    return Script(content=content, **kw)


def tool_calls(*calls: tuple[str, str], content: str | None = None, **kw: Any) -> Script:
    """One or more (parallel) function calls, arguments split across chunks."""
    return Script(content=content, tool_calls=list(calls), **kw)


def http_error(
    status: int,
    message: str = "upstream failure",
    *,
    type: str = "server_error",
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> Script:
    """An HTTP error reply with an OpenAI error body."""
    error = {"message": message, "type": type, "param": None, "code": code}
    return Script(status=status, error=error, headers=headers or {})


def rate_limited(retry_after: str = "7") -> Script:
    return http_error(
        429,
        "Rate limit reached for requests",
        type="rate_limit_exceeded",
        code="rate_limit_exceeded",
        headers={"Retry-After": retry_after},
    )


def stall(seconds: float = 30.0, *, after: int = 1) -> Script:
    """Send ``after`` chunks, then nothing for ``seconds`` (a read timeout on the client)."""
    return Script(content="one two three four", stall_after=after, stall_seconds=seconds)


def cut(content: str = "one two three four", *, after: int = 2) -> Script:
    """Abort the connection after ``after`` chunks: no finish_reason, no [DONE]."""
    return Script(content=content, cut_after=after)


def garbage(*, after: int = 1) -> Script:
    return Script(content="one two three", garbage_after=after)


def _usage(prompt: int, completion: int, reasoning: int = 0) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": reasoning,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _prompt_tokens(body: dict[str, Any]) -> int:
    count = 0
    for message in body.get("messages") or ():
        content = message.get("content")
        if isinstance(content, str):
            count += len(content.split())
        elif isinstance(content, list):
            count += sum(len(str(p.get("text", "")).split()) for p in content)
    return count + 3


def last_user_text(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages") or ()):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            return " ".join(p.get("text", "") for p in content if p.get("type") == "text")
    return ""


class FakeOpenAIChat(LoopbackFake):
    """The fake upstream. Use as ``async with``, or ``start_in_thread()`` for sync tests."""

    thread_name = "fake-openai-chat"
    default_model = MODEL
    owned_by = "fake"  # what its models list says of the model (servers say who they are)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    @property
    def bodies(self) -> list[Any]:
        """The JSON bodies of the chat completion requests received, in order."""
        return [r.body for r in self.requests if r.path.endswith("/chat/completions")]

    def _default(self, body: dict[str, Any]) -> Reply:
        return text(f"You said: {last_user_text(body)}")

    # -- routes ---------------------------------------------------------------------

    def _app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.serve)
        app.router.add_post("/chat/completions", self.serve)
        app.router.add_get("/v1/models", self._models)
        return app

    # -- handlers ------------------------------------------------------------------

    async def _models(self, request: web.Request) -> web.Response:
        data = {
            "object": "list",
            "data": [
                {
                    "id": self.model,
                    "object": "model",
                    "created": 1700000000,
                    "owned_by": self.owned_by,
                }
            ],
        }
        return web.Response(body=orjson.dumps(data), content_type="application/json")

    def error_response(
        self, status: int, error: dict[str, Any], headers: dict[str, str]
    ) -> web.Response:
        return web.Response(
            status=status,
            body=orjson.dumps({"error": error}),
            content_type="application/json",
            headers=headers,
        )

    # -- wire format ---------------------------------------------------------------

    def _chunk_base(self, cid: str, created: int, body: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": body.get("model") or self.model,
            "system_fingerprint": "fp_fake",
        }

    def _deltas(self, reply: Script) -> list[dict[str, Any]]:
        """The ``delta`` objects of a streamed answer (without the final finish chunk)."""
        deltas: list[dict[str, Any]] = []
        first: dict[str, Any] = {
            "role": "assistant",
            "content": "" if reply.content else None,
            "refusal": None,
        }
        deltas.append(first)
        for piece in _words(reply.reasoning or ""):
            deltas.append({"reasoning_content": piece})
        for piece in _words(reply.content or ""):
            deltas.append({"content": piece})
        for piece in _words(reply.refusal or ""):
            deltas.append({"refusal": piece})
        calls = reply.tool_calls
        if calls:
            ids = [f"call_{uuid.uuid4().hex[:24]}" for _ in calls]
            if reply.one_chunk:
                for i, (name, args) in enumerate(calls):
                    deltas.append(
                        {
                            "tool_calls": [
                                {
                                    "index": i,
                                    "id": ids[i],
                                    "type": "function",
                                    "function": {"name": name, "arguments": args},
                                }
                            ]
                        }
                    )
            else:
                heads = [
                    {
                        "tool_calls": [
                            {
                                "index": i,
                                "id": ids[i],
                                "type": "function",
                                "function": {"name": name, "arguments": ""},
                            }
                        ]
                    }
                    for i, (name, _args) in enumerate(calls)
                ]
                tails = [
                    [
                        {"tool_calls": [{"index": i, "function": {"arguments": frag}}]}
                        for frag in _split(args, reply.fragments)
                    ]
                    for i, (_name, args) in enumerate(calls)
                ]
                if reply.interleave:
                    deltas.extend(heads)
                    longest = max(len(t) for t in tails)
                    for j in range(longest):
                        deltas.extend(t[j] for t in tails if j < len(t))
                else:
                    for head, tail in zip(heads, tails, strict=True):
                        deltas.append(head)
                        deltas.extend(tail)
        return deltas

    async def stream_reply(
        self, request: web.Request, body: dict[str, Any], reply: Script, record: RecordedRequest
    ) -> web.StreamResponse:
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        cid = f"chatcmpl-{uuid.uuid4().hex[:29]}"
        created = int(time.time())
        base = self._chunk_base(cid, created, body)
        deltas = self._deltas(reply)
        finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
        chunks: list[dict[str, Any]] = []
        top = _asked_logprobs(body)
        tokens = iter(token_logprobs(_words(reply.content or ""), top) if top is not None else ())
        for delta in deltas:
            logprobs = None
            if top is not None and delta.get("content"):
                logprobs = {"content": [next(tokens)], "refusal": None}
            chunk = {
                **base,
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": None}
                ],
            }
            if include_usage:
                chunk["usage"] = None
            chunks.append(chunk)
        last = {
            **base,
            "choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": finish}],
        }
        if include_usage:
            last["usage"] = None
        chunks.append(last)
        if include_usage:
            usage = reply.usage or _usage(_prompt_tokens(body), len(deltas) - 1)
            chunks.append({**base, "choices": [], "usage": usage})

        frames = [sse_frame(chunk, named=False) for chunk in chunks]
        if reply.garbage_after is not None:
            frames.insert(reply.garbage_after, b"data: {this is not json\n\n")
        if reply.done:
            frames.append(b"data: [DONE]\n\n")
        return await self.send_script(request, record, frames, reply)

    def json_reply(self, body: dict[str, Any], reply: Script) -> dict[str, Any]:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": reply.content,
            "refusal": reply.refusal,
            "annotations": [],
        }
        if reply.reasoning:
            message["reasoning_content"] = reply.reasoning
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": f"call_{uuid.uuid4().hex[:24]}",
                    "type": "function",
                    "function": {"name": n, "arguments": a},
                }
                for n, a in reply.tool_calls
            ]
        finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
        completion_tokens = len(_words(reply.content or "")) + 10 * len(reply.tool_calls)
        top = _asked_logprobs(body)
        logprobs = None
        if top is not None:
            logprobs = {
                "content": token_logprobs(_words(reply.content or ""), top),
                "refusal": None,
            }
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:29]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or self.model,
            "system_fingerprint": "fp_fake",
            "choices": [
                {"index": 0, "message": message, "logprobs": logprobs, "finish_reason": finish}
            ],
            "usage": reply.usage or _usage(_prompt_tokens(body), completion_tokens),
            "service_tier": "default",
        }


def _asked_logprobs(body: dict[str, Any]) -> int | None:
    """The alternatives per token a request asks for (None: ``logprobs`` not asked for)."""
    return int(body.get("top_logprobs") or 0) if body.get("logprobs") else None


__all__ = [
    "MODEL",
    "FakeOpenAIChat",
    "Raw",
    "RecordedRequest",
    "Reply",
    "Script",
    "cut",
    "garbage",
    "http_error",
    "last_user_text",
    "rate_limited",
    "stall",
    "text",
    "tool_calls",
]
