"""Static bounds on a client's JSON Schema: what one schema may ask of the gateway.

A schema drives work: validators walk it, the built-in model generates values
from it (``minLength: 1e9`` would be a gigabyte string), strictify rewrites it.
``check_bounds`` walks a schema once (O(its size)) and refuses the first thing
past a limit: its node count, its nesting depth, the keywords that size a
generated value (``minLength``, ``minItems``, ``minContains``,
``minProperties``), the length of a ``pattern`` (or a ``patternProperties``
name), and — when the schema has references — its size once every ``$ref`` is
followed (``_check_expansion``: memoized, still O(size)); and then what the schema costs
as a whole (``orgate.gate.cost``): the size of the smallest value it admits and the number
of subschemas one value is checked against. Values under ``enum``,
``const``, ``default`` and ``examples`` are data, not schema: they count as
nodes but their keys are not keywords.

Patterns themselves are matched by a linear-time engine (``orgate.gate.patterns``);
the built-in model's generator and strictify carry their own budgets as well.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from orgate.gate.cost import cost_of
from orgate.gate.refs import (
    DATA,
    REFS,
    SCHEMA,
    Targets,
    path_to,
    role_of,
)

_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$-]*\Z")


@dataclass(frozen=True, slots=True)
class SchemaBounds:
    """The limits one schema must stay within (``[limits]`` ``max_schema_*`` in the
    configuration)."""

    max_nodes: int = 20_000
    max_depth: int = 32
    max_min_length: int = 100_000
    max_min_items: int = 10_000
    max_min_properties: int = 1_000
    max_pattern_length: int = 1_000
    max_expansion: int = 200_000
    max_min_chars: int = 1_000_000
    max_fanout: int = 1_024

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
    """A schema past one of its bounds: where (``path``, from the schema's root), what,
    which limit."""

    def __init__(
        self, path: tuple[str | int, ...], keyword: str, detail: str, limit: int, setting: str
    ) -> None:
        self.path = path
        self.keyword = keyword
        self.limit = limit
        self.setting = setting
        super().__init__(f"{detail}, more than the limit of {limit} (limits.{setting})")


def dotted(prefix: str, path: tuple[str | int, ...]) -> str:
    """``("properties", "x", "minItems")`` under ``tools[0].parameters`` →
    ``tools[0].parameters.properties.x.minItems``."""
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
_WATCHED = (
    frozenset(
        {"minLength", "minItems", "minContains", "minProperties", "pattern", "patternProperties"}
    )
    | REFS
)


def check_bounds(schema: Any, bounds: SchemaBounds) -> None:
    """Raise ``SchemaTooComplex`` for the first bound ``schema`` exceeds; one pass over it.

    The pass keeps no paths (that would cost more than the walk): a refusal finds its
    path afterwards, by identity (``path_to``).
    """
    if type(schema) is not dict and type(schema) is not list:
        return
    nodes = 0
    refs = False
    max_nodes, max_depth = bounds.max_nodes, bounds.max_depth
    stack: list[tuple[Any, int, int]] = [(schema, 1, SCHEMA)]  # (container, depth, role)
    while stack:
        node, depth, role = stack.pop()
        if depth > max_depth:
            raise SchemaTooComplex(
                path_to(schema, node),
                "",
                f"the schema is nested {depth} levels deep",
                max_depth,
                "max_schema_depth",
            )
        if type(node) is dict:
            nodes += len(node)
            if role == SCHEMA and not _WATCHED.isdisjoint(node):
                for key in _WATCHED.intersection(node):
                    if key in REFS:
                        refs = True
                    else:
                        _check_keyword(key, node[key], schema, node, bounds)
            for key, value in node.items():
                if type(value) is dict or type(value) is list:
                    stack.append(
                        (
                            value,
                            depth + 1,
                            role_of(key) if role == SCHEMA else role if role == DATA else SCHEMA,
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
    _check_cost(schema, bounds)


def _check_cost(schema: Any, bounds: SchemaBounds) -> None:
    """Refuse a schema whose cost as a whole (``orgate.gate.cost``) is past its bounds: the
    smallest value it admits, the subschemas one value of an instance is checked against."""
    cost = cost_of(schema)
    if cost.min_chars > bounds.max_min_chars:
        raise SchemaTooComplex(
            cost.min_at,
            _last_keyword(cost.min_at),
            f"the smallest value the schema admits is {cost.min_chars:,} characters of JSON",
            bounds.max_min_chars,
            "max_schema_min_chars",
        )
    if cost.fanout > bounds.max_fanout:
        raise SchemaTooComplex(
            cost.fanout_at,
            _last_keyword(cost.fanout_at),
            f"one value would be checked against {cost.fanout:,} subschemas",
            bounds.max_fanout,
            "max_schema_fanout",
        )


def _last_keyword(path: tuple[str | int, ...]) -> str:
    return next((part for part in reversed(path) if isinstance(part, str)), "")


def _check_keyword(
    key: str, value: Any, root: Any, node: dict[str, Any], bounds: SchemaBounds
) -> None:
    if _number(value):
        found = bounds.limit_of(key)
        if found is not None and value > found[0]:
            shown = f"{value:g}" if isinstance(value, float) else str(value)
            raise SchemaTooComplex((*path_to(root, node), key), key, f"{key} is {shown}", *found)
    elif key == "pattern" and isinstance(value, str):
        if len(value) > bounds.max_pattern_length:
            _long_pattern(value, (*path_to(root, node), key), bounds)
    elif key == "patternProperties" and type(value) is dict:
        for name in value:
            if len(name) > bounds.max_pattern_length:
                _long_pattern(name, (*path_to(root, node), key, name), bounds)


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
    targets = Targets(schema)
    sizes: dict[int, int] = {}
    active: set[int] = set()
    stack: list[tuple[Any, int, bool]] = [(schema, SCHEMA, False)]
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
                path_to(schema, node),
                "$ref",
                "through $ref, the schema expands to more objects here",
                limit,
                "max_schema_expansion",
            )
