"""Compacting a conversation that holds an upstream's own items (a hosted web search).

Kept extension items are sealed, in place, into compaction items of their own
(the output stays spec-valid, no 400); sent back as input they reach their
upstream again, at their place, and any other upstream gets the conversation
without them plus a gate warning. Older ones are summarised like any item.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from orgate.engine.compaction import core as compaction
from orgate.engine.compaction.service import kept_output
from orgate.neutral import EXTENSION_ITEM_TYPE, OpaqueItem
from orgate.protocol import CompactionSummaryItemParam, UserMessageItemParam
from orgate.protocol.errors import ApiError
from tests.fakes.anthropic_upstream import FakeAnthropic
from tests.fakes.anthropic_upstream import text as claude_text
from tests.fakes.responses_upstream import FakeResponses, text, web_search_call
from tests.support.configs import native_and_claude
from tests.support.spec import validate
from tests.ws.inproc import InProcessServer

KEY = bytes(range(32))
ORIGIN = "openai-responses http://127.0.0.1:1/v1"
PREVIEW = {"id": "wsp_cmp", "type": "openai:web_search_preview_call", "status": "completed"}
GATE_HEADER = "x-orgate-gate-warnings"


def opaque(item: dict[str, Any], item_id: str) -> OpaqueItem:
    return OpaqueItem(id=item_id, origin=ORIGIN, item=item)


# --- units -------------------------------------------------------------------------------------


def test_runs_of_extension_items_are_sealed_in_place() -> None:
    search = web_search_call("q")
    kept = [
        UserMessageItemParam(content="weather?"),
        opaque(search, "ext_1"),
        opaque(PREVIEW, "ext_2"),
        UserMessageItemParam(content="and now?"),
        opaque(search, "ext_3"),
    ]
    output = kept_output(kept, KEY, tenant="t1", model="native")
    assert [i["type"] for i in output] == ["message", "compaction", "message", "compaction"]
    for item in output:
        validate("ItemField", item)
    assert "web_search" not in json.dumps(output) and "orgate:" not in json.dumps(output)
    sealed = [
        CompactionSummaryItemParam(encrypted_content=i["encrypted_content"])
        for i in output
        if i["type"] == "compaction"
    ]
    expanded = compaction.expand(
        [UserMessageItemParam(content="x"), sealed[0], sealed[1]], KEY, context="t1"
    )
    assert expanded[1:] == [
        opaque(search, "ext_1"),
        opaque(PREVIEW, "ext_2"),
        opaque(search, "ext_3"),
    ]
    with pytest.raises(ApiError) as caught:  # bound to the tenant like any compaction item
        compaction.expand([sealed[0]], KEY, context="t2")
    assert caught.value.code == "invalid_compaction"


def test_the_transcript_names_extension_items() -> None:
    line = compaction.render_item(opaque(web_search_call("q"), "ext_1"))
    assert line == "[web_search_call item]"
    assert (
        compaction.estimate_tokens([opaque(web_search_call("q" * 400), "ext_1")]) > 100
    )  # its raw size counts


# --- end to end --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def upstreams() -> Iterator[tuple[FakeResponses, FakeAnthropic]]:
    with FakeResponses.start_in_thread() as native, FakeAnthropic.start_in_thread() as claude:
        yield native, claude


@pytest.fixture(scope="module")
def server(upstreams: tuple[FakeResponses, FakeAnthropic]) -> Iterator[InProcessServer]:
    native, claude = upstreams
    config = native_and_claude(native, claude)
    with InProcessServer(config) as running:
        yield running


@pytest.fixture
def http(
    server: InProcessServer, upstreams: tuple[FakeResponses, FakeAnthropic]
) -> Iterator[httpx.Client]:
    for fake in upstreams:
        fake.reset()
    with httpx.Client(base_url=server.url, headers=server.headers(), timeout=20) as client:
        yield client


def searched(http: httpx.Client, native: FakeResponses) -> tuple[str, dict[str, Any]]:
    """One stored turn on the native upstream that made a web search (and an ``openai:`` item)."""
    search = web_search_call("paris")
    native.enqueue(text("Sunny in Paris.", extra_items=[search, PREVIEW]))
    res = http.post("/v1/responses", json={"model": "native", "input": "Weather in Paris?"})
    assert res.status_code == 200, res.text
    return res.json()["id"], search


def test_kept_extension_items_are_sealed_and_go_back_to_their_upstream(
    http: httpx.Client, upstreams: tuple[FakeResponses, FakeAnthropic]
) -> None:
    native, _ = upstreams
    first, search = searched(http, native)
    res = http.post(
        "/v1/responses/compact", json={"model": "native", "previous_response_id": first}
    )
    assert res.status_code == 200, res.text
    compacted = res.json()
    validate("CompactResource", compacted)
    assert "web_search" not in res.text and "orgate:" not in res.text
    assert [(i["type"], i.get("role")) for i in compacted["output"]] == [
        ("message", "user"),
        ("compaction", None),  # the two extension items, sealed where they stood
        ("message", "assistant"),
        ("compaction", None),  # the summary (nothing older here)
    ]
    native.enqueue(text("You're welcome."))
    res = http.post(
        "/v1/responses",
        json={
            "model": "native",
            "input": [*compacted["output"], {"role": "user", "content": "Thanks"}],
        },
    )
    assert res.status_code == 200, res.text
    assert GATE_HEADER not in res.headers
    sent = native.bodies[-1]["input"]
    assert [i.get("type") for i in sent] == [
        "message",
        "web_search_call",
        "openai:web_search_preview_call",
        "message",
        "message",
    ]
    assert sent[1] == search and sent[2] == PREVIEW  # as the upstream made them, ids included
    listed = http.get(f"/v1/responses/{res.json()['id']}/input_items", params={"order": "asc"})
    assert (
        listed.status_code == 200
        and "orgate:" not in listed.text
        and "web_search" not in listed.text
    )
    for item in listed.json()["data"]:
        validate("ItemParam", item)


def test_another_upstream_gets_the_compacted_conversation_without_them(
    http: httpx.Client, upstreams: tuple[FakeResponses, FakeAnthropic]
) -> None:
    native, claude = upstreams
    first, _ = searched(http, native)
    compacted = http.post(
        "/v1/responses/compact", json={"model": "native", "previous_response_id": first}
    ).json()
    claude.enqueue(claude_text("Still sunny."))
    res = http.post(
        "/v1/responses",
        json={
            "model": "claude",
            "input": [*compacted["output"], {"role": "user", "content": "Thanks"}],
        },
    )
    assert res.status_code == 200, res.text
    assert "web_search" not in json.dumps(claude.bodies[-1]) and "Sunny in Paris." in json.dumps(
        claude.bodies[-1]
    )
    assert res.headers[GATE_HEADER].startswith(
        "history: namespaced, 2 item(s) made by another upstream not sent to 'claude'"
    )


def test_older_extension_items_are_summarised(
    http: httpx.Client, upstreams: tuple[FakeResponses, FakeAnthropic]
) -> None:
    native, _ = upstreams
    previous, _ = searched(http, native)
    for question in ("And Rome?", "And Oslo?"):
        native.enqueue(text("Fine."))
        res = http.post(
            "/v1/responses",
            json={"model": "native", "input": question, "previous_response_id": previous},
        )
        assert res.status_code == 200, res.text
        previous = res.json()["id"]
    native.enqueue(text("They searched the weather in Paris."))
    res = http.post(
        "/v1/responses/compact", json={"model": "native", "previous_response_id": previous}
    )
    assert res.status_code == 200, res.text
    validate("CompactResource", res.json())
    assert [i["type"] for i in res.json()["output"]].count(
        "compaction"
    ) == 1  # nothing kept to seal
    prompt = json.dumps(native.bodies[-1]["input"])
    assert "[web_search_call item]" in prompt and "[openai:web_search_preview_call item]" in prompt
    assert EXTENSION_ITEM_TYPE not in prompt
