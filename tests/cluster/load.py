"""Bounded load through the load balancer, and what its clients saw.

``run_lanes(...)`` runs a fixed set of lanes, each one conversation of sequential turns
through the balancer until ``stop`` is set (or ``MAX_TURNS``): the openai SDK continuing a
``previous_response_id`` chain (streamed and not), raw HTTP doing the same, and raw HTTP in a
session (``X-Session-Id``). Every response a client saw completed goes into the ``Ledger``
(its id, its text, which node served it when the balancer said); every error is counted,
never retried by the lane (the SDK retries as it always does). A session turn refused with
409 ``session_busy`` is tried again after a second: a turn of that session is still running,
or was running on a node that died and holds the session until the survivors recover it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import openai
import orjson

from tests.cluster.clients import output_text, sse_events
from tests.cluster.conftest import KEYS
from tests.server_process import START_TIMEOUT

#: Turns per lane at most: the load stops by itself even if nothing sets ``stop``.
MAX_TURNS = 400
#: Each turn's input: a few words with a pause between them, so that turns are in flight on a
#: node when it is killed.
WORDS = "orgate:delay=40 one two three four five"


@dataclass(frozen=True)
class Seen:
    """A response a client saw completed."""

    id: str
    text: str
    lane: str
    served_by: str  # HAProxy's server name, "" when the client could not tell
    at: float  # time.monotonic() when it was seen


@dataclass
class Lane:
    name: str
    kind: str  # "sdk" | "http" | "session"
    stream: bool
    last: str | None = None  # the last response this lane saw completed
    session: str | None = None


@dataclass
class Ledger:
    seen: list[Seen] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    busy: int = 0  # 409 session_busy answers

    def add(self, lane: Lane, response: dict[str, Any], served_by: str) -> None:
        assert response["status"] == "completed", response
        self.seen.append(
            Seen(response["id"], output_text(response), lane.name, served_by, time.monotonic())
        )
        lane.last = response["id"]

    def since(self, moment: float) -> list[Seen]:
        return [item for item in self.seen if item.at > moment]


def lanes(run: str) -> list[Lane]:
    return [
        Lane("sdk-chain", "sdk", stream=False),
        Lane("sdk-stream", "sdk", stream=True),
        Lane("http-chain", "http", stream=False),
        Lane("http-stream", "http", stream=True),
        Lane("session-plain", "session", stream=False, session=f"{run}-plain"),
        Lane("session-stream", "session", stream=True, session=f"{run}-stream"),
    ]


async def _sdk_turn(client: openai.AsyncOpenAI, lane: Lane, ledger: Ledger, text: str) -> None:
    if lane.stream:
        events = await client.responses.create(
            model="orgate/echo", input=text, previous_response_id=lane.last, stream=True
        )
        async for event in events:
            if event.type == "response.completed":
                ledger.add(lane, event.response.model_dump(mode="json"), "")
                return
        raise RuntimeError("the stream ended without response.completed")
    raw = await client.responses.with_raw_response.create(
        model="orgate/echo", input=text, previous_response_id=lane.last
    )
    ledger.add(lane, raw.parse().model_dump(mode="json"), raw.headers.get("x-served-by", ""))


async def _http_turn(client: httpx.AsyncClient, lane: Lane, ledger: Ledger, text: str) -> None:
    body: dict[str, Any] = {"model": "orgate/echo", "input": text, "stream": lane.stream}
    headers = {}
    if lane.session is not None:
        headers["X-Session-Id"] = lane.session
    elif lane.last is not None:
        body["previous_response_id"] = lane.last
    reply = await client.post("/v1/responses", json=body, headers=headers)
    if reply.status_code == 409 and reply.json()["error"]["code"] == "session_busy":
        ledger.busy += 1
        await asyncio.sleep(1)  # polls: the session is free once its running turn ends
        return
    if reply.status_code != 200:
        raise RuntimeError(f"{reply.status_code} {reply.text[:200]}")
    if lane.stream:
        events = sse_events(reply.text)
        if not events or events[-1]["type"] != "response.completed":
            raise RuntimeError(f"the stream ended with {events[-1]['type'] if events else None}")
        response = events[-1]["response"]
    else:
        response = orjson.loads(reply.content)
    ledger.add(lane, response, reply.headers.get("x-served-by", ""))


async def _lane(url: str, lane: Lane, ledger: Ledger, stop: asyncio.Event) -> None:
    key = KEYS["alpha"]
    sdk = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key=key, timeout=120)
    http = httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=120)
    try:
        for turn in range(MAX_TURNS):
            if stop.is_set():
                return
            text = f"{lane.name} turn {turn} {WORDS}"
            try:
                if lane.kind == "sdk":
                    await _sdk_turn(sdk, lane, ledger, text)
                else:
                    await _http_turn(http, lane, ledger, text)
            except (openai.APIError, httpx.HTTPError, RuntimeError) as exc:
                ledger.errors.append(f"{lane.name}: {type(exc).__name__}: {exc}"[:300])
                await asyncio.sleep(0.2)  # a client backs off: no tight loop of failures
    finally:
        await sdk.close()
        await http.aclose()


def start_lanes(
    url: str, all_lanes: list[Lane], ledger: Ledger, stop: asyncio.Event
) -> asyncio.Future[Any]:
    return asyncio.gather(*(_lane(url, lane, ledger, stop) for lane in all_lanes))


async def until(what: str, condition: Callable[[], bool], ledger: Ledger) -> None:
    """Poll ``condition`` while the lanes run; fail (saying what the ledger holds) after
    twice the start-up timeout: a loaded machine is slow, a stuck load is not."""
    deadline = time.monotonic() + 2 * START_TIMEOUT
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{what}: not reached; {len(ledger.seen)} completed, errors {ledger.errors[-5:]}"
            )
        await asyncio.sleep(0.1)
