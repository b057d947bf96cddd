"""Strict-mode check and strictify on real-world schemas, and ``denull``."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from orgate.structured.strict import check, denull, is_strict, make_nullable, strictify

NESTED = {
    "type": "object",
    "properties": {
        "customer": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "email": {"type": "string", "format": "email"},
            },
            "required": ["name"],
        },
        "lines": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "properties": {
                    "sku": {"type": "string", "maxLength": 12},
                    "qty": {"type": "integer"},
                },
                "required": ["sku", "qty"],
            },
        },
        "status": {"type": "string", "enum": ["open", "paid"]},
        "coupon": {"$ref": "#/$defs/coupon"},
        "shipping": {"oneOf": [{"$ref": "#/$defs/address"}, {"type": "string", "const": "pickup"}]},
    },
    "required": ["customer", "lines"],
    "$defs": {
        "coupon": {
            "type": "object",
            "properties": {"code": {"type": "string"}},
            "required": ["code"],
            "additionalProperties": False,
        },
        "address": {
            "type": "object",
            "properties": {"street": {"type": "string"}, "zip": {"type": "string", "default": ""}},
            "required": ["street", "zip"],
        },
    },
}


def rules(schema: Any) -> list[tuple[str, str, bool]]:
    return [(v.path, v.rule, v.fixable) for v in check(schema)]


def test_already_strict_schema_has_no_violations() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": ["string", "null"]},
            "b": {"type": "array", "items": {"type": "integer"}},
        },
        "required": ["a", "b"],
        "additionalProperties": False,
    }
    assert check(schema) == []
    assert strictify(schema).schema == schema


def test_check_lists_every_violation_with_its_path() -> None:
    found = rules(NESTED)
    assert ("/additionalProperties", "additionalProperties", True) in found
    assert ("/properties/customer/properties/email", "required", True) in found
    assert ("/properties/lines/items/properties/sku/maxLength", "narrowing", True) in found
    assert ("/properties/shipping/oneOf", "oneOf", True) in found
    assert ("/$defs/address/properties/zip/default", "annotation", True) in found
    assert ("/properties/status", "required", True) in found
    assert all(fixable for _, _, fixable in found)


def test_strictify_real_world_schema() -> None:
    result = strictify(NESTED)
    out = result.schema
    assert out is not None and check(out) == []
    assert out["required"] == ["customer", "lines", "status", "coupon", "shipping"]
    assert out["additionalProperties"] is False
    assert out["properties"]["status"] == {
        "type": ["string", "null"],
        "enum": ["open", "paid", None],
    }
    assert out["properties"]["coupon"] == {"anyOf": [{"$ref": "#/$defs/coupon"}, {"type": "null"}]}
    assert out["properties"]["customer"]["properties"]["email"]["type"] == ["string", "null"]
    assert out["properties"]["shipping"]["anyOf"][-1] == {"type": "null"}
    assert "default" not in out["$defs"]["address"]["properties"]["zip"]
    assert out["properties"]["lines"]["items"]["properties"]["sku"] == {
        "type": "string",
        "description": "Constraints: maxLength=12.",
    }
    assert NESTED["required"] == ["customer", "lines"]  # input untouched
    Draft202012Validator.check_schema(out)


def test_strict_output_denulled_validates_against_the_original() -> None:
    strict_schema = strictify(NESTED).schema
    output = {
        "customer": {"name": "Ann", "email": None},
        "lines": [{"sku": "A", "qty": 1}],
        "status": None,
        "coupon": None,
        "shipping": {"street": "Main", "zip": "1"},
    }
    assert Draft202012Validator(strict_schema).is_valid(output)
    assert not Draft202012Validator(NESTED).is_valid(output)
    fixed = denull(output, NESTED)
    assert fixed == {
        "customer": {"name": "Ann"},
        "lines": [{"sku": "A", "qty": 1}],
        "shipping": {"street": "Main", "zip": "1"},
    }
    assert Draft202012Validator(NESTED).is_valid(fixed)
    assert output["status"] is None  # not modified in place


def test_denull_keeps_nulls_the_original_allows() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": ["string", "null"]}, "b": {"type": "string"}},
    }
    assert denull({"a": None, "b": None}, schema) == {"a": None}
    assert denull({"a": None}, {**schema, "required": ["a"]}) == {"a": None}


def test_arrays_of_objects_and_recursive_refs() -> None:
    tree = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "children": {"type": "array", "items": {"$ref": "#"}},
        },
        "required": ["name"],
    }
    out = strictify(tree).schema
    assert out is not None and check(out) == []
    assert out["properties"]["children"]["items"] == {"$ref": "#"}
    value = {"name": "a", "children": [{"name": "b", "children": None}]}
    assert denull(value, tree) == {"name": "a", "children": [{"name": "b"}]}


def test_anyof_branches_are_walked() -> None:
    schema = {
        "type": "object",
        "properties": {
            "item": {
                "anyOf": [
                    {
                        "type": "object",
                        "properties": {"kind": {"const": "a"}, "x": {"type": "integer"}},
                        "required": ["kind"],
                    },
                    {"type": "string"},
                ]
            }
        },
        "required": ["item"],
    }
    out = strictify(schema).schema
    assert out is not None
    branch = out["properties"]["item"]["anyOf"][0]
    assert branch["required"] == ["kind", "x"] and branch["additionalProperties"] is False
    assert branch["properties"]["x"] == {"type": ["integer", "null"]}


def test_ref_with_siblings_is_inlined_and_single_allof_merged() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"$ref": "#/$defs/A", "properties": {"extra": {"type": "string"}}},
            "b": {"allOf": [{"$ref": "#/$defs/A"}], "description": "B"},
        },
        "required": ["a", "b"],
        "$defs": {
            "A": {
                "type": "object",
                "properties": {"v": {"type": "integer"}},
                "required": ["v"],
                "additionalProperties": False,
            }
        },
    }
    out = strictify(schema).schema
    assert out is not None and check(out) == []
    assert out["properties"]["a"]["properties"] == {
        "v": {"type": "integer"},
        "extra": {"type": ["string", "null"]},
    }
    assert out["properties"]["a"]["required"] == ["v", "extra"]
    assert out["properties"]["b"] == {"$ref": "#/$defs/A", "description": "B"}


@pytest.mark.parametrize(
    ("schema", "path", "words"),
    [
        (
            {"type": "object", "patternProperties": {"^x-": {"type": "string"}}},
            "/patternProperties",
            "no strict equivalent",
        ),
        (
            {
                "type": "object",
                "properties": {"m": {"type": "object", "additionalProperties": {"type": "number"}}},
                "required": ["m"],
            },
            "/properties/m/additionalProperties",
            "map",
        ),
        (
            {"type": "object", "properties": {"free": {"type": "object"}}, "required": ["free"]},
            "/properties/free",
            "free-form",
        ),
        (
            {"type": "object", "properties": {"l": {"type": "array"}}, "required": ["l"]},
            "/properties/l",
            "without 'items'",
        ),
        ({"type": "object", "properties": {"x": {}}, "required": ["x"]}, "/properties/x", "typed"),
        ({"type": "array", "items": {"type": "string"}}, "#", "root must have type 'object'"),
        ({"anyOf": [{"type": "object"}, {"type": "string"}]}, "#", "not anyOf"),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "string", "not": {"const": ""}}},
                "required": ["a"],
            },
            "/properties/a/not",
            "'not'",
        ),
        (
            {
                "type": "object",
                "properties": {"a": {"$ref": "https://example.com/a.json"}},
                "required": ["a"],
            },
            "/properties/a/$ref",
            "local reference",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a", "b"]},
            "/required",
            "'b' is not among",
        ),
    ],
)
def test_schemas_without_strict_equivalent_are_explained(
    schema: dict[str, Any], path: str, words: str
) -> None:
    result = strictify(schema)
    assert result.schema is None and not result.ok
    assert any(v.path == path and words in v.message for v in result.blockers), result.blockers


def test_limits() -> None:
    deep: dict[str, Any] = {"type": "string"}
    for i in range(11):
        deep = {
            "type": "object",
            "properties": {f"l{i}": deep},
            "required": [f"l{i}"],
            "additionalProperties": False,
        }
    assert any("depth 11 exceeds 10" in v.message for v in check(deep))
    many = {
        "type": "object",
        "properties": {f"p{i}": {"type": "string"} for i in range(5001)},
        "required": [f"p{i}" for i in range(5001)],
        "additionalProperties": False,
    }
    assert [v.message for v in check(many)] == ["5001 properties exceed the limit of 5000"]
    enums = {
        "type": "object",
        "properties": {"e": {"enum": list(range(1001))}},
        "required": ["e"],
        "additionalProperties": False,
    }
    assert [v.message for v in check(enums)] == ["1001 enum values exceed the limit of 1000"]
    big = {
        "type": "object",
        "properties": {"e": {"enum": ["x" * 60 + str(i) for i in range(251)]}},
        "required": ["e"],
        "additionalProperties": False,
    }
    assert "enum of 251 values" in check(big)[0].message


def test_make_nullable_shapes() -> None:
    assert make_nullable({"type": "string"}) == {"type": ["string", "null"]}
    assert make_nullable({"type": ["string", "integer"]}) == {"type": ["string", "integer", "null"]}
    assert make_nullable({"anyOf": [{"type": "string"}]}) == {
        "anyOf": [{"type": "string"}, {"type": "null"}]
    }
    assert make_nullable({"enum": ["a"]}) == {"enum": ["a", None]}
    assert make_nullable({"$ref": "#/$defs/x", "description": "d"}) == {
        "anyOf": [{"$ref": "#/$defs/x"}, {"type": "null"}],
        "description": "d",
    }
    assert make_nullable({"const": "a", "type": "string"}) == {
        "anyOf": [{"const": "a", "type": "string"}, {"type": "null"}]
    }


def test_strictify_is_idempotent() -> None:
    once = strictify(NESTED).schema
    assert once is not None
    assert strictify(copy.deepcopy(once)).schema == once and is_strict(once)


_LEAF = st.sampled_from(
    [
        {"type": "string"},
        {"type": "integer", "minimum": 0},
        {"type": "number"},
        {"type": "boolean"},
        {"type": "string", "maxLength": 5, "default": "x"},
        {"enum": ["a", "b"]},
        {"type": ["string", "null"]},
    ]
)


def _object(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    props = st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), children, min_size=1, max_size=4)
    return props.flatmap(
        lambda p: st.builds(
            lambda req, closed: {
                "type": "object",
                "properties": p,
                "required": [k for k in p if k in req],
                **({"additionalProperties": False} if closed else {}),
            },
            st.sets(st.sampled_from(sorted(p))),
            st.booleans(),
        )
    )


_SCHEMA = st.recursive(
    _LEAF,
    lambda c: (
        _object(c)
        | st.builds(lambda i: {"type": "array", "items": i}, c)
        | st.builds(lambda a, b: {"oneOf": [a, b]}, c, c)
    ),
    max_leaves=8,
)


@settings(max_examples=40, deadline=None)
@given(_object(_SCHEMA))
def test_strictify_property(schema: dict[str, Any]) -> None:
    result = strictify(schema)
    assert result.schema is not None  # this grammar always has a strict equivalent
    Draft202012Validator.check_schema(result.schema)
    assert check(result.schema) == []
    assert strictify(result.schema).schema == result.schema


def _violations(schema: Any) -> list[tuple[str, str, str, bool]]:
    return [(v.path, v.rule, v.message, v.fixable) for v in check(schema)]


def test_a_boolean_sub_schema_allows_any_value() -> None:
    schema = {
        "type": "object",
        "properties": {"a": True},
        "required": ["a"],
        "additionalProperties": False,
    }
    assert _violations(schema) == [
        (
            "/properties/a",
            "any",
            "schema true allows any value; strict mode needs a typed schema",
            False,
        )
    ]
    assert strictify(schema).partial["properties"]["a"] is True


def test_unknown_and_vendor_keywords_are_removed() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string", "x-ui": "wide", "flavour": 1}},
        "required": ["a"],
        "additionalProperties": False,
    }
    assert _violations(schema) == [
        (
            "/properties/a/x-ui",
            "annotation",
            "unknown keyword 'x-ui' removed (ignored by validation)",
            True,
        ),
        (
            "/properties/a/flavour",
            "annotation",
            "unknown keyword 'flavour' removed (ignored by validation)",
            True,
        ),
    ]
    assert strictify(schema).schema == {**schema, "properties": {"a": {"type": "string"}}}


def test_an_unsupported_format_joins_the_narrowing_note_after_the_description() -> None:
    schema = {
        "type": "object",
        "properties": {
            "link": {"type": "string", "format": "uri", "maxLength": 9, "description": "A link."},
            "when": {"type": "string", "format": "date-time"},
            "bare": {"type": "string", "format": "uri"},
        },
        "required": ["link", "when", "bare"],
        "additionalProperties": False,
    }
    assert _violations(schema) == [
        (
            "/properties/link/maxLength",
            "narrowing",
            "'maxLength' is not supported; moved to the description and enforced by validation",
            True,
        ),
        (
            "/properties/link/format",
            "narrowing",
            "format 'uri' is not supported; moved to the description",
            True,
        ),
        (
            "/properties/bare/format",
            "narrowing",
            "format 'uri' is not supported; moved to the description",
            True,
        ),
    ]
    out = strictify(schema).schema
    assert out is not None
    assert out["properties"]["link"] == {
        "type": "string",
        "description": 'A link. Constraints: maxLength=9, format="uri".',
    }
    assert out["properties"]["when"] == {"type": "string", "format": "date-time"}
    assert out["properties"]["bare"] == {
        "type": "string",
        "description": 'Constraints: format="uri".',
    }


def test_a_ref_to_a_non_schema_with_siblings_is_kept_and_reported() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/flag", "type": "string"}},
        "required": ["a"],
        "additionalProperties": False,
        "$defs": {"flag": True},
    }
    assert _violations(schema) == [
        ("/properties/a", "ref-siblings", "$ref with sibling keywords is inlined", True),
        (
            "/$defs/flag",
            "any",
            "schema true allows any value; strict mode needs a typed schema",
            False,
        ),
    ]
    assert strictify(schema).partial["properties"]["a"] == {
        "$ref": "#/$defs/flag",
        "type": "string",
    }


def test_a_ref_with_only_a_description_is_not_inlined() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/A", "description": "d", "title": "t"}},
        "required": ["a"],
        "additionalProperties": False,
        "$defs": {"A": {"type": "string"}},
    }
    assert check(schema) == []


def test_inlining_a_ref_unites_both_required_lists() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {
                "$ref": "#/$defs/A",
                "properties": {"w": {"type": "string"}},
                "required": ["w", "v"],
            }
        },
        "required": ["a"],
        "additionalProperties": False,
        "$defs": {
            "A": {
                "type": "object",
                "properties": {"v": {"type": "integer"}},
                "required": ["v"],
                "additionalProperties": False,
            }
        },
    }
    out = strictify(schema).schema
    assert out is not None and out["properties"]["a"]["required"] == ["v", "w"]


@pytest.mark.parametrize("any_of", [[], "string"])
def test_an_empty_or_malformed_any_of_has_no_strict_equivalent(any_of: Any) -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"anyOf": any_of}},
        "required": ["a"],
        "additionalProperties": False,
    }
    assert _violations(schema) == [
        ("/properties/a/anyOf", "anyOf", "anyOf must be a non-empty list", False)
    ]


def test_an_allof_sharing_a_key_with_its_parent_is_not_merged() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string", "allOf": [{"type": "string"}]}},
        "required": ["a"],
        "additionalProperties": False,
    }
    assert _violations(schema) == [
        (
            "/properties/a/allOf",
            "unsupported",
            "'allOf' is not supported in strict mode and has no strict equivalent",
            False,
        )
    ]


def test_malformed_objects_and_arrays_are_explained() -> None:
    schema = {
        "type": "object",
        "properties": {
            "o": {"type": "object", "properties": ["x"]},
            "t": {"type": "array", "items": [{"type": "string"}]},
        },
        "required": ["o", "t"],
        "additionalProperties": False,
    }
    assert _violations(schema) == [
        ("/properties/o/properties", "properties", "properties must be an object", False),
        ("/properties/t/items", "items", "tuple-form items (a list) is not supported", False),
    ]


def test_const_values_definition_names_and_the_root_count_towards_the_limits() -> None:
    long = "x" * 60_001
    schema = {
        "type": "object",
        "properties": {"c": {"const": long}},
        "required": ["c"],
        "additionalProperties": False,
        "$defs": {long: {"type": "string"}},
    }
    assert _violations(schema) == [
        ("#", "limit", "120003 characters of names and values exceed 120000", False)
    ]
    assert _violations(["not", "a", "schema"]) == [
        ("#", "root", "the root must be an object schema", False)
    ]


def test_definitions_are_walked_as_top_level_objects() -> None:
    deep: dict[str, Any] = {"type": "string"}
    for i in range(10):
        deep = {
            "type": "object",
            "properties": {f"l{i}": deep},
            "required": [f"l{i}"],
            "additionalProperties": False,
        }
    root = {
        "type": "object",
        "properties": {"d": {"$ref": "#/definitions/deep"}},
        "required": ["d"],
        "additionalProperties": False,
        "definitions": {"deep": deep},
    }
    assert check(root) == []  # depth restarts at 1 under definitions
    nested = {**root, "definitions": {"deep": {**deep, "x-note": 1}}}
    assert [v.path for v in check(nested)] == ["/definitions/deep/x-note"]


def test_denull_ignores_what_is_no_schema() -> None:
    assert denull({"a": None}, True) == {"a": None}
    value = {"a": None}
    assert denull(value, {"type": "object", "properties": {"a": {"type": "string"}}}) == {}
    assert denull(value, {"allOf": [{"allOf": [{"properties": {"a": {"type": "string"}}}]}]}) == {}


def test_denull_stops_at_its_depth_limit() -> None:
    value: Any = {}
    schema: Any = {"type": "object"}
    for _ in range(70):
        value = {"a": value, "n": None}
        schema = {"type": "object", "properties": {"a": schema, "n": {"type": "string"}}}
    out = denull(value, schema)
    kept = []
    for level in range(70):
        if "n" in out:
            kept.append(level)
        out = out["a"]
    # objects nested 65 levels and deeper are left as they are
    assert kept == list(range(65, 70))


def test_denull_follows_refs_branches_and_all_of() -> None:
    root = {
        "$defs": {
            "obj": {"type": "object", "properties": {"a": {"type": "string"}}},
            "flag": True,
            "maybe": {"type": ["string", "null"]},
        },
        "type": "object",
        "properties": {
            "r": {"$ref": "#/$defs/obj"},
            "bad": {"$ref": "#/$defs/flag", "properties": {"a": {"type": "string"}}},
            "missing": {"$ref": "#/$defs/none"},
            "one": {"oneOf": [{"type": "integer"}, {"$ref": "#/$defs/obj"}]},
            "num": {"anyOf": [{"type": "number"}, {"type": "string"}]},
            "int": {"anyOf": [True, {"type": "number"}]},
            "nomatch": {"anyOf": [{"type": "string"}], "properties": {"a": {"type": "string"}}},
            "untyped": {"anyOf": [{"properties": {"a": {"type": "string"}}}]},
            "all": {
                "allOf": [
                    {"properties": {"a": {"type": "string"}}},
                    {"properties": {"b": {"type": "string"}}},
                ]
            },
            "list": {"type": "array", "items": {"$ref": "#/$defs/obj"}},
            "tuple": {"type": "array", "items": [{"$ref": "#/$defs/obj"}]},
            "nullable": {"type": ["string", "null"]},
            "maybe": {"$ref": "#/$defs/maybe"},
            "req": {"type": "string"},
        },
        "required": ["req"],
    }
    value = {
        "r": {"a": None, "z": None},
        "bad": {"a": None},
        "missing": {"a": None},
        "one": {"a": None},
        "num": 1.5,
        "int": 3,
        "nomatch": {"a": None},
        "untyped": {"a": None},
        "all": {"a": None, "b": None, "c": None},
        "list": [{"a": None}, {"a": "x"}],
        "tuple": [{"a": None}],
        "nullable": None,
        "maybe": None,
        "req": None,
        "extra": None,
    }
    assert denull(value, root) == {
        "r": {"z": None},
        "bad": {},
        "missing": {"a": None},
        "one": {},
        "num": 1.5,
        "int": 3,
        "nomatch": {},
        "untyped": {},
        "all": {"c": None},
        "list": [{}, {"a": "x"}],
        "tuple": [{"a": None}],
        "nullable": None,
        "maybe": None,
        "req": None,
        "extra": None,
    }


def test_denull_without_a_dict_root_finds_no_ref_that_admits_null() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"$ref": "#/x"}, "b": {"type": ["string", "null"]}},
    }
    assert denull({"a": None, "b": None}, schema, root=[]) == {"b": None}
