"""Schemas hostile as a whole (each keyword within its bound, their product not), the requests
that carry them and what a fake upstream answers to them: shared by
``test_hostile_schema_costs.py`` and ``bench/hostile_schemas.py``.

Each shape says what must come of it: a 400 with a code and the start of its ``param``, or an
answer (a 200, or the safety net's own 500 ``model_error`` after its retries) no longer than
the built-in model's output cap allows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from tests.fakes.openai_chat_upstream import Script

#: The largest answer body the built-in model can give (8192 tokens of at most 32 characters,
#: the JSON escaping and the response envelope around them).
ANSWER_BOUND = 8192 * 32 * 2 + 64 * 1024


def obj(**props: Any) -> dict[str, Any]:
    """An object schema whose every property is required."""
    return {"type": "object", "properties": props, "required": list(props)}


def optional(**props: Any) -> dict[str, Any]:
    """An object schema whose properties are all optional."""
    return {"type": "object", "properties": props}


def fmt(schema: Any, model: str = "orgate/echo", name: str = "out") -> dict[str, Any]:
    return {
        "model": model,
        "input": "hostile",
        "text": {"format": {"type": "json_schema", "name": name, "schema": schema}},
    }


def tool(parameters: Any, model: str = "orgate/echo", name: str = "f") -> dict[str, Any]:
    return {
        "model": model,
        "input": "hostile",
        "tools": [{"type": "function", "name": name, "parameters": parameters}],
        "tool_choice": "required",
    }


def doubled_refs(levels: int) -> dict[str, Any]:
    """A ``$ref`` doubled ``levels`` times: each definition holds two references to the next."""
    defs = {
        f"a{i}": obj(x={"$ref": f"#/$defs/a{i + 1}"}, y={"$ref": f"#/$defs/a{i + 1}"})
        for i in range(levels)
    }
    return {"$defs": {**defs, f"a{levels}": {"type": "string"}}, "$ref": "#/$defs/a0"}


def doubled_branches(levels: int, leaf: dict[str, Any]) -> dict[str, Any]:
    """An array whose every item is checked against 2^levels paths of nested ``anyOf``s."""
    defs = {
        f"a{i}": {
            "anyOf": [
                {"$ref": f"#/$defs/a{i + 1}", "minimum": -1 - i},
                {"$ref": f"#/$defs/a{i + 1}", "maximum": 100 + i},
            ]
        }
        for i in range(levels)
    }
    return obj(x={"type": "array", "items": {"$ref": "#/$defs/a0"}}) | {
        "$defs": {**defs, f"a{levels}": leaf}
    }


def chained_conjunctions(levels: int) -> dict[str, Any]:
    """``levels`` definitions, each an ``allOf`` of the next and three required members: a
    schema of a quarter of a megabyte whose every level is checked at the same place."""
    defs = {
        f"a{i}": {
            "type": "object",
            "allOf": [{"$ref": f"#/$defs/a{i + 1}"}],
            "properties": {f"k{i}_{j}": {"type": "integer"} for j in range(3)},
            "required": [f"k{i}_{j}" for j in range(3)],
        }
        for i in range(levels)
    }
    return {"$defs": {**defs, f"a{levels}": {"type": "object"}}, "$ref": "#/$defs/a0"}


GIGABYTE = {"type": "array", "minItems": 10_000, "items": {"type": "string", "minLength": 100_000}}
MANY_PROPERTIES = {
    "type": "array",
    "minItems": 10_000,
    "items": {"type": "object", "minProperties": 1_000},
}
UNIQUE = {"type": "array", "minItems": 10_000, "uniqueItems": True, "items": {"type": "object"}}


@dataclass(frozen=True)
class Shape:
    """One hostile request and what must come of it."""

    body: dict[str, Any]
    #: (status, code, start of param) of the 400 it must get; None: an answer, bounded
    refused: tuple[int, str, str] | None = None


SHAPES: dict[str, Shape] = {
    # the built-in model generates from these
    "gigabyte_optional": Shape(fmt(optional(a=GIGABYTE))),
    "gigabyte_required": Shape(
        fmt(obj(a=GIGABYTE)),
        (400, "schema_too_complex", "text.format.schema.properties.a.minItems"),
    ),
    "gigabyte_tool": Shape(tool(optional(a=GIGABYTE))),
    "many_properties_optional": Shape(fmt(optional(x=MANY_PROPERTIES))),
    "many_properties_required": Shape(
        fmt(obj(x=MANY_PROPERTIES)),
        (400, "schema_too_complex", "text.format.schema.properties.x.minItems"),
    ),
    "unique_objects": Shape(fmt(obj(x=UNIQUE))),
    "output_cap": Shape(
        fmt(
            obj(
                a={"type": "array", "minItems": 9_000, "items": {"type": "string", "minLength": 30}}
            )
        ),
        (400, "schema_exceeds_output", "text.format.schema.properties.a.minItems"),
    ),
    "ref_doubled_16": Shape(
        fmt(doubled_refs(16)), (400, "schema_too_complex", "text.format.schema")
    ),
    "branches_doubled_16": Shape(
        tool(doubled_branches(16, {"type": "integer"})),
        (400, "schema_too_complex", "tools[0].parameters"),
    ),
    "large_chained_conjunctions": Shape(
        fmt(chained_conjunctions(1_200)),
        (400, "schema_too_complex", "text.format.schema"),
    ),
    # a fake upstream answers these; orgate checks the answers
    "unique_objects_upstream": Shape(
        fmt(
            obj(
                x={"type": "array", "uniqueItems": True, "items": {"type": "object"}},
                y={"type": "integer"},
            ),
            model="fake-chat",
            name="unique",
        )
    ),
    "branches_upstream": Shape(
        fmt(doubled_branches(8, {"type": "string"}), model="fake-chat", name="branches")
    ),
    "branches_tool_upstream": Shape(
        tool(doubled_branches(8, {"type": "string"}), model="fake-chat", name="branches")
    ),
}


def upstream_answer(body: dict[str, Any]) -> Script:
    """What the fake upstream answers: 10,000 distinct objects and a wrong type for ``unique``;
    20,000 values none of the nested branches accepts for ``branches`` (as text or as a tool
    call's arguments); an empty object otherwise."""
    fmt_name = ((body.get("response_format") or {}).get("json_schema") or {}).get("name")
    tools = [t.get("function", {}).get("name") for t in body.get("tools") or []]
    if fmt_name == "unique":
        return Script(content=_json({"x": [{"a": i} for i in range(10_000)], "y": "no"}))
    wrong = _json({"x": [1] * 20_000})
    if fmt_name == "branches":
        return Script(content=wrong)
    if "branches" in tools:
        return Script(content=None, tool_calls=[("branches", wrong)], one_chunk=True)
    return Script(content="{}")


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()
