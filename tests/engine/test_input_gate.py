"""The replay gate on a request's input, in process: ``split_namespaced`` then ``check_context``.

The two steps run as the endpoint runs them: ``split_namespaced`` on the raw JSON input,
the body parsed, then ``check_context`` over history + the new input. Expectations are
docs/gate.md's table ("In the gateway", on the input): under ``enforce`` each finding is a
400 with the gate's code and a ``param`` counting the client's own input; under ``warn``
the same finding is a warning (namespaced items are dropped); ``off`` checks nothing.
Only findings in the new input count: stored history passed the gate when it was stored.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

import pytest

from orgate.engine.history_items import items_from_wire
from orgate.engine.input_gate import check_context, split_namespaced, without_reasoning_text
from orgate.engine.request_body import normalize_input, parse_body
from orgate.protocol.errors import ApiError

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
        "required": ["city"],
    },
}
USER = {"type": "message", "role": "user", "content": "Weather in Paris?"}
CALL = {
    "type": "function_call",
    "call_id": "call_1",
    "name": "get_weather",
    "arguments": '{"city": "Paris", "unit": "c"}',
    "status": "completed",
}
OUTPUT = {"type": "function_call_output", "call_id": "call_1", "output": "sunny"}
SEARCH = {"type": "openai:web_search_call", "id": "ws_1", "status": "completed"}


def gate(
    raw_input: list[Any],
    policy: str = "enforce",
    *,
    history: list[dict[str, Any]] | None = None,
    tools: list[dict[str, Any]] | None = None,
) -> list[str]:
    """Both steps over a client's input, as the endpoint runs them; the warnings they left."""
    warnings: list[str] = []
    kept = split_namespaced(copy.deepcopy(raw_input), policy, warnings)  # type: ignore[arg-type]
    body = parse_body({"model": "m", "input": kept, "tools": [WEATHER] if tools is None else tools})
    past = items_from_wire(history or [])
    check_context(past, normalize_input(body), policy, warnings, body.tools)  # type: ignore[arg-type]
    return warnings


def refusal(raw_input: list[Any], **options: Any) -> ApiError:
    with pytest.raises(ApiError) as caught:
        gate(raw_input, **options)
    assert caught.value.status == 400 and caught.value.type == "invalid_request_error"
    return caught.value


# --- calls and outputs that pass (ok) -------------------------------------------------------------


@pytest.mark.parametrize("policy", ["enforce", "warn", "off"])
def test_a_valid_call_and_its_output_pass(policy: str) -> None:
    assert gate([USER, CALL, OUTPUT], policy) == []


def test_a_call_without_status_or_with_null_status_counts_as_completed() -> None:
    no_status = {k: v for k, v in CALL.items() if k != "status"}
    assert gate([USER, no_status, OUTPUT]) == []
    assert gate([USER, CALL | {"status": None}, OUTPUT]) == []


def test_an_output_pairs_with_a_call_in_the_history() -> None:
    assert gate([OUTPUT], history=[USER, CALL]) == []


def test_a_call_to_a_tool_the_request_does_not_define_is_not_refused() -> None:
    other = CALL | {"name": "old_tool", "arguments": '{"anything": true}'}
    assert gate([USER, other, OUTPUT]) == []
    assert gate([USER, CALL | {"arguments": "{}"}, OUTPUT], tools=[]) == []  # no tools: no schema


def test_messages_alone_are_not_checked() -> None:
    bad_history = [USER, CALL | {"status": "in_progress"}, OUTPUT, OUTPUT]
    assert gate([USER], history=bad_history) == []


# --- namespaced items -----------------------------------------------------------------------------


def test_a_namespaced_item_is_refused_under_enforce() -> None:
    error = refusal([USER, SEARCH])
    assert (error.code, error.param) == ("non_portable_item", "input[1].type")
    assert "openai:web_search_call" in error.message


def test_a_namespaced_item_is_dropped_with_a_warning_under_warn(
    caplog: pytest.LogCaptureFixture,
) -> None:
    warnings: list[str] = []
    with caplog.at_level(logging.WARNING, logger="orgate.gate"):
        kept = split_namespaced([USER, SEARCH, OUTPUT | {"call_id": "x"}], "warn", warnings)
    assert kept == [USER, OUTPUT | {"call_id": "x"}]
    assert warnings == ["input[1]: dropped non-portable item of type openai:web_search_call"]
    assert "non-portable" in caplog.text


def test_off_leaves_namespaced_items_for_the_parser() -> None:
    warnings: list[str] = []
    assert split_namespaced([USER, SEARCH], "off", warnings) == [USER, SEARCH] and warnings == []


def test_a_non_list_input_is_left_alone() -> None:
    assert split_namespaced("hello", "enforce", []) == "hello"


# --- a call's own shape: status, arguments_type, arguments_parse, arguments_schema ----------------


@pytest.mark.parametrize(
    ("change", "code", "param"),
    [
        ({"status": "in_progress"}, "status", "input[1]"),
        ({"status": "incomplete"}, "status", "input[1]"),
        ({"arguments": {"city": "Paris"}}, "arguments_type", "input[1].arguments"),
        ({"arguments": '{"city": "Par'}, "arguments_parse", "input[1]"),
        ({"arguments": '{"city": NaN}'}, "arguments_parse", "input[1]"),
        ({"arguments": '{"city": "Paris", "unit": "kelvin"}'}, "arguments_schema", "input[1]"),
        ({"arguments": '{"unit": "c"}'}, "arguments_schema", "input[1]"),
    ],
)
def test_a_call_that_fails_the_gate_is_refused_with_its_code(
    change: dict[str, Any], code: str, param: str
) -> None:
    error = refusal([USER, CALL | change, OUTPUT])
    assert (error.code, error.param) == (code, param)
    assert "input[1]" in error.message and code in error.message


def test_the_first_failing_call_in_input_order_is_reported() -> None:
    second = CALL | {"call_id": "call_2", "arguments": "nope"}
    first = CALL | {"status": "in_progress"}
    error = refusal([USER, first, second])
    assert (error.code, error.param) == ("status", "input[1]")


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"status": "in_progress"}, "status"),
        ({"arguments": "nope"}, "arguments_parse"),
        ({"arguments": '{"unit": "kelvin"}'}, "arguments_schema"),
    ],
)
def test_under_warn_a_failing_call_is_a_warning(change: dict[str, Any], code: str) -> None:
    warnings = gate([USER, CALL | change], "warn")
    assert warnings == [f"input[1]: {code}"]


# --- call/output pairing --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("items", "code", "param"),
    [
        ([USER, OUTPUT], "orphan_output", "input[1].call_id"),
        ([USER, OUTPUT, CALL], "orphan_output", "input[1].call_id"),  # the call must come first
        ([USER, CALL, OUTPUT, OUTPUT], "duplicate_output", "input[3].call_id"),
        ([USER, CALL, CALL, OUTPUT], "duplicate_call", "input[2].call_id"),
    ],
)
def test_pairing_findings_are_refused(items: list[dict[str, Any]], code: str, param: str) -> None:
    error = refusal(items)
    assert (error.code, error.param) == (code, param)
    assert "previous_response_id" not in error.message  # no history: the indexes are the client's


def test_an_output_attached_to_a_failed_call_in_the_history_is_refused() -> None:
    history = [USER, CALL | {"status": "incomplete"}]  # stored as the model left it
    error = refusal([OUTPUT], history=history)
    assert (error.code, error.param) == ("failed_call", "input[0].call_id")
    assert "previous_response_id" in error.message  # context indexes are explained


def test_pairing_params_count_the_clients_input_not_the_history() -> None:
    error = refusal([USER, OUTPUT | {"call_id": "call_9"}], history=[USER, CALL])
    assert (error.code, error.param) == ("orphan_output", "input[1].call_id")


def test_history_findings_are_not_reported() -> None:
    history = [USER, CALL, OUTPUT, OUTPUT]  # a duplicate output stored long ago
    assert gate([USER, CALL | {"call_id": "call_2"}], history=history) == []


def test_a_long_agent_loop_pairs_against_the_call_it_names() -> None:
    """Only the history items that share a call_id with the new input are checked again; the
    others still count for the indexes a message names."""

    def turn(n: int) -> list[dict[str, Any]]:
        return [USER, CALL | {"call_id": f"c{n}"}, OUTPUT | {"call_id": f"c{n}"}]

    history = [item for n in range(40) for item in turn(n)]
    history.append(CALL | {"call_id": "open", "arguments": "not json", "status": "completed"})
    assert gate([OUTPUT | {"call_id": "c7"}], "warn", history=history) == [
        "input[0].call_id: duplicate_output"
    ]
    error = refusal([OUTPUT | {"call_id": "c7"}], history=history)
    assert "input[23]" in error.message  # the history's own output of c7: 7 × 3 + 2
    error = refusal([OUTPUT | {"call_id": "open"}], history=history)
    assert (error.code, error.param) == ("failed_call", "input[0].call_id")
    assert "input[120]" in error.message
    assert gate([CALL | {"call_id": "c39"}], "warn", history=history) == [
        "input[0].call_id: duplicate_call"
    ]


def test_under_warn_pairing_findings_are_warnings_in_input_order(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bad_call = CALL | {"arguments": "nope"}
    with caplog.at_level(logging.WARNING, logger="orgate.gate"):
        warnings = gate([USER, bad_call, OUTPUT, OUTPUT | {"call_id": "call_2"}], "warn")
    assert warnings == [
        "input[1]: arguments_parse",
        "input[2].call_id: failed_call",
        "input[3].call_id: orphan_output",
    ]
    assert caplog.text.count("gate:") >= 3


def test_under_warn_params_count_the_items_that_were_dropped() -> None:
    warnings = gate([SEARCH, USER, SEARCH, OUTPUT], "warn")
    assert warnings[:2] == [
        "input[0]: dropped non-portable item of type openai:web_search_call",
        "input[2]: dropped non-portable item of type openai:web_search_call",
    ]
    assert warnings[2:] == [
        "input[3].call_id: orphan_output"
    ]  # the client's index, not the parsed one


def test_off_checks_nothing() -> None:
    assert gate([USER, OUTPUT, OUTPUT, CALL | {"arguments": "nope"}], "off") == []


# --- reasoning items replayed as output -----------------------------------------------------------


def test_reasoning_text_content_is_left_out_under_every_policy() -> None:
    item = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [],
        "content": [{"type": "reasoning_text", "text": "hm"}],
    }
    for policy in ("enforce", "warn", "off"):
        assert split_namespaced([item], policy, []) == [
            {"type": "reasoning", "id": "rs_1", "summary": []}
        ]
    other = item | {"content": [{"type": "output_text", "text": "x"}]}
    assert without_reasoning_text(other) is other  # anything else is the parser's to refuse


# --- OpenAI's custom tool calls and their outputs -------------------------------------------------

CUSTOM_CALL = {
    "type": "custom_tool_call",
    "call_id": "call_c",
    "name": "apply_patch",
    "input": "*** Begin Patch",
    "status": "completed",
}
CUSTOM_OUTPUT = {"type": "custom_tool_call_output", "call_id": "call_c", "output": "applied"}
PATCH_TOOL = {"type": "custom", "name": "apply_patch"}


def test_a_custom_call_and_its_output_pass() -> None:
    assert gate([USER, CUSTOM_CALL, CUSTOM_OUTPUT], tools=[WEATHER, PATCH_TOOL]) == []


def test_a_custom_call_that_is_not_completed_is_refused() -> None:
    error = refusal(
        [USER, CUSTOM_CALL | {"status": "in_progress"}, CUSTOM_OUTPUT], tools=[PATCH_TOOL]
    )
    assert (error.code, error.param) == (
        "status",
        "input[1]",
    ) and "custom_tool_call" in error.message


@pytest.mark.parametrize(
    ("items", "code", "param"),
    [
        ([USER, CUSTOM_OUTPUT], "orphan_output", "input[1].call_id"),
        (
            [USER, CUSTOM_CALL, OUTPUT | {"call_id": "call_c"}],
            "mismatched_output",
            "input[2].call_id",
        ),
        (
            [USER, CALL, CUSTOM_OUTPUT | {"call_id": "call_1"}],
            "mismatched_output",
            "input[2].call_id",
        ),
    ],
)
def test_a_custom_output_pairs_with_a_custom_call_only(
    items: list[dict[str, Any]], code: str, param: str
) -> None:
    error = refusal(items, tools=[WEATHER, PATCH_TOOL])
    assert (error.code, error.param) == (code, param)
