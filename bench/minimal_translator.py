"""A lower bound for `/v1/responses` over Chat Completions: the least any translator must do.

An ASGI app on the floor's stack (``passthrough.py``) for ``bench/instructions.py``:
it checks the bearer key, parses and validates the body with orgate's own
``CreateResponseBody`` (and echoes orgate's defaults, taken once at start-up),
sends one Chat Completions request through a pooled aiohttp session, parses the
answer and builds the response with the ~10 spec events a non-streaming response
drains. Nothing else: no limits, metrics, logs, replay gate, sessions, store,
timeouts or disconnect handling, and only a string ``input`` and a plain text
answer. It is not a gateway; its cost, next to the pass-through floor's, shows
how much of the floor ratio the translation itself takes.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

import orjson
from passthrough import PassThrough, Receive, Scope, Send

from orgate.engine.request_body import normalize_input
from orgate.engine.turn import build_turn
from orgate.neutral import Deployment
from orgate.protocol import CreateResponseBody

#: The fields a response sets itself; the rest of its skeleton is echoed from the request.
_OWN = frozenset(
    {
        "id",
        "object",
        "created_at",
        "completed_at",
        "status",
        "incomplete_details",
        "model",
        "previous_response_id",
        "instructions",
        "output",
        "error",
        "usage",
    }
)


def _echoed_defaults() -> dict[str, Any]:
    """The response fields echoed from a request that sets none of them: orgate's own
    (``build_turn``'s skeleton), taken once at start-up."""
    body = CreateResponseBody.model_validate({"model": "m", "input": "x"})
    deployment = Deployment(name="m", provider="openai-chat", upstream_model="m")
    base = build_turn(body, deployment, normalize_input(body), [], store_enabled=False).base
    return {key: value for key, value in base.items() if key not in _OWN}


_ECHO = _echoed_defaults()


class MinimalTranslator(PassThrough):
    """ASGI app: ``POST`` a string-input Responses request, get the response (non-streaming).

    The floor's own lifespan and client session (``PassThrough``): the same stack, only the
    work per request differs.
    """

    def __init__(self, chat_url: str, key: str) -> None:
        super().__init__(chat_url)
        self.chat_url = chat_url
        self.authorization = f"Bearer {key}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        assert self.session is not None
        if dict(scope["headers"]).get(b"authorization") != self.authorization:
            await _answer(
                send,
                401,
                b'{"error":{"message":"bad key","type":"invalid_request_error",'
                b'"param":null,"code":"invalid_api_key"}}',
            )
            return
        message = await receive()
        body = CreateResponseBody.model_validate(orjson.loads(message["body"]))
        chat = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": body.input}]}
        headers = {"Content-Type": "application/json", "Authorization": "Bearer x"}
        async with self.session.post(
            self.chat_url, data=orjson.dumps(chat), headers=headers
        ) as reply:
            answer = orjson.loads(await reply.read())
        text = answer["choices"][0]["message"]["content"]
        usage = answer["usage"]
        base = {
            "id": "resp_" + secrets.token_hex(24),
            "object": "response",
            "created_at": int(time.time()),
            "completed_at": None,
            "status": "in_progress",
            "incomplete_details": None,
            "model": body.model,
            "previous_response_id": None,
            "instructions": None,
            "output": [],
            "error": None,
            **_ECHO,
            "usage": None,
        }
        item_id = "msg_" + secrets.token_hex(24)
        part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
        item = {
            "id": item_id,
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "content": [part],
        }
        final = {
            **base,
            "status": "completed",
            "completed_at": int(time.time()),
            "output": [item],
            "usage": {
                "input_tokens": usage["prompt_tokens"],
                "output_tokens": usage["completion_tokens"],
                "total_tokens": usage["total_tokens"],
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 0},
            },
        }
        where = {"item_id": item_id, "output_index": 0, "content_index": 0}
        events: list[dict[str, Any]] = [
            {"type": "response.created", "response": dict(base)},
            {"type": "response.in_progress", "response": dict(base)},
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {**item, "status": "in_progress", "content": []},
            },
            {"type": "response.content_part.added", **where, "part": {**part, "text": ""}},
            {"type": "response.output_text.delta", **where, "delta": text, "logprobs": []},
            {"type": "response.output_text.done", **where, "text": text, "logprobs": []},
            {"type": "response.content_part.done", **where, "part": part},
            {"type": "response.output_item.done", "output_index": 0, "item": item},
            {"type": "response.completed", "response": final},
        ]
        for number, event in enumerate(events):
            event["sequence_number"] = number
        await _answer(send, 200, orjson.dumps(events[-1]["response"]))


async def _answer(send: Send, status: int, body: bytes) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
