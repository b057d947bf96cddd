"""load_tools(): every input shape, errors with params, and the content-keyed validator cache."""

from __future__ import annotations

from typing import Any

import pytest

from orgate.gate import SchemaCache, ToolCatalog, ToolsError, check, load_tools
from orgate.gate.schemas import json_path, schema_key

from .conftest import SALES_SCHEMA, SALES_TOOLS, call


def test_request_tools_list() -> None:
    tools = load_tools(SALES_TOOLS)
    assert isinstance(tools, ToolCatalog)
    assert list(tools) == ["get_latest_sales_report"]
    assert tools["get_latest_sales_report"].parameters == SALES_SCHEMA


def test_chat_completions_style() -> None:
    tools = load_tools(
        [
            {
                "type": "function",
                "function": {"name": "get_latest_sales_report", "parameters": SALES_SCHEMA},
            }
        ]
    )
    assert check(call({"region": "global"}), tools).code == "arguments_schema"


def test_object_with_tools_key_and_single_tool_and_plain_map() -> None:
    assert list(load_tools({"model": "x", "tools": SALES_TOOLS})) == ["get_latest_sales_report"]
    assert list(load_tools(SALES_TOOLS[0])) == ["get_latest_sales_report"]
    assert list(load_tools({"a": SALES_SCHEMA, "b": None, "c": True})) == ["a", "b", "c"]


def test_non_function_tools_are_skipped() -> None:
    tools = load_tools([{"type": "web_search"}, {"type": "openai:code_interpreter"}, *SALES_TOOLS])
    assert list(tools) == ["get_latest_sales_report"]


def test_catalogue_passes_through() -> None:
    tools = load_tools(SALES_TOOLS)
    assert load_tools(tools) is tools


@pytest.mark.parametrize(
    ("obj", "param"),
    [
        ([{"type": "function", "parameters": {}}], "tools[0]"),
        ([{"type": "function", "name": "a", "parameters": {"type": "foo"}}], "tools[0].parameters"),
        ([{"type": "function", "name": "a", "parameters": "x"}], "tools[0].parameters"),
        ([SALES_TOOLS[0], SALES_TOOLS[0]], "tools[1]"),
        ([1], "tools[0]"),
        ({"a": "not a schema"}, "tools.a"),
        ({"a": {"minimum": "zero"}}, "tools.a.parameters"),
        ({"f": {"$ref": "https://example.com/remote.json"}}, "tools.f.parameters"),
        ({"f": {"$ref": "#/$defs/missing"}}, "tools.f.parameters"),
        ("tools", None),
    ],
)
def test_malformed_tools_raise_with_param(obj: Any, param: str | None, cache: SchemaCache) -> None:
    with pytest.raises(ToolsError) as info:
        load_tools(obj, cache)
    assert info.value.param == param


def test_draft_declared_by_schema_is_honoured(cache: SchemaCache) -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {
            "pair": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]}
        },
    }
    tools = load_tools({"f": schema}, cache)
    assert check(call({"pair": ["a", 1]}, name="f"), tools).ok
    assert not check(call({"pair": [1, "a"]}, name="f"), tools).ok


def test_cache_is_keyed_by_content(cache: SchemaCache) -> None:
    a = {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "string"}}}
    b = {"properties": {"y": {"type": "string"}, "x": {"type": "integer"}}, "type": "object"}
    assert schema_key(a) == schema_key(b)
    first = load_tools({"f": a}, cache)["f"].schema
    second = load_tools({"g": b}, cache)["g"].schema
    assert first is second
    assert cache.misses == 1 and cache.hits == 1
    assert schema_key({"const": 1}) != schema_key({"const": 1.0}) != schema_key({"const": True})


def test_invalid_schemas_are_cached_too(cache: SchemaCache) -> None:
    for _ in range(3):
        with pytest.raises(ToolsError):
            load_tools({"f": {"type": 12}}, cache)
    assert cache.misses == 1


def test_cache_is_bounded() -> None:
    cache = SchemaCache(maxsize=2)
    for i in range(5):
        load_tools({"f": {"const": i}}, cache)
    assert len(cache) == 2


def test_json_path() -> None:
    assert json_path([]) == "$"
    assert json_path(["a", 0, "b_c", "d-e", "it's"]) == "$.a[0].b_c['d-e']['it\\'s']"


def test_an_empty_cache_is_truthy() -> None:
    cache = SchemaCache()
    assert len(cache) == 0 and bool(cache)
    assert (cache or SchemaCache()) is cache
