"""Static bounds on a client's JSON Schema: what one schema may ask of the gateway.

A schema drives work: validators walk it, the built-in model generates values
from it (``minLength: 1e9`` would be a gigabyte string), strictify rewrites it.
``check_bounds`` walks a schema once (O(its size)) and refuses the first thing
past a limit: its node count, its nesting depth, the keywords that size a
generated value (``minLength``, ``minItems``, ``minContains``,
``minProperties``), the length of a ``pattern`` (or a ``patternProperties``
name), and — when the schema has references — its size once every ``$ref`` is
followed (``_check_expansion``: memoized, still O(size)). Values under ``enum``,
``const``, ``default`` and ``examples`` are data, not schema: they count as
nodes but their keys are not keywords.

Patterns themselves are matched by a linear-time engine (``orgate.gate.patterns``);
the built-in model's generator and strictify carry their own budgets as well.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

#: Keywords whose value is data, not a subschema.
_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})
#: Keywords whose value maps names to subschemas (its keys are names, never keywords).
_NAME_MAPS = frozenset(
    {"properties", "patternProperties", "dependentSchemas", "$defs", "definitions"}
)

# What a container is: a schema (or a list of schemas), a map of names to schemas, or data.
_SCHEMA, _NAMES, _DATA = 0, 1, 2


def _role(key: str) -> int:
    """The role of a schema object's member ``key``'s value."""
    return _DATA if key in _DATA_KEYWORDS else _NAMES if key in _NAME_MAPS else _SCHEMA


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
    max_expansion: int = 200_000

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

    def __init__(
        self, path: tuple[str | int, ...], keyword: str, detail: str, limit: int, setting: str
    ) -> None:
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


#: The keywords the pass looks at: a set intersection per object keeps it cheap.
_REFS = frozenset({"$ref", "$dynamicRef"})
_WATCHED = (
    frozenset(
        {"minLength", "minItems", "minContains", "minProperties", "pattern", "patternProperties"}
    )
    | _REFS
)


def check_bounds(schema: Any, bounds: SchemaBounds) -> None:
    """Raise ``SchemaTooComplex`` for the first bound ``schema`` exceeds; one pass over it.

    The pass keeps no paths (that would cost more than the walk): a refusal finds its
    path afterwards, by identity (``_path_to``).
    """
    if type(schema) is not dict and type(schema) is not list:
        return
    nodes = 0
    refs = False
    max_nodes, max_depth = bounds.max_nodes, bounds.max_depth
    stack: list[tuple[Any, int, int]] = [(schema, 1, _SCHEMA)]  # (container, depth, role)
    while stack:
        node, depth, role = stack.pop()
        if depth > max_depth:
            raise SchemaTooComplex(
                _path_to(schema, node),
                "",
                f"the schema is nested {depth} levels deep",
                max_depth,
                "max_schema_depth",
            )
        if type(node) is dict:
            nodes += len(node)
            if role == _SCHEMA and not _WATCHED.isdisjoint(node):
                for key in _WATCHED.intersection(node):
                    if key in _REFS:
                        refs = True
                    else:
                        _check_keyword(key, node[key], schema, node, bounds)
            for key, value in node.items():
                if type(value) is dict or type(value) is list:
                    stack.append(
                        (
                            value,
                            depth + 1,
                            _role(key) if role == _SCHEMA else role if role == _DATA else _SCHEMA,
                        )
                    )
        else:
            nodes += len(node)
            for value in node:
                if type(value) is dict or type(value) is list:
                    stack.append((value, depth + 1, role))
        if nodes > max_nodes:
            raise SchemaTooComplex(
                (),
                "",
                f"the schema has more than {max_nodes} JSON values",
                max_nodes,
                "max_schema_nodes",
            )
    if refs:
        _check_expansion(schema, bounds.max_expansion)


def _path_to(root: Any, target: Any) -> tuple[str | int, ...]:
    """The path of ``target`` (by identity) inside ``root``; only run to word a refusal."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(root, ())]
    while stack:
        node, path = stack.pop()
        if node is target:
            return path
        items = (
            node.items() if type(node) is dict else enumerate(node) if type(node) is list else ()
        )
        for key, value in items:
            if type(value) is dict or type(value) is list:
                stack.append((value, (*path, key)))
    return ()


def _check_keyword(
    key: str, value: Any, root: Any, node: dict[str, Any], bounds: SchemaBounds
) -> None:
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
    raise SchemaTooComplex(
        path,
        "pattern",
        f"a pattern of {len(pattern)} characters",
        bounds.max_pattern_length,
        "max_schema_pattern_length",
    )


def _check_expansion(schema: Any, limit: int) -> None:
    """Refuse a schema whose ``$ref``s expand it past ``limit`` objects.

    A validator evaluates every branch of ``anyOf``/``allOf``/``oneOf`` at the same place of
    the instance, and follows each ``$ref``: forty definitions, each an ``anyOf`` of two
    references to the next, are 2⁴⁰ evaluations of one value (``jsonschema-rs`` holds the GIL
    throughout). The expanded size — each object plus the expanded sizes of its children and
    of its reference's target — is computed once per object (memoized, O(size)); a reference
    back into an object being expanded (recursion, which the instance's depth bounds) counts 1.
    """
    targets = _Targets(schema)
    sizes: dict[int, int] = {}
    active: set[int] = set()
    stack: list[tuple[Any, int, bool]] = [(schema, _SCHEMA, False)]
    while stack:
        node, role, done = stack.pop()
        key = id(node)
        if key in sizes:
            continue
        children, unresolved = targets.children(node, role)
        if not done:
            if key in active:
                continue
            active.add(key)
            stack.append((node, role, True))
            stack.extend(
                (c, r, False) for c, r in children if id(c) not in sizes and id(c) not in active
            )
            continue
        active.discard(key)
        size = 1 + unresolved * targets.total + sum(sizes.get(id(c), 1) for c, _ in children)
        sizes[key] = size
        if size > limit:
            raise SchemaTooComplex(
                _path_to(schema, node),
                "$ref",
                "through $ref, the schema expands to more objects here",
                limit,
                "max_schema_expansion",
            )


#: Definitions: evaluated only where a reference reaches them.
_DEFINITIONS = frozenset({"$defs", "definitions"})


class _Targets:
    """Where a schema's references point: local JSON pointers, ``$anchor``/``$dynamicAnchor``
    names and ``$id`` values. A reference none of these resolves counts as the whole schema."""

    def __init__(self, root: Any) -> None:
        self.root = root
        self.named: dict[str, Any] = {}
        self.total = 0
        stack = [root]
        while stack:
            node = stack.pop()
            self.total += 1
            if type(node) is dict:
                for anchor_key in ("$anchor", "$dynamicAnchor"):
                    if isinstance(node.get(anchor_key), str):
                        self.named["#" + node[anchor_key]] = node
                if isinstance(node.get("$id"), str):
                    self.named[node["$id"].rstrip("#")] = node
                stack.extend(v for v in node.values() if type(v) is dict or type(v) is list)
            elif type(node) is list:
                stack.extend(v for v in node if type(v) is dict or type(v) is list)

    def children(self, node: Any, role: int) -> tuple[list[tuple[Any, int]], int]:
        """(the containers a validator evaluates from ``node``, with their roles; the number of
        its references left unresolved). Definitions count only where referenced; data not at all."""
        if role == _DATA:
            return [], 0
        if type(node) is list:
            return [(v, role) for v in node if type(v) is dict or type(v) is list], 0
        if role == _NAMES:
            return [(v, _SCHEMA) for v in node.values() if type(v) is dict or type(v) is list], 0
        out = [
            (v, _role(k))
            for k, v in node.items()
            if (type(v) is dict or type(v) is list)
            and k not in _DATA_KEYWORDS
            and k not in _DEFINITIONS
        ]
        unresolved = 0
        for ref_key in _REFS:
            ref = node.get(ref_key)
            if isinstance(ref, str):
                target = self.resolve(ref)
                if target is None:
                    unresolved += 1
                elif type(target) is dict or type(target) is list:
                    out.append((target, _SCHEMA))
        return out, unresolved

    def resolve(self, ref: str) -> Any:
        if ref in self.named:
            return self.named[ref]
        base, _, pointer = ref.partition("#")
        node = self.named.get(base) if base else self.root
        if node is None or (pointer and not pointer.startswith("/")):
            return None
        for part in pointer.split("/")[1:]:
            part = part.replace("~1", "/").replace("~0", "~")
            if type(node) is dict and part in node:
                node = node[part]
            elif type(node) is list and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return None
        return node
