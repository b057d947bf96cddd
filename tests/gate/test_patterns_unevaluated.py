"""``unevaluatedProperties`` under the linear-time pattern engine (``gate/patterns.py``) agrees
with ``jsonschema``'s own Draft 2020-12 rules, keyword by keyword, where the patterns are ones
both engines match the same way."""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import Draft202012Validator

from orgate.gate.patterns import bounded

BOUNDED = bounded(Draft202012Validator)

# (schema, instances): each schema closes the object with ``unevaluatedProperties: false`` and
# lets keys be evaluated through one keyword; the instances are valid under some branches only.
CASES: list[tuple[dict[str, Any], list[dict[str, Any]]]] = [
    (
        {"properties": {"a": {}}},
        [{"a": 1}, {"a": 1, "b": 2}, {}],
    ),
    (
        {"additionalProperties": {"type": "integer"}, "properties": {"s": {"type": "string"}}},
        [{"s": "x", "n": 1}, {"s": "x", "n": "y"}],
    ),
    (
        {"patternProperties": {"^x-": {}}},
        [{"x-a": 1}, {"y-a": 1}],
    ),
    (
        {"dependentSchemas": {"card": {"properties": {"billing": {}}}}, "properties": {"card": {}}},
        [{"card": 1, "billing": 2}, {"billing": 2}, {"card": 1}],
    ),
    (
        {"allOf": [{"properties": {"a": {}}}, True]},
        [{"a": 1}, {"a": 1, "b": 1}],
    ),
    (
        {
            "oneOf": [
                {"properties": {"a": {"type": "integer"}}, "required": ["a"]},
                {"properties": {"b": {}}, "required": ["b"]},
            ]
        },
        [{"a": 1}, {"b": 1}, {"a": "x", "b": 1}, {"a": 1, "b": 1}],
    ),
    (
        {"anyOf": [{"properties": {"a": {"type": "integer"}}}, {"properties": {"b": {}}}]},
        [{"a": 1, "b": 1}, {"a": "x", "b": 1}, {"c": 1}],
    ),
    (
        {
            "if": {"properties": {"kind": {"const": "x"}}, "required": ["kind"]},
            "then": {"properties": {"x": {}}},
            "else": {"properties": {"y": {}}},
        },
        [
            {"kind": "x", "x": 1},
            {"kind": "x", "y": 1},
            {"kind": "z", "y": 1},
            {"y": 1},
            {"kind": "z", "x": 1},
        ],
    ),
    (
        {"if": {"required": ["a"]}, "then": {"properties": {"a": {}}}},
        [{"a": 1}, {"b": 1}],
    ),
    (
        {
            "$defs": {"base": {"properties": {"id": {}}}},
            "$ref": "#/$defs/base",
            "properties": {"name": {}},
        },
        [{"id": 1, "name": "n"}, {"id": 1, "other": 2}],
    ),
    (
        {
            "$defs": {
                "inner": {"properties": {"a": {}}, "unevaluatedProperties": {"type": "string"}}
            },
            "$ref": "#/$defs/inner",
        },
        [{"a": 1, "b": "s"}, {"a": 1, "b": 2}],
    ),
]


@pytest.mark.parametrize(("schema", "instances"), CASES)
def test_unevaluated_properties_agree_with_jsonschema(
    schema: dict[str, Any], instances: list[dict[str, Any]]
) -> None:
    closed = {**schema, "unevaluatedProperties": False}
    Draft202012Validator.check_schema(closed)
    outcomes = []
    for instance in instances:
        expected = sorted(e.message for e in Draft202012Validator(closed).iter_errors(instance))
        got = sorted(e.message for e in BOUNDED(closed).iter_errors(instance))
        assert got == expected, instance
        outcomes.append(not expected)
    assert True in outcomes and False in outcomes  # each case tells valid from invalid


def test_an_unevaluated_subschema_checks_the_keys_left_over() -> None:
    schema = {"properties": {"a": {}}, "unevaluatedProperties": {"type": "integer"}}
    assert BOUNDED(schema).is_valid({"a": "x", "b": 1})
    errors = [e.message for e in BOUNDED(schema).iter_errors({"a": "x", "b": "y", "c": "z"})]
    assert errors == [
        "Unevaluated properties are not valid under the given schema ('b', 'c' were "
        "unevaluated and invalid)"
    ]
    assert BOUNDED(schema).is_valid(["not", "an", "object"])
