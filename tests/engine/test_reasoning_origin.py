"""Reasoning items go back only to the upstream that made their ``encrypted_content``, unit by unit.

The builder marks them (``orgate:origin``) in the history it keeps, never in
what the client sees; the marker survives the store round trip; the
``openai-responses`` mapping sends a marked item only to its origin (without
the marker) and leaves it out elsewhere; unmarked items (older history,
client input) go as before; the anthropic and chat mappings do not read it and
never leak it; listings show neither the marker nor extension wrappers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from orgate.engine.builder import ResponseBuilder
from orgate.engine.history_items import is_private, item_to_wire, items_from_wire, listed_item
from orgate.engine.request_body import parse_body
from orgate.engine.service import Caller, ResponsesService
from orgate.neutral import (
    EXTENSION_ITEM_TYPE,
    Deployment,
    ExtensionItem,
    Finish,
    ModelRequest,
    ReasoningDelta,
    ReasoningEncrypted,
    TextDelta,
    origin_of,
)
from orgate.neutral.items import ORIGIN_FIELD
from orgate.protocol import ReasoningItemParam, UserMessageItemParam
from orgate.providers.anthropic import build_body as anthropic_body
from orgate.providers.anthropic import encode_blocks
from orgate.providers.openai_chat import build_body as chat_body
from orgate.providers.openai_responses import build_body as responses_body
from orgate.store import open_store
from tests.engine.helpers import base, run
from tests.support.scripted import ScriptedProvider
from tests.support.spec import check_events, validate

NATIVE = Deployment(
    name="gpt",
    provider="openai-responses",
    upstream_model="m",
    base_url="https://api.openai.com/v1",
)
OTHER = Deployment(
    name="vllm",
    provider="openai-responses",
    upstream_model="m",
    base_url="http://vllm.internal:8000/v1",
)
ORIGIN, OTHER_ORIGIN = origin_of(NATIVE), origin_of(OTHER)
USER = {"type": "message", "role": "user", "content": "Why?"}
SUMMARY = [{"type": "summary_text", "text": "Think."}]


def answered(encrypted: str = "ENC-native") -> ResponseBuilder:
    return run(
        ReasoningDelta("Think.", "summary"),
        ReasoningEncrypted(encrypted),
        TextDelta("Because."),
        Finish("stop"),
    )


def next_request(history: list[dict[str, Any]]) -> ModelRequest:
    return ModelRequest(
        model="m", input=[*items_from_wire(history), UserMessageItemParam(content="And then?")]
    )


# --- the builder: history only ------------------------------------------------------------------


def test_sealed_reasoning_is_marked_in_the_history_never_in_what_the_client_sees() -> None:
    builder = answered()
    events = builder.drain()
    check_events(events)
    final = builder.final
    assert final is not None
    validate("ResponseResource", final)
    assert "orgate:" not in orjson.dumps(events).decode()
    assert builder.history_differs
    history = builder.output_items(ORIGIN)
    assert history[0] == {**final["output"][0], ORIGIN_FIELD: ORIGIN}
    assert ORIGIN_FIELD not in final["output"][0]  # a copy: the emitted item is unchanged
    assert history[1] is final["output"][1]
    assert builder.output_items() == final["output"]  # no origin given: nothing marked


def test_reasoning_without_encrypted_content_needs_no_marker() -> None:
    builder = run(ReasoningDelta("Think.", "summary"), TextDelta("Because."), Finish("stop"))
    assert not builder.history_differs
    assert builder.output_items(ORIGIN) == builder.final["output"]  # type: ignore[index]


def test_markers_and_extension_items_keep_their_places() -> None:
    search = {"id": "ws_1", "type": "web_search_call", "status": "completed"}
    builder = run(
        ReasoningDelta("Think.", "summary"),
        ReasoningEncrypted("ENC"),
        ExtensionItem(search, ORIGIN),
        TextDelta("Found."),
        Finish("stop"),
    )
    history = builder.output_items(ORIGIN)
    assert [(i["type"], i.get(ORIGIN_FIELD)) for i in history] == [
        ("reasoning", ORIGIN),
        (EXTENSION_ITEM_TYPE, None),
        ("message", None),
    ]


def test_the_marker_survives_the_store_round_trip() -> None:
    history = [USER, *answered().output_items(ORIGIN)]
    models = items_from_wire(history)
    assert isinstance(models[1], ReasoningItemParam)
    assert models[1].model_extra == {ORIGIN_FIELD: ORIGIN}
    assert (
        item_to_wire(models[1])[ORIGIN_FIELD] == ORIGIN
    )  # a WebSocket cache / unlinked save keeps it


# --- the providers -----------------------------------------------------------------------------


def test_openai_responses_sends_marked_reasoning_to_its_origin_only() -> None:
    request = next_request([USER, *answered().output_items(ORIGIN)])
    same = responses_body(request, origin=ORIGIN)["input"]
    assert [i["type"] for i in same] == ["message", "reasoning", "message", "message"]
    assert same[1] == {
        "type": "reasoning",
        "summary": SUMMARY,
        "encrypted_content": "ENC-native",
    }  # no marker, no id
    other = responses_body(request, origin=OTHER_ORIGIN)["input"]
    assert [i.get("role") for i in other] == [
        "user",
        "assistant",
        "user",
    ]  # the whole item left out
    assert "ENC-native" not in orjson.dumps(other).decode()
    assert (
        responses_body(request)["input"] == other
    )  # no origin known: only unmarked reasoning goes


def test_unmarked_reasoning_goes_as_before() -> None:
    """History stored before origins were recorded (and client input) has no marker."""
    old = [
        USER,
        {"type": "reasoning", "id": "rs_1", "summary": SUMMARY, "encrypted_content": "ENC-old"},
    ]
    sent = responses_body(next_request(old), origin=OTHER_ORIGIN)["input"]
    assert sent[1] == {"type": "reasoning", "summary": SUMMARY, "encrypted_content": "ENC-old"}


def test_an_anthropic_envelope_goes_back_to_the_orgate_upstream_that_made_it() -> None:
    """An orgate behind orgate: its reasoning is an anthropic envelope,
    made (for us) by that upstream."""
    envelope = encode_blocks([{"type": "thinking", "thinking": "hmm", "signature": "sig"}])
    marked = [
        USER,
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [],
            "encrypted_content": envelope,
            ORIGIN_FIELD: ORIGIN,
        },
    ]
    assert [i["type"] for i in responses_body(next_request(marked), origin=ORIGIN)["input"]] == [
        "message",
        "reasoning",
        "message",
    ]
    assert [
        i["type"] for i in responses_body(next_request(marked), origin=OTHER_ORIGIN)["input"]
    ] == ["message", "message"]
    unmarked = [
        USER,
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": envelope},
    ]
    assert [i["type"] for i in responses_body(next_request(unmarked), origin=ORIGIN)["input"]] == [
        "message",
        "message",
    ]


def test_anthropic_and_chat_do_not_read_the_marker_and_never_leak_it() -> None:
    envelope = encode_blocks([{"type": "thinking", "thinking": "hmm", "signature": "sig"}])
    claude_origin = "anthropic https://api.anthropic.com"
    history = [
        USER,
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [],
            "encrypted_content": envelope,
            ORIGIN_FIELD: claude_origin,
        },
    ]
    body = anthropic_body(next_request(history))
    assert body["messages"][1] == {
        "role": "assistant",
        "content": [{"type": "thinking", "thinking": "hmm", "signature": "sig"}],
    }
    openai_made = [USER, *answered().output_items(ORIGIN)]
    for body in (anthropic_body(next_request(openai_made)), chat_body(next_request(openai_made))):
        text = orjson.dumps(body).decode()
        assert "orgate:" not in text and "ENC-native" not in text


# --- what a listing shows ---------------------------------------------------------------------


def test_listings_show_spec_items_only() -> None:
    wrapper = {
        "type": EXTENSION_ITEM_TYPE,
        "id": "ext_1",
        "origin": ORIGIN,
        "item": {"type": "web_search_call"},
    }
    marked = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": SUMMARY,
        "encrypted_content": "E",
        ORIGIN_FIELD: ORIGIN,
    }
    user = {"id": "msg_1", **USER}
    assert [is_private(i) for i in (wrapper, marked, user)] == [True, True, False]
    assert listed_item(wrapper) is None
    assert listed_item(marked) == {
        "type": "reasoning",
        "id": "rs_1",
        "summary": SUMMARY,
        "encrypted_content": "E",
    }
    assert ORIGIN_FIELD in marked  # the stored item is not changed
    assert listed_item(user) is user
    validate("ItemParam", listed_item(marked))


# --- through the service and a real store ------------------------------------------------------


@pytest.mark.parametrize("marked", [False, True])
async def test_a_stored_chain_sends_reasoning_by_its_marker(tmp_path: Path, marked: bool) -> None:
    """A chain stored before origins were recorded (no marker) goes as before;
    a marked one only to its origin."""
    store = await open_store(f"sqlite://{tmp_path}/orgate.db", heartbeat_interval=0)
    try:
        first = ResponseBuilder(base())
        first.start()
        for event in (
            ReasoningDelta("Think.", "summary"),
            ReasoningEncrypted("ENC-stored"),
            TextDelta("Because."),
            Finish("stop"),
        ):
            first.feed(event)
        assert first.final is not None
        output_items = (
            first.output_items(ORIGIN) if marked else None
        )  # None: what orgate stored before markers
        await store.save(first.final, tenant="t", input_items=[USER], output_items=output_items)
        provider = ScriptedProvider(otherwise=[TextDelta("ok"), Finish("stop")])
        service = ResponsesService({"vllm": OTHER}, lambda deployment: provider, store=store)
        body = parse_body({"model": "vllm", "input": "And then?", "previous_response_id": first.id})
        stream = await service.create(body, Caller("k", "t"), [])
        assert (await stream.final())["status"] == "completed"
        sent = responses_body(provider.requests[-1], origin=OTHER_ORIGIN)["input"]
        assert ("ENC-stored" in orjson.dumps(sent).decode()) is not marked
        assert [i.get("role") for i in sent if i["type"] == "message"] == [
            "user",
            "assistant",
            "user",
        ]
    finally:
        await store.close()
