"""check_pairing(): outputs attach to an earlier, passing call with the same call_id."""

from __future__ import annotations

from orgate.gate import check_pairing

from .conftest import SALES_TOOLS, call, output


def msg(text: str = "hi") -> dict[str, object]:
    return {"type": "message", "role": "user", "content": text}


def test_good_trajectory() -> None:
    items = [msg(), call(call_id="a"), output("a"), call(call_id="b", id="fc_2"), output("b")]
    result = check_pairing(items, SALES_TOOLS)
    assert result.ok and result.issues == () and result.error() is None
    assert sorted(result.calls) == [1, 3]
    assert all(v.ok for v in result.calls.values())


def test_orphan_output_including_call_after_output() -> None:
    result = check_pairing([msg(), output("zzz"), output("a"), call(call_id="a")])
    assert [(i.index, i.kind) for i in result.issues] == [
        (1, "orphan_output"),
        (2, "orphan_output"),
    ]
    err = result.error()
    assert err == {
        "message": "no earlier function_call has call_id 'zzz'",
        "type": "invalid_request_error",
        "param": "input[1].call_id",
        "code": "orphan_output",
    }


def test_duplicate_output() -> None:
    result = check_pairing([call(call_id="a"), output("a"), msg(), output("a")])
    assert [(i.index, i.kind, i.call_index) for i in result.issues] == [(3, "duplicate_output", 0)]
    assert result.issues[0].param == "input[3].call_id"


def test_output_attached_to_failed_call() -> None:
    items = [call({"region": "global"}, call_id="a"), output("a")]
    result = check_pairing(items, SALES_TOOLS)
    assert [(i.index, i.kind) for i in result.issues] == [(1, "failed_call")]
    assert "arguments_schema" in result.issues[0].message
    assert result.calls[0].code == "arguments_schema"


def test_output_attached_to_in_progress_or_namespaced_call() -> None:
    items = [
        call(call_id="a", status="in_progress"),
        output("a"),
        {"type": "openai:web_search_call", "call_id": "w", "status": "completed"},
        output("w"),
    ]
    result = check_pairing(items)
    assert [(i.index, i.kind) for i in result.issues] == [(1, "failed_call"), (3, "failed_call")]
    assert "namespaced" in result.issues[1].message


def test_missing_call_id_and_duplicate_call() -> None:
    no_id = output("a")
    del no_id["call_id"]
    items = [call(call_id="a"), call(call_id="a", id="fc_2"), no_id]
    result = check_pairing(items, param_prefix="body.input")
    assert [(i.index, i.kind) for i in result.issues] == [
        (1, "duplicate_call"),
        (2, "missing_call_id"),
    ]
    assert result.issues[0].param == "body.input[1].call_id"


def test_require_status_passthrough() -> None:
    items = [call(call_id="a", status=None), output("a")]
    assert not check_pairing(items).ok
    assert check_pairing(items, require_status=False).ok


def test_non_object_items_do_not_break_pairing() -> None:
    assert check_pairing([None, 1, "x", [], {}]).ok


def custom_call(call_id: str, **fields: object) -> dict[str, object]:
    return {
        "type": "custom_tool_call",
        "call_id": call_id,
        "name": "apply_patch",
        "input": "*** Begin Patch",
        "status": "completed",
        **fields,
    }


def custom_output(call_id: str) -> dict[str, object]:
    return {"type": "custom_tool_call_output", "call_id": call_id, "output": "done"}


def test_custom_calls_pair_with_custom_outputs_only() -> None:
    assert check_pairing(
        [msg(), custom_call("c"), custom_output("c"), call(call_id="a"), output("a")], SALES_TOOLS
    ).ok
    result = check_pairing(
        [
            custom_call("c"),
            output("c"),
            call(call_id="a"),
            custom_output("a"),
            custom_output("zzz"),
            custom_output("c"),
        ]
    )
    assert [(i.index, i.kind, i.call_index) for i in result.issues] == [
        (1, "mismatched_output", 0),
        (3, "mismatched_output", 2),
        (4, "orphan_output", None),
        (5, "duplicate_output", 0),
    ]
    assert result.issues[2].message == "no earlier custom_tool_call has call_id 'zzz'"


def test_an_output_for_an_unfinished_custom_call_is_a_failed_call() -> None:
    result = check_pairing(
        [custom_call("c", status="incomplete"), custom_output("c"), custom_call("c")]
    )
    assert [(i.index, i.kind) for i in result.issues] == [(1, "failed_call"), (2, "duplicate_call")]
    assert "status" in result.issues[0].message
