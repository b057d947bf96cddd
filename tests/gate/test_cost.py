"""The cost model of a client's schema as a whole (``orgate.gate.cost``): the smallest instance
it admits and the subschemas one value is checked against, and their bounds at the edge."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from orgate.gate.bounds import SchemaBounds, SchemaTooComplex, check_bounds, dotted
from orgate.gate.cost import CHARS_PER_TOKEN, cost_of, min_tokens, schema_cost
from orgate.providers.schema_example import example_for
from tests.hostile.shapes import GIGABYTE, MANY_PROPERTIES, doubled_branches, doubled_refs, obj

#: Seconds. Far above what the linear walk takes (a quarter of a second at most, idle: a machine
#: 30 times slower passes), far below an exponential one (minutes, or never ending).
SLOW = 10.0


def _json_len(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":")))


@pytest.mark.parametrize(
    ("schema", "smallest"),
    [
        ({"type": "string", "minLength": 5}, '"xxxxx"'),
        ({"type": "integer"}, "0"),
        ({"type": ["null", "string"]}, '""'),
        ({"type": "boolean"}, "true"),
        ({"minLength": 50}, "0"),  # no type: a number is a value of it
        ({"type": "array", "minItems": 3, "items": {"type": "integer"}}, "[0,0,0]"),
        (
            {"type": "array", "prefixItems": [{"type": "string", "minLength": 3}], "minItems": 2},
            '["xxx",0]',
        ),
        ({"type": "array", "contains": {"const": "abc"}, "minContains": 2}, '["abc","abc"]'),
        (obj(a={"type": "string"}, bb={"type": "integer"}), '{"a":"","bb":0}'),
        ({"type": "object", "minProperties": 2}, '{"":0,"":0}'),
        ({"enum": ["long value", 7, "xy"]}, "7"),
        ({"const": {"k": [1, 2]}}, '{"k":[1,2]}'),
        (
            {"anyOf": [{"type": "string", "minLength": 9}, {"type": "array", "minItems": 2}]},
            "[0,0]",
        ),
        ({"allOf": [{"type": "string", "minLength": 3}, {"minLength": 7}]}, '"xxxxxxx"'),
        (
            {"allOf": [{"type": "array", "items": {"minLength": 4, "type": "string"}}]}
            | {"minItems": 2},
            '["xxxx","xxxx"]',
        ),
        (
            {"allOf": [obj(a={"type": "string", "minLength": 3}), obj(b={"type": "integer"})]},
            '{"a":"xxx","b":0}',
        ),
    ],
)
def test_the_smallest_value_is_counted_exactly_for_plain_shapes(schema: Any, smallest: str) -> None:
    assert schema_cost(schema).min_chars == len(smallest)


def test_references_are_followed_and_recursion_ends() -> None:
    tree = {
        "$defs": {
            "node": obj(name={"type": "string", "minLength": 4}, kids={"$ref": "#/$defs/kids"}),
            "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}},
        },
        "$ref": "#/$defs/node",
    }
    # {"name":"xxxx","kids":[]}: the recursion needs no child
    assert schema_cost(tree).min_chars == len('{"name":"xxxx","kids":[]}')


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "http://169.254.169.254/latest/meta-data"},
        {"$ref": "#/nowhere"},
        {"anyOf": [{"$ref": "#/$defs/missing"}]},
        {"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"},
        {"type": "object", "required": "not a list", "properties": []},
        {"type": 7, "minItems": "x", "items": 3},
    ],
)
def test_a_reference_that_leads_nowhere_or_malformed_keywords_cost_nothing_more(
    schema: Any,
) -> None:
    cost = schema_cost(schema)
    assert cost.min_chars <= 2 and cost.fanout <= 2


def test_a_whole_schema_past_every_keyword_bound_is_counted_as_a_product() -> None:
    cost = schema_cost(obj(a=GIGABYTE))
    assert cost.min_chars > 10_000 * 100_000
    assert cost.min_at == ("properties", "a", "minItems")
    assert schema_cost(obj(x=MANY_PROPERTIES)).min_chars > 10_000 * 1_000 * 4
    # the same, optional: the smallest value is {} (the generator is bounded on its own)
    assert schema_cost({"type": "object", "properties": {"a": GIGABYTE}}).min_chars == 2


def test_a_doubled_reference_doubles_the_smallest_value_in_linear_time() -> None:
    start = time.perf_counter()
    cost = schema_cost(doubled_refs(40))
    assert time.perf_counter() - start < SLOW
    assert cost.min_chars >= 2**40
    assert cost.min_at[:2] == ("$defs", "a0")
    smallest = '""'
    for _ in range(4):
        smallest = f'{{"x":{smallest},"y":{smallest}}}'
    assert schema_cost(doubled_refs(4)).min_chars == len(smallest)
    assert len(smallest) <= _json_len(example_for(doubled_refs(4), "x"))


def test_fan_out_multiplies_through_nested_branches_not_through_a_chain_of_references() -> None:
    assert schema_cost(obj(a={"type": "string"})).fanout == 1
    union = {"anyOf": [obj(kind={"const": f"k{i}"}) for i in range(20)]}
    assert schema_cost(union).fanout == 21  # the union and each of its branches
    assert schema_cost(obj(x=union)).fanout == 21
    assert schema_cost(doubled_branches(8, {"type": "string"})).fanout > 2**8
    start = time.perf_counter()
    deep = schema_cost(doubled_branches(40, {"type": "string"}))
    assert time.perf_counter() - start < SLOW
    assert deep.fanout > 2**40
    assert deep.fanout_at[:2] == ("$defs", "a0") and deep.fanout_at[-1] == "anyOf"
    chain = {f"a{i}": {"$ref": f"#/$defs/a{i + 1}"} for i in range(4000)}
    linked = {"$defs": {**chain, "a4000": {"type": "string"}}, "$ref": "#/$defs/a0"}
    assert schema_cost(linked).fanout <= 2


def test_the_edge_refuses_a_schema_whose_smallest_value_is_too_large_naming_the_keyword() -> None:
    with pytest.raises(SchemaTooComplex) as refused:
        check_bounds(obj(a=GIGABYTE), SchemaBounds())
    exc = refused.value
    assert exc.setting == "max_schema_min_chars" and exc.keyword == "minItems"
    assert dotted("text.format.schema", exc.path) == "text.format.schema.properties.a.minItems"
    assert "1,000,030,007 characters" in str(exc) and "limits.max_schema_min_chars" in str(exc)
    check_bounds(obj(a=GIGABYTE), SchemaBounds(max_min_chars=2 * 10**9))


def test_the_edge_refuses_a_schema_whose_fan_out_is_too_large() -> None:
    schema = doubled_branches(9, {"type": "integer"})
    check_bounds(schema, SchemaBounds(max_fanout=2**11))
    with pytest.raises(SchemaTooComplex) as refused:
        check_bounds(schema, SchemaBounds())
    assert refused.value.setting == "max_schema_fanout"
    assert refused.value.path == ("$defs", "a0", "anyOf")


def test_the_cost_of_a_schema_is_kept_by_content() -> None:
    first = cost_of(obj(a={"type": "string", "minLength": 12345}))
    again = cost_of(obj(a={"type": "string", "minLength": 12345}))
    assert again is first and first.min_chars == len('{"a":""}') + 12345


def test_min_tokens_counts_the_longest_tokens() -> None:
    assert CHARS_PER_TOKEN == 32
    cost = schema_cost({"type": "string", "minLength": 62})
    assert min_tokens(cost) == 2  # 64 characters with the quotes
