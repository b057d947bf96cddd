"""check(): every code, in order, with the spec's own examples."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from orgate.gate import CODES, Code, SchemaCache, SchemaError, Verdict, check, load_tools

from .conftest import SALES_SCHEMA, SALES_TOOLS, call


@pytest.fixture
def tools(cache: SchemaCache) -> Any:
    return load_tools(SALES_TOOLS, cache)


def test_codes_are_exported_in_check_order() -> None:
    assert [c.value for c in CODES] == [
        "namespaced",
        "hosted_call",
        "not_function_call",
        "status",
        "arguments_type",
        "arguments_parse",
        "unknown_tool",
        "arguments_schema",
        "ok",
    ]
    assert Code.OK == "ok"


def test_spec_example_apac_is_ok(tools: Any) -> None:
    v = check(call({"region": "apac"}), tools)
    assert v.code is Code.OK and v.ok
    assert (v.name, v.call_id, v.id) == ("get_latest_sales_report", "call_1", "fc_1")
    assert v.errors == ()


def test_spec_example_global_fails_schema_and_is_not_fixed(tools: Any) -> None:
    item = call({"region": "global"})
    before = copy.deepcopy(item)
    v = check(item, tools)
    assert v.code is Code.ARGUMENTS_SCHEMA
    assert item == before  # never "fixed" into apac
    assert [e.path for e in v.errors] == ["$.region"]
    assert "global" in v.errors[0].message


def test_additional_properties_reported_with_every_error(tools: Any) -> None:
    v = check(call({"region": "global", "extra": 1}), tools)
    assert v.code is Code.ARGUMENTS_SCHEMA
    assert len(v.errors) == 2
    assert {e.path for e in v.errors} == {"$", "$.region"}
    assert any("extra" in e.message for e in v.errors)


def test_namespaced_provider_item(tools: Any) -> None:
    v = check({"type": "openai:web_search_call", "id": "ws_1", "status": "completed"}, tools)
    assert v.code is Code.NAMESPACED and v.id == "ws_1"


@pytest.mark.parametrize(
    "item",
    [
        {"id": "x"},  # type missing
        {"type": 3},
        {"type": None, "role": "user"},  # present but not a string: not the role shorthand
        {"type": ["function_call"]},
        {"type": "orgate:function_call", "status": "completed", "arguments": "{}"},
        "function_call",
        None,
        42,
        [call()],
    ],
)
def test_namespaced_shapes(item: Any) -> None:
    assert check(item).code is Code.NAMESPACED


def test_role_shorthand_message_is_not_namespaced() -> None:
    assert check({"role": "user", "content": "hi"}).code is Code.NOT_FUNCTION_CALL


@pytest.mark.parametrize(
    "typ", ["function_call_output", "message", "reasoning", "Function_call", "function_call "]
)
def test_not_function_call(typ: str, tools: Any) -> None:
    assert (
        check({"type": typ, "call_id": "call_1", "output": "x"}, tools).code
        is Code.NOT_FUNCTION_CALL
    )


@pytest.mark.parametrize("status", ["in_progress", "incomplete", "failed", None, 1])
def test_status_not_completed(status: Any, tools: Any) -> None:
    item = call()
    item["status"] = status
    v = check(item, tools)
    assert v.code is Code.STATUS
    if status == "incomplete":
        assert "truncated" in v.message


def test_missing_status_is_status_unless_not_required(tools: Any) -> None:
    item = call(status=None)
    assert check(item, tools).code is Code.STATUS
    assert check(item, tools, require_status=False).code is Code.OK
    # a present, wrong status still fails when status is optional
    assert check(call(status="in_progress"), tools, require_status=False).code is Code.STATUS


@pytest.mark.parametrize("arguments", [{"region": "apac"}, ["apac"], None, 1, True])
def test_arguments_type(arguments: Any, tools: Any) -> None:
    item = call()
    item["arguments"] = arguments
    assert check(item, tools).code is Code.ARGUMENTS_TYPE


def test_arguments_missing_is_arguments_type(tools: Any) -> None:
    item = call()
    del item["arguments"]
    assert check(item, tools).code is Code.ARGUMENTS_TYPE


@pytest.mark.parametrize("arguments", ['{"region": "ap', "", "{region: apac}", "NaN", '{"a":1} x'])
def test_arguments_parse(arguments: str, tools: Any) -> None:
    v = check(call(arguments), tools)
    assert v.code is Code.ARGUMENTS_PARSE
    assert "not valid JSON" in v.message


def test_unknown_tool(tools: Any) -> None:
    v = check(call(name="delete_everything"), tools)
    assert v.code is Code.UNKNOWN_TOOL and "delete_everything" in v.message


def test_empty_catalogue_is_not_no_catalogue() -> None:
    assert check(call(), []).code is Code.UNKNOWN_TOOL
    assert check(call(), {}).code is Code.UNKNOWN_TOOL
    assert check(call()).code is Code.OK
    assert "no tool catalogue" in check(call()).message


def test_no_catalogue_skips_schema_but_needs_a_name() -> None:
    assert check(call({"region": "global"})).code is Code.OK
    item = call()
    del item["name"]
    assert check(item).code is Code.UNKNOWN_TOOL


def test_order_first_failure_wins(tools: Any) -> None:
    # namespaced beats everything else
    assert (
        check({"type": "x:function_call", "status": "in_progress", "arguments": {}}, tools).code
        is Code.NAMESPACED
    )
    # status beats arguments type
    item = call(status="in_progress")
    item["arguments"] = {"region": "apac"}
    assert check(item, tools).code is Code.STATUS
    # parse beats unknown tool
    assert check(call("{", name="nope"), tools).code is Code.ARGUMENTS_PARSE
    # unknown tool beats schema
    assert check(call({"region": "global"}, name="nope"), tools).code is Code.UNKNOWN_TOOL


def test_null_parameters_accept_any_object(cache: SchemaCache) -> None:
    tools = load_tools([{"type": "function", "name": "now", "parameters": None}], cache)
    assert check(call({}, name="now"), tools).code is Code.OK
    assert check(call({"anything": [1, {"x": None}]}, name="now"), tools).code is Code.OK
    v = check(call("[1, 2]", name="now"), tools)
    assert v.code is Code.ARGUMENTS_SCHEMA and v.errors[0].path == "$"


def test_ref_defs(cache: SchemaCache) -> None:
    schema = {
        "type": "object",
        "$defs": {
            "region": {"enum": ["apac", "emea", "amer"]},
            "point": {"$ref": "#/$defs/region"},
        },
        "properties": {"regions": {"type": "array", "items": {"$ref": "#/$defs/point"}}},
    }
    tools = load_tools({"f": schema}, cache)
    assert check(call({"regions": ["apac", "amer"]}, name="f"), tools).ok
    v = check(call({"regions": ["apac", "mars", "emea", "moon"]}, name="f"), tools)
    assert v.code is Code.ARGUMENTS_SCHEMA
    assert [e.path for e in v.errors] == ["$.regions[1]", "$.regions[3]"]


def test_one_of_any_of_all_of_const(cache: SchemaCache) -> None:
    schema = {
        "type": "object",
        "properties": {
            "id": {"oneOf": [{"type": "integer"}, {"type": "string", "pattern": "^u_"}]},
            "n": {
                "anyOf": [
                    {"type": "null"},
                    {"type": "number", "minimum": 0, "exclusiveMaximum": 10},
                ]
            },
            "k": {"allOf": [{"type": "string"}, {"minLength": 2}], "const": "ok"},
        },
    }
    tools = load_tools({"f": schema}, cache)
    assert check(call({"id": 3, "n": None, "k": "ok"}, name="f"), tools).ok
    assert check(call({"id": "u_1", "n": 9.5}, name="f"), tools).ok
    for bad in ({"id": "x_1"}, {"id": 1.5}, {"n": 10}, {"n": -1}, {"k": "no"}):
        assert check(call(bad, name="f"), tools).code is Code.ARGUMENTS_SCHEMA, bad


def test_one_of_fails_when_more_than_one_matches(cache: SchemaCache) -> None:
    schema = {
        "type": "object",
        "properties": {"v": {"oneOf": [{"type": "number"}, {"type": "integer"}]}},
    }
    tools = load_tools({"f": schema}, cache)
    assert check(call({"v": 1.5}, name="f"), tools).ok
    assert check(call({"v": 2}, name="f"), tools).code is Code.ARGUMENTS_SCHEMA


@pytest.mark.parametrize(
    ("raw", "ok"),
    [
        ("1", True),
        ("1.0", True),
        ("-0", True),
        ("1e2", True),
        ("1.5", False),
        ("true", False),
        ('"1"', False),
    ],
)
def test_integer_semantics(raw: str, ok: bool, cache: SchemaCache) -> None:
    tools = load_tools({"f": {"type": "object", "properties": {"n": {"type": "integer"}}}}, cache)
    assert check(call('{"n": ' + raw + "}", name="f"), tools).ok is ok


def test_boolean_is_not_a_number(cache: SchemaCache) -> None:
    tools = load_tools({"f": {"type": "object", "properties": {"n": {"type": "number"}}}}, cache)
    assert check(call({"n": False}, name="f"), tools).code is Code.ARGUMENTS_SCHEMA


def test_error_paths_quote_awkward_keys(cache: SchemaCache) -> None:
    schema = {
        "type": "object",
        "properties": {"a b": {"type": "array", "items": {"type": "string"}}},
    }
    tools = load_tools({"f": schema}, cache)
    v = check(call({"a b": ["x", 3]}, name="f"), tools)
    assert v.errors[0].path == "$['a b'][1]"
    assert isinstance(v.errors[0], SchemaError)


def test_nested_error_paths(cache: SchemaCache) -> None:
    schema = {
        "type": "object",
        "properties": {
            "rows": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"qty": {"type": "integer", "minimum": 1}},
                },
            }
        },
    }
    tools = load_tools({"f": schema}, cache)
    v = check(call({"rows": [{"qty": 1}, {"qty": 0}]}, name="f"), tools)
    assert [e.path for e in v.errors] == ["$.rows[1].qty"]
    assert v.errors[0].keyword == "minimum"


def test_tools_given_as_any_loader_shape() -> None:
    item = call({"region": "global"})
    for tools in (SALES_TOOLS, {"tools": SALES_TOOLS}, {"get_latest_sales_report": SALES_SCHEMA}):
        assert check(item, tools).code is Code.ARGUMENTS_SCHEMA


def test_verdict_is_frozen_and_serialisable(tools: Any) -> None:
    v = check(call({"region": "global"}), tools)
    assert isinstance(v, Verdict)
    with pytest.raises(AttributeError):
        v.code = Code.OK  # type: ignore[misc]
    d = v.to_dict()
    assert d["code"] == "arguments_schema" and d["errors"][0]["path"] == "$.region"


def test_non_string_identity_fields_become_none() -> None:
    v = check({"type": "message", "id": 5, "call_id": ["x"], "name": {}})
    assert (v.id, v.call_id, v.name) == (None, None, None)


def test_huge_values_give_clipped_messages(cache: SchemaCache) -> None:
    tools = load_tools({"f": {"type": "object", "properties": {"n": {"type": "integer"}}}}, cache)
    v = check(call({"n": "x" * 100_000}, name="f"), tools)
    assert v.code is Code.ARGUMENTS_SCHEMA
    assert len(v.errors[0].message) <= 1000


@pytest.mark.parametrize(
    "kind", ["web_search_call", "tool_search_call", "local_shell_call", "mcp_call"]
)
def test_a_hosted_tool_item_is_a_hosted_call(kind: str) -> None:
    v = check({"type": kind, "id": "x_1", "status": "completed"})
    assert v.code is Code.HOSTED_CALL and not v.ok and v.id == "x_1"


def test_a_custom_tool_call_is_checked_for_status_and_a_string_input() -> None:
    good = {
        "type": "custom_tool_call",
        "call_id": "c1",
        "name": "apply_patch",
        "input": "*** Begin Patch",
        "status": "completed",
    }
    assert check(good).code is Code.OK
    assert check({**good, "input": {"patch": "x"}}).code is Code.ARGUMENTS_TYPE
    assert check({k: v for k, v in good.items() if k != "status"}).code is Code.STATUS
    assert (
        check({k: v for k, v in good.items() if k != "status"}, require_status=False).code
        is Code.OK
    )
    assert check({k: v for k, v in good.items() if k != "name"}).code is Code.UNKNOWN_TOOL
    assert (
        check({"type": "custom_tool_call_output", "call_id": "c1", "output": "done"}).code
        is Code.NOT_FUNCTION_CALL
    )


def test_each_check_in_turn_is_the_first_failure(tools: Any) -> None:
    # One item failing every check; mending one check at a time moves the verdict down the order.
    item: dict[str, Any] = {
        "type": "x:function_call",
        "status": "in_progress",
        "arguments": {"region": "global"},
        "name": "nope",
    }
    steps: list[tuple[Code, dict[str, Any]]] = [
        (Code.NAMESPACED, {"type": "message"}),
        (Code.NOT_FUNCTION_CALL, {"type": "function_call"}),
        (Code.STATUS, {"status": "completed"}),
        (Code.ARGUMENTS_TYPE, {"arguments": '{"region": '}),
        (Code.ARGUMENTS_PARSE, {"arguments": '{"region": "global"}'}),
        (Code.UNKNOWN_TOOL, {"name": "get_latest_sales_report"}),
        (Code.ARGUMENTS_SCHEMA, {"arguments": '{"region": "apac"}'}),
    ]
    for code, mend in steps:
        assert check(item, tools).code is code
        item.update(mend)
    assert check(item, tools).code is Code.OK


@pytest.mark.parametrize(
    ("status", "words"),
    [
        ("in_progress", "still streaming"),
        ("incomplete", "truncated"),
        ("failed", "'failed', not 'completed'"),
        (None, "None, not 'completed'"),
    ],
)
def test_status_messages_say_what_is_wrong(status: Any, words: str, tools: Any) -> None:
    item = call()
    item["status"] = status
    assert words in check(item, tools).message
    del item["status"]
    assert check(item, tools).message == "status is missing (must be 'completed')"


def test_a_value_of_no_json_type_is_named_by_its_class() -> None:
    verdict = check({1, 2})
    assert verdict.code is Code.NAMESPACED and verdict.message.startswith("item is set")
    assert check({"type": 1.5}).message == "type is number, not a string"
