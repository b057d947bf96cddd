"""Bounded schema work: the static bounds, linear-time patterns, and each consumer's own budget.

Every time bound here is generous (seconds) against work that took minutes or
gigabytes without the bounds: the tests fail on the old behaviour, never on a slow machine.
"""

from __future__ import annotations

import time

import orjson
import pytest

from orgate.config import LimitSettings
from orgate.gate import SchemaCache, SchemaProblem
from orgate.gate.bounds import SchemaBounds, SchemaTooComplex, check_bounds, dotted
from orgate.gate.patterns import bounded, search, valid
from orgate.protocol.errors import ApiError
from orgate.providers.schema_example import example_for
from orgate.server.body import check_request_limits
from orgate.structured.layers import ValidatorCache, check_output
from orgate.structured.strict import strictify

EVIL = "^(a+)+$"
EVIL_TEXT = "a" * 30 + "!"
#: Seconds. Far above what bounded work takes (a third of a second at most, idle: a machine 30
#: times slower passes), far below what unbounded work took (minutes, or never ending).
SLOW = 10.0


def _obj(**props: dict) -> dict:
    return {"type": "object", "properties": props, "required": list(props)}


def _refused(schema: dict, bounds: SchemaBounds | None = None) -> SchemaTooComplex:
    with pytest.raises(SchemaTooComplex) as info:
        check_bounds(schema, bounds or SchemaBounds())
    return info.value


# --- static bounds -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("keyword", "value", "setting"),
    [
        ("minLength", 1_000_000_000, "max_schema_min_length"),
        ("minLength", 1e9, "max_schema_min_length"),
        ("minItems", 200_000, "max_schema_min_items"),
        ("minItems", 1_000_000_000, "max_schema_min_items"),
        ("minContains", 200_000, "max_schema_min_items"),
        ("minProperties", 1_000_000, "max_schema_min_properties"),
    ],
)
def test_a_counting_keyword_past_its_limit_is_named_with_its_path(
    keyword: str, value: float, setting: str
) -> None:
    exc = _refused(_obj(x={keyword: value}))
    assert exc.path == ("properties", "x", keyword)
    assert exc.keyword == keyword
    assert f"limits.{setting}" in str(exc)
    assert dotted("tools[0].parameters", exc.path) == f"tools[0].parameters.properties.x.{keyword}"


def test_values_at_the_limit_pass() -> None:
    b = SchemaBounds()
    check_bounds(
        _obj(
            s={"minLength": b.max_min_length},
            a={"minItems": b.max_min_items},
            o={"minProperties": b.max_min_properties},
        ),
        b,
    )


def test_node_count_depth_and_pattern_length() -> None:
    assert "limits.max_schema_nodes" in str(
        _refused({"enum": list(range(200))}, SchemaBounds(max_nodes=100))
    )
    deep: dict = {"type": "string"}
    for _ in range(20):
        deep = {"type": "array", "items": deep}
    assert "limits.max_schema_depth" in str(_refused(deep, SchemaBounds(max_depth=16)))
    long = _refused(_obj(x={"pattern": "a" * 2000}))
    assert long.path == (
        "properties",
        "x",
        "pattern",
    ) and "limits.max_schema_pattern_length" in str(long)
    named = _refused({"patternProperties": {"b" * 2000: {}}})
    assert named.path[:1] == ("patternProperties",)


def test_data_under_enum_const_default_examples_is_not_schema() -> None:
    data = {"minItems": 10**9, "minLength": 10**9, "pattern": "a" * 5000}
    check_bounds(
        {
            "enum": [data],
            "const": data,
            "default": data,
            "examples": [data],
            "properties": {"minItems": {"type": "string"}},
        },
        SchemaBounds(),
    )


def test_odd_keys_are_quoted_in_the_path() -> None:
    exc = _refused({"properties": {"a b": {"minItems": 10**9}}})
    assert dotted("text.format.schema", exc.path) == "text.format.schema.properties['a b'].minItems"


# --- the request edge ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (
            {
                "tools": [
                    {
                        "type": "function",
                        "name": "f",
                        "parameters": _obj(x={"type": "string", "minLength": 10**9}),
                    }
                ]
            },
            "tools[0].parameters.properties.x.minLength",
        ),
        (
            {
                "tools": [
                    {
                        "type": "function",
                        "name": "f",
                        "parameters": _obj(x={"type": "array", "minItems": 200_000}),
                    }
                ]
            },
            "tools[0].parameters.properties.x.minItems",
        ),
        (
            {
                "text": {
                    "format": {
                        "type": "json_schema",
                        "name": "o",
                        "schema": _obj(x={"type": "array", "minItems": 10**9}),
                    }
                }
            },
            "text.format.schema.properties.x.minItems",
        ),
        (
            {
                "text": {
                    "format": {
                        "type": "json_schema",
                        "name": "o",
                        "schema": _obj(x={"type": "string", "minLength": 10**9}),
                    }
                }
            },
            "text.format.schema.properties.x.minLength",
        ),
    ],
)
def test_the_edge_answers_400_naming_keyword_and_limit(body: dict, param: str) -> None:
    with pytest.raises(ApiError) as info:
        check_request_limits({"model": "m", "input": "hi", **body}, LimitSettings())
    err = info.value
    assert err.status == 400
    assert err.code == "schema_too_complex"
    assert err.param == param
    assert param in err.message and "limits.max_schema_" in err.message


def test_the_edge_reads_the_configured_limits() -> None:
    body = {
        "tools": [
            {
                "type": "function",
                "name": "f",
                "parameters": _obj(x={"type": "array", "minItems": 50}),
            }
        ]
    }
    check_request_limits(body, LimitSettings())
    with pytest.raises(ApiError, match=r"limit of 10 \(limits.max_schema_min_items\)"):
        check_request_limits(body, LimitSettings(max_schema_min_items=10))


# --- patterns ------------------------------------------------------------------------------


def test_pattern_search_is_linear_on_the_classic_redos() -> None:
    start = time.perf_counter()
    assert not search(EVIL, EVIL_TEXT)
    assert not search(EVIL, "a" * 100_000 + "!")
    assert search(EVIL, "a" * 30)
    assert time.perf_counter() - start < SLOW


def test_lookaround_and_backreferences_are_not_patterns() -> None:
    assert not valid(r"^(a)\1$") and not valid(r"^(?=a)a$")
    assert not search(r"^(a)\1$", "aa")  # an invalid pattern matches nothing
    with pytest.raises(SchemaProblem, match="lookaround, backreferences"):
        SchemaCache().compile({"type": "string", "pattern": r"^(?=.*\d).+$"})


def test_compiled_schemas_and_the_python_backend_match_in_linear_time() -> None:
    schema = {"type": "string", "pattern": EVIL}
    for backend in ("rust", "python"):
        compiled = SchemaCache(backend=backend).compile(schema)
        start = time.perf_counter()
        assert compiled.validate(EVIL_TEXT)
        assert time.perf_counter() - start < SLOW


def test_the_bounded_python_validator_words_pattern_errors() -> None:
    from jsonschema import Draft202012Validator

    cls = bounded(Draft202012Validator)
    schema = {
        "type": "object",
        "properties": {"x": {"pattern": EVIL}},
        "patternProperties": {"^(b+)+$": {"type": "integer"}},
        "additionalProperties": False,
    }
    start = time.perf_counter()
    errors = list(cls(schema).iter_errors({"x": EVIL_TEXT, "b" * 30 + "!": 1, "bb": "no"}))
    assert time.perf_counter() - start < SLOW
    messages = sorted(e.message for e in errors)
    assert any("does not match" in m and EVIL in m for m in messages)
    assert any("b" * 30 + "!" in m and "regexes" in m for m in messages)
    assert any("is not of type 'integer'" in m for m in messages)


def test_the_safety_nets_recheck_of_an_output_is_linear() -> None:
    schema = ValidatorCache().get(_obj(x={"type": "string", "pattern": EVIL}))
    start = time.perf_counter()
    failure = check_output(orjson.dumps({"x": EVIL_TEXT}).decode(), schema=schema)
    assert time.perf_counter() - start < SLOW
    assert failure.stage == "schema" and "does not match the pattern" in failure.errors[0]


# --- the built-in model's example generator ------------------------------------------------


def _quick(schema: dict, text: str = "hi") -> object:
    start = time.perf_counter()
    value = example_for(schema, text)
    assert time.perf_counter() - start < SLOW
    return value


@pytest.mark.parametrize(
    "sub",
    [
        {"type": "string", "minLength": 1_000_000_000},
        {"type": "array", "minItems": 1_000_000_000},
        {"type": "array", "minItems": 200_000},
        {"type": "array", "minItems": 200_000, "uniqueItems": True, "items": {"type": "integer"}},
        {"type": "object", "minProperties": 1_000_000},
        {"type": "string", "pattern": "^((a{1000}){1000}){1000}$"},
    ],
)
def test_the_generator_never_builds_a_giant_value(sub: dict) -> None:
    value = _quick(_obj(x=sub))
    assert len(str(value)) < 1_000_000


def test_the_generator_matches_patterns_in_linear_time() -> None:
    value = _quick(_obj(x={"type": "string", "pattern": EVIL}), EVIL_TEXT)
    assert isinstance(value, dict) and search(EVIL, value["x"])


def test_the_generator_has_a_budget_for_ref_trees() -> None:
    defs = {
        f"a{i}": _obj(x={"$ref": f"#/$defs/a{i + 1}"}, y={"$ref": f"#/$defs/a{i + 1}"})
        for i in range(40)
    }
    _quick({"$defs": {**defs, "a40": {"type": "string"}}, "$ref": "#/$defs/a0"})


def test_strictify_has_a_budget_for_inlined_refs() -> None:
    n = 30
    defs = {
        f"a{i}": {
            "type": "object",
            "properties": {k: {"$ref": f"#/$defs/a{i + 1}", "type": "object"} for k in "xy"},
            "required": ["x", "y"],
        }
        for i in range(n)
    }
    schema = {
        "type": "object",
        "$defs": {**defs, f"a{n}": {"type": "object"}},
        "properties": {"r": {"$ref": "#/$defs/a0", "type": "object"}},
    }
    start = time.perf_counter()
    result = strictify(schema)
    assert time.perf_counter() - start < SLOW
    assert result.schema is None and any("sub-schemas" in str(v) for v in result.blockers)


def test_unevaluated_properties_match_pattern_properties_in_linear_time() -> None:
    from jsonschema import Draft202012Validator

    cls = bounded(Draft202012Validator)
    schema = {
        "allOf": [{"properties": {"a": {}}}, {"patternProperties": {EVIL: {"type": "integer"}}}],
        "$defs": {"d": {"patternProperties": {"^z": {}}}},
        "$ref": "#/$defs/d",
        "unevaluatedProperties": False,
    }
    start = time.perf_counter()
    errors = list(cls(schema).iter_errors({"a": 1, "aaa": 2, "zed": 3, EVIL_TEXT: 4}))
    assert time.perf_counter() - start < SLOW
    assert [e.message for e in errors] == [
        f"Unevaluated properties are not allowed ({EVIL_TEXT!r} was unexpected)"
    ]
    assert cls(schema).is_valid({"a": 1, "aaa": 2, "zed": 3})
    assert not cls(schema).is_valid({"aaa": "x"})


def test_the_ref_cycle_check_follows_each_reference_chain_once() -> None:
    from orgate.engine.request_body import _ref_cycle

    n = 4000
    chain = {f"a{i}": {"$ref": f"#/$defs/a{i + 1}"} for i in range(n)}
    schema = {
        "type": "object",
        "$defs": {**chain, f"a{n}": {"type": "string"}},
        "properties": {"x": {"$ref": "#/$defs/a0"}},
    }
    start = time.perf_counter()
    assert not _ref_cycle(schema)
    schema["$defs"][f"a{n}"] = {"$ref": "#/$defs/a0"}
    assert _ref_cycle(schema)
    assert time.perf_counter() - start < SLOW


def _fanout(levels: int) -> dict:
    defs = {
        f"a{i}": {"anyOf": [{"$ref": f"#/$defs/a{i + 1}"}, {"$ref": f"#/$defs/a{i + 1}"}]}
        for i in range(levels)
    }
    return {"$defs": {**defs, f"a{levels}": {"type": "integer"}}, "$ref": "#/$defs/a0"}


def test_ref_fan_out_past_the_expansion_limit_is_refused() -> None:
    check_bounds(_fanout(8), SchemaBounds())
    exc = _refused(_fanout(40))
    assert exc.keyword == "$ref" and "limits.max_schema_expansion" in str(exc)
    assert exc.path[:1] == ("$defs",)
    anchors = {
        f"a{i}": {"$anchor": f"x{i}", "anyOf": [{"$ref": f"#x{i + 1}"}, {"$ref": f"#x{i + 1}"}]}
        for i in range(40)
    }
    assert (
        _refused({"$defs": {**anchors, "a40": {"$anchor": "x40"}}, "$ref": "#x0"}).keyword == "$ref"
    )


def test_definitions_count_only_where_referenced_and_recursion_counts_once() -> None:
    n = 4000
    chain = {f"a{i}": {"$ref": f"#/$defs/a{i + 1}"} for i in range(n)}
    check_bounds(
        {
            "$defs": {**chain, f"a{n}": {"type": "string"}},
            "properties": {"x": {"$ref": "#/$defs/a0"}},
        },
        SchemaBounds(),
    )
    tree = {
        "$defs": {
            "node": _obj(
                name={"type": "string"},
                children={"type": "array", "items": {"$ref": "#/$defs/node"}},
            )
        },
        "$ref": "#/$defs/node",
    }
    check_bounds(tree, SchemaBounds(max_expansion=1000))


def test_unique_items_of_thousands_of_objects_are_checked_quickly() -> None:
    schema = ValidatorCache().get(
        _obj(
            x={"type": "array", "uniqueItems": True, "items": {"type": "object"}},
            y={"type": "integer"},
        )
    )
    items = [{"a": i} for i in range(3000)]
    start = time.perf_counter()
    wrong_type = check_output(orjson.dumps({"x": items, "y": "no"}).decode(), schema=schema)
    duplicate = check_output(
        orjson.dumps({"x": [*items, {"a": 1.0}], "y": 1}).decode(), schema=schema
    )
    assert time.perf_counter() - start < SLOW
    assert wrong_type.errors == ('y: expected integer, got string "no"',)
    assert "duplicates" in duplicate.errors[0]


def test_a_pattern_that_compiles_too_big_is_not_a_pattern() -> None:
    assert not valid(r"^(\w{1,40}){1,40}$")
    assert valid(r"^\w{1,255}$") and valid(r"^[\p{L}\p{N}]{1000}$")
    with pytest.raises(SchemaProblem):
        SchemaCache().compile({"type": "string", "pattern": r"^(\w{1,40}){1,40}$"})


def test_the_chat_endpoint_bounds_its_schemas_by_their_chat_names() -> None:
    from orgate.legacy_chat.endpoint import _check_schemas

    tools = {
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "f",
                    "parameters": _obj(x={"type": "array", "minItems": 10**9}),
                },
            }
        ]
    }
    with pytest.raises(ApiError) as info:
        _check_schemas(tools, LimitSettings())
    assert info.value.param == "tools[0].function.parameters.properties.x.minItems"
    fmt = {
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "o", "schema": _obj(x={"type": "string", "minLength": 10**9})},
        }
    }
    with pytest.raises(ApiError) as info:
        _check_schemas(fmt, LimitSettings())
    assert info.value.param == "response_format.json_schema.schema.properties.x.minLength"


def test_resolving_a_review_entry_checks_its_schema_in_linear_time() -> None:
    from orgate.structured.review import ReviewItem, schema_errors

    schema = _obj(x={"type": "string", "pattern": EVIL})
    item = ReviewItem("r", 0.0, "pending", "m", "out", "json_schema", "schema", [], schema, {}, [])
    start = time.perf_counter()
    errors = schema_errors(item, {"x": EVIL_TEXT})
    assert time.perf_counter() - start < SLOW
    assert errors and "does not match the pattern" in errors[0]


def test_properties_named_like_data_keywords_are_still_schemas() -> None:
    for name in ("default", "enum", "const", "examples", "$defs"):
        exc = _refused(
            {"type": "object", "properties": {name: {"type": "array", "minItems": 10**9}}}
        )
        assert exc.path == ("properties", name, "minItems")
        fan = _fanout(40)
        assert (
            _refused({"$defs": fan["$defs"], "properties": {name: {"$ref": "#/$defs/a0"}}}).keyword
            == "$ref"
        )
    check_bounds(True, SchemaBounds())
