"""WebSocket admission (open sockets per key and per process) and the idle timeout."""

from __future__ import annotations

import asyncio
import time

import orjson
import pytest
from websockets.exceptions import ConnectionClosedOK, InvalidStatus

from orgate.server import ws_limits
from orgate.server.websocket import WebSocketSettings
from orgate.server.ws_limits import SocketLimits
from tests.conftest import chat_model_config
from tests.fakes.openai_chat_upstream import FakeOpenAIChat, text
from tests.support.spec import validate
from tests.support.waiting import PATIENCE
from tests.ws.conftest import create, recv, ws_connect
from tests.ws.inproc import InProcessServer


def test_admission_counts_per_key_and_in_all(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ws_limits, "descriptor_budget", lambda: None)
    limits = SocketLimits(max_connections=3, max_per_key=2)
    assert limits.admit("a") is None and limits.admit("a") is None
    refused = limits.admit("a")
    assert refused is not None and (refused.status, refused.code) == (
        429,
        "too_many_websocket_connections",
    )
    assert limits.admit("b") is None
    full = limits.admit("c")
    assert full is not None and (full.status, full.code) == (503, "websocket_capacity_reached")
    limits.release("a")
    assert limits.admit("c") is None  # a closed socket frees its place
    assert (limits.open, dict(limits.by_key)) == (3, {"a": 1, "b": 1, "c": 1})


def test_the_open_files_limit_lowers_the_process_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ws_limits, "descriptor_budget", lambda: 2)
    limits = SocketLimits(max_connections=1000, max_per_key=1000)
    assert limits.capacity() == 2
    assert limits.admit("a") is None and limits.admit("b") is None
    refused = limits.admit("c")
    assert refused is not None and refused.status == 503 and "maximum of 2" in refused.message


async def test_refused_handshake_is_an_http_status_and_a_closed_socket_frees_its_place() -> None:
    with InProcessServer(
        ws=WebSocketSettings(max_connections=10, max_connections_per_key=1)
    ) as server:
        async with ws_connect(server):
            with pytest.raises(InvalidStatus) as refused:
                async with ws_connect(server):
                    pass
            assert refused.value.response.status_code == 429
            body = orjson.loads(refused.value.response.body)
            assert body["error"]["code"] == "too_many_websocket_connections"
        deadline = time.monotonic() + PATIENCE
        while True:  # the server notices the close asynchronously: poll
            try:
                async with ws_connect(server) as ws:
                    assert (await create(ws, model="orgate/echo", input="again"))[-1][
                        "type"
                    ] == "response.completed"
                break
            except InvalidStatus:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)


async def test_an_idle_connection_is_closed_but_not_while_a_response_runs(
    fake_chat: FakeOpenAIChat,
) -> None:
    fake_chat.reset()
    fake_chat.enqueue(
        text("one two three four five six", delay=0.4)
    )  # ~2 s: longer than the idle time
    with InProcessServer(
        chat_model_config(fake_chat.base_url), ws=WebSocketSettings(idle_seconds=1)
    ) as server:
        async with ws_connect(server) as ws:
            events = await create(ws, model="fake-chat", input="slow")
            assert events[-1]["type"] == "response.completed"
            finished = time.monotonic()
            error = await recv(ws, timeout=30)
            validate("WebSocketErrorEvent", error)
            assert error["error"]["code"] == "websocket_idle_timeout"
            assert time.monotonic() - finished >= 0.9  # counted from the end of the response
            with pytest.raises(ConnectionClosedOK):
                await asyncio.wait_for(ws.recv(), 10)
