"""A WebSocket connection's own history (``store: false`` chains) keeps an upstream's extension items.

Turn 1 on the native Responses upstream answers with a ``web_search_call`` and
an ``openai:`` item; the connection cache holds them (not the events, not the
spec output); continuations on the same upstream get them back in order,
through the cache twice; a continuation on Anthropic leaves them out.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.fakes.anthropic_upstream import FakeAnthropic
from tests.fakes.anthropic_upstream import text as claude_text
from tests.fakes.responses_upstream import FakeResponses, text, web_search_call
from tests.support.spec import check_events
from tests.ws.conftest import create, ws_connect
from tests.ws.inproc import InProcessServer

PREVIEW = {"id": "wsp_ws", "type": "openai:web_search_preview_call", "status": "completed"}


@pytest.fixture(scope="module")
def upstreams() -> Iterator[tuple[FakeResponses, FakeAnthropic]]:
    native, claude = FakeResponses.start_in_thread(), FakeAnthropic.start_in_thread()
    try:
        yield native, claude
    finally:
        native.stop_thread()
        claude.stop_thread()


@pytest.fixture(scope="module")
def server(upstreams: tuple[FakeResponses, FakeAnthropic]) -> Iterator[InProcessServer]:
    native, claude = upstreams
    config = f"""
[[models]]
name = "native"
provider = "openai-responses"
base_url = "{native.base_url}"
upstream_model = "gpt-fake-1"
read_timeout = 5

[[models]]
name = "claude"
provider = "anthropic"
base_url = "{claude.base_url}"
api_key = "k"
upstream_model = "claude-fake-1"
read_timeout = 5
"""
    with InProcessServer(config) as running:
        yield running


async def test_the_connection_history_keeps_them_for_the_same_upstream_only(server: InProcessServer, upstreams: tuple[FakeResponses, FakeAnthropic]) -> None:
    native, claude = upstreams
    search = web_search_call("ws weather")
    native.enqueue(text("Sunny.", extra_items=[search, PREVIEW]), text("Welcome."), text("Again."))
    claude.enqueue(claude_text("Elsewhere."))
    async with ws_connect(server) as ws:
        first = await create(ws, model="native", input="Weather?", store=False)
        check_events(first)
        assert "web_search" not in json.dumps(first) and "openai:" not in json.dumps(first)
        first_id = first[-1]["response"]["id"]
        second = await create(ws, model="native", input="Thanks", store=False, previous_response_id=first_id)
        assert second[-1]["type"] == "response.completed"
        third = await create(ws, model="native", input="More", store=False, previous_response_id=second[-1]["response"]["id"])
        assert third[-1]["type"] == "response.completed"
        fourth = await create(ws, model="claude", input="Bye", store=False, previous_response_id=first_id)
        assert fourth[-1]["type"] == "response.completed"
    for body in native.bodies[1:3]:
        sent = body["input"]
        assert [i.get("type") for i in sent][:4] == ["message", "web_search_call", "openai:web_search_preview_call", "message"]
        assert sent[1] == search and sent[2] == PREVIEW
    assert len(native.bodies[2]["input"]) == 7  # turn 1 (4 items), turn 2 (2), turn 3's question
    received = json.dumps(claude.bodies[-1])
    assert "web_search" not in received and "Sunny." in received
