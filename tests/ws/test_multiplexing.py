"""WebSocket multiplexing (OpenAI's ``stream_id``), end to end over a real socket.

With ``[websocket] multiplexing`` on: responses on different streams run side by side, those on
one stream one after another (FIFO); every event of a named stream carries its ``stream_id``,
errors included; errors that belong to no named stream carry none (the default stream's); the
limits answer with OpenAI's ``websocket_stream_limit_reached`` (named streams) and orgate's
``websocket_active_response_limit_reached`` (responses running or queued). Off (the default),
the spec's single lane is unchanged: ``stream_id`` is an unknown parameter.
The openai SDK's own WebSocket client (``client.beta.responses.connect``) runs two streams.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest
from websockets.asyncio.client import ClientConnection

from orgate.server.websocket import WebSocketSettings
from tests.support.samples import output_text
from tests.support.spec import check_events, validate, validate_event
from tests.ws.conftest import TERMINAL, create, recv, send, ws_connect
from tests.ws.inproc import InProcessServer

SLOW = "orgate:delay=150 one two three four five six seven eight"


@pytest.fixture(scope="module")
def mux() -> Iterator[InProcessServer]:
    settings = WebSocketSettings(multiplexing=True, max_streams=3, max_active_responses=3)
    with InProcessServer(ws=settings) as server:
        yield server


def _create(stream_id: str | None, text: str, **body: Any) -> dict[str, Any]:
    message = {"type": "response.create", "model": "orgate/echo", "input": text, **body}
    if stream_id is not None:
        message["stream_id"] = stream_id
    return message


async def _collect(
    ws: ClientConnection, count: int
) -> tuple[dict[str | None, list[dict[str, Any]]], list[str | None]]:
    """Events by stream until ``count`` terminal events, and the streams in the order they ended."""
    by_stream: dict[str | None, list[dict[str, Any]]] = {}
    ended: list[str | None] = []
    while len(ended) < count:
        event = await recv(ws, timeout=30)
        stream = event.get("stream_id")
        by_stream.setdefault(stream, []).append(event)
        if event["type"] in TERMINAL:
            ended.append(stream)
    return by_stream, ended


def _spec_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events without their ``stream_id`` (the envelope field OpenAI adds): spec events."""
    plain = [{k: v for k, v in event.items() if k != "stream_id"} for event in events]
    for event in plain:
        validate_event(event)
    check_events(plain)
    return plain


async def test_streams_run_side_by_side_and_every_event_names_its_stream(
    mux: InProcessServer,
) -> None:
    async with ws_connect(mux) as ws:
        await send(ws, _create("slow", SLOW))
        await send(ws, _create("fast", "quick"))
        by_stream, ended = await _collect(ws, 2)
    # the fast stream did not wait for the slow one: one lane would have answered in order
    assert ended == ["fast", "slow"]
    assert set(by_stream) == {"slow", "fast"}  # no event without its stream
    assert output_text(_spec_events(by_stream["fast"])[-1]["response"]) == "quick"
    assert output_text(_spec_events(by_stream["slow"])[-1]["response"]) == SLOW


async def test_one_stream_runs_its_responses_in_the_order_sent(mux: InProcessServer) -> None:
    async with ws_connect(mux) as ws:
        await send(ws, _create("a", SLOW))
        await send(ws, _create("a", "second"))  # queued, not refused
        events = [await recv(ws, timeout=30) for _ in range(2)]
        rest, _ = await _collect(ws, 2)
    events += rest["a"]
    terminals = [i for i, e in enumerate(events) if e["type"] in TERMINAL]
    created = [i for i, e in enumerate(events) if e["type"] == "response.created"]
    assert len(terminals) == 2 and len(created) == 2
    assert created[1] > terminals[0]  # the second began after the first ended
    assert output_text(events[terminals[0]]["response"]) == SLOW
    assert output_text(events[terminals[1]]["response"]) == "second"


async def test_the_default_stream_is_the_spec_one(mux: InProcessServer) -> None:
    async with ws_connect(mux) as ws:
        events = await create(ws, model="orgate/echo", input="plain")
    assert all("stream_id" not in event for event in events)
    for event in events:
        validate_event(event)


async def test_a_fork_continues_a_response_of_another_stream(mux: InProcessServer) -> None:
    async with ws_connect(mux) as ws:
        await send(ws, _create("main", "the parent", store=False))
        parent = (await _collect(ws, 1))[0]["main"][-1]["response"]
        for fork in ("f1", "f2"):
            await send(
                ws, _create(fork, f"child {fork}", store=False, previous_response_id=parent["id"])
            )
        by_stream, ended = await _collect(ws, 2)
    assert sorted(ended) == ["f1", "f2"]
    for fork in ("f1", "f2"):
        final = by_stream[fork][-1]
        assert final["type"] == "response.completed"
        assert final["response"]["previous_response_id"] == parent["id"]


async def test_errors_name_their_stream_and_the_others_go_to_the_default_one(
    mux: InProcessServer,
) -> None:
    async with ws_connect(mux) as ws:
        await send(ws, _create("x", "hi", model="no-such-model"))
        error = await recv(ws)
        assert error["stream_id"] == "x" and error["error"]["code"] == "model_not_found"
        validate("WebSocketErrorEvent", {k: v for k, v in error.items() if k != "stream_id"})
        await send(ws, _create("y", "hi", temperature="hot"))
        error = await recv(ws)
        assert error["stream_id"] == "y" and error["status"] == 400
        await ws.send("{not json")
        error = await recv(ws)
        assert "stream_id" not in error and error["error"]["code"] == "invalid_json"
        await send(ws, _create("bad id!", "hi"))
        error = await recv(ws)
        assert "stream_id" not in error and error["error"]["param"] == "stream_id"
        await send(ws, {**_create(None, "hi"), "stream_id": 7})
        error = await recv(ws)
        assert "stream_id" not in error and error["error"]["code"] == "invalid_type"
        # the connection serves on
        assert (await create(ws, model="orgate/echo", input="ok", stream_id="x"))[-1][
            "stream_id"
        ] == "x"


async def test_a_stream_past_the_limit_is_openais_stream_limit_error(
    mux: InProcessServer,
) -> None:
    async with ws_connect(mux) as ws:
        for name in ("s1", "s2", "s3"):
            await create(ws, model="orgate/echo", input=name, stream_id=name)
        await send(ws, _create("s4", "one too many"))
        error = await recv(ws)
        assert error["stream_id"] == "s4" and error["status"] == 400
        assert error["error"] == {
            "type": "invalid_request_error",
            "code": "websocket_stream_limit_reached",
            "message": error["error"]["message"],
            "param": "stream_id",
        }
        # a stream already named still takes responses
        assert (await create(ws, model="orgate/echo", input="again", stream_id="s2"))[-1][
            "type"
        ] == "response.completed"


async def test_responses_past_the_active_limit_are_refused_until_one_ends(
    mux: InProcessServer,
) -> None:
    async with ws_connect(mux) as ws:
        for name in ("a1", "a2", "a3"):
            await send(ws, _create(name, SLOW))
        await send(ws, _create("a1", "fourth"))
        errors: list[dict[str, Any]] = []
        while not errors:
            event = await recv(ws, timeout=30)
            if event["type"] == "error" and "sequence_number" not in event:
                errors.append(event)
        assert errors[0]["stream_id"] == "a1" and errors[0]["status"] == 429
        assert errors[0]["error"]["code"] == "websocket_active_response_limit_reached"
        await _collect(ws, 3)
        assert (await create(ws, model="orgate/echo", input="room again", stream_id="a1"))[-1][
            "type"
        ] == "response.completed"


async def test_without_multiplexing_stream_id_is_an_unknown_parameter(
    app_server: InProcessServer,
) -> None:
    async with ws_connect(app_server) as ws:
        await send(ws, _create("lane", "hi"))
        error = await recv(ws)
        assert "stream_id" not in error
        assert error["error"]["code"] == "unknown_parameter"
        assert error["error"]["param"] == "stream_id"
        events = await create(ws, model="orgate/echo", input="still usable")
        assert events[-1]["type"] == "response.completed"


async def test_the_openai_sdk_runs_two_streams_on_one_connection(mux: InProcessServer) -> None:
    client = openai.AsyncOpenAI(base_url=f"{mux.url}/v1", api_key=mux.api_key)
    ended: dict[str, str] = {}
    async with client.beta.responses.connect() as connection:
        await connection.response.create(model="orgate/echo", input=SLOW, stream_id="left")
        await connection.response.create(model="orgate/echo", input="right", stream_id="right")
        async for event in connection:
            if event.type in TERMINAL:
                assert event.stream_id is not None
                ended[event.stream_id] = output_text(event.response.model_dump(mode="json"))
                if len(ended) == 2:
                    break
    await client.close()
    assert ended == {"left": SLOW, "right": "right"}


async def test_at_its_end_of_life_a_queued_response_is_told_on_its_stream() -> None:
    settings = WebSocketSettings(multiplexing=True, max_connection_seconds=1, drain_seconds=30)
    with InProcessServer(ws=settings) as server:
        async with ws_connect(server) as ws:
            await send(ws, _create("q", SLOW + " nine ten eleven twelve"))
            await send(ws, _create("q", "never started"))
            seen: list[tuple[str, str | None]] = []
            while not seen or seen[-1] != ("error", None):
                event = await recv(ws, timeout=30)
                if event["type"] == "error" or event["type"] in TERMINAL:
                    seen.append((event["type"], event.get("stream_id")))
                    if event["type"] == "error":
                        assert event["error"]["code"] == "websocket_connection_limit_reached"
    # the queued one is told on its stream, the running one finishes, then the connection's end
    assert seen == [("error", "q"), ("response.completed", "q"), ("error", None)]
