"""A WebSocket connection's own history (``store: false`` chains) keeps an upstream's extension
items.

Turn 1 on the native Responses upstream answers with a ``web_search_call`` and
an ``openai:`` item; the connection cache holds them (not the events, not the
spec output); continuations on the same upstream get them back in order,
through the cache twice; a continuation on Anthropic leaves them out (and the
gate warning, which has no header to go in, is logged). A ``store: true``
continuation saves the cached history as its input: the listing shows spec
items only, the stored history keeps the rest (extension items, reasoning
origins) for the next turn.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.fakes.anthropic_upstream import FakeAnthropic
from tests.fakes.anthropic_upstream import text as claude_text
from tests.fakes.responses_upstream import FakeResponses, text, web_search_call
from tests.support.configs import native_and_claude
from tests.support.spec import check_events, validate
from tests.ws.conftest import create, ws_connect
from tests.ws.inproc import InProcessServer

PREVIEW = {"id": "wsp_ws", "type": "openai:web_search_preview_call", "status": "completed"}


@pytest.fixture(scope="module")
def upstreams() -> Iterator[tuple[FakeResponses, FakeAnthropic]]:
    with FakeResponses.start_in_thread() as native, FakeAnthropic.start_in_thread() as claude:
        yield native, claude


@pytest.fixture(scope="module")
def server(upstreams: tuple[FakeResponses, FakeAnthropic]) -> Iterator[InProcessServer]:
    native, claude = upstreams
    config = native_and_claude(native, claude, native_other=True)
    with InProcessServer(config) as running:
        yield running


async def test_the_connection_history_keeps_them_for_the_same_upstream_only(
    server: InProcessServer, upstreams: tuple[FakeResponses, FakeAnthropic]
) -> None:
    native, claude = upstreams
    search = web_search_call("ws weather")
    native.enqueue(text("Sunny.", extra_items=[search, PREVIEW]), text("Welcome."), text("Again."))
    claude.enqueue(claude_text("Elsewhere."))
    async with ws_connect(server) as ws:
        first = await create(ws, model="native", input="Weather?", store=False)
        check_events(first)
        assert "web_search" not in json.dumps(first) and "openai:" not in json.dumps(first)
        first_id = first[-1]["response"]["id"]
        second = await create(
            ws, model="native", input="Thanks", store=False, previous_response_id=first_id
        )
        assert second[-1]["type"] == "response.completed"
        third = await create(
            ws,
            model="native",
            input="More",
            store=False,
            previous_response_id=second[-1]["response"]["id"],
        )
        assert third[-1]["type"] == "response.completed"
        fourth = await create(
            ws, model="claude", input="Bye", store=False, previous_response_id=first_id
        )
        assert fourth[-1]["type"] == "response.completed"
    for body in native.bodies[1:3]:
        sent = body["input"]
        assert [i.get("type") for i in sent][:4] == [
            "message",
            "web_search_call",
            "openai:web_search_preview_call",
            "message",
        ]
        assert sent[1] == search and sent[2] == PREVIEW
    assert len(native.bodies[2]["input"]) == 7  # turn 1 (4 items), turn 2 (2), turn 3's question
    received = json.dumps(claude.bodies[-1])
    assert "web_search" not in received and "Sunny." in received


async def test_gate_warnings_have_no_header_on_a_websocket_and_are_logged(
    server: InProcessServer,
    upstreams: tuple[FakeResponses, FakeAnthropic],
    caplog: pytest.LogCaptureFixture,
) -> None:
    native, claude = upstreams
    native.enqueue(text("Sunny.", extra_items=[web_search_call("logged"), PREVIEW]))
    claude.enqueue(claude_text("Elsewhere."))
    caplog.set_level(logging.WARNING, logger="orgate.server.websocket")
    async with ws_connect(server) as ws:
        first = await create(ws, model="native", input="Weather?", store=False)
        second = await create(
            ws,
            model="claude",
            input="Bye",
            store=False,
            previous_response_id=first[-1]["response"]["id"],
        )
    assert second[-1]["type"] == "response.completed"
    check_events(second)  # nothing but the spec's events reached the client
    second_id = second[-1]["response"]["id"]
    logged = [r.getMessage() for r in caplog.records if r.name == "orgate.server.websocket"]
    assert any(
        second_id in m and "2 item(s) made by another upstream not sent to 'claude'" in m
        for m in logged
    ), logged


def page_through(http: httpx.Client, response_id: str, order: str) -> list[dict[str, Any]]:
    """Every listed item, one per page."""
    items: list[dict[str, Any]] = []
    after: str | None = None
    while True:
        params = {"order": order, "limit": 1, **({"after": after} if after else {})}
        page = http.get(f"/v1/responses/{response_id}/input_items", params=params).json()
        items.extend(page["data"])
        if page["data"]:
            assert page["first_id"] == page["last_id"] == page["data"][0]["id"]
        if not page["has_more"]:
            return items
        after = page["last_id"]


async def test_a_stored_continuation_of_a_connection_history_lists_spec_items_only(
    server: InProcessServer, upstreams: tuple[FakeResponses, FakeAnthropic]
) -> None:
    native, _ = upstreams
    search = web_search_call("listed")
    native.enqueue(
        text(
            "Sunny.",
            extra_items=[search, PREVIEW],
            reasoning_summary="Look it up.",
            encrypted_content="ENC-ws",
        ),
        text("Welcome."),
        text("Again."),
        text("Elsewhere."),
    )
    async with ws_connect(server) as ws:
        first = await create(ws, model="native", input="Weather?", store=False)
        second = await create(
            ws,
            model="native",
            input="Thanks",
            store=True,
            previous_response_id=first[-1]["response"]["id"],
        )
    assert second[-1]["type"] == "response.completed"
    second_id = second[-1]["response"]["id"]
    with httpx.Client(base_url=server.url, headers=server.headers(), timeout=20) as http:
        listed = http.get(f"/v1/responses/{second_id}/input_items", params={"order": "asc"})
        assert listed.status_code == 200, listed.text
        assert "orgate:" not in listed.text and "web_search" not in listed.text
        data = listed.json()["data"]
        assert [(i["type"], i.get("role")) for i in data] == [
            ("message", "user"),
            ("reasoning", None),
            ("message", "assistant"),
            ("message", "user"),
        ]
        for item in data:
            validate("ItemParam", item)
        assert data[1]["encrypted_content"] == "ENC-ws"  # the spec item, unchanged
        assert (
            listed.json()["first_id"] == data[0]["id"]
            and listed.json()["last_id"] == data[-1]["id"]
        )
        assert not listed.json()["has_more"]
        # paging skips the wrappers: one listed item per page, in both orders
        assert page_through(http, second_id, "asc") == data
        assert page_through(http, second_id, "desc") == data[::-1]
        two = http.get(
            f"/v1/responses/{second_id}/input_items", params={"order": "asc", "limit": 2}
        ).json()
        assert [i["id"] for i in two["data"]] == [i["id"] for i in data[:2]] and two["has_more"]

        # the stored history kept what the listing leaves out: the same upstream gets it all back
        res = http.post(
            "/v1/responses",
            json={"model": "native", "input": "More", "previous_response_id": second_id},
        )
        assert res.status_code == 200, res.text
        sent = native.bodies[-1]["input"]
        assert [i.get("type") for i in sent][:5] == [
            "message",
            "web_search_call",
            "openai:web_search_preview_call",
            "reasoning",
            "message",
        ]
        assert sent[1] == search and sent[2] == PREVIEW
        assert sent[3] == {
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "Look it up."}],
            "encrypted_content": "ENC-ws",
        }
        # and the reasoning's origin survived the connection cache and the save:
        # another upstream does not get it
        res = http.post(
            "/v1/responses",
            json={"model": "native-other", "input": "More", "previous_response_id": second_id},
        )
        assert res.status_code == 200, res.text
        received = json.dumps(native.bodies[-1])
        assert "ENC-ws" not in received and "web_search" not in received and "Sunny." in received
