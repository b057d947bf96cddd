"""Static bounds on a client's JSON Schema: what one schema may ask of the gateway.

A schema drives work: validators walk it, the built-in model generates values
from it (``minLength: 1e9`` would be a gigabyte string), strictify rewrites it.
``check_bounds`` walks a schema once (O(its size)) and refuses the first thing
past a limit: its node count, its nesting depth, the keywords that size a
generated value (``minLength``, ``minItems``, ``minContains``,
``minProperties``) and the length of a ``pattern`` (or a ``patternProperties``
name). Values under ``enum``, ``const``, ``default`` and ``examples`` are data,
not schema: they count as nodes but their keys are not keywords.

Patterns themselves are matched by a linear-time engine (``orgate.gate.patterns``);
work that expands ``$ref`` (example generation, strictify) carries its own budget.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

#: Keywords whose value is data, not a subschema.
_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})

_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$-]*\Z")


@dataclass(frozen=True, slots=True)
class SchemaBounds:
    """The limits one schema must stay within (``[limits]`` ``max_schema_*`` in the configuration)."""

    max_nodes: int = 20_000
    max_depth: int = 32
    max_min_length: int = 100_000
    max_min_items: int = 10_000
    max_min_properties: int = 1_000
    max_pattern_length: int = 1_000

    def limit_of(self, keyword: str) -> tuple[int, str] | None:
        """(limit, setting name) of a counting keyword, or None when the keyword has none."""
        if keyword == "minLength":
            return self.max_min_length, "max_schema_min_length"
        if keyword in ("minItems", "minContains"):
            return self.max_min_items, "max_schema_min_items"
        if keyword == "minProperties":
            return self.max_min_properties, "max_schema_min_properties"
        return None


class SchemaTooComplex(ValueError):
    """A schema past one of its bounds: where (``path``, from the schema's root), what, which limit."""

    def __init__(self, path: tuple[str | int, ...], keyword: str, detail: str, limit: int, setting: str) -> None:
        self.path = path
        self.keyword = keyword
        self.limit = limit
        self.setting = setting
        super().__init__(f"{detail}, more than the limit of {limit} (limits.{setting})")


def dotted(prefix: str, path: tuple[str | int, ...]) -> str:
    """``("properties", "x", "minItems")`` under ``tools[0].parameters`` → ``tools[0].parameters.properties.x.minItems``."""
    out = [prefix]
    for part in path:
        if isinstance(part, int):
            out.append(f"[{part}]")
        elif _IDENT.match(part):
            out.append(f".{part}")
        else:
            out.append("['" + part.replace("\\", "\\\\").replace("'", "\\'") + "']")
    return "".join(out)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


#: The keywords ``_check_keyword`` looks at: a set intersection per object keeps the pass cheap.
_WATCHED = frozenset({"minLength", "minItems", "minContains", "minProperties", "pattern", "patternProperties"})


def check_bounds(schema: Any, bounds: SchemaBounds) -> None:
    """Raise ``SchemaTooComplex`` for the first bound ``schema`` exceeds; one pass over it.

    The pass keeps no paths (that would cost more than the walk): a refusal finds its
    path afterwards, by identity (``_path_to``).
    """
    nodes = 0
    max_nodes, max_depth = bounds.max_nodes, bounds.max_depth
    stack: list[tuple[Any, int, bool]] = [(schema, 1, False)]  # (container, depth, is data)
    while stack:
        node, depth, data = stack.pop()
        if depth > max_depth:
            raise SchemaTooComplex(_path_to(schema, node), "", f"the schema is nested {depth} levels deep", max_depth, "max_schema_depth")
        if type(node) is dict:
            nodes += len(node)
            if not data and not _WATCHED.isdisjoint(node):
                for key in _WATCHED.intersection(node):
                    _check_keyword(key, node[key], schema, node, bounds)
            for key, value in node.items():
                if type(value) is dict or type(value) is list:
                    stack.append((value, depth + 1, data or key in _DATA_KEYWORDS))
        else:
            nodes += len(node)
            for value in node:
                if type(value) is dict or type(value) is list:
                    stack.append((value, depth + 1, data))
        if nodes > max_nodes:
            raise SchemaTooComplex((), "", f"the schema has more than {max_nodes} JSON values", max_nodes, "max_schema_nodes")


def _path_to(root: Any, target: Any) -> tuple[str | int, ...]:
    """The path of ``target`` (by identity) inside ``root``; only run to word a refusal."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(root, ())]
    while stack:
        node, path = stack.pop()
        if node is target:
            return path
        items = node.items() if type(node) is dict else enumerate(node) if type(node) is list else ()
        for key, value in items:
            if type(value) is dict or type(value) is list:
                stack.append((value, (*path, key)))
    return ()


def _check_keyword(key: str, value: Any, root: Any, node: dict[str, Any], bounds: SchemaBounds) -> None:
    if _number(value):
        found = bounds.limit_of(key)
        if found is not None and value > found[0]:
            shown = f"{value:g}" if isinstance(value, float) else str(value)
            raise SchemaTooComplex((*_path_to(root, node), key), key, f"{key} is {shown}", *found)
    elif key == "pattern" and isinstance(value, str):
        if len(value) > bounds.max_pattern_length:
            _long_pattern(value, (*_path_to(root, node), key), bounds)
    elif key == "patternProperties" and type(value) is dict:
        for name in value:
            if len(name) > bounds.max_pattern_length:
                _long_pattern(name, (*_path_to(root, node), key, name), bounds)


def _long_pattern(pattern: str, path: tuple[str | int, ...], bounds: SchemaBounds) -> None:
    raise SchemaTooComplex(path, "pattern", f"a pattern of {len(pattern)} characters", bounds.max_pattern_length, "max_schema_pattern_length")
