"""Every component schema of the spec has a same-named model or type alias;
the package stands alone."""

from __future__ import annotations

import ast
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from orgate import protocol
from orgate.protocol import param_from_loc
from tests.support.spec import schema_names, spec

ENUMS = [n for n, s in spec()["components"]["schemas"].items() if "enum" in s]
# The response object is the builder's dict, named by a type alias (protocol/response.py); its
# shape is held to the schema by tests/engine/test_response_shape.py.
BUILT_AS_DICT = {"ResponseResource"}


def test_the_spec_has_108_schemas() -> None:
    assert len(schema_names()) == 108


@pytest.mark.parametrize("name", schema_names())
def test_schema_has_a_same_named_export(name: str) -> None:
    assert name in protocol.__all__
    obj = getattr(protocol, name)
    schema = spec()["components"]["schemas"][name]
    if name in BUILT_AS_DICT:
        assert typing.get_origin(obj) is dict, name
    elif "properties" in schema or "allOf" in schema:
        assert isinstance(obj, type) and issubclass(obj, BaseModel), name
        assert obj.__name__ == name


@pytest.mark.parametrize("name", ENUMS)
def test_enum_aliases_list_the_spec_values(name: str) -> None:
    values = spec()["components"]["schemas"][name]["enum"]
    assert list(typing.get_args(getattr(protocol, name))) == values


def _properties(schema: dict[str, Any]) -> set[str]:
    """A schema's property names, with those of its ``allOf`` parts (``$ref``s followed)."""
    names = set(schema.get("properties", ()))
    for part in schema.get("allOf", ()):
        ref = part.get("$ref")
        names |= _properties(
            spec()["components"]["schemas"][ref.rsplit("/", 1)[1]] if ref else part
        )
    return names


def test_request_models_cover_every_spec_property() -> None:
    checked = []
    for name in schema_names():
        obj = getattr(protocol, name)
        props = _properties(spec()["components"]["schemas"][name])
        if not props or not (isinstance(obj, type) and issubclass(obj, BaseModel)):
            continue
        names = {f.alias or k for k, f in obj.model_fields.items()}
        assert props <= names, (name, props - names)
        checked.append(name)
    assert "WebSocketResponseCreateEvent" in checked  # an allOf schema: its parts' properties count


def test_protocol_imports_nothing_else_of_orgate() -> None:
    root = Path(protocol.__file__).parent
    for path in root.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            mods: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module:
                mods = [node.module]
            elif isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            for mod in mods:
                assert not mod.startswith("orgate.") or mod.startswith("orgate.protocol"), (
                    path.name,
                    mod,
                )


@pytest.mark.parametrize(
    ("loc", "param"),
    [
        (
            (
                "input",
                "Array",
                2,
                "UserMessageItemParam",
                "content",
                "Array",
                0,
                "UnknownUserContentType",
                "type",
            ),
            "input[2].content[0].type",
        ),
        (("tools", 0, "FunctionToolParam", "name"), "tools[0].name"),
        (("tool_choice", "ToolChoiceValueEnum"), "tool_choice"),
        (("text", "format", "JsonSchemaResponseFormatParam", "schema"), "text.format.schema"),
        (("metadata", "k"), "metadata.k"),
        ((), None),
    ],
)
def test_param_from_loc(loc: tuple[int | str, ...], param: str | None) -> None:
    assert param_from_loc(loc) == param
