"""Parse, schema and semantic layers: stages and the exact wording of each message."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator, FormatChecker

from orgate.structured.layers import (
    Accepted,
    Failure,
    SemanticCheckError,
    ValidatorCache,
    check_output,
    describe_error,
    format_path,
    parse_layer,
    semantic_layer,
    strip_code_fence,
)

CACHE = ValidatorCache()
ORDER = {
    "type": "object",
    "properties": {
        "sku": {"type": "string"},
        "price": {"type": "number"},
        "status": {"enum": ["open", "closed"]},
        "lines": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"qty": {"type": "integer", "minimum": 1}},
                "required": ["qty"],
                "additionalProperties": False,
            },
        },
        "ref": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    },
    "required": ["sku", "price"],
    "additionalProperties": False,
}


def errors(text: str, schema: Any = ORDER, **kw: Any) -> tuple[str, ...]:
    result = check_output(text, schema=CACHE.get(schema), **kw)
    assert isinstance(result, Failure), result
    return result.errors


def stage(text: str, **kw: Any) -> str:
    result = check_output(text, schema=CACHE.get(ORDER), **kw)
    return result.stage if isinstance(result, Failure) else "ok"


def test_wrong_type_message() -> None:
    assert errors('{"sku": "A", "price": "12.5"}') == ('price: expected number, got string "12.5"',)


def test_missing_and_unexpected_keys() -> None:
    assert errors('{"price": 1, "colour": "red"}') == (
        "missing required key sku",
        "unexpected key colour",
    )


def test_nested_paths_and_enum() -> None:
    got = errors(
        '{"sku": "A", "price": 1, "status": "pending", "lines": [{"qty": 2}, {"qty": 0, "x": 1}]}'
    )
    assert got == (
        "unexpected key x in lines[1]",
        "lines[1].qty: 0 is less than the minimum of 1",
        'status: expected one of "open", "closed", got "pending"',
    )


def test_missing_key_in_nested_object() -> None:
    assert errors('{"sku": "A", "price": 1, "lines": [{}]}') == (
        "missing required key qty in lines[0]",
    )


def test_anyof_message_lists_alternatives() -> None:
    (msg,) = errors('{"sku": "A", "price": 1, "ref": 5}')
    assert (
        msg == "ref: none of the allowed alternatives matched (expected string, got integer "
        "5; expected null, got integer 5)"
    )


def test_type_list_and_null() -> None:
    schema = {"type": "object", "properties": {"a": {"type": ["string", "null"]}}}
    assert errors('{"a": 1}', schema) == ("a: expected string or null, got integer 1",)
    assert errors('{"a": {}}', {"type": "object", "properties": {"a": {"type": "string"}}}) == (
        "a: expected string, got object",
    )


def test_root_type_message() -> None:
    assert errors("[1]", {"type": "object"}) == ("expected object, got array",)


def test_paths_quote_odd_keys() -> None:
    assert format_path(["a", 0, "unit price", "b"]) == 'a[0]["unit price"].b'
    assert format_path([]) == "$"


def test_parse_error_has_line_column_snippet() -> None:
    (msg,) = errors('{\n  "sku": "A",\n  "price": 1 "x"\n}')
    assert msg.startswith("line 3, column 14: expected ',' or a closing bracket; near: ")
    assert '1 "x"' in msg


def test_parse_incomplete_json_is_named() -> None:
    (msg,) = errors('{"sku": "A", "pri')
    assert "unterminated string" in msg and "the JSON is incomplete" in msg


def test_parse_empty_and_nan() -> None:
    assert errors("   ") == ("the reply is empty: expected a JSON value",)
    assert errors('{"sku": "A", "price": NaN}') == ("NaN is not valid JSON",)


def test_trailing_prose_rejected_unless_configured() -> None:
    text = 'Here you go: {"sku": "A", "price": 1} Enjoy!'
    (msg,) = errors(text)
    assert "no text before it" in msg
    (msg,) = errors('{"sku": "A", "price": 1} Enjoy!')
    assert "unexpected text after the JSON value" in msg and "no text after it" in msg
    result = check_output(text, schema=CACHE.get(ORDER), strip_prose=True)
    assert (
        isinstance(result, Accepted) and result.changed and result.text == '{"sku":"A","price":1}'
    )


def test_code_fence_rejected_unless_configured() -> None:
    text = '```json\n{"sku": "A", "price": 1}\n```'
    assert errors(text) == (
        "the reply is wrapped in a Markdown code fence (```); send the bare JSON value "
        "without fences",
    )
    result = check_output(text, schema=CACHE.get(ORDER), strip_fences=True)
    assert isinstance(result, Accepted) and result.value == {"sku": "A", "price": 1}
    assert strip_code_fence("```\n[1]\n```") == "[1]"
    assert strip_code_fence("[1]") is None


def test_accepted_text_is_untouched_when_nothing_changed() -> None:
    text = '{"sku": "A",   "price": 1}'
    result = check_output(text, schema=CACHE.get(ORDER))
    assert result == Accepted({"sku": "A", "price": 1}, text, False)


def test_stage_order() -> None:
    def no_a(value: Any) -> list[str]:
        return ["sku: must not be A"] if value.get("sku") == "A" else []

    checks = [("no_a", no_a)]
    assert stage("{", checks=checks) == "parse"
    assert stage('{"sku": 1, "price": 1}', checks=checks) == "schema"
    assert stage('{"sku": "A", "price": 1}', checks=checks) == "semantic"
    assert stage('{"sku": "B", "price": 1}', checks=checks) == "ok"


def test_semantic_collects_all_messages() -> None:
    checks = [
        ("a", lambda v: ["price: must be >= 0"]),
        ("b", lambda v: []),
        ("c", lambda v: ["sku: not in catalogue"]),
    ]
    assert semantic_layer({}, checks) == Failure(
        "semantic", ("price: must be >= 0", "sku: not in catalogue")
    )


def test_broken_semantic_check_is_not_the_models_fault() -> None:
    with pytest.raises(SemanticCheckError, match="raised ZeroDivisionError"):
        semantic_layer({}, [("boom", lambda v: [1 / 0])])
    with pytest.raises(SemanticCheckError, match="list of strings"):
        semantic_layer({}, [("str", lambda v: "oops")])  # type: ignore[list-item,return-value]


def test_cache_by_content() -> None:
    cache = ValidatorCache()
    a = cache.get({"type": "object", "properties": {"x": {"type": "string"}}})
    b = cache.get({"properties": {"x": {"type": "string"}}, "type": "object"})
    assert a is b and len(cache) == 1


def test_many_errors_are_capped() -> None:
    schema = {"type": "array", "items": {"type": "string"}}
    got = errors("[" + ",".join(["1"] * 30) + "]", schema)
    assert len(got) == 21 and got[-1] == "… and 10 more problems"
    assert got[0] == "[0]: expected string, got integer 1"


@settings(max_examples=50, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda c: st.lists(c) | st.dictionaries(st.text(), c),
        max_leaves=20,
    )
)
def test_any_json_value_parses(value: Any) -> None:
    parsed = parse_layer(json.dumps(value))
    assert not isinstance(parsed, Failure) and parsed[0] == value


_EVERY_KEYWORD: list[tuple[dict[str, Any], Any, list[str]]] = [
    ({"required": ["a", "b"]}, {"b": 1}, ["missing required key a"]),
    ({"properties": {"o": {"required": ["a"]}}}, {"o": {}}, ["missing required key a in o"]),
    (
        {"properties": {"a": {}}, "patternProperties": {"^x": {}}, "additionalProperties": False},
        {"a": 1, "x1": 2, "b": 3},
        ["unexpected key b"],
    ),
    (
        {"properties": {"a": {}}, "unevaluatedProperties": False},
        {"a": 1, "b": 2},
        ["unexpected key b"],
    ),
    (
        {"properties": {"a": {"type": "string"}}, "unevaluatedProperties": False},
        {"a": 1},
        ["a: expected string, got integer 1"],
    ),
    (
        {"enum": list(range(25))},
        99,
        ["expected one of " + ", ".join(str(i) for i in range(20)) + ", …, got 99"],
    ),
    ({"properties": {"c": {"const": "a"}}}, {"c": "b"}, ['c: expected "a", got "b"']),
    ({"minLength": 2}, "a", ['"a" is too short (expected at least 2 characters, got 1)']),
    ({"maxLength": 1}, "ab", ['"ab" is too long (expected at most 1 character, got 2)']),
    ({"minItems": 1}, [], ["[] is too short (expected at least 1 item, got 0)"]),
    ({"maxItems": 1}, [1, 2], ["[1,2] is too long (expected at most 1 item, got 2)"]),
    (
        {"maxProperties": 1},
        {"a": 1, "b": 2},
        ['{"a":1,"b":2} has too many keys (expected at most 1 key, got 2)'],
    ),
    ({"minProperties": 2}, {}, ["{} has too few keys (expected at least 2 keys, got 0)"]),
    ({"minLength": 2.0}, "a", ["'a' is too short"]),
    ({"pattern": "^a"}, "b", ['"b" does not match the pattern "^a"']),
    (
        {"properties": {"e": {"format": "email"}}},
        {"e": "x"},
        ['e: expected a string in format email, got "x"'],
    ),
    ({"uniqueItems": True}, [1, 1], ["expected unique items, got duplicates in [1,1]"]),
    (
        {"oneOf": [{"type": "string"}, {"type": "integer"}]},
        1.5,
        [
            "must match exactly one alternative (expected string, got number 1.5;"
            " expected integer, got number 1.5)"
        ],
    ),
    (
        {"oneOf": [{"type": "integer"}, {"type": "number"}]},
        1,
        ["1 is valid under each of {'type': 'number'}, {'type': 'integer'}"],
    ),
    (
        {"anyOf": [{"type": t} for t in ("string", "boolean", "null", "array", "object")]},
        1.5,
        [
            "none of the allowed alternatives matched (expected string, got number 1.5;"
            " expected boolean, got number 1.5; expected null, got number 1.5;"
            " expected array, got number 1.5)"
        ],
    ),
    (
        {
            "properties": {
                "a": {
                    "anyOf": [
                        {"type": "object", "required": ["x"]},
                        {"type": "object", "required": ["x"]},
                        {"type": "string"},
                    ]
                }
            }
        },
        {"a": {"y": 1}},
        [
            "a: none of the allowed alternatives matched"
            " (missing required key x; expected string, got object)"
        ],
    ),
    (
        {"items": {"anyOf": [{"properties": {"b": {"type": "string"}}}, {"type": "string"}]}},
        [{"b": 1}],
        [
            "[0]: none of the allowed alternatives matched"
            " (b: expected string, got integer 1; expected string, got object)"
        ],
    ),
    ({"minimum": 3}, 1, ["1 is less than the minimum of 3"]),
    (  # a schema for the other keys, not False: jsonschema's own words
        {"properties": {"o": {"unevaluatedProperties": {"type": "string"}}}},
        {"o": {"a": 1}},
        [
            "o: Unevaluated properties are not valid under the given schema"
            " ('a' was unevaluated and invalid)"
        ],
    ),
]


@pytest.mark.parametrize(("schema", "instance", "messages"), _EVERY_KEYWORD)
def test_every_keyword_has_its_message(
    schema: dict[str, Any], instance: Any, messages: list[str]
) -> None:
    validator = Draft202012Validator(schema, format_checker=FormatChecker())
    found = sorted(validator.iter_errors(instance), key=lambda e: e.message)
    assert [m for error in found for m in describe_error(error)] == messages
