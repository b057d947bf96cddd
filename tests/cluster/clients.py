"""What the multi-node tests send: stored responses, console sessions, review entries, bursts."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import httpx
import orjson

from tests.cluster.conftest import KEYS

PERSON = {
    "type": "json_schema",
    "name": "person",
    "schema": {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
        "required": ["name", "age"],
        "additionalProperties": False,
    },
    "strict": True,
}


def sse_events(raw: str) -> list[dict[str, Any]]:
    """The JSON events of an SSE body (``[DONE]`` left out)."""
    return [
        orjson.loads(line[6:])
        for line in raw.split("\n")
        if line.startswith("data: ") and line != "data: [DONE]"
    ]


def output_text(response: dict[str, Any]) -> str:
    return "".join(
        part.get("text", "")
        for item in response.get("output", [])
        if item.get("type") == "message"
        for part in item.get("content", [])
    )


def poll(predicate: Callable[[], Any], timeout: float, every: float = 0.25) -> Any:
    """``predicate()``'s first true value, polled until ``timeout`` seconds have passed (then
    its last value, false)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(every)


def console(url: str, tenant: str) -> httpx.Client:
    """A console session of ``tenant``'s key, signed in at ``url`` (its cookie and CSRF token)."""
    client = httpx.Client(base_url=url, timeout=60)
    signed = client.post("/console/api/session", json={"key": KEYS[tenant]})
    assert signed.status_code == 200, signed.text
    client.headers["X-CSRF-Token"] = signed.json()["csrf_token"]
    return client


def with_cookie_of(session: httpx.Client, url: str) -> httpx.Client:
    """A client of ``url`` carrying ``session``'s cookie and CSRF token (a copied cookie)."""
    return httpx.Client(
        base_url=url,
        cookies={"orgate_console": session.cookies["orgate_console"]},
        headers={"X-CSRF-Token": session.headers["X-CSRF-Token"]},
        timeout=60,
    )


def queue_for_review(client: httpx.Client) -> str:
    """A structured-output request whose budget is spent: the review entry's id."""
    response = client.post(
        "/v1/responses",
        json={
            "model": "orgate/echo",
            "input": "a person orgate:bad-json",
            "text": {"format": PERSON},
        },
    )
    review_id = response.headers.get("x-orgate-review-id")
    assert review_id, (response.status_code, response.text)
    return review_id


async def burst(urls: list[str], key: str, count: int) -> list[httpx.Response]:
    """``count`` concurrent calls of ``key``, spread over ``urls`` in turn."""
    async with httpx.AsyncClient(timeout=120) as client:
        return await asyncio.gather(
            *(
                client.post(
                    f"{urls[i % len(urls)]}/v1/responses",
                    json={"model": "orgate/echo", "input": f"burst {i}"},
                    headers={"Authorization": f"Bearer {KEYS[key]}"},
                )
                for i in range(count)
            )
        )
