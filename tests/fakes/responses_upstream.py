"""A fake OpenAI Responses API server over loopback, speaking the real wire format.

``POST /v1/responses`` (and ``/responses``): with ``"stream": true`` the
OpenAI event stream (``response.created``, ``response.in_progress``,
``response.output_item.added`` / ``.done``, ``response.content_part.*``,
``response.output_text.delta`` / ``.done``, ``response.reasoning_summary_*``,
``response.function_call_arguments.*``, ``response.web_search_call.*``,
``response.completed`` / ``.incomplete`` / ``.failed``, ``error``), each with
``event:`` and a ``sequence_number``; otherwise one ``response`` object.
HTTP errors use the OpenAI body ``{"error": {"message", "type", "param", "code"}}``.
Scripted per test like the other fakes; every request is recorded.

Async use::

    async with FakeResponses(text("Hello there")) as fake:
        fake.base_url  # "http://127.0.0.1:<port>/v1"

Sync use: ``with FakeResponses.start_in_thread(text("hi")) as fake: ...``
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from tests.fakes._base import (
    LoopbackFake,
    Raw,
    RecordedRequest,
    sse_frame,
    token_logprobs,
)
from tests.fakes._base import split_evenly as _split
from tests.fakes._base import words as _words

MODEL = "gpt-fake-1"


@dataclass
class Script:
    """A scripted Responses answer, streamed or not, with failure knobs.

    Output items come in this order: ``extra_items`` (non-portable items such
    as ``web_search_call``, sent whole), reasoning, message (text / refusal),
    function calls. ``function_calls`` are ``(name, arguments_json)`` pairs
    streamed in ``fragments`` pieces (``interleave``: all calls opened first,
    their pieces round-robin). Failure knobs count SSE events sent before acting.
    """

    text: str | None = "Hello!"
    refusal: str | None = None
    reasoning_summary: str | None = None
    reasoning_text: str | None = None
    encrypted_content: str | None = None
    function_calls: list[tuple[str, str]] = field(default_factory=list)
    extra_items: list[dict[str, Any]] = field(default_factory=list)
    fragments: int = 3
    interleave: bool = False
    outcome: str = "completed"  # or "incomplete", "failed"
    incomplete_reason: str = "max_output_tokens"
    failure: dict[str, Any] = field(
        default_factory=lambda: {
            "code": "server_error",
            "message": "The model produced invalid output.",
        }
    )
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    delay: float = 0.0
    status: int = 200
    error: dict[str, Any] | None = None  # error object of a non-200 reply
    headers: dict[str, str] = field(default_factory=dict)
    stall_before_headers: float = 0.0
    stall_after: int | None = None
    stall_seconds: float = 30.0
    cut_after: int | None = None
    error_after: int | None = None  # send an ``error`` event after N events, then end
    error_event: dict[str, Any] = field(
        default_factory=lambda: {
            "code": "rate_limit_exceeded",
            "message": "Rate limit reached",
            "param": None,
        }
    )
    done: bool = False  # append ``data: [DONE]`` (OpenAI does not; orgate and some servers do)


Reply = Script | Raw


def text(content: str, **kw: Any) -> Script:
    return Script(text=content, **kw)


def function_calls(*calls: tuple[str, str], content: str | None = None, **kw: Any) -> Script:
    return Script(text=content, function_calls=list(calls), **kw)


def reasoning(
    summary: str, answer: str = "Done.", *, encrypted: str = "gAAAAABfake-encrypted", **kw: Any
) -> Script:
    return Script(text=answer, reasoning_summary=summary, encrypted_content=encrypted, **kw)


def http_error(
    status: int,
    message: str = "upstream failure",
    *,
    type: str = "server_error",
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> Script:
    error = {"message": message, "type": type, "param": None, "code": code}
    return Script(status=status, error=error, headers=headers or {})


def rate_limited(retry_after: str = "7") -> Script:
    return http_error(
        429,
        "Rate limit reached for requests",
        type="requests",
        code="rate_limit_exceeded",
        headers={"Retry-After": retry_after},
    )


def web_search_call(query: str = "weather") -> dict[str, Any]:
    """A hosted-tool output item (no neutral event can carry it)."""
    return {
        "id": f"ws_{uuid.uuid4().hex[:24]}",
        "type": "web_search_call",
        "status": "completed",
        "action": {"type": "search", "query": query},
    }


def cut(content: str = "one two three four", *, after: int = 6) -> Script:
    return Script(text=content, cut_after=after)


def stall(seconds: float = 30.0, *, after: int = 5) -> Script:
    return Script(text="one two three four", stall_after=after, stall_seconds=seconds)


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    return [
        str(p.get("text", ""))
        for p in content or ()
        if isinstance(p, dict) and p.get("type") in ("input_text", "output_text")
    ]


def last_user_text(body: dict[str, Any]) -> str:
    items = body.get("input")
    if isinstance(items, str):
        return items
    for item in reversed(items or ()):
        if isinstance(item, dict) and item.get("role") == "user":
            return " ".join(_texts(item.get("content")))
    return ""


def _input_tokens(body: dict[str, Any]) -> int:
    items = body.get("input")
    if isinstance(items, str):
        return len(items.split()) + 3
    count = len(str(body.get("instructions") or "").split())
    for item in items or ():
        if isinstance(item, dict):
            count += sum(len(t.split()) for t in _texts(item.get("content")))
    return count + 3


class FakeResponses(LoopbackFake):
    """The fake Responses upstream. Use as ``async with``, or ``start_in_thread()`` for sync
    tests."""

    thread_name = "fake-responses"
    default_model = MODEL

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/responses", self.serve)
        app.router.add_post("/responses", self.serve)
        app.router.add_post("/v1/responses/input_tokens", self.serve_count)
        return app

    def _default(self, body: dict[str, Any]) -> Reply:
        return text(f"You said: {last_user_text(body)}")

    def error_response(
        self, status: int, error: dict[str, Any], headers: dict[str, str]
    ) -> web.Response:
        return _error_response(status, error, headers)

    async def stream_reply(
        self, request: web.Request, body: dict[str, Any], reply: Script, record: RecordedRequest
    ) -> web.StreamResponse:
        frames = [sse_frame(e) for e in self.events(body, reply)]
        if reply.done:
            frames.append(b"data: [DONE]\n\n")
        return await self.send_script(request, record, frames, reply)

    def json_reply(self, body: dict[str, Any], reply: Script) -> dict[str, Any]:
        return self.response(body, reply, self.output_items(reply, _asked_logprobs(body)))

    # -- wire format -----------------------------------------------------------------

    def output_items(self, reply: Script, logprobs: int | None = None) -> list[dict[str, Any]]:
        """The completed output items of the answer (``logprobs``: the alternatives per token
        asked for, None = no log probabilities)."""
        items: list[dict[str, Any]] = [dict(i) for i in reply.extra_items]
        if reply.reasoning_summary is not None or reply.encrypted_content is not None:
            item: dict[str, Any] = {
                "id": f"rs_{uuid.uuid4().hex[:24]}",
                "type": "reasoning",
                "summary": (
                    [{"type": "summary_text", "text": reply.reasoning_summary}]
                    if reply.reasoning_summary
                    else []
                ),
            }
            if reply.reasoning_text:
                item["content"] = [{"type": "reasoning_text", "text": reply.reasoning_text}]
            if reply.encrypted_content is not None:
                item["encrypted_content"] = reply.encrypted_content
            items.append(item)
        if reply.text or reply.refusal:
            content: list[dict[str, Any]] = []
            if reply.text:
                tokens = (
                    token_logprobs(_words(reply.text), logprobs) if logprobs is not None else []
                )
                content.append(
                    {
                        "type": "output_text",
                        "annotations": [],
                        "logprobs": tokens,
                        "text": reply.text,
                    }
                )
            if reply.refusal:
                content.append({"type": "refusal", "refusal": reply.refusal})
            items.append(
                {
                    "id": f"msg_{uuid.uuid4().hex[:24]}",
                    "type": "message",
                    "status": "incomplete" if reply.outcome == "incomplete" else "completed",
                    "content": content,
                    "role": "assistant",
                }
            )
        for name, args in reply.function_calls:
            items.append(
                {
                    "id": f"fc_{uuid.uuid4().hex[:24]}",
                    "type": "function_call",
                    "status": "completed",
                    "arguments": args,
                    "call_id": f"call_{uuid.uuid4().hex[:24]}",
                    "name": name,
                }
            )
        return items

    def response(
        self,
        body: dict[str, Any],
        reply: Script,
        output: list[dict[str, Any]],
        *,
        final: bool = True,
    ) -> dict[str, Any]:
        status = reply.outcome if final else "in_progress"
        out_tokens = reply.output_tokens
        if out_tokens is None:
            out_tokens = len(_words(reply.text or "")) + 10 * len(reply.function_calls)
            out_tokens += reply.reasoning_tokens
        in_tokens = reply.input_tokens if reply.input_tokens is not None else _input_tokens(body)
        usage = {
            "input_tokens": in_tokens,
            "input_tokens_details": {"cached_tokens": reply.cached_tokens},
            "output_tokens": out_tokens,
            "output_tokens_details": {"reasoning_tokens": reply.reasoning_tokens},
            "total_tokens": in_tokens + out_tokens,
        }
        return {
            "id": f"resp_{uuid.uuid4().hex[:24]}",
            "object": "response",
            "created_at": int(time.time()),
            "status": status,
            "background": False,
            "error": reply.failure if final and status == "failed" else None,
            "incomplete_details": (
                {"reason": reply.incomplete_reason} if final and status == "incomplete" else None
            ),
            "instructions": body.get("instructions"),
            "max_output_tokens": body.get("max_output_tokens"),
            "model": body.get("model") or self.model,
            "output": output if final else [],
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "previous_response_id": None,
            "reasoning": body.get("reasoning") or {"effort": None, "summary": None},
            "store": body.get("store", True),
            "temperature": body.get("temperature", 1.0),
            "text": body.get("text") or {"format": {"type": "text"}},
            "tool_choice": body.get("tool_choice", "auto"),
            "tools": body.get("tools") or [],
            "top_p": body.get("top_p", 1.0),
            "truncation": "disabled",
            "usage": usage if final and status != "failed" else None,
            "metadata": {},
        }

    def events(self, body: dict[str, Any], reply: Script) -> list[dict[str, Any]]:
        """The SSE event payloads of a streamed answer, numbered."""
        items = self.output_items(reply, _asked_logprobs(body))
        events: list[dict[str, Any]] = [
            {"type": "response.created", "response": self.response(body, reply, [], final=False)},
            {
                "type": "response.in_progress",
                "response": self.response(body, reply, [], final=False),
            },
        ]
        calls: list[tuple[int, dict[str, Any]]] = []
        for oi, item in enumerate(items):
            kind = item["type"]
            if kind == "function_call":
                calls.append((oi, item))
                continue
            if kind == "reasoning":
                events.extend(self._reasoning_events(oi, item))
            elif kind == "message":
                events.extend(self._message_events(oi, item))
            else:  # hosted tool calls: added, progress events, done
                added = {**item, "status": "in_progress"}
                events.append(
                    {"type": "response.output_item.added", "output_index": oi, "item": added}
                )
                for phase in ("in_progress", "searching", "completed"):
                    events.append(
                        {
                            "type": f"response.{kind}.{phase}",
                            "output_index": oi,
                            "item_id": item["id"],
                        }
                    )
                events.append(
                    {"type": "response.output_item.done", "output_index": oi, "item": item}
                )
        events.extend(self._call_events(calls, reply))
        terminal = {
            "completed": "response.completed",
            "incomplete": "response.incomplete",
            "failed": "response.failed",
        }[reply.outcome]
        events.append({"type": terminal, "response": self.response(body, reply, items)})
        if reply.error_after is not None:
            events = events[: reply.error_after]
            events.append({"type": "error", **reply.error_event})
        for n, event in enumerate(events):
            event["sequence_number"] = n
        return events

    @staticmethod
    def _reasoning_events(oi: int, item: dict[str, Any]) -> list[dict[str, Any]]:
        rid = item["id"]
        added = {"id": rid, "type": "reasoning", "summary": []}
        events: list[dict[str, Any]] = [
            {"type": "response.output_item.added", "output_index": oi, "item": added}
        ]
        for si, part in enumerate(item["summary"]):
            base = {"item_id": rid, "output_index": oi, "summary_index": si}
            events.append(
                {
                    "type": "response.reasoning_summary_part.added",
                    **base,
                    "part": {"type": "summary_text", "text": ""},
                }
            )
            for piece in _words(part["text"]):
                events.append(
                    {
                        "type": "response.reasoning_summary_text.delta",
                        **base,
                        "delta": piece,
                        "obfuscation": "x1",
                    }
                )
            events.append(
                {"type": "response.reasoning_summary_text.done", **base, "text": part["text"]}
            )
            events.append({"type": "response.reasoning_summary_part.done", **base, "part": part})
        for ci, part in enumerate(item.get("content") or ()):
            base = {"item_id": rid, "output_index": oi, "content_index": ci}
            for piece in _words(part["text"]):
                events.append({"type": "response.reasoning_text.delta", **base, "delta": piece})
            events.append({"type": "response.reasoning_text.done", **base, "text": part["text"]})
        events.append({"type": "response.output_item.done", "output_index": oi, "item": item})
        return events

    @staticmethod
    def _message_events(oi: int, item: dict[str, Any]) -> list[dict[str, Any]]:
        mid = item["id"]
        added = {**item, "status": "in_progress", "content": []}
        events: list[dict[str, Any]] = [
            {"type": "response.output_item.added", "output_index": oi, "item": added}
        ]
        for ci, part in enumerate(item["content"]):
            base = {"item_id": mid, "output_index": oi, "content_index": ci}
            if part["type"] == "output_text":
                empty = {**part, "text": ""}
                events.append({"type": "response.content_part.added", **base, "part": empty})
                tokens = part["logprobs"]  # one per word, when asked for
                for i, piece in enumerate(_words(part["text"])):
                    events.append(
                        {
                            "type": "response.output_text.delta",
                            **base,
                            "delta": piece,
                            "logprobs": tokens[i : i + 1],
                            "obfuscation": "ab",
                        }
                    )
                events.append(
                    {
                        "type": "response.output_text.done",
                        **base,
                        "text": part["text"],
                        "logprobs": tokens,
                    }
                )
            else:
                events.append(
                    {
                        "type": "response.content_part.added",
                        **base,
                        "part": {"type": "refusal", "refusal": ""},
                    }
                )
                for piece in _words(part["refusal"]):
                    events.append({"type": "response.refusal.delta", **base, "delta": piece})
                events.append({"type": "response.refusal.done", **base, "refusal": part["refusal"]})
            events.append({"type": "response.content_part.done", **base, "part": part})
        events.append({"type": "response.output_item.done", "output_index": oi, "item": item})
        return events

    @staticmethod
    def _call_events(
        calls: list[tuple[int, dict[str, Any]]], reply: Script
    ) -> list[dict[str, Any]]:
        def added(oi: int, item: dict[str, Any]) -> dict[str, Any]:
            opened = {**item, "status": "in_progress", "arguments": ""}
            return {"type": "response.output_item.added", "output_index": oi, "item": opened}

        def deltas(oi: int, item: dict[str, Any]) -> list[dict[str, Any]]:
            return [
                {
                    "type": "response.function_call_arguments.delta",
                    "item_id": item["id"],
                    "output_index": oi,
                    "delta": frag,
                    "obfuscation": "q",
                }
                for frag in _split(item["arguments"], reply.fragments)
            ]

        def done(oi: int, item: dict[str, Any]) -> list[dict[str, Any]]:
            return [
                {
                    "type": "response.function_call_arguments.done",
                    "item_id": item["id"],
                    "output_index": oi,
                    "arguments": item["arguments"],
                },
                {"type": "response.output_item.done", "output_index": oi, "item": item},
            ]

        events: list[dict[str, Any]] = []
        if reply.interleave:
            events.extend(added(oi, item) for oi, item in calls)
            pieces = [deltas(oi, item) for oi, item in calls]
            for j in range(max((len(p) for p in pieces), default=0)):
                events.extend(p[j] for p in pieces if j < len(p))
            for oi, item in calls:
                events.extend(done(oi, item))
        else:
            for oi, item in calls:
                events.append(added(oi, item))
                events.extend(deltas(oi, item))
                events.extend(done(oi, item))
        return events


def _error_response(status: int, error: dict[str, Any], headers: dict[str, str]) -> web.Response:
    return web.Response(
        status=status,
        body=orjson.dumps({"error": {"param": None, "code": None, **error}}),
        content_type="application/json",
        headers=headers,
    )


__all__ = [
    "MODEL",
    "FakeResponses",
    "Raw",
    "RecordedRequest",
    "Reply",
    "Script",
    "cut",
    "function_calls",
    "http_error",
    "last_user_text",
    "rate_limited",
    "reasoning",
    "stall",
    "text",
    "web_search_call",
]


def _asked_logprobs(body: dict[str, Any]) -> int | None:
    """The alternatives per token a request asks for (None: no log probabilities asked for)."""
    if "message.output_text.logprobs" not in (body.get("include") or ()):
        return None
    return int(body.get("top_logprobs") or 0)
