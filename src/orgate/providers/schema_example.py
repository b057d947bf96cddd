"""Make a JSON value that satisfies a JSON Schema (used by the built-in test model).

Deterministic: the same schema and seed text give the same value. Every
sub-schema yields a stream of *candidate* values in order of preference
(strings drawn from the seed text first); each candidate is checked with
``jsonschema`` (the schema's own draft, Draft 2020-12 by default, formats
checked) and the first valid one wins, so the result is valid by
construction whenever a candidate is. Covers ``type`` (and type lists),
``properties``/``required``/``additionalProperties``/``patternProperties``/
``propertyNames``/``min``-``maxProperties``/``dependentRequired``/
``dependentSchemas``, ``items``/``prefixItems``/``contains``/``min``-
``maxItems``/``uniqueItems``, ``enum``/``const``, ``anyOf``/``oneOf``/
``allOf``/``not``/``if``-``then``-``else``, ``$ref`` (``$defs``,
``definitions``, ``$anchor``, ``$id``, recursion), numeric bounds and
``multipleOf``, string lengths, ``pattern`` (a string is generated from the
regular expression) and the common ``format`` values.

When no candidate is valid — a contradictory schema (``{"type": "integer",
"minimum": 5, "maximum": 1}``, ``false``, a ``required`` key that
``additionalProperties: false`` forbids…) or a ``multipleOf`` that float
division cannot meet (``0.3 / 0.1`` is not an integer in binary floating
point) — the result is a best effort: the first candidate, or ``None`` when
there is none.

Bounded: no candidate longer than ``max_chars`` characters of JSON is validated or
returned (its size is counted before any check, so a gigabyte of repeated strings is never
serialized, walked or sent); the validations are limited in number and in the characters
they walk, and ``seconds`` ends the search with the best effort so far. Uniqueness is
decided by canonical keys, in linear time.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from decimal import Decimal
from typing import Any, cast

import jsonschema
from jsonschema.validators import validator_for
from referencing import Registry
from referencing.jsonschema import DRAFT202012, specification_with

from orgate.gate import patterns as safe_patterns
from orgate.providers import regex_tree

Resolver = Any  # referencing's resolver (not exported under a public name)

_MAX_DEPTH = 24
_SOFT_DEPTH = 5  # deeper than this, prefer the smallest values (ends recursion)
_MAX_CANDIDATES = 48  # candidates tried per sub-schema
_BUDGET = 20000  # validations per call, then best effort
_STEPS = (
    200_000  # sub-schemas expanded per call (``$ref`` trees can be exponential), then best effort
)
_MAX_TEXT = 100_000  # characters of one generated string, then no candidate
_MAX_COUNT = 10_000  # items or properties of one generated value, then no candidate
_WORK = 4_000_000  # values (and 16 characters of a string) validated per call, then best effort
_ROOT_URI = "urn:orgate:schema-example"

_FORMATS: dict[str, list[str]] = {
    "date-time": ["2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z"],
    "date": ["2026-01-01", "2026-01-02", "2026-01-03"],
    "time": ["00:00:00Z", "01:00:00Z", "02:00:00Z"],
    "duration": ["P1D", "P2D", "PT1H"],
    "email": ["user@example.com", "a@b.co", "a@b", "user2@example.com"],
    "idn-email": ["user@example.com", "a@b.co", "a@b"],
    "uri": ["https://example.com/", "https://example.com/a", "urn:a"],
    "url": ["https://example.com/", "https://example.com/a"],
    "iri": ["https://example.com/", "https://example.com/a"],
    "uri-reference": ["https://example.com/", "/a", "a"],
    "iri-reference": ["https://example.com/", "/a", "a"],
    "uri-template": ["https://example.com/{id}", "https://example.com/"],
    "uuid": [
        "00000000-0000-4000-8000-000000000000",
        "00000000-0000-4000-8000-000000000001",
        "00000000-0000-4000-8000-000000000002",
    ],
    "ipv4": ["192.0.2.1", "192.0.2.2", "192.0.2.3"],
    "ipv6": ["2001:db8::1", "2001:db8::2", "::1"],
    "hostname": ["example.com", "a.example.com", "a"],
    "idn-hostname": ["example.com", "a.example.com", "a"],
    "regex": [".*", "^a$", "a"],
    "json-pointer": ["/a", "", "/b"],
    "relative-json-pointer": ["0", "1", "0/a"],
}

_STRING_KEYS = ("minLength", "maxLength", "pattern", "format")
_NUMBER_KEYS = (
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
)
_OBJECT_KEYS = (
    "properties",
    "required",
    "additionalProperties",
    "patternProperties",
    "propertyNames",
    "minProperties",
    "maxProperties",
    "dependentRequired",
    "dependentSchemas",
)
_ARRAY_KEYS = ("items", "prefixItems", "contains", "minItems", "maxItems", "uniqueItems")
_TYPE_ORDER = ("object", "array", "string", "integer", "number", "boolean", "null")
_LOWER_BOUNDS = (
    "minimum",
    "exclusiveMinimum",
    "minLength",
    "minItems",
    "minProperties",
    "minContains",
)
_UPPER_BOUNDS = (
    "maximum",
    "exclusiveMaximum",
    "maxLength",
    "maxItems",
    "maxProperties",
    "maxContains",
)
_MISSING = object()


def _dict_at(schema: dict[str, Any], key: str) -> dict[str, Any]:
    """``schema[key]`` when it is an object, else an empty one."""
    value = schema.get(key)
    return value if isinstance(value, dict) else {}


def _list_at(schema: dict[str, Any], key: str) -> list[Any]:
    """``schema[key]`` when it is an array, else an empty one."""
    value = schema.get(key)
    return value if isinstance(value, list) else []


def _int_at(schema: dict[str, Any], key: str) -> int | None:
    """``schema[key]`` when it is an integer, else None."""
    value = schema.get(key)
    return value if isinstance(value, int) else None


def _count_at(schema: dict[str, Any], key: str, default: int) -> int:
    """``schema[key]`` when it is an integer, else ``default``."""
    value = schema.get(key)
    return value if isinstance(value, int) else default


def _str_at(schema: dict[str, Any], key: str) -> str | None:
    """``schema[key]`` when it is a string, else None."""
    value = schema.get(key)
    return value if isinstance(value, str) else None


class _OutOfBudget(Exception):
    pass


def example_for(
    schema: Any,
    text: str = "example",
    max_chars: int | None = None,
    seconds: float | None = None,
) -> Any:
    """A value for ``schema`` (``None`` if it is unsatisfiable, or if none fits in
    ``max_chars`` characters of JSON); strings are drawn from ``text``. ``seconds``: the time
    the search may take, then the best effort so far."""
    if schema is True or schema is None:
        return {}
    if schema is False:
        return None
    if not isinstance(schema, dict):
        return None
    try:
        maker = _Maker(schema, text, max_chars, seconds)
    except Exception:  # a schema jsonschema cannot load: best effort, unchecked
        return {}
    value = maker.make(schema, 0, maker.resolver)
    return None if value is _MISSING else value


class _Maker:
    def __init__(
        self, root: dict[str, Any], text: str, max_chars: int | None, seconds: float | None
    ) -> None:
        self.root = root
        self.text = text.strip() or "example"
        self.max_chars = max_chars
        self.deadline = None if seconds is None else time.monotonic() + seconds
        self.work = _WORK
        self.sizes: dict[int, tuple[Any, int]] = {}
        self.weights: dict[int, tuple[Any, int]] = {}
        cls = safe_patterns.bounded(validator_for(root, default=jsonschema.Draft202012Validator))
        self.cls = cls
        try:
            spec = specification_with(cls.META_SCHEMA.get("$schema", ""), default=DRAFT202012)
        except Exception:  # pragma: no cover
            spec = DRAFT202012
        resource = spec.create_resource(root)
        self.registry: Registry = Registry().with_resource(_ROOT_URI, resource)
        self.registry = self.registry.crawl()
        self.resolver: Resolver = self.registry.resolver(base_uri=_ROOT_URI)
        self.budget = _BUDGET
        self.steps = _STEPS
        self.cache: dict[tuple[int, bool], tuple[Any, Any]] = {}

    # --- validation ----------------------------------------------------------------------

    def valid(self, schema: Any, value: Any, resolver: Resolver) -> bool:
        if value is _MISSING:
            return False
        self.budget -= 1
        self.work -= _json_size(value, _WORK + 1, self.weights, string_weight=16)
        if self.budget < 0 or self.work < 0:
            raise _OutOfBudget
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise _OutOfBudget
        if isinstance(schema, bool):
            return schema
        try:
            validator = self.cls(
                schema,
                format_checker=self.cls.FORMAT_CHECKER,
                registry=self.registry,
                _resolver=resolver,
            )
            valid: bool = validator.is_valid(value)
            return valid
        except _OutOfBudget:
            raise
        except Exception:
            return False

    # --- sizes -----------------------------------------------------------------------------

    def size(self, value: Any) -> int:
        """About the characters of ``value`` as compact JSON (a string counts its characters
        and quotes), counted up to just past ``max_chars`` (or ``_WORK``) and no further:
        a list of ten thousand copies of one long string costs a few steps, not its size."""
        limit = (self.max_chars if self.max_chars is not None else _WORK) + 1
        return _json_size(value, limit, self.sizes)

    def fits(self, value: Any) -> bool:
        return self.max_chars is None or self.size(value) <= self.max_chars

    # --- entry points --------------------------------------------------------------------

    def make(self, schema: Any, depth: int, resolver: Resolver) -> Any:
        """The first valid candidate of ``schema`` (else the first candidate, else missing)."""
        key = (id(schema), depth > _SOFT_DEPTH)
        hit = self.cache.get(key)
        if hit is not None and hit[0] is schema:
            return hit[1]
        result = self._make(schema, depth, resolver)
        self.cache[key] = (schema, result)
        return result

    def _make(self, schema: Any, depth: int, resolver: Resolver) -> Any:
        first: Any = _MISSING
        try:
            for value in self.values(schema, depth, resolver, 1):
                return value
        except _OutOfBudget:
            pass
        if first is _MISSING and self.steps > 0:
            try:
                first = next(iter(self.candidates(schema, depth, resolver)), _MISSING)
            except (_OutOfBudget, RecursionError):
                first = _MISSING
        return first if first is _MISSING or self.fits(first) else _MISSING

    def values(self, schema: Any, depth: int, resolver: Resolver, limit: int) -> Iterator[Any]:
        """Up to ``limit`` distinct valid values of ``schema``."""
        seen: set[Any] = set()
        tried = 0
        for value in self.candidates(schema, depth, resolver):
            tried += 1
            if tried > _MAX_CANDIDATES * max(1, limit):
                return
            if value is _MISSING or not self.fits(value):
                continue
            key = _canonical(value)
            if key in seen:
                continue
            if self.valid(schema, value, resolver):
                seen.add(key)
                yield value
                if len(seen) >= limit:
                    return

    # --- candidates ----------------------------------------------------------------------

    def candidates(self, schema: Any, depth: int, resolver: Resolver) -> Iterator[Any]:
        self.steps -= 1
        if self.steps < 0:
            raise _OutOfBudget
        if schema is True:
            schema = {}
        if not isinstance(schema, dict) or depth > _MAX_DEPTH:
            return
        if "$ref" in schema and isinstance(schema["$ref"], str):
            expanded = _expand_ref(schema, resolver)
            if expanded is not None:
                yield from self.candidates(expanded[0], depth + 1, expanded[1])
            return
        if "$id" in schema and depth > 0 and isinstance(schema["$id"], str):
            resolver = resolver.in_subresource(DRAFT202012.create_resource(schema))
        if "const" in schema:
            yield schema["const"]
            return
        if isinstance(schema.get("enum"), list):
            yield from schema["enum"]
            return
        alternatives = _alternatives(schema, depth, resolver)
        if alternatives is not None:
            for sub in alternatives:
                yield from self.candidates(sub, depth + 1, resolver)
            return
        for kind in _kinds(schema, depth):
            yield from getattr(self, f"_{kind}")(schema, depth, resolver)

    def _object(self, schema: dict[str, Any], depth: int, resolver: Resolver) -> Iterator[Any]:
        props = _dict_at(schema, "properties")
        required = [r for r in schema.get("required", []) or [] if isinstance(r, str)]
        dependent = schema.get("dependentRequired")
        dependent = dependent if isinstance(dependent, dict) else {}
        dep_schemas = schema.get("dependentSchemas")
        dep_schemas = dep_schemas if isinstance(dep_schemas, dict) else {}
        min_props = _count_at(schema, "minProperties", 0)
        max_props = schema.get("maxProperties")
        deep = depth > _SOFT_DEPTH

        def value_for(name: str) -> Any:
            return self.make(self.property_schema(schema, name), depth + 1, resolver)

        def close(keys: list[str]) -> list[str]:
            keys = list(dict.fromkeys(keys))
            for _ in range(4):
                for key in list(keys):
                    for need in dependent.get(key, []) or []:
                        if isinstance(need, str) and need not in keys:
                            keys.append(need)
                    extra = dep_schemas.get(key)
                    if isinstance(extra, dict):
                        for need in extra.get("required", []) or []:
                            if isinstance(need, str) and need not in keys:
                                keys.append(need)
            return keys

        def build(keys: list[str]) -> Any:
            value: dict[str, Any] = {}
            room = self.max_chars  # what is left of it: optional members that pass it are left out
            for name in keys:
                sub = self.property_schema(schema, name)
                for key, extra in dep_schemas.items():
                    if key in keys and isinstance(extra, dict):
                        inner = extra.get("properties")
                        if isinstance(inner, dict) and name in inner:
                            sub = _merge(
                                sub if isinstance(sub, dict) else {}, {"allOf": [inner[name]]}
                            )
                made = self.make(sub, depth + 1, resolver)
                if made is not _MISSING and room is not None:
                    taken = len(name) + 4 + self.size(made)
                    if taken > room and name not in required:
                        continue
                    room -= taken
                if made is _MISSING:
                    if name in required:
                        return _MISSING
                    continue
                value[name] = made
            if len(value) < min_props:
                for extra_key in self.extra_keys(schema, min_props - len(value), set(value)):
                    made = value_for(extra_key)
                    if made is not _MISSING:
                        value[extra_key] = made
            return value

        everything = close([*props, *required])
        minimal = close(required)
        plans = [minimal, everything] if deep else [everything, minimal]
        if isinstance(max_props, int):
            plans.append(minimal[:max_props])
        for keys in plans:
            if isinstance(max_props, int) and len(keys) > max_props:
                keys = close(required)
            yield build(keys)
        # without optional keys that break dependencies / `not`: one property at a time
        for name in props:
            if name not in minimal:
                yield build(close([*required, name]))
        # variants (for uniqueItems): vary the first key's value
        first_keys = everything if everything else []
        if first_keys:
            name = first_keys[0]
            base = build(first_keys)
            if isinstance(base, dict):
                sub = self.property_schema(schema, name)
                for i, alt in enumerate(self.values(sub, depth + 1, resolver, 8)):
                    if i:
                        yield {**base, name: alt}

    def property_schema(self, schema: dict[str, Any], name: str) -> Any:
        props = _dict_at(schema, "properties")
        if name in props:
            return props[name]
        patterns = schema.get("patternProperties")
        if isinstance(patterns, dict):
            for pattern, sub in patterns.items():
                if safe_patterns.search(pattern, name):
                    return sub
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            return extra
        return {"type": "string"}

    def extra_keys(self, schema: dict[str, Any], count: int, used: set[str]) -> list[str]:
        """``count`` new property names the schema accepts (patternProperties, propertyNames)."""
        if count > _MAX_COUNT:
            return []
        pools: list[str] = []
        patterns = schema.get("patternProperties")
        if isinstance(patterns, dict):
            for pattern in patterns:
                pools.extend(_strings_for_pattern(pattern, 12))
        names = schema.get("propertyNames")
        if isinstance(names, dict) and isinstance(names.get("pattern"), str):
            pools.extend(_strings_for_pattern(names["pattern"], 12))
        if schema.get("additionalProperties") is not False:
            pools.extend(f"key{i}" for i in range(count + 4))
            pools.extend(
                "key" + "abcdefghijklmnopqrstuvwxyz"[i % 26] * (1 + i // 26)
                for i in range(count + 4)
            )
        out: list[str] = []
        for name in pools:
            if name in used or name in out:
                continue
            if isinstance(names, dict | bool) and not self.valid(names, name, self.resolver):
                continue
            out.append(name)
            if len(out) >= count:
                break
        return out

    def _array(self, schema: dict[str, Any], depth: int, resolver: Resolver) -> Iterator[Any]:
        prefix = _list_at(schema, "prefixItems")
        items = schema.get("items", True)
        if isinstance(items, list):  # draft 4-7 tuple form
            prefix, items = items, schema.get("additionalItems", True)
        contains = schema.get("contains")
        min_items = _count_at(schema, "minItems", 0)
        max_items = _int_at(schema, "maxItems")
        min_contains = _count_at(schema, "minContains", 1)
        unique = bool(schema.get("uniqueItems"))
        deep = depth > _SOFT_DEPTH
        counts = [min_items, max(min_items, 1)] if deep else [max(min_items, 1), min_items]
        if contains is not None:
            counts = [max(c, min_contains) for c in counts]
        counts = [max(c, 0) for c in counts]
        if max_items is not None:
            counts = [min(c, max_items) for c in counts]
        for count in dict.fromkeys(counts):
            yield self._build_array(
                prefix, items, contains, min_contains, count, unique, depth, resolver
            )

    def _build_array(
        self,
        prefix: list[Any],
        items: Any,
        contains: Any,
        min_contains: int,
        count: int,
        unique: bool,
        depth: int,
        resolver: Resolver,
    ) -> Any:
        if count > _MAX_COUNT or (self.max_chars is not None and 2 * count > self.max_chars):
            return _MISSING  # each item is a character and a comma at least
        values: list[Any] = []
        pool_cache: dict[int, list[Any]] = {}
        used: set[Any] = set()
        cursor: dict[int, int] = {}

        def pool(sub: Any, need: int) -> list[Any]:
            key = id(sub)
            if key not in pool_cache or len(pool_cache[key]) < need:
                pool_cache[key] = list(self.values(sub, depth + 1, resolver, need))
            return pool_cache[key]

        def fresh(options: list[Any], key: int) -> Any:
            """The next option not used yet (the options are distinct: one pass over them)."""
            at = cursor.get(key, 0)
            while at < len(options) and _canonical(options[at]) in used:
                at += 1
            cursor[key] = at + 1
            return options[at] if at < len(options) else _MISSING

        n_contains = min_contains if contains is not None else 0
        for i in range(count):
            if i < len(prefix):
                sub: Any = prefix[i]
            else:
                sub = items if items is not None else True
                if i - len(prefix) < n_contains and contains is not None:
                    sub = {"allOf": [sub if isinstance(sub, dict | bool) else {}, contains]}
            if sub is False:
                return _MISSING
            if unique:
                choice = fresh(pool(sub, count), id(sub))
                if choice is not _MISSING:
                    used.add(_canonical(choice))
            else:
                choice = self.make(sub, depth + 1, resolver)
            if choice is _MISSING:
                return _MISSING
            values.append(choice)
        return values

    def _string(self, schema: dict[str, Any], depth: int, resolver: Resolver) -> Iterator[Any]:
        fmt = schema.get("format")
        low = _count_at(schema, "minLength", 0)
        high = _int_at(schema, "maxLength")
        pattern = _str_at(schema, "pattern")
        bases: list[str] = []
        if isinstance(fmt, str) and fmt in _FORMATS:
            bases.extend(_FORMATS[fmt])
        else:
            bases.extend([self.text, "example", "a", "", "b", "example 2"])
            bases.extend(f"{self.text} {i}" for i in range(2, 6))
        if pattern is not None:
            generated = _strings_for_pattern(pattern, 16, low, high)
            if bases and not _anchored_start(pattern):
                generated += [bases[0] + g for g in generated[:4]]
            bases = [b for b in bases if _search(pattern, b)] + generated + bases
        for base in dict.fromkeys(bases):
            yield _fit(base, low, high)

    def _integer(self, schema: dict[str, Any], depth: int, resolver: Resolver) -> Iterator[Any]:
        yield from _numbers(schema, integer=True)

    def _number(self, schema: dict[str, Any], depth: int, resolver: Resolver) -> Iterator[Any]:
        yield from _numbers(schema, integer=False)

    def _boolean(self, schema: dict[str, Any], depth: int, resolver: Resolver) -> Iterator[Any]:
        yield True
        yield False

    def _null(self, schema: dict[str, Any], depth: int, resolver: Resolver) -> Iterator[Any]:
        yield None


# --- helpers -------------------------------------------------------------------------------


def _canonical(value: Any) -> Any:
    """A hashable key equal for JSON-equal values (``1`` and ``1.0`` alike, ``1`` and
    ``true`` not), as JSON Schema's ``uniqueItems`` and ``enum`` compare them."""
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, int | float):
        return ("n", int(value) if isinstance(value, float) and value.is_integer() else value)
    if isinstance(value, str):
        return ("s", value)
    if isinstance(value, list):
        return ("l", tuple(_canonical(v) for v in value))
    if isinstance(value, dict):
        return ("d", tuple(sorted((k, _canonical(v)) for k, v in value.items())))
    return ("z", None) if value is None else ("o", id(value))


def _json_size(
    value: Any, limit: int, memo: dict[int, tuple[Any, int]], string_weight: int = 1
) -> int:
    """The size of ``value`` as compact JSON, strings counted by characters and quotes (escapes
    not counted; ``string_weight`` characters as one), each list and object measured once
    (``memo``, by identity); stops past ``limit``."""
    if isinstance(value, str):
        return len(value) // string_weight + 2
    if value is None or isinstance(value, bool):
        return 4 if value is not False else 5
    if isinstance(value, int | float):
        return len(repr(value))
    if not isinstance(value, list | dict):
        return 1
    known = memo.get(id(value))
    if known is not None and known[0] is value:
        return known[1]
    total = 2
    if isinstance(value, list):
        for item in value:
            total += _json_size(item, limit, memo, string_weight) + 1
            if total > limit:
                break
    else:
        for key, item in value.items():
            total += len(key) + 4 + _json_size(item, limit, memo, string_weight)
            if total > limit:
                break
    memo[id(value)] = (value, total)
    return total


def _same(a: Any, b: Any) -> bool:
    """JSON equality (``1 == True`` is not)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return (
        type(a) in (int, float)
        and type(b) in (int, float)
        and a == b
        or (type(a) is type(b) and a == b)
    )


def _option_rank(option: Any, deep: bool) -> int:
    if not isinstance(option, dict):
        return 2
    is_null = option.get("type") == "null" or option.get("const", 0) is None
    if deep:
        return 0 if is_null else (2 if "$ref" in option else 1)
    return 1 if is_null else 0


def _expand_ref(
    schema: dict[str, Any], resolver: Resolver
) -> tuple[dict[str, Any], Resolver] | None:
    """A ``$ref`` schema as its target merged with its other keywords, and the resolver of the
    target's document; None when the target is ``false`` (no value). An unresolvable reference
    is an empty target."""
    try:
        resolved = resolver.lookup(schema["$ref"])
    except Exception:
        target: Any = {}
        inner = resolver
    else:
        target, inner = resolved.contents, resolved.resolver
    if target is False:
        return None
    rest = {k: v for k, v in schema.items() if k != "$ref"}
    return _merge(target if isinstance(target, dict) else {}, rest), inner


def _alternatives(
    schema: dict[str, Any], depth: int, resolver: Resolver
) -> Iterator[dict[str, Any]] | None:
    """The schemas whose candidates are this one's when it combines others — ``allOf`` merged
    into one, ``anyOf`` / ``oneOf`` options best first, ``if``: its then-branch, then its
    else-branch — or None when it combines none."""
    if isinstance(schema.get("allOf"), list):
        return iter([_merge_all_of(schema, resolver)])
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            return _options(schema, key, options, depth)
    if isinstance(schema.get("if"), dict | bool):
        return _branches(schema)
    return None


def _merge_all_of(schema: dict[str, Any], resolver: Resolver) -> dict[str, Any]:
    merged = {k: v for k, v in schema.items() if k != "allOf"}
    for sub in schema["allOf"]:
        if isinstance(sub, dict) and "$ref" in sub:
            try:
                sub = resolver.lookup(sub["$ref"]).contents
            except Exception:
                sub = {}
        if isinstance(sub, dict):
            merged = _merge(merged, sub)
    return merged


def _options(
    schema: dict[str, Any], key: str, options: list[Any], depth: int
) -> Iterator[dict[str, Any]]:
    base = {k: v for k, v in schema.items() if k != key}
    for option in sorted(options, key=lambda o: _option_rank(o, depth > _SOFT_DEPTH)):
        if isinstance(option, dict):
            yield _merge(base, option)


def _branches(schema: dict[str, Any]) -> Iterator[dict[str, Any]]:
    base = {k: v for k, v in schema.items() if k not in ("if", "then", "else")}
    cond = schema["if"] if isinstance(schema["if"], dict) else {}
    then = _dict_at(schema, "then")
    other = _dict_at(schema, "else")
    yield _merge(_merge(base, cond), then)
    yield _merge(base, other)


def _kinds(schema: dict[str, Any], depth: int) -> list[str]:
    """The JSON types to try for ``schema``, most preferred first."""
    kind = schema.get("type")
    if isinstance(kind, str):
        kinds = [kind]
    elif isinstance(kind, list):
        kinds = _listed_kinds([k for k in kind if isinstance(k, str)], depth)
    else:
        kinds = _implied_kinds(schema, depth)
    return [k for k in kinds if k in _TYPE_ORDER]


def _listed_kinds(kinds: list[str], depth: int) -> list[str]:
    """A ``type`` list in its order, ``null`` first when deep (it ends recursion), else last."""
    rest = [k for k in kinds if k != "null"]
    if "null" not in kinds:
        return rest
    return ["null", *rest] if depth > _SOFT_DEPTH else [*rest, "null"]


def _implied_kinds(schema: dict[str, Any], depth: int) -> list[str]:
    """Without ``type``: the types its keywords speak of first (an object at the top, else a
    string, when none do), then every other type."""
    kinds = [
        kind
        for kind, keys in (
            ("object", _OBJECT_KEYS),
            ("array", (*_ARRAY_KEYS, "minContains", "maxContains")),
            ("string", _STRING_KEYS),
            ("number", _NUMBER_KEYS),
        )
        if any(k in schema for k in keys)
    ]
    if not kinds:
        kinds = ["object"] if depth == 0 else ["string"]
    return kinds + [k for k in _TYPE_ORDER if k not in kinds]


def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """A schema for generating values of ``allOf: [a, b]`` (validation checks the real one)."""
    out = dict(a)
    for key, value in b.items():
        if key not in out:
            out[key] = value
        elif key in _COMBINATORS:
            if isinstance(value, list):
                _merge_combinator(out, key, value)
        elif (rule := _merge_rule(key)) is not None and (
            merged := rule(out[key], value)
        ) is not _KEEP:
            out[key] = merged
    return out


#: What a merge rule returns when the key keeps ``a``'s value.
_KEEP = object()
_COMBINATORS = ("allOf", "anyOf", "oneOf")
_SUBSCHEMA_KEYS = ("items", "additionalProperties", "contains", "propertyNames", "not")


def _merge_rule(key: str) -> Any:
    """How ``key``'s two values combine (``(a's, b's) → merged or _KEEP``); None: ``a``'s
    stays."""
    if key in _LOWER_BOUNDS:
        return lambda mine, value: max(mine, value) if _is_num(value) and _is_num(mine) else _KEEP
    if key in _UPPER_BOUNDS:
        return lambda mine, value: min(mine, value) if _is_num(value) and _is_num(mine) else _KEEP
    if key in _SUBSCHEMA_KEYS:
        return _merge_subschema
    return _MERGE_RULES.get(key)


def _merge_properties(mine: Any, value: Any) -> Any:
    if not (isinstance(value, dict) and isinstance(mine, dict)):
        return _KEEP
    props = dict(mine)
    for name, sub in value.items():
        props[name] = {"allOf": [props[name], sub]} if name in props else sub
    return props


def _merge_required(mine: Any, value: Any) -> Any:
    if not (isinstance(value, list) and isinstance(mine, list)):
        return _KEEP
    return list(dict.fromkeys([*mine, *value]))


def _merge_type(mine: Any, value: Any) -> Any:
    """The types both allow (an integer is a number); ``a``'s when they share none."""
    left = mine if isinstance(mine, list) else [mine]
    right = value if isinstance(value, list) else [value]
    both = [t for t in left if t in right or (t == "integer" and "number" in right)]
    both += [t for t in right if t == "integer" and "number" in left and t not in both]
    return both or left


def _merge_enum(mine: Any, value: Any) -> Any:
    if not (isinstance(value, list) and isinstance(mine, list)):
        return _KEEP
    return [v for v in mine if any(_same(v, w) for w in value)]


def _merge_multiple_of(mine: Any, value: Any) -> Any:
    return _lcm(mine, value) if _is_num(value) and _is_num(mine) else _KEEP


def _merge_subschema(mine: Any, value: Any) -> Any:
    if isinstance(value, dict) and isinstance(mine, dict):
        return {"allOf": [mine, value]}
    return False if value is False else _KEEP


_MERGE_RULES: dict[str, Any] = {
    "properties": _merge_properties,
    "required": _merge_required,
    "type": _merge_type,
    "enum": _merge_enum,
    "multipleOf": _merge_multiple_of,
}


def _merge_combinator(out: dict[str, Any], key: str, value: list[Any]) -> None:
    """Both have ``key`` (allOf / anyOf / oneOf): allOf lists join, others become one more allOf
    entry."""
    if key == "allOf" and isinstance(out[key], list):
        out[key] = [*out[key], *value]
    else:
        out["allOf"] = [*(out.get("allOf") or []), {key: value}]


def _is_num(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _decimals(d: Decimal) -> int:
    """How many digits ``d`` has after the point (negative for trailing zeros)."""
    exponent = d.as_tuple().exponent
    assert isinstance(exponent, int), "a JSON number is finite"
    return -exponent


def _lcm(a: float, b: float) -> float:
    if isinstance(a, int) and isinstance(b, int):
        return abs(a * b) // math.gcd(a, b) if a and b else max(a, b)
    da, db = Decimal(str(a)), Decimal(str(b))
    scale = Decimal(10) ** max(_decimals(da), _decimals(db), 0)
    ia, ib = int(da * scale), int(db * scale)
    if not ia or not ib:
        return max(a, b)
    return float(Decimal(abs(ia * ib) // math.gcd(ia, ib)) / scale)


def _num_or_none(value: Any) -> Any:
    return value if _is_num(value) else None


class _NumberRange:
    """A number schema's bounds (draft 4's boolean exclusive bounds read as later drafts'),
    and the candidates kept so far: each valid one once (``1`` and ``1.0`` are two)."""

    def __init__(self, schema: dict[str, Any]) -> None:
        low, high = _num_or_none(schema.get("minimum")), _num_or_none(schema.get("maximum"))
        ex_low, ex_high = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
        if ex_low is True and low is not None:  # draft 4 booleans
            ex_low, low = low, None
        if ex_high is True and high is not None:
            ex_high, high = high, None
        self.low, self.high = low, high
        self.ex_low, self.ex_high = _num_or_none(ex_low), _num_or_none(ex_high)
        step = _num_or_none(schema.get("multipleOf"))
        self.step = None if step is not None and step <= 0 else step
        self.lower = max([b for b in (self.low, self.ex_low) if b is not None], default=None)
        self.upper = min([b for b in (self.high, self.ex_high) if b is not None], default=None)
        self.out: list[Any] = []

    def ok(self, v: float) -> bool:
        return (
            (self.low is None or v >= self.low)
            and (self.high is None or v <= self.high)
            and (self.ex_low is None or v > self.ex_low)
            and (self.ex_high is None or v < self.ex_high)
        )

    def emit(self, v: Any) -> None:
        if self.ok(v) and not any(type(v) is type(w) and v == w for w in self.out):
            self.out.append(v)

    def anchors(self) -> list[float]:
        """The numbers candidates start from: 1, near each bound, the middle, then 0, 2, -1."""
        lower, upper = self.lower, self.upper
        anchors: list[float] = [1]
        if lower is not None:
            anchors += [lower, math.floor(lower) + 1, lower + 1]
        if upper is not None:
            anchors += [upper, math.ceil(upper) - 1, upper - 1]
        if lower is not None and upper is not None:
            anchors.append((lower + upper) / 2)
        return [*anchors, 0, 2, -1]


def _numbers(schema: dict[str, Any], integer: bool) -> Iterator[Any]:
    numbers = _NumberRange(schema)
    if numbers.step is None:
        _free_numbers(numbers, integer)
    else:
        _multiples(numbers, numbers.step, integer)
    yield from numbers.out


def _free_numbers(numbers: _NumberRange, integer: bool) -> None:
    """Candidates without ``multipleOf``: the anchors (rounded both ways for an integer), for a
    number fractions of the range and halves beside the first integer, then 3 to 19."""
    for a in numbers.anchors():
        if integer:
            for v in (math.ceil(a), math.floor(a)):
                numbers.emit(int(v))
        else:
            numbers.emit(int(a) if float(a).is_integer() else a)
    if not integer:
        lower, upper = numbers.lower, numbers.upper
        if lower is not None and upper is not None:
            for frac in (0.5, 0.25, 0.75, 0.001, 0.999):
                numbers.emit(lower + (upper - lower) * frac)
        base = next((v for v in numbers.out if isinstance(v, int)), None)
        if base is not None:
            numbers.emit(base + 0.5)
            numbers.emit(base - 0.5)
    for extra in range(3, 20):
        numbers.emit(extra)


def _multiples(numbers: _NumberRange, step: float, integer: bool) -> None:
    """Candidates of a ``multipleOf``: multiples near each anchor (decimal arithmetic), then for
    an integer of a fractional step the smallest integer multiples, then the multiples that
    float division does not see as multiples (a best effort, last)."""
    dstep = Decimal(str(step))
    inexact: list[Any] = []
    for a in numbers.anchors():
        k0 = int((Decimal(str(a)) / dstep).to_integral_value())
        for k in (k0, k0 + 1, k0 - 1, k0 + 2, k0 - 2):
            raw = Decimal(k) * dstep
            v: Any = int(raw) if raw == raw.to_integral_value() else float(raw)
            if integer and not isinstance(v, int):
                continue
            if isinstance(v, float) and not (v / step).is_integer():
                inexact.append(v)  # a multiple in decimal, not in float division
                continue
            numbers.emit(v)
    if integer and not numbers.out:  # an integer multiple of a fraction: the smallest k giving one
        unit = _lcm(1, step)
        unit_int = int(unit) if float(unit).is_integer() else None
        if unit_int:
            start = math.ceil((numbers.lower if numbers.lower is not None else 1) / unit_int)
            for k in range(start, start + 5):
                numbers.emit(k * unit_int)
            for k in range(0, -5, -1):
                numbers.emit(k * unit_int)
    for v in inexact:
        numbers.emit(v)


def _fit(text: str, low: int, high: int | None) -> str:
    if low > _MAX_TEXT:
        return text  # a string that long is not generated: best effort
    if len(text) < low:
        text = text + "x" * (low - len(text))
    if high is not None and len(text) > high:
        text = text[:high]
    return text


def _search(pattern: str, text: str) -> bool:
    return safe_patterns.search(pattern, text)


def _anchored_start(pattern: str) -> bool:
    return pattern.startswith("^") or pattern.startswith("\\A")


def _strings_for_pattern(
    pattern: str, limit: int, low: int = 0, high: int | None = None
) -> list[str]:
    """Strings matching ``pattern`` (searched, as JSON Schema does), shortest first."""
    if not safe_patterns.valid(pattern):
        return []
    try:
        parsed = regex_tree.parse(pattern)
    except (regex_tree.PatternSyntaxError, RecursionError):
        return []
    out: list[str] = []
    for extra in (0, 1, 2, 3, 5, 8, max(low, 0), max(low, 0) * 2):
        for variant in range(4):
            gen = _RegexGen(extra, variant, low)
            try:
                text = gen.emit(parsed)
            except (_Unsupported, RecursionError):
                continue
            if safe_patterns.search(pattern, text) and text not in out:
                if len(text) >= low and (high is None or len(text) <= high):
                    out.insert(len([o for o in out if len(o) >= low]), text)
                else:
                    out.append(text)
            if len(out) >= limit:
                return out
    return out


class _Unsupported(Exception):
    pass


_CATEGORY_CHARS = {
    "DIGIT": "0123456789",
    "NOT_DIGIT": "abcxyzABC",
    "SPACE": " ",
    "NOT_SPACE": "abc012",
    "WORD": "abcxyz012ABC_",
    "NOT_WORD": "-. ",
}
_NEGATED_POOL = "aAbx0z1Z_- .@"


class _RegexGen:
    def __init__(self, extra: int, variant: int, low: int) -> None:
        self.extra = extra
        self.variant = variant
        self.low = low
        self.groups: dict[int, str] = {}
        self.size = 0  # characters emitted so far (nested repeats multiply)

    def pick(self, chars: str) -> str:
        return chars[self.variant % len(chars)]

    def emit(self, tree: regex_tree.Tree) -> str:
        out: list[str] = []
        for op, arg in tree:
            if op == "LITERAL":
                assert isinstance(arg, int)
                out.append(chr(arg))
            elif op == "ANY":
                out.append(self.pick("abcx"))
            elif op == "IN":
                out.append(self.char_in(cast("list[regex_tree.Node]", arg)))
            elif op == "REPEAT":
                out.append(self.repeat(arg))
            elif op == "GROUP":
                group, sub = cast("tuple[int | None, regex_tree.Tree]", arg)
                text = self.emit(sub)
                if group:
                    self.groups[group] = text
                out.append(text)
            elif op == "BRANCH":
                branches = cast("list[regex_tree.Tree]", arg)
                out.append(self.emit(branches[self.variant % len(branches)]))
            elif op == "GROUPREF":
                assert isinstance(arg, int)
                out.append(self.groups.get(arg, ""))
            elif op in ("AT", "ASSERT"):
                continue
            else:
                raise _Unsupported(op)
        return "".join(out)

    def repeat(self, arg: object) -> str:
        low, high, sub = cast("tuple[int, int | None, regex_tree.Tree]", arg)
        count = low + self.extra
        if high is not None:
            count = min(count, high)
        out: list[str] = []
        for _ in range(count):
            piece = self.emit(sub)
            self.size += len(piece)
            if self.size > _MAX_TEXT:
                raise _Unsupported("too long")
            out.append(piece)
        return "".join(out)

    def char_in(self, items: list[regex_tree.Node]) -> str:
        allowed: list[str] = []
        negate = False
        for op, arg in items:
            if op == "NEGATE":
                negate = True
            elif op == "LITERAL":
                allowed.append(chr(cast(int, arg)))
            elif op == "RANGE":
                lo, hi = cast("tuple[int, int]", arg)
                allowed.extend(chr(c) for c in range(lo, min(hi, lo + 25) + 1))
            elif op == "CATEGORY":
                allowed.extend(_CATEGORY_CHARS.get(str(arg), "a"))
        if negate:
            pool = [c for c in _NEGATED_POOL if c not in allowed]
            if not pool:
                raise _Unsupported("negated class")
            return self.pick("".join(pool))
        if not allowed:
            raise _Unsupported("empty class")
        return self.pick("".join(allowed))
