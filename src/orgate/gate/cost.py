"""What a client's JSON Schema costs as a whole, known before any work is done with it.

The static bounds (``bounds.py``) limit each keyword on its own; their product they do
not: ``minItems: 10000`` strings of ``minLength: 100000`` is a gigabyte, 10,000 objects of
``minProperties: 1000`` are fifty million characters, forty nested ``anyOf`` pairs check
one value 2⁴⁰ times. ``schema_cost`` walks the whole schema once — every ``$ref``
followed, each part computed once (memoized; a reference back into a part still being
computed, recursion, counts as nothing) — and gives two figures:

``min_chars``
    No instance the schema admits is shorter, as compact JSON (a lower bound). A value
    of a schema that names no ``type`` may be a number (one character); a string is its
    quotes and ``minLength``; an array its brackets, ``minItems`` (at least
    ``minContains`` with ``contains``) times its smallest item (each of ``prefixItems``
    its own) and the commas; an object its required properties (name and smallest value)
    and the ``minProperties`` beyond them; ``const`` and ``enum`` their shortest value.
    ``allOf`` and ``$ref`` count as the largest of their parts, ``anyOf`` and ``oneOf``
    as their smallest branch, ``if`` as the smaller of ``then`` and ``else``.
``fanout``
    No single value of an instance is checked against more subschemas: at its place, the
    schema and every ``allOf`` / ``anyOf`` / ``oneOf`` / ``if`` / ``then`` / ``else`` /
    ``not`` / ``dependentSchemas`` / ``$ref`` branch reached from it; below it, for each
    place a property (its own schema or ``additionalProperties``, plus every pattern of
    ``patternProperties``) or an item (``prefixItems`` or ``items``, plus ``contains``)
    reaches, summed over those branches. Checking an instance of n values costs at most
    about ``fanout × n`` subschema evaluations, each linear in its value (patterns are
    matched in linear time): the work validation can take for an instance of a given size.

Both are refused past a limit at the request's edge (``bounds.check_bounds``:
``max_schema_min_chars``, ``max_schema_fanout``); ``min_chars`` is also held against what
a model can output (``CHARS_PER_TOKEN``), and the size of the work decides where it runs
(``work.py``). ``cost_of`` keeps the cost of the schemas seen last, by content.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import orjson

from orgate.gate.patterns import search
from orgate.gate.refs import REFS, Targets, path_to

#: The most characters one output token is taken to hold: the built-in model's tokens are
#: at most this long (``providers/builtin.py``), and the tokens of real models are shorter on
#: JSON text. A schema whose smallest instance is longer than ``CHARS_PER_TOKEN`` times a
#: model's output token cap cannot be answered completely by that model.
CHARS_PER_TOKEN = 32

#: Figures are clamped here: a schema doubling itself forty times is simply "too much".
_CAP = 10**15

#: Keywords checked at the same place of the instance as the schema holding them.
_IN_PLACE_LISTS = ("allOf", "anyOf", "oneOf")
_IN_PLACE_ONE = ("if", "then", "else", "not")
#: Object members beyond this many × patterns are not matched against the patterns (a
#: lower bound stays one when a required member's value counts as the smallest value).
_MAX_PATTERN_LOOKUPS = 10_000
#: The keys the sizing of a value reads.
_SIZING_KEYS = frozenset(
    {
        "minItems",
        "minContains",
        "minProperties",
        "minLength",
        "const",
        "enum",
        "required",
        "properties",
        "patternProperties",
        "additionalProperties",
        "prefixItems",
        "items",
        "additionalItems",
        "contains",
    }
)
#: The keys that lead to subschemas.
_LINK_KEYS = frozenset(
    {
        "allOf",
        "anyOf",
        "oneOf",
        "if",
        "then",
        "else",
        "not",
        "dependentSchemas",
        "dependencies",
        "$ref",
        "$dynamicRef",
        "properties",
        "additionalProperties",
        "patternProperties",
        "unevaluatedProperties",
        "propertyNames",
        "prefixItems",
        "items",
        "additionalItems",
        "contains",
        "unevaluatedItems",
    }
)
#: The keys of a schema object that only points elsewhere.
_BARE_REFERENCE = REFS | {"title", "description", "$comment"}
#: The smallest JSON text of one value of each type (``0``, ``true``, ``null``).
_TYPE_FLOOR = {"null": 4, "boolean": 4, "integer": 1, "number": 1}

Path = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class SchemaCost:
    """The figures of one schema (see the module docstring); ``*_at``: the place of the keyword
    that makes each figure what it is, as a path from the schema's root."""

    min_chars: int
    fanout: int
    min_at: Path = ()
    fanout_at: Path = ()
    #: the largest ``minItems`` / ``minContains`` / ``minProperties`` / ``minLength`` reached
    largest_count: int = 0


def min_tokens(cost: SchemaCost) -> int:
    """The fewest output tokens any instance of the schema takes (``CHARS_PER_TOKEN`` each)."""
    return -(-cost.min_chars // CHARS_PER_TOKEN)


def schema_cost(schema: Any) -> SchemaCost:
    """The cost of ``schema`` (a JSON Schema: an object or a boolean); O(its size)."""
    if type(schema) is not dict:
        return SchemaCost(0 if schema is False else 1, 1)
    return _Walk(schema).cost()


def cost_of(schema: Any) -> SchemaCost:
    """``schema_cost``, remembered for the schemas seen last (by content): a client sends the
    same tools and format with every request."""
    key = _content_key(schema)
    found = _COSTS.get(key)
    if found is not None:
        return found
    cost = schema_cost(schema)
    with _COSTS_LOCK:  # costed on the event loop and in threads alike
        _COSTS[key] = cost
        if len(_COSTS) > _KEPT:
            _COSTS.popitem(last=False)
    return cost


_KEPT = 4096
_COSTS: OrderedDict[bytes, SchemaCost] = OrderedDict()
_COSTS_LOCK = threading.Lock()


def _content_key(schema: Any) -> bytes:
    try:
        raw = orjson.dumps(schema)
    except TypeError:  # integers wider than 64 bits
        raw = json.dumps(schema, separators=(",", ":")).encode()
    return hashlib.blake2b(raw, digest_size=16).digest()


def _json_len(value: Any) -> int:
    try:
        return len(orjson.dumps(value))
    except TypeError:
        return len(json.dumps(value, separators=(",", ":")))


def _count(value: Any, default: int = 0) -> int:
    """A counting keyword's value (``minItems: 3``, ``3.0``), or ``default`` when it is none."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return default
    return int(min(max(value, 0), _CAP))


def _cap(value: int) -> int:
    return value if value < _CAP else _CAP


@dataclass(slots=True)
class _Links:
    """The subschemas one schema object reaches, by how they apply."""

    conjunction: list[Any] = field(default_factory=list)  # allOf, $ref targets
    alternatives: list[list[Any]] = field(default_factory=list)  # each anyOf / oneOf
    conditional: list[Any] = field(default_factory=list)  # then, else (with if)
    in_place: list[Any] = field(default_factory=list)  # every subschema at the same place
    property_values: list[Any] = field(default_factory=list)  # properties, additionalProperties
    every_member: list[Any] = field(default_factory=list)  # patterns, unevaluated, names
    item_values: list[Any] = field(default_factory=list)  # prefixItems, items, additionalItems
    every_item: list[Any] = field(default_factory=list)  # contains, unevaluatedItems

    def all(self) -> list[Any]:
        return [
            *self.in_place,
            *self.property_values,
            *self.every_member,
            *self.item_values,
            *self.every_item,
        ]


@dataclass(slots=True)
class _Part:
    """The figures of one schema object, and which of its keywords or subschemas made them."""

    min_chars: int
    largest_count: int  # the largest counting keyword in it and what it reaches
    local: int  # subschemas checked at its place (itself included)
    below: int  # subschemas checked at one place below it, at most
    fanout: int
    min_why: tuple[str, Any]  # ("key", keyword) or ("child", subschema)
    fan_why: tuple[str, Any]


_NO_LINKS = _Links()  # shared by every schema object without subschemas: never changed
_TRUE = _Part(1, 0, 1, 0, 1, ("key", ""), ("key", ""))
_FALSE = _Part(0, 0, 1, 0, 1, ("key", ""), ("key", ""))
_CYCLE = _Part(0, 0, 0, 0, 0, ("key", ""), ("key", ""))
_COUNTING = ("minItems", "minContains", "minProperties", "minLength")


#: Past this many names (or subschemas of a kind), the merged keywords of a conjunction keep
#: what they have: a lower bound stays one with fewer constraints, and merging down a long
#: chain of ``allOf`` stays linear.
_MAX_MERGED = 64


@dataclass(slots=True)
class _Sizing:
    """The keywords that size a value, of a schema object and of every part of its conjunction
    (``allOf``, ``$ref``) merged: a value meets them all, so the largest count and the union of
    the required members apply. Each count keeps the object it is written in, to name it."""

    types: frozenset[str] | None = None  # None: any type
    counts: dict[str, tuple[int, Any]] = field(default_factory=dict)
    literal: tuple[int, Any] | None = None  # the shortest const / enum value, where
    required: dict[str, None] = field(default_factory=dict)
    properties: list[dict[str, Any]] = field(default_factory=list)  # each part's ``properties``
    patterns: list[tuple[str, Any]] = field(default_factory=list)
    extras: list[Any] = field(default_factory=list)
    prefix: list[Any] | None = None
    items: list[Any] = field(default_factory=list)
    contains: list[Any] = field(default_factory=list)
    required_at: Any = None  # the object whose ``required`` came first

    @classmethod
    def of(cls, node: dict[str, Any]) -> _Sizing:
        sizing = cls(types=_types_of(node.get("type")))
        keys = _SIZING_KEYS.intersection(node)
        if not keys:
            return sizing
        for key in _COUNTING:
            if key in keys:
                value = _count(node[key], -1)
                if value >= 0:
                    sizing.counts[key] = (value, node)
        if "const" in keys:
            sizing.literal = (_json_len(node["const"]), node)
        elif "enum" in keys and isinstance(node["enum"], list) and node["enum"]:
            sizing.literal = (min(_json_len(v) for v in node["enum"]), node)
        if "required" in keys and isinstance(node["required"], list):
            sizing.required = dict.fromkeys(r for r in node["required"] if isinstance(r, str))
            sizing.required_at = node
        if "properties" in keys and isinstance(node["properties"], dict):
            sizing.properties = [node["properties"]]
        if "patternProperties" in keys and isinstance(node["patternProperties"], dict):
            sizing.patterns = list(node["patternProperties"].items())
        if "additionalProperties" in keys:
            sizing.extras = [node["additionalProperties"]]
        _item_sizing(node, sizing)
        return sizing

    def empty(self) -> bool:
        return (
            self.types is None
            and not self.counts
            and self.literal is None
            and not self.required
            and not self.properties
            and not self.patterns
            and not self.extras
            and self.prefix is None
            and not self.items
            and not self.contains
        )

    def count(self, key: str, node: dict[str, Any], default: int = 0) -> tuple[int, Any]:
        """A counting keyword's merged value and the object it is written in."""
        return self.counts.get(key, (default, node))

    def merged(self, other: _Sizing) -> _Sizing:
        types = (
            other.types
            if self.types is None
            else self.types
            if other.types is None
            else _common_types(self.types, other.types)
        )
        counts = dict(self.counts)
        for key, found in other.counts.items():
            if key not in counts or found[0] > counts[key][0]:
                counts[key] = found
        literal = self.literal
        if other.literal is not None and (literal is None or other.literal[0] > literal[0]):
            literal = other.literal
        out = _Sizing(types, counts, literal, self.required)
        if other.required and len(self.required) + len(other.required) <= _MAX_MERGED:
            out.required = {**self.required, **other.required}
        out.properties = _joined(self.properties, other.properties)
        out.patterns = _joined(self.patterns, other.patterns)
        out.extras = _joined(self.extras, other.extras)
        out.prefix = self.prefix if self.prefix is not None else other.prefix
        out.items = _joined(self.items, other.items)
        out.contains = _joined(self.contains, other.contains)
        out.required_at = self.required_at if self.required_at is not None else other.required_at
        return out


def _joined(mine: list[Any], theirs: list[Any]) -> list[Any]:
    if not theirs or len(mine) + len(theirs) > _MAX_MERGED:
        return mine
    return mine + theirs


def _types_of(kind: Any) -> frozenset[str] | None:
    if isinstance(kind, str):
        return frozenset({kind})
    if isinstance(kind, list):
        return frozenset(k for k in kind if isinstance(k, str))
    return None


def _common_types(left: frozenset[str], right: frozenset[str]) -> frozenset[str]:
    """The types both admit (an integer is a number)."""
    both = left & right
    if "integer" in left and "number" in right or "integer" in right and "number" in left:
        both |= {"integer"}
    return both


def _item_sizing(node: dict[str, Any], sizing: _Sizing) -> None:
    prefix = node.get("prefixItems")
    items = node.get("items")
    if isinstance(items, list):  # drafts 4 to 7: the tuple form
        prefix, items = items, node.get("additionalItems")
    if isinstance(prefix, list):
        sizing.prefix = prefix
    if type(items) is dict or type(items) is bool:
        sizing.items = [items]
    contains = node.get("contains")
    if type(contains) is dict or type(contains) is bool:
        sizing.contains = [contains]


class _Walk:
    """One computation of a schema's cost: a post-order walk over its schema objects."""

    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.targets: Targets | None = None
        self.parts: dict[int, _Part] = {}
        self.links: dict[int, _Links] = {}
        self.sizings: dict[int, _Sizing] = {}

    def cost(self) -> SchemaCost:
        self._walk()
        part = self.parts[id(self.root)]
        return SchemaCost(
            part.min_chars,
            max(part.fanout, 1),
            self._place(self.root, lambda p: p.min_why),
            self._place(self.root, lambda p: p.fan_why),
            part.largest_count,
        )

    # --- the walk ------------------------------------------------------------------------

    def _walk(self) -> None:
        active: set[int] = set()
        stack: list[tuple[dict[str, Any], bool]] = [(self.root, False)]
        while stack:
            node, done = stack.pop()
            key = id(node)
            if done:
                active.discard(key)
                self.parts[key] = self._compute(node, self.links.pop(key))
                continue
            if key in self.parts or key in active:
                continue
            active.add(key)
            links = self._links(node)
            self.links[key] = links
            stack.append((node, True))
            for child in links.all():
                if type(child) is dict and id(child) not in self.parts and id(child) not in active:
                    stack.append((child, False))

    def part(self, schema: Any) -> _Part:
        if type(schema) is dict:
            return self.parts.get(id(schema), _CYCLE)
        return _FALSE if schema is False else _TRUE

    def _links(self, node: dict[str, Any]) -> _Links:
        if _LINK_KEYS.isdisjoint(node):
            return _NO_LINKS
        links = _Links()
        for key in _IN_PLACE_LISTS:
            branches = node.get(key)
            if isinstance(branches, list):
                schemas = [b for b in branches if type(b) is dict or type(b) is bool]
                links.in_place += schemas
                if key == "allOf":
                    links.conjunction += schemas
                elif schemas:
                    links.alternatives.append(schemas)
        for key in _IN_PLACE_ONE:
            sub = node.get(key)
            if type(sub) is dict or type(sub) is bool:
                links.in_place.append(sub)
                if key in ("then", "else") and "if" in node:
                    links.conditional.append(sub)
        for key in ("dependentSchemas", "dependencies"):
            subs = node.get(key)
            if isinstance(subs, dict):
                links.in_place += [s for s in subs.values() if type(s) is dict]
        for key in REFS:
            ref = node.get(key)
            if isinstance(ref, str):
                if self.targets is None:
                    self.targets = Targets(self.root)
                target = self.targets.resolve(ref)
                if type(target) is dict or type(target) is bool:
                    links.in_place.append(target)
                    links.conjunction.append(target)
        self._member_links(node, links)
        self._item_links(node, links)
        return links

    @staticmethod
    def _member_links(node: dict[str, Any], links: _Links) -> None:
        props = node.get("properties")
        if isinstance(props, dict):
            links.property_values += [s for s in props.values() if type(s) is dict]
        extra = node.get("additionalProperties")
        if type(extra) is dict:
            links.property_values.append(extra)
        patterns = node.get("patternProperties")
        if isinstance(patterns, dict):
            links.every_member += [s for s in patterns.values() if type(s) is dict]
        for key in ("unevaluatedProperties", "propertyNames"):
            if type(node.get(key)) is dict:
                links.every_member.append(node[key])

    @staticmethod
    def _item_links(node: dict[str, Any], links: _Links) -> None:
        prefix = node.get("prefixItems")
        if isinstance(prefix, list):
            links.item_values += [s for s in prefix if type(s) is dict]
        items = node.get("items")
        if isinstance(items, list):  # drafts 4 to 7: the tuple form
            links.item_values += [s for s in items if type(s) is dict]
        elif type(items) is dict:
            links.item_values.append(items)
        if type(node.get("additionalItems")) is dict:
            links.item_values.append(node["additionalItems"])
        for key in ("contains", "unevaluatedItems"):
            if type(node.get(key)) is dict:
                links.every_item.append(node[key])

    # --- one schema object's figures -----------------------------------------------------

    def _compute(self, node: dict[str, Any], links: _Links) -> _Part:
        if links is _NO_LINKS:
            return self._leaf(node)
        sizing, borrowed = self._sizing(node, links)
        self.sizings[id(node)] = sizing
        min_chars, min_why = self._min_chars(node, links, None if borrowed else sizing)
        # A bare reference is its target's work: a chain of them is followed, not multiplied.
        local = 0 if node.keys() <= _BARE_REFERENCE else 1
        below, fan_why = self._below(links)
        for sub in links.in_place:
            part = self.part(sub)
            local = _cap(local + part.local)
        fanout = max(local, below)
        if fanout == local:
            bare = (not local or node.keys() <= _BARE_REFERENCE) and links.in_place
            fan_why = ("child", links.in_place[0]) if bare else ("key", _combinator(node))
        largest = max(
            (count for count, _ in sizing.counts.values()),
            default=0,
        )
        if links is not _NO_LINKS:
            largest = max(
                largest, max((self.part(sub).largest_count for sub in links.all()), default=0)
            )
        return _Part(min_chars, largest, local, below, fanout, min_why, fan_why)

    def _leaf(self, node: dict[str, Any]) -> _Part:
        """A schema object without subschemas (most of them): checked once, sized by itself."""
        sizing = _Sizing.of(node)
        self.sizings[id(node)] = sizing
        min_chars, min_why = self._sized_min(node, sizing)
        largest = max((count for count, _ in sizing.counts.values()), default=0)
        return _Part(min_chars, largest, 1, 0, 1, min_why, ("key", ""))

    def _below(self, links: _Links) -> tuple[int, tuple[str, Any]]:
        """The subschemas checked at one place below this one, at most: a member's or an
        item's own, plus every one that applies to all of them; plus those of the branches
        checked at this place."""
        biggest: tuple[int, Any] = (0, None)
        members = _cap(
            max((self.part(s).fanout for s in links.property_values), default=0)
            + sum(self.part(s).fanout for s in links.every_member)
        )
        items = _cap(
            max((self.part(s).fanout for s in links.item_values), default=0)
            + sum(self.part(s).fanout for s in links.every_item)
        )
        for sub in links.property_values + links.every_member:
            biggest = max(biggest, (self.part(sub).fanout, sub), key=lambda pair: pair[0])
        for sub in links.item_values + links.every_item:
            biggest = max(biggest, (self.part(sub).fanout, sub), key=lambda pair: pair[0])
        below = max(members, items)
        for sub in links.in_place:
            part = self.part(sub)
            below = _cap(below + part.below)
            biggest = max(biggest, (part.below, sub), key=lambda pair: pair[0])
        why: tuple[str, Any] = ("child", biggest[1]) if biggest[1] is not None else ("key", "")
        return below, why

    def _min_chars(
        self, node: dict[str, Any], links: _Links, sizing: _Sizing | None
    ) -> tuple[int, tuple[str, Any]]:
        """The smallest value; ``sizing`` None when the node's only sizing is its one part's."""
        best, why = self._sized_min(node, sizing) if sizing is not None else (0, ("key", ""))
        for sub in links.conjunction:
            value = self.part(sub).min_chars
            if value > best:
                best, why = value, ("child", sub)
        for branches in links.alternatives:
            smallest = min(branches, key=lambda s: self.part(s).min_chars)
            value = self.part(smallest).min_chars
            if value > best:
                best, why = value, ("child", smallest)
        if len(links.conditional) == 2:
            smallest = min(links.conditional, key=lambda s: self.part(s).min_chars)
            value = self.part(smallest).min_chars
            if value > best:
                best, why = value, ("child", smallest)
        return best, why

    def _sizing(self, node: dict[str, Any], links: _Links) -> tuple[_Sizing, bool]:
        """The sizing keywords of ``node`` and of every part of its conjunction, merged; and
        whether they are only its one part's (a bare reference: nothing new to compute)."""
        sizing = _Sizing.of(node)
        parts = [
            self.sizings[id(sub)]
            for sub in links.conjunction
            if type(sub) is dict and id(sub) in self.sizings
        ]
        if len(parts) == 1 and sizing.empty():
            return parts[0], True
        for other in parts:
            sizing = sizing.merged(other)
        return sizing, False

    def _sized_min(self, node: dict[str, Any], sizing: _Sizing) -> tuple[int, tuple[str, Any]]:
        """The smallest value the merged sizing keywords admit (its ``type`` and what sizes it)."""
        if sizing.literal is not None:
            return sizing.literal[0], ("at", (sizing.literal[1], "enum"))
        if sizing.types is None:
            return 1, ("key", "")  # a number is a value of it
        best: tuple[int, tuple[str, Any]] | None = None
        found: tuple[int, tuple[str, Any]]
        for name in sizing.types:
            if name in _TYPE_FLOOR:
                found = (_TYPE_FLOOR[name], ("key", "type"))
            elif name == "string":
                length, owner = sizing.count("minLength", node)
                found = (_cap(2 + length), ("at", (owner, "minLength")))
            elif name == "array":
                found = self._array_min(node, sizing)
            elif name == "object":
                found = self._object_min(node, sizing)
            else:
                continue
            if best is None or found[0] < best[0]:
                best = found
        return best if best is not None else (1, ("key", ""))

    def _array_min(self, node: dict[str, Any], sizing: _Sizing) -> tuple[int, tuple[str, Any]]:
        count, owner = sizing.count("minItems", node)
        keyword = "minItems"
        least_contained = 0
        if sizing.contains:
            least_contained, contained_at = sizing.count("minContains", node, 1)
            if least_contained > count:
                count, owner, keyword = least_contained, contained_at, "minContains"
        prefix = sizing.prefix or []
        first = min(count, len(prefix))
        item = max((self.part(s).min_chars for s in sizing.items), default=1)
        total = sum(self.part(s).min_chars for s in prefix[:first])
        total = _cap(total + (count - first) * item)
        if least_contained:
            contained = max(self.part(s).min_chars for s in sizing.contains)
            total = max(total, _cap(least_contained * contained))
        chars = _cap(2 + total + max(count - 1, 0))
        if count == 1:
            only = prefix[0] if prefix else (sizing.contains or sizing.items or [None])[0]
            if type(only) is dict:
                return chars, ("child", only)
        return chars, ("at", (owner, keyword)) if count else ("key", "type")

    def _object_min(self, node: dict[str, Any], sizing: _Sizing) -> tuple[int, tuple[str, Any]]:
        names = list(sizing.required)
        total = 0
        biggest: tuple[int, Any] = (0, None)
        for name in names:
            value, sub = self._member_min(sizing, name, len(names))
            total = _cap(total + len(name) + 3 + value)
            if value > biggest[0]:
                biggest = (value, sub)
        least, owner = sizing.count("minProperties", node)
        count = max(least, len(names))
        extra = count - len(names)
        chars = _cap(2 + total + extra * 4 + max(count - 1, 0))
        if type(biggest[1]) is dict and biggest[0] * 2 >= chars:
            return chars, ("child", biggest[1])
        if not count:
            return chars, ("key", "type")
        if extra * 4 > total:
            return chars, ("at", (owner, "minProperties"))
        return chars, ("at", (sizing.required_at or node, "required"))

    def _member_min(self, sizing: _Sizing, name: str, required: int) -> tuple[int, Any]:
        """The smallest value of a required member, and the subschema that sizes it."""
        declared = [props[name] for props in sizing.properties if name in props]
        if declared:
            sub = max(declared, key=lambda s: self.part(s).min_chars)
            return self.part(sub).min_chars, sub
        if sizing.patterns:
            if required * len(sizing.patterns) > _MAX_PATTERN_LOOKUPS:
                return 1, None
            matched = [s for p, s in sizing.patterns if search(p, name)]
            if matched:
                sub = max(matched, key=lambda s: self.part(s).min_chars)
                return self.part(sub).min_chars, sub
        if sizing.extras:
            sub = max(sizing.extras, key=lambda s: self.part(s).min_chars)
            return self.part(sub).min_chars, sub
        return 1, None

    # --- where --------------------------------------------------------------------------

    def _place(self, node: Any, why_of: Any) -> Path:
        """The path of the keyword a figure comes from, following the subschemas that made it."""
        seen: set[int] = set()
        while type(node) is dict and id(node) not in seen:
            seen.add(id(node))
            part = self.parts.get(id(node))
            if part is None:
                break
            kind, what = why_of(part)
            if kind == "child":
                node = what
                continue
            if kind == "at":
                node, what = what
            where = path_to(self.root, node)
            return (*where, what) if what else where
        return path_to(self.root, node) if type(node) is dict else ()


def _combinator(node: dict[str, Any]) -> str:
    """The keyword that checks a value against several subschemas at one place."""
    for key in ("anyOf", "oneOf", "allOf", "$ref", "$dynamicRef", "if", "not"):
        if key in node:
            return key
    return ""
