"""The built-in model's contract, in process: tool arguments and JSON answers are schema-valid.

docs/builtin-model.md promises arguments "generated from the tool's JSON Schema
(valid by construction)". Every schema here is checked with jsonschema Draft
2020-12 *with format checking on*, the way a client's test would check it.
``FAILED_BEFORE`` lists the schemas the old generator got wrong.
"""

from __future__ import annotations

import dataclasses
import json

import jsonschema
import pytest

from orgate.neutral import Deployment, ModelRequest, TextDelta, TextFormat, ToolCallDelta
from orgate.protocol.items import (
    FunctionCallItemParam,
    FunctionCallOutputItemParam,
    UserMessageItemParam,
)
from orgate.protocol.tools import FunctionToolParam, SpecificFunctionParam
from orgate.providers.builtin import BuiltinProvider
from orgate.providers.schema_example import example_for

V = jsonschema.Draft202012Validator
PROMPTS = ["Find flights from Paris", "", "x", "get_weather in Berlin please, 2 days"]

FAILED_BEFORE = {
    "minItems3_unique": {
        "type": "array",
        "items": {"type": "integer"},
        "minItems": 3,
        "uniqueItems": True,
    },
    "minItems3_unique_str": {
        "type": "array",
        "items": {"type": "string"},
        "minItems": 3,
        "uniqueItems": True,
    },
    "unique_enum": {
        "type": "array",
        "items": {"enum": ["a", "b", "c"]},
        "minItems": 2,
        "uniqueItems": True,
    },
    "contains": {"type": "array", "items": {"type": "integer"}, "contains": {"minimum": 10}},
    "contains_min": {
        "type": "array",
        "contains": {"type": "string", "const": "x"},
        "minContains": 2,
    },
    "contains_only": {"type": "array", "contains": {"type": "integer"}},
    "enum_typed": {"type": "string", "enum": [1, "b"]},
    "oneOf_overlap": {"oneOf": [{"type": "string"}, {"type": "string", "minLength": 2}]},
    "oneOf_num": {"oneOf": [{"type": "number"}, {"type": "integer"}]},
    "ref_recursive": {
        "$ref": "#/$defs/node",
        "$defs": {
            "node": {
                "type": "object",
                "properties": {
                    "v": {"type": "integer"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
                },
                "required": ["v", "children"],
            }
        },
    },
    "pattern_code": {"type": "string", "pattern": "^[A-Z]{3}-\\d{4}$"},
    "pattern_phone": {"type": "string", "pattern": "^\\+?[0-9]{10,13}$"},
    "pattern_hex": {"type": "string", "pattern": "^#[0-9a-fA-F]{6}$"},
    "pattern_alt": {"type": "string", "pattern": "^(foo|bar)baz$"},
    "pattern_min": {"type": "string", "pattern": "^[a-z]+$", "minLength": 10},
    "multipleOf_int": {"type": "integer", "multipleOf": 7, "minimum": 10, "maximum": 20},
    "multipleOf_neg": {"type": "integer", "multipleOf": 5, "maximum": -3},
    "multipleOf_int_frac": {"type": "integer", "multipleOf": 2.5},
    "patternProperties": {
        "type": "object",
        "patternProperties": {"^n_": {"type": "integer"}},
        "additionalProperties": False,
        "minProperties": 1,
    },
    "propertyNames": {
        "type": "object",
        "propertyNames": {"pattern": "^[a-z]+$"},
        "minProperties": 2,
    },
    "maxProperties": {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "string"}, "c": {"type": "string"}},
        "maxProperties": 1,
    },
    "maxProperties_req": {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
        "required": ["b"],
        "maxProperties": 1,
    },
    "dependentRequired": {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
        "dependentRequired": {"a": ["b", "c"]},
    },
    "dependentSchemas": {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "dependentSchemas": {"a": {"required": ["z"], "properties": {"z": {"type": "integer"}}}},
    },
    "if_then_else": {
        "type": "object",
        "properties": {"kind": {"enum": ["a", "b"]}, "n": {"type": "integer"}},
        "required": ["kind"],
        "if": {"properties": {"kind": {"const": "a"}}},
        "then": {"required": ["n"], "properties": {"n": {"minimum": 100}}},
        "else": {"required": ["m"]},
    },
    "if_then_str": {"type": "string", "if": {"minLength": 1}, "then": {"pattern": "^z"}},
    "not_in_enum": {"type": "string", "not": {"enum": ["example", "a"]}},
    "not_obj": {
        "type": "object",
        "not": {"required": ["a"]},
        "properties": {"a": {"type": "string"}},
    },
    "not_const_int": {"type": "integer", "not": {"const": 1}},
    "array_of_objs_unique": {
        "type": "array",
        "items": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]},
        "minItems": 2,
        "uniqueItems": True,
    },
    "array_items_false": {"type": "array", "items": False},
    "arr_no_items_min": {"type": "array", "minItems": 2, "uniqueItems": True},
    "number_multipleOf_003": {"type": "number", "multipleOf": 0.03, "minimum": 0.1, "maximum": 0.2},
    "big_minLength_pattern": {"type": "string", "pattern": "^[0-9]{5}$"},
    "pattern_and_format": {"type": "string", "format": "email", "pattern": "@corp\\.com$"},
    "anchors": {
        "$defs": {"s": {"$anchor": "foo", "type": "integer"}},
        "type": "object",
        "properties": {"a": {"$ref": "#foo"}},
        "required": ["a"],
    },
    "id_ref": {
        "$id": "https://example.com/root",
        "$defs": {"s": {"type": "integer", "minimum": 3}},
        "type": "object",
        "properties": {"a": {"$ref": "https://example.com/root#/$defs/s"}},
        "required": ["a"],
    },
}

ALREADY_FINE = {
    "nested": {
        "type": "object",
        "properties": {
            "a": {
                "type": "object",
                "properties": {"b": {"type": "array", "items": {"type": "integer"}}},
                "required": ["b"],
            }
        },
        "required": ["a"],
    },
    "minItems3": {"type": "array", "items": {"type": "integer"}, "minItems": 3},
    "maxItems0": {"type": "array", "maxItems": 0},
    "prefixItems": {
        "type": "array",
        "prefixItems": [{"type": "string"}, {"type": "integer"}],
        "items": False,
    },
    "prefixItems_min": {
        "type": "array",
        "prefixItems": [{"type": "string"}],
        "items": {"type": "boolean"},
        "minItems": 3,
    },
    "enum": {"enum": ["red", "green"]},
    "const": {"const": {"a": 1}},
    "oneOf_objs": {
        "type": "object",
        "oneOf": [{"required": ["a"]}, {"required": ["b"]}],
        "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
    },
    "anyOf_null_first": {"anyOf": [{"type": "null"}, {"type": "integer", "minimum": 5}]},
    "allOf": {
        "allOf": [
            {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
            {"properties": {"b": {"type": "string"}}, "required": ["b"]},
        ]
    },
    "allOf_bounds": {
        "allOf": [{"type": "integer", "minimum": 5}, {"maximum": 7}, {"multipleOf": 3}]
    },
    "allOf_strings": {"allOf": [{"type": "string", "minLength": 3}, {"maxLength": 5}]},
    "ref": {
        "type": "object",
        "properties": {"p": {"$ref": "#/$defs/P"}},
        "required": ["p"],
        "$defs": {
            "P": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}
        },
    },
    "ref_recursive_min": {
        "$ref": "#/$defs/node",
        "$defs": {
            "node": {
                "type": "object",
                "properties": {
                    "v": {"type": "integer"},
                    "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]},
                },
                "required": ["v", "next"],
                "additionalProperties": False,
            }
        },
    },
    "ref_definitions": {
        "type": "object",
        "properties": {"p": {"$ref": "#/definitions/P"}},
        "required": ["p"],
        "definitions": {"P": {"type": "string", "minLength": 4}},
    },
    "pattern_email": {"type": "string", "pattern": "^[^@\\s]+@[^@\\s]+\\.[a-z]{2,}$"},
    "pattern_max": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 2},
    "pattern_unanchored": {"type": "string", "pattern": "\\d"},
    "format_date": {"type": "string", "format": "date"},
    "format_datetime": {"type": "string", "format": "date-time"},
    "format_email": {"type": "string", "format": "email"},
    "format_uri": {"type": "string", "format": "uri"},
    "format_uuid": {"type": "string", "format": "uuid"},
    "format_ipv4": {"type": "string", "format": "ipv4"},
    "format_ipv6": {"type": "string", "format": "ipv6"},
    "format_time": {"type": "string", "format": "time"},
    "format_duration": {"type": "string", "format": "duration"},
    "format_regex": {"type": "string", "format": "regex"},
    "format_json_pointer": {"type": "string", "format": "json-pointer"},
    "format_email_max": {"type": "string", "format": "email", "maxLength": 5},
    "minLength": {"type": "string", "minLength": 50},
    "maxLength1": {"type": "string", "maxLength": 1},
    "maxLength0": {"type": "string", "maxLength": 0},
    "minmax": {"type": "integer", "minimum": 10, "maximum": 20},
    "neg": {"type": "integer", "maximum": -5},
    "neg_num": {"type": "number", "maximum": -0.5},
    "exclusiveMin": {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 2},
    "exclusiveMin_num": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 0.001},
    "exclusive_only_max": {"type": "number", "exclusiveMaximum": 0},
    "multipleOf001": {"type": "number", "multipleOf": 0.01, "minimum": 0.015},
    "int_frac_bounds": {"type": "integer", "minimum": 1.5, "maximum": 2.5},
    "number_big_min": {"type": "number", "minimum": 1000000.0},
    "nullable": {"type": ["string", "null"]},
    "nullable_int": {"type": ["null", "integer"], "minimum": 3},
    "type_multi": {"type": ["integer", "string"], "minLength": 2},
    "addl_false": {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "additionalProperties": False,
        "required": ["a"],
    },
    "addl_schema": {
        "type": "object",
        "additionalProperties": {"type": "integer"},
        "minProperties": 2,
    },
    "addl_schema_req": {
        "type": "object",
        "required": ["x"],
        "additionalProperties": {"type": "integer"},
    },
    "not_string": {"not": {"type": "string"}},
    "empty": {},
    "true": True,
    "obj_empty_props": {"type": "object", "properties": {}},
    "strict": {
        "type": "object",
        "properties": {
            "q": {"type": "string"},
            "n": {"type": ["integer", "null"]},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["x", "y"]}},
        },
        "required": ["q", "n", "tags"],
        "additionalProperties": False,
    },
    "bool_in_enum": {"type": "boolean", "enum": [False]},
    "const_and_type": {"type": "integer", "const": 3},
    "unevaluatedProps": {
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "required": ["a"],
        "unevaluatedProperties": False,
    },
    "req_with_dash": {
        "type": "object",
        "properties": {"a-b": {"type": "string"}, "$x": {"type": "integer"}},
        "required": ["a-b", "$x"],
    },
    "nested_oneOf_discrim": {
        "type": "object",
        "properties": {
            "shape": {
                "oneOf": [
                    {
                        "type": "object",
                        "properties": {
                            "kind": {"const": "circle"},
                            "r": {"type": "number", "exclusiveMinimum": 0},
                        },
                        "required": ["kind", "r"],
                    },
                    {
                        "type": "object",
                        "properties": {"kind": {"const": "square"}, "s": {"type": "number"}},
                        "required": ["kind", "s"],
                    },
                ]
            }
        },
        "required": ["shape"],
    },
    "anyOf_in_items": {
        "type": "array",
        "items": {"anyOf": [{"type": "string", "format": "email"}, {"type": "integer"}]},
        "minItems": 1,
    },
    "ref_sibling": {"$defs": {"s": {"type": "string"}}, "$ref": "#/$defs/s", "minLength": 10},
}


def _errors(schema, value):
    validator = V(schema, format_checker=V.FORMAT_CHECKER)
    return [e.message for e in validator.iter_errors(value)]


@pytest.mark.parametrize("prompt", PROMPTS)
@pytest.mark.parametrize("name", sorted(FAILED_BEFORE))
def test_example_is_valid_for_schemas_that_failed_before(name, prompt):
    schema = FAILED_BEFORE[name]
    value = example_for(schema, prompt)
    assert _errors(schema, value) == [], (name, value)


@pytest.mark.parametrize("prompt", PROMPTS[:2])
@pytest.mark.parametrize("name", sorted(ALREADY_FINE))
def test_example_stays_valid(name, prompt):
    schema = ALREADY_FINE[name]
    value = example_for(schema, prompt)
    assert _errors(schema, value) == [], (name, value)


def test_strings_are_still_drawn_from_the_prompt():
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    assert example_for(schema, "weather in Oslo") == {"q": "weather in Oslo"}


def test_contradictory_schema_gives_best_effort_not_an_exception():
    assert example_for({"type": "integer", "minimum": 5, "maximum": 1}) is None
    assert example_for(False) is None


def _deployment() -> Deployment:
    return Deployment(name="orgate/echo", provider="builtin", upstream_model="echo")


async def _stream_text(request: ModelRequest, kind=ToolCallDelta) -> str:
    events = [ev async for ev in BuiltinProvider(_deployment()).stream(request)]
    if kind is ToolCallDelta:
        return "".join(ev.arguments for ev in events if isinstance(ev, ToolCallDelta))
    return "".join(ev.text for ev in events if isinstance(ev, TextDelta))


@pytest.mark.parametrize("name", sorted(FAILED_BEFORE))
async def test_tool_call_arguments_are_schema_valid(name):
    schema = FAILED_BEFORE[name]
    if schema.get("type") != "object":
        defs = {k: schema[k] for k in ("$defs", "definitions") if k in schema}
        schema = {"type": "object", "properties": {"v": schema}, "required": ["v"], **defs}
    request = ModelRequest(
        model="echo",
        input=[UserMessageItemParam(role="user", content="fill it in")],
        tools=[FunctionToolParam(name="t", parameters=schema, strict=True)],
    )
    arguments = json.loads(await _stream_text(request))
    assert _errors(schema, arguments) == [], (name, arguments)


@pytest.mark.parametrize("name", ["minItems3_unique_str", "pattern_code", "if_then_else"])
async def test_json_schema_answer_is_schema_valid(name):
    schema = FAILED_BEFORE[name]
    request = ModelRequest(
        model="echo",
        input=[UserMessageItemParam(role="user", content="json please")],
        text_format=TextFormat(type="json_schema", name="x", schema=schema, strict=False),
    )
    value = json.loads(await _stream_text(request, TextDelta))
    assert _errors(schema, value) == [], (name, value)


async def test_stop_sequences_end_the_text_before_the_first_one():
    """The chat adapter's ``stop`` reached the built-in model and was ignored
    (the whole text came back)."""
    prompt = "alpha beta general gamma END delta"
    request = ModelRequest(model="echo", input=[UserMessageItemParam(role="user", content=prompt)])
    whole = await _stream_text(request, TextDelta)
    assert "general" in whole and "END" in whole
    for stop, cut_at in ((["END", "general"], "general"), (["END"], "END"), (["nowhere"], None)):
        text = await _stream_text(dataclasses.replace(request, stop=stop), TextDelta)
        assert text == (whole if cut_at is None else whole[: whole.find(cut_at)])


@pytest.mark.parametrize(
    ("tool_choice", "calls"),
    [
        ("auto", False),
        ("required", True),
        (SpecificFunctionParam(type="function", name="get_weather"), True),
    ],
)
async def test_a_forced_call_comes_even_after_a_tool_output(tool_choice, calls):
    """After a ``function_call_output`` the model quotes it, unless ``tool_choice`` forces a call:
    then it calls (it answered text, which the gateway's tool guard refused and re-asked)."""
    tool = FunctionToolParam(
        name="get_weather",
        parameters={
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    )
    request = ModelRequest(
        model="echo",
        input=[
            UserMessageItemParam(role="user", content="weather in Paris"),
            FunctionCallItemParam(
                type="function_call",
                call_id="c1",
                name="get_weather",
                arguments='{"city": "Paris"}',
            ),
            FunctionCallOutputItemParam(type="function_call_output", call_id="c1", output="sunny"),
        ],
        tools=[tool],
        tool_choice=tool_choice,
    )
    if calls:
        arguments = json.loads(await _stream_text(request))
        assert _errors(tool.parameters, arguments) == [] and set(arguments) == {"city"}
    else:
        assert await _stream_text(request, TextDelta) == "get_weather returned: sunny"
