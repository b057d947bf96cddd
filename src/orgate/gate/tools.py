"""The tool catalogue the gate checks calls against, and ``load_tools``.

``load_tools(obj)`` accepts every shape tools arrive in:

* a request's / response's ``tools`` list: ``[{"type": "function", "name", "parameters"}]``
  (non-function tools such as ``web_search`` are skipped — they are not called by name);
* an OpenAI tool file: the same list, or Chat-Completions style
  ``[{"type": "function", "function": {"name", "parameters"}}]``;
* an object holding such a list under ``tools`` (a request body, a stored response);
* a single function tool object;
* a plain map ``{name: schema}``.

A tool whose ``parameters`` is ``null`` or absent accepts any JSON object
(``{"type": "object"}``). Every schema is compiled once on load (through the
content-keyed cache), so an invalid schema is reported here, as ``ToolsError``
with a ``param`` path such as ``tools[2].parameters``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from orgate.gate.schemas import CompiledSchema, SchemaCache, SchemaProblem, compile_schema
from orgate.gate.verdict import SchemaError

#: The schema used when a tool's ``parameters`` is null: any JSON object.
ANY_OBJECT: dict[str, Any] = {"type": "object"}


class ToolsError(ValueError):
    """The tools themselves are malformed (a caller's or a file's mistake)."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(f"{param}: {message}" if param else message)
        self.message = message
        self.param = param


@dataclass(frozen=True, slots=True)
class Tool:
    """One function tool with its compiled argument schema."""

    name: str
    parameters: Any
    schema: CompiledSchema

    def validate(self, arguments: Any) -> tuple[SchemaError, ...]:
        return self.schema.validate(arguments)


class ToolCatalog(Mapping[str, Tool]):
    """An immutable ``{name: Tool}`` mapping. Build it with ``load_tools``."""

    __slots__ = ("_tools",)

    def __init__(self, tools: Mapping[str, Tool]) -> None:
        self._tools: dict[str, Tool] = dict(tools)

    def __getitem__(self, name: str) -> Tool:
        return self._tools[name]

    def get(self, name: str, default: Any = None) -> Any:  # fast path, no KeyError
        return self._tools.get(name, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return f"ToolCatalog({sorted(self._tools)!r})"


def _is_schema(value: Any) -> bool:
    return value is None or isinstance(value, dict | bool)


def _make(name: Any, params: Any, param: str, cache: SchemaCache | None) -> Tool:
    if not isinstance(name, str) or not name:
        raise ToolsError("a function tool needs a non-empty string name", param)
    if params is None:
        params = ANY_OBJECT
    elif not isinstance(params, dict | bool):
        raise ToolsError(
            "parameters must be a JSON Schema (object or boolean) or null", f"{param}.parameters"
        )
    try:
        compiled = compile_schema(params, cache)
    except SchemaProblem as exc:
        raise ToolsError(
            f"invalid JSON Schema for tool {name!r}: {exc}", f"{param}.parameters"
        ) from None
    return Tool(name, params, compiled)


def _from_entry(entry: Any, param: str, cache: SchemaCache | None) -> Tool | None:
    if not isinstance(entry, dict):
        raise ToolsError("a tool must be an object", param)
    typ = entry.get("type", "function")
    if typ != "function":
        return None  # built-in / provider tools are not called by name through function_call
    fn = entry.get("function")
    if isinstance(fn, dict) and "name" not in entry:  # Chat-Completions style
        return _make(fn.get("name"), fn.get("parameters"), f"{param}.function", cache)
    return _make(entry.get("name"), entry.get("parameters"), param, cache)


def _from_list(entries: list[Any], prefix: str, cache: SchemaCache | None) -> ToolCatalog:
    tools: dict[str, Tool] = {}
    for i, entry in enumerate(entries):
        param = f"{prefix}[{i}]"
        tool = _from_entry(entry, param, cache)
        if tool is None:
            continue
        if tool.name in tools:
            raise ToolsError(f"duplicate tool name {tool.name!r}", param)
        tools[tool.name] = tool
    return ToolCatalog(tools)


def load_tools(obj: Any, cache: SchemaCache | None = None) -> ToolCatalog:
    """Build a ``ToolCatalog`` from any supported shape (see the module doc).

    Raises ``ToolsError`` when the shape is not recognised or a schema is invalid.
    """
    if isinstance(obj, ToolCatalog):
        return obj
    if isinstance(obj, list):
        return _from_list(obj, "tools", cache)
    if isinstance(obj, dict):
        inner = obj.get("tools")
        if isinstance(inner, list):
            return _from_list(inner, "tools", cache)
        if obj.get("type") == "function" or (
            isinstance(obj.get("name"), str) and "parameters" in obj
        ):
            return _from_list([obj], "tools", cache)
        tools: dict[str, Tool] = {}
        for name, schema in obj.items():
            if not _is_schema(schema):
                raise ToolsError(
                    "expected a tools list, a tool object or a {name: schema} map", f"tools.{name}"
                )
            tools[name] = _make(name, schema, f"tools.{name}", cache)
        return ToolCatalog(tools)
    raise ToolsError(f"expected a tools list or a {{name: schema}} map, not {type(obj).__name__}")
