"""An upstream's own output items (``web_search_call``, ``openai:...``) through the engine,
unit by unit.

The builder keeps them out of the spec events and output but in the model's
full output; stored history reads them back as ``OpaqueItem``s; the input
gate reports the ones the serving deployment leaves out.
"""

from __future__ import annotations

from typing import Any

import pytest

from orgate.engine.history_items import item_to_wire, items_from_wire
from orgate.engine.input_gate import opaque_items, report_opaque
from orgate.neutral import (
    EXTENSION_ITEM_TYPE,
    Deployment,
    ExtensionItem,
    Finish,
    OpaqueItem,
    ReasoningDelta,
    ReasoningEncrypted,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    origin_of,
)
from orgate.protocol import FunctionCallItemParam, ReasoningItemParam, UserMessageItemParam
from orgate.protocol.errors import ApiError
from tests.engine.helpers import run
from tests.support.spec import check_events, validate

NATIVE = Deployment(
    name="gpt",
    provider="openai-responses",
    upstream_model="m",
    base_url="https://api.openai.com/v1",
)
ORIGIN = origin_of(NATIVE)
SEARCH = {
    "id": "ws_1",
    "type": "web_search_call",
    "status": "completed",
    "action": {"type": "search", "query": "q"},
}
PREVIEW = {
    "id": "wsp_1",
    "type": "openai:web_search_preview_call",
    "status": "completed",
    "note": None,
}


# --- the builder ------------------------------------------------------------------------------


def test_extension_items_are_kept_aside_in_place_and_never_emitted() -> None:
    builder = run(
        ReasoningDelta("think", "summary"),
        ReasoningEncrypted("ENC"),
        ExtensionItem(SEARCH, ORIGIN),
        ExtensionItem(PREVIEW, ORIGIN),
        TextDelta("It is sunny."),
        ToolCallStart(0, "call_1", "get_weather"),
        ToolCallDelta(0, "{}"),
        Finish("tool_calls"),
    )
    events = builder.drain()
    check_events(events)  # every event validates against the spec, and the grammar holds
    assert "web_search_call" not in repr(events) and EXTENSION_ITEM_TYPE not in repr(events)
    final = builder.final
    assert final is not None
    validate("ResponseResource", final)
    assert [i["type"] for i in final["output"]] == ["reasoning", "message", "function_call"]
    assert [i["output_index"] for i in events if i["type"] == "response.output_item.added"] == [
        0,
        1,
        2,
    ]

    full = builder.output_items()
    assert [i["type"] for i in full] == [
        "reasoning",
        EXTENSION_ITEM_TYPE,
        EXTENSION_ITEM_TYPE,
        "message",
        "function_call",
    ]
    assert full[0] is final["output"][0] and full[3] is final["output"][1]
    assert [(i["origin"], i["item"]) for i in full[1:3]] == [(ORIGIN, SEARCH), (ORIGIN, PREVIEW)]
    assert full[1]["id"].startswith("ext_") and full[1]["id"] != full[2]["id"]
    assert (
        full[0]["encrypted_content"] == "ENC"
    )  # the reasoning item closed before the search, whole


def test_without_extension_items_the_full_output_is_the_spec_output() -> None:
    builder = run(TextDelta("hi"), Finish("stop"))
    assert builder.extensions == []
    assert builder.output_items() == builder.final["output"]  # type: ignore[index]


def test_extension_items_first_and_last_and_in_a_failed_response() -> None:
    builder = run(
        ExtensionItem(SEARCH, ORIGIN),
        TextDelta("a"),
        ExtensionItem(PREVIEW, ORIGIN),
        Finish("stop"),
    )
    assert [i["type"] for i in builder.output_items()] == [
        EXTENSION_ITEM_TYPE,
        "message",
        EXTENSION_ITEM_TYPE,
    ]
    failed = run(ExtensionItem(SEARCH, ORIGIN), TextDelta("partial"))
    failed.fail(ApiError(502, "boom", type="server_error", code="upstream_error"))
    assert [i["type"] for i in failed.output_items()] == [EXTENSION_ITEM_TYPE, "message"]
    validate("ResponseResource", failed.final)


# --- stored history ---------------------------------------------------------------------------


def test_history_reads_extension_items_back_as_opaque_items_in_place() -> None:
    stored = run(
        ReasoningDelta("s", "summary"),
        ReasoningEncrypted("ENC"),
        ExtensionItem(SEARCH, ORIGIN),
        TextDelta("done"),
        Finish("stop"),
    ).output_items()
    history = items_from_wire([{"type": "message", "role": "user", "content": "hi"}, *stored])
    assert [type(i).__name__ for i in history] == [
        "UserMessageItemParam",
        "ReasoningItemParam",
        "OpaqueItem",
        "AssistantMessageItemParam",
    ]
    opaque = history[2]
    assert isinstance(opaque, OpaqueItem) and opaque.item == SEARCH and opaque.origin == ORIGIN
    assert opaque_items(history) == (opaque,)
    assert item_to_wire(opaque) == stored[1]  # stored again unchanged (e.g. the WebSocket cache)
    assert isinstance(history[1], ReasoningItemParam) and history[1].encrypted_content == "ENC"


def test_a_broken_stored_extension_item_is_a_store_error() -> None:
    with pytest.raises(ApiError) as err:
        items_from_wire([{"type": EXTENSION_ITEM_TYPE, "id": "ext_1", "item": SEARCH}])  # no origin
    assert (err.value.status, err.value.code) == (500, "store_corrupt")


# --- the gate's report ------------------------------------------------------------------------


def _history() -> tuple[OpaqueItem, ...]:
    return opaque_items(
        [
            UserMessageItemParam(content="hi"),
            OpaqueItem(id="ext_a", origin=ORIGIN, item=SEARCH),
            FunctionCallItemParam(call_id="c", name="f", arguments="{}"),
            OpaqueItem(id="ext_b", origin=ORIGIN, item=PREVIEW),
        ]
    )


def test_nothing_is_reported_when_the_same_upstream_serves() -> None:
    warnings: list[str] = []
    same = Deployment(
        name="gpt-5",
        provider="openai-responses",
        upstream_model="other-model",
        base_url="https://API.openai.com/v1/",
        api_key="k2",
    )
    report_opaque(_history(), same, "enforce", warnings)
    assert warnings == []


@pytest.mark.parametrize("policy", ["enforce", "warn"])
@pytest.mark.parametrize(
    "served",
    [
        Deployment(
            name="claude",
            provider="anthropic",
            upstream_model="c",
            base_url="https://api.anthropic.com",
        ),
        Deployment(
            name="local",
            provider="openai-responses",
            upstream_model="m",
            base_url="http://127.0.0.1:8000/v1",
        ),
    ],
)
def test_items_of_another_upstream_are_reported_by_id_and_type(
    policy: Any, served: Deployment, caplog: pytest.LogCaptureFixture
) -> None:
    warnings: list[str] = []
    report_opaque(_history(), served, policy, warnings)
    assert warnings == [
        f"history: namespaced, 2 item(s) made by another upstream not sent to '{served.name}': "
        "ext_a (web_search_call), ext_b (openai:web_search_preview_call)"
    ]
    assert warnings[0].encode("latin-1")  # fits an HTTP header
    assert "ext_a" in caplog.text


def test_policy_off_only_logs(caplog: pytest.LogCaptureFixture) -> None:
    warnings: list[str] = []
    claude = Deployment(
        name="claude",
        provider="anthropic",
        upstream_model="c",
        base_url="https://api.anthropic.com",
    )
    report_opaque(_history(), claude, "off", warnings)
    assert warnings == [] and "ext_b" in caplog.text


def test_a_long_list_is_cut_and_odd_characters_are_replaced() -> None:
    items = tuple(
        OpaqueItem(id=f"ext_{n}", origin=ORIGIN, item={"type": "wéird type\r\n"}) for n in range(11)
    )
    warnings: list[str] = []
    claude = Deployment(
        name="claude",
        provider="anthropic",
        upstream_model="c",
        base_url="https://api.anthropic.com",
    )
    report_opaque(items, claude, "warn", warnings)
    assert warnings[0].endswith("ext_7 (w_ird_type__), and 3 more")
    assert warnings[0].isascii() and "\n" not in warnings[0]
