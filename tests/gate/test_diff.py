"""diff(): the same trajectory from two providers."""

from __future__ import annotations

import copy

from orgate.gate import diff, json_equal

from .conftest import call, output


def traj() -> list[dict[str, object]]:
    return [
        {"type": "message", "role": "user", "content": "report?"},
        call({"region": "apac", "limit": 3}, call_id="a"),
        output("a"),
        {"type": "message", "role": "assistant", "content": "done"},
    ]


def kinds(result: object) -> list[tuple[str, int | None, int | None]]:
    return [(d.kind, d.left, d.right) for d in result.differences]  # type: ignore[attr-defined]


def test_identical_is_ok() -> None:
    result = diff(traj(), traj())
    assert result.verdict == "ok" and result.differences == ()


def test_arguments_compared_as_parsed_json() -> None:
    right = traj()
    right[1]["arguments"] = '{ "limit" : 3.0,\n "region": "apac" }'
    assert diff(traj(), right).differences == ()
    right[1]["arguments"] = '{"limit": true, "region": "apac"}'
    result = diff(traj(), right)
    assert kinds(result) == [("arguments", 1, 1)]
    assert result.verdict == "ok"
    assert result.differences[0].detail["compared_as"] == "json"


def test_unparseable_arguments_compared_as_strings() -> None:
    left, right = traj(), traj()
    left[1]["arguments"] = right[1]["arguments"] = '{"region": "ap'
    assert diff(left, right).differences == ()
    right[1]["arguments"] = '{"region":  "ap'
    result = diff(left, right)
    assert kinds(result) == [("arguments", 1, 1)]
    assert result.differences[0].detail["compared_as"] == "string"


def test_type_became_namespaced_blocks() -> None:
    right = traj()
    right[1]["type"] = "openai:function_call"
    result = diff(traj(), right)
    assert result.verdict == "block"
    (d,) = result.differences
    assert d.kind == "type" and d.blocking and d.detail["became_namespaced"] is True


def test_portable_type_change_does_not_block() -> None:
    right = traj()
    right[0]["type"] = "reasoning"  # wrong, reported, but both portable
    result = diff(traj(), right)
    assert kinds(result) == [("type", 0, 0)]
    assert result.verdict == "ok"


def test_call_ids_that_do_not_pair_block() -> None:
    right = traj()
    right[1]["call_id"] = "b"
    right[2]["call_id"] = "b"
    result = diff(traj(), right)
    assert result.verdict == "block"
    assert kinds(result) == [("call_id", 1, 1), ("call_id", 2, 2)]


def test_name_status_and_missing_extra() -> None:
    right = traj()
    right[1]["name"] = "get_sales"
    right[1]["status"] = "incomplete"
    del right[3]
    right.append({"type": "reasoning", "summary": []})
    right.append({"type": "message", "role": "assistant", "content": "x"})
    result = diff(traj(), right)
    assert kinds(result) == [("name", 1, 1), ("status", 1, 1), ("type", 3, 3), ("extra", None, 4)]
    assert result.verdict == "ok"


def test_missing_call_blocks() -> None:
    right = traj()
    del right[1]
    result = diff(traj(), right)
    assert kinds(result) == [("missing", 1, None)]
    assert result.verdict == "block"


def test_pairs_by_call_id_regardless_of_position() -> None:
    left = [
        call(call_id="a"),
        call(call_id="b", id="fc_2", arguments={"region": "emea"}),
        output("a"),
        output("b"),
    ]
    right = [left[1], left[0], left[3], left[2]]
    assert diff(left, right).differences == ()


def test_single_item_and_response() -> None:
    item = call()
    assert diff(item, copy.deepcopy(item)).verdict == "ok"
    response = {"object": "response", "output": traj()}
    assert diff(response, traj()).differences == ()
    # a function_call_output whose output is a list is an item, not a response
    rich_output = {
        "type": "function_call_output",
        "call_id": "a",
        "output": [{"type": "input_text", "text": "x"}],
    }
    assert diff(rich_output, rich_output).differences == ()


def test_json_equal() -> None:
    assert json_equal({"a": [1, 2.0]}, {"a": [1.0, 2]})
    assert not json_equal(1, True)
    assert not json_equal(0, False)
    assert not json_equal(None, False)
    assert not json_equal([1], [1, 1])
    assert not json_equal({"a": 1}, {"b": 1})
    assert not json_equal("1", 1)


def test_to_dict() -> None:
    right = traj()
    right[1]["type"] = "openai:function_call"
    d = diff(traj(), right).to_dict()
    assert d["verdict"] == "block"
    assert d["differences"][0]["kind"] == "type" and d["differences"][0]["blocking"] is True
