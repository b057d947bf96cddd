"""Fixtures for the WebSocket tests: one in-process app (echo + ``fake-chat``) and a socket
client."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from websockets.asyncio.client import ClientConnection, connect

from tests.conftest import chat_model_config
from tests.fakes.openai_chat_upstream import FakeOpenAIChat
from tests.ws.inproc import InProcessServer


@pytest.fixture(scope="session")
def app_server(fake_chat: FakeOpenAIChat) -> Iterator[InProcessServer]:
    with InProcessServer(chat_model_config(fake_chat.base_url)) as running:
        yield running


def ws_connect(server: InProcessServer, key: str | None = None, **kw: Any) -> Any:
    return connect(
        server.ws_url, additional_headers=server.headers(key), proxy=None, max_size=None, **kw
    )


async def send(ws: ClientConnection, message: dict[str, Any]) -> None:
    await ws.send(orjson.dumps(message).decode())


async def recv(ws: ClientConnection, timeout: float = 10) -> dict[str, Any]:
    raw = await asyncio.wait_for(ws.recv(), timeout)
    assert isinstance(raw, str), "events are JSON text messages"
    return orjson.loads(raw)


TERMINAL = ("response.completed", "response.incomplete", "response.failed")


async def until_terminal(
    ws: ClientConnection, *, errors: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """The events of one response; WebSocket error envelopes (no sequence_number) go to
    ``errors``."""
    events: list[dict[str, Any]] = []
    while True:
        event = await recv(ws)
        if event["type"] == "error" and "sequence_number" not in event:
            if errors is None:
                raise AssertionError(f"unexpected error event: {event}")
            errors.append(event)
            continue
        events.append(event)
        if event["type"] in TERMINAL:
            return events


async def create(ws: ClientConnection, **body: Any) -> list[dict[str, Any]]:
    await send(ws, {"type": "response.create", **body})
    return await until_terminal(ws)
