"""Strict-mode rules for ``json_schema`` (OpenAI Structured Outputs) — check and strictify.

Pure functions, no I/O:

- ``check(schema)`` lists every rule a schema breaks, each with its JSON path.
- ``strictify(schema)`` returns a strict-compatible equivalent when one exists,
  or the reasons there is none.
- ``denull(value, original)`` undoes the one output change strictify causes:
  an optional property made required-and-nullable comes back as ``null`` and
  is dropped again so the value validates against the client's schema.

The rules follow OpenAI's documented subset: the root is an object (not
``anyOf``); every object has ``additionalProperties: false`` and lists every
property in ``required``; arrays have ``items``; supported keywords only
(``type enum const anyOf $ref $defs definitions properties required
additionalProperties items pattern format minimum maximum exclusiveMinimum
exclusiveMaximum multipleOf minItems maxItems title description``); object
nesting depth ≤ 10; ≤ 5000 properties in total; ≤ 1000 enum values in total;
an enum of more than 250 values has ≤ 15 000 characters; ≤ 120 000 characters
of property names, definition names, enum and const values.

"Equivalent" means: every value the strict schema admits, after ``denull``,
validates against the original **or** is caught by the safety net, which always
validates against the client's original schema. Keywords the strict subset
lacks but that only narrow values (``minLength``, ``maxLength``, ``uniqueItems``,
``minProperties``, unsupported ``format``s…) are moved into the description so
the model still sees them, and are enforced by validation. Keywords that change
the *shape* of what is allowed (``patternProperties``, ``additionalProperties``
with a schema, free-form objects, ``not``, ``if/then/else``, ``prefixItems``…)
have no strict equivalent.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

MAX_DEPTH = 10
MAX_PROPERTIES = 5000
MAX_ENUM_VALUES = 1000
LARGE_ENUM = 250
LARGE_ENUM_CHARS = 15000
MAX_TOTAL_CHARS = 120000
# sub-schemas one strictify visits ($ref inlining repeats a target), then no strict equivalent
MAX_WALK = 10000

SUPPORTED = frozenset(
    {
        "type", "enum", "const", "anyOf", "$ref", "$defs", "definitions", "properties", "required",
        "additionalProperties", "items", "pattern", "format", "minimum", "maximum",
        "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems", "maxItems", "title",
        "description",
    }
)  # fmt: skip
SUPPORTED_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
# Annotations only: dropping them changes no validation result.
ANNOTATIONS = frozenset(
    {
        "default", "examples", "$comment", "$schema", "$id", "readOnly", "writeOnly", "deprecated",
        "contentEncoding", "contentMediaType", "contentSchema", "nullable", "discriminator",
    }
)  # fmt: skip
# Narrowing constraints: moved into the description, enforced by validation.
NARROWING = frozenset(
    {
        "minLength", "maxLength", "minProperties", "maxProperties", "uniqueItems", "contains",
        "minContains", "maxContains",
    }
)  # fmt: skip
# Keywords that change the shape of what is allowed: no strict equivalent.
SHAPE = frozenset(
    {
        "patternProperties", "propertyNames", "unevaluatedProperties", "unevaluatedItems",
        "prefixItems", "additionalItems", "not", "if", "then", "else", "dependentRequired",
        "dependentSchemas", "dependencies", "$anchor", "$dynamicRef", "$dynamicAnchor",
        "$recursiveRef", "$recursiveAnchor", "allOf",
    }
)  # fmt: skip


@dataclass(slots=True, frozen=True)
class Violation:
    """One broken strict-mode rule at ``path`` (a JSON pointer into the schema)."""

    path: str
    rule: str
    message: str
    fixable: bool

    def __str__(self) -> str:
        fix = "" if self.fixable else " [no strict equivalent]"
        return f"{self.path}: {self.message}{fix}"


@dataclass(slots=True)
class StrictResult:
    """Outcome of ``strictify``: ``schema`` is None when no strict equivalent exists."""

    schema: dict[str, Any] | None
    violations: list[Violation] = field(default_factory=list)
    changes: list[str] = field(default_factory=list)
    #: the schema with every fixable violation fixed, the blockers left as they were
    partial: Any = None

    @property
    def ok(self) -> bool:
        return self.schema is not None

    @property
    def blockers(self) -> list[Violation]:
        return [v for v in self.violations if not v.fixable]

    @property
    def optionalized(self) -> bool:
        """True when some optional property became required-and-nullable (``denull`` is needed)."""
        return any(v.rule == "required" for v in self.violations)


def _ptr(path: str, *parts: str | int) -> str:
    for p in parts:
        path += "/" + str(p).replace("~", "~0").replace("/", "~1")
    return path


def _types(node: dict[str, Any]) -> list[str]:
    t = node.get("type")
    if isinstance(t, str):
        return [t]
    if isinstance(t, list):
        return [str(x) for x in t]
    return []


def _accepts_null(node: Any, root: dict[str, Any], seen: frozenset[str] = frozenset()) -> bool:
    """Whether ``node`` admits ``null`` (following local refs; conservative)."""
    if node is True or node == {}:
        return True
    if not isinstance(node, dict):
        return False
    ref = node.get("$ref")
    if isinstance(ref, str):
        if ref in seen:
            return False
        target = resolve_ref(root, ref)
        if target is None or not _accepts_null(target, root, seen | {ref}):
            return False
    if "type" in node and "null" not in _types(node):
        return False
    if "enum" in node and None not in node["enum"]:
        return False
    if "const" in node and node["const"] is not None:
        return False
    for key in ("anyOf", "oneOf"):
        if key in node and not any(_accepts_null(b, root, seen) for b in node[key]):
            return False
    return not ("allOf" in node and not all(_accepts_null(b, root, seen) for b in node["allOf"]))


def resolve_ref(root: dict[str, Any], ref: str) -> Any:
    """Resolve a local ``#/...`` reference, or None."""
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        return None
    node: Any = root
    for raw in ref[2:].split("/"):
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def make_nullable(node: dict[str, Any]) -> dict[str, Any]:
    """``{"type": "string"}`` → ``{"type": ["string", "null"]}``; otherwise ``anyOf`` with null."""
    keys = set(node) - {"description", "title"}
    if (
        isinstance(node.get("type"), (str, list))
        and "$ref" not in node
        and "anyOf" not in node
        and "const" not in node
    ):
        out = dict(node)
        types = _types(node)
        if "null" not in types:
            out["type"] = [*types, "null"]
        if "enum" in out and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]
        return out
    if keys == {"anyOf"}:
        return {**node, "anyOf": [*node["anyOf"], {"type": "null"}]}
    if keys == {"enum"}:
        return {**node, "enum": [*node["enum"], None]} if None not in node["enum"] else node
    out = {"anyOf": [{k: v for k, v in node.items() if k != "description"}, {"type": "null"}]}
    if "description" in node:
        out["description"] = node["description"]
    return out


class _TooComplex(Exception):
    """The walk went past ``MAX_WALK`` sub-schemas: inlining ``$ref``s can grow exponentially."""


class _Walker:
    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.violations: list[Violation] = []
        self.properties = 0
        self.enum_values = 0
        self.chars = 0
        self.steps = 0

    def add(self, path: str, rule: str, message: str, fixable: bool) -> None:
        self.violations.append(Violation(path or "#", rule, message, fixable))

    def walk(self, node: Any, path: str, depth: int) -> Any:
        """``node`` made strict-compatible where it can be; every rule it breaks is recorded."""
        self.steps += 1
        if self.steps > MAX_WALK:
            raise _TooComplex
        if isinstance(node, bool) or not isinstance(node, dict):
            self.add(
                path,
                "any",
                f"schema {json.dumps(node)} allows any value; strict mode needs a typed schema",
                False,
            )
            return node
        out = self._merge_single_allof(dict(node), path)
        self._rewrite_unsupported_keywords(out, path)
        inlined = self._inlined_ref(out, path)
        if inlined is not None:
            return self.walk(inlined, path, depth)
        self._any_of(out, path, depth)
        self._count_values(out, path)
        types = _types(out)
        if not types and not ({"enum", "const", "anyOf", "$ref"} & set(out)):
            self.add(path, "type", "no 'type': strict mode needs every schema to be typed", False)
        if "object" in types:
            out = self._object(out, path, depth)
        if "array" in types:
            out = self._array(out, path, depth)
        self._definitions(out, path)
        return out

    def _merge_single_allof(self, out: dict[str, Any], path: str) -> dict[str, Any]:
        """``out`` with an ``allOf`` of one member merged in, when no key would be overwritten."""
        one = out.get("allOf")
        if (
            isinstance(one, list)
            and len(one) == 1
            and isinstance(one[0], dict)
            and not (set(one[0]) & (set(out) - {"allOf"}))
        ):
            self.add(
                _ptr(path, "allOf"),
                "allOf",
                "allOf with one member is merged into its parent",
                True,
            )
            out.update(out.pop("allOf")[0])
        return out

    def _rewrite_unsupported_keywords(self, out: dict[str, Any], path: str) -> None:
        """Apply the rule of each keyword outside the subset; narrowing ones join the
        description."""
        narrowing: list[str] = []
        for key in list(out):
            if key not in SUPPORTED and (note := self._unsupported_keyword(out, key, path)):
                narrowing.append(note)
        fmt = out.get("format")
        if isinstance(fmt, str) and fmt not in SUPPORTED_FORMATS:
            self.add(
                _ptr(path, "format"),
                "narrowing",
                f"format '{fmt}' is not supported; moved to the description",
                True,
            )
            narrowing.append(f"format={json.dumps(out.pop('format'))}")
        if narrowing:
            note = "Constraints: " + ", ".join(narrowing) + "."
            out["description"] = f"{out['description']} {note}" if out.get("description") else note

    def _unsupported_keyword(self, out: dict[str, Any], key: str, path: str) -> str | None:
        """Rewrite, remove or report ``key``; the ``key=value`` note for a narrowing keyword."""
        at = _ptr(path, key)
        if key == "oneOf":
            self.add(at, "oneOf", "oneOf is not supported; anyOf is used instead", True)
            out["anyOf"] = out.pop("oneOf")
        elif key in ANNOTATIONS:
            self.add(at, "annotation", f"'{key}' is not permitted; removed (annotation only)", True)
            del out[key]
        elif key in NARROWING:
            self.add(
                at,
                "narrowing",
                f"'{key}' is not supported; moved to the description and enforced by validation",
                True,
            )
            return f"{key}={json.dumps(out.pop(key))}"
        elif key in SHAPE:
            self.add(
                at,
                "unsupported",
                f"'{key}' is not supported in strict mode and has no strict equivalent",
                False,
            )
        else:  # vendor extensions (x-…) and keywords no validator knows
            self.add(
                at, "annotation", f"unknown keyword '{key}' removed (ignored by validation)", True
            )
            del out[key]
        return None

    def _inlined_ref(self, out: dict[str, Any], path: str) -> dict[str, Any] | None:
        """The ``$ref`` target merged with its siblings when they must be inlined, else None."""
        ref = out.get("$ref")
        if not isinstance(ref, str):
            return None
        target = resolve_ref(self.root, ref)
        if target is None:
            self.add(
                _ptr(path, "$ref"),
                "ref",
                f"$ref {ref!r} is not a local reference that resolves",
                False,
            )
        elif len(set(out) - {"$ref", "description", "title"}) > 0:
            self.add(path, "ref-siblings", "$ref with sibling keywords is inlined", True)
            if isinstance(target, dict):
                return _merge(target, {k: v for k, v in out.items() if k != "$ref"})
        return None

    def _any_of(self, out: dict[str, Any], path: str, depth: int) -> None:
        if "anyOf" not in out:
            return
        if not isinstance(out["anyOf"], list) or not out["anyOf"]:
            self.add(_ptr(path, "anyOf"), "anyOf", "anyOf must be a non-empty list", False)
        else:
            out["anyOf"] = [
                self.walk(b, _ptr(path, "anyOf", i), depth) for i, b in enumerate(out["anyOf"])
            ]

    def _count_values(self, out: dict[str, Any], path: str) -> None:
        """Count ``enum`` and ``const`` values towards the schema-wide limits."""
        if "enum" in out and isinstance(out["enum"], list):
            self._count_enum(out["enum"], _ptr(path, "enum"))
        if "const" in out:
            self.chars += len(str(out["const"]))

    def _definitions(self, out: dict[str, Any], path: str) -> None:
        """Walk ``$defs`` and ``definitions``; each definition starts at nesting depth 1."""
        for defs_key in ("$defs", "definitions"):
            if isinstance(out.get(defs_key), dict):
                self.chars += sum(len(k) for k in out[defs_key])
                out[defs_key] = {
                    k: self.walk(v, _ptr(path, defs_key, k), 1) for k, v in out[defs_key].items()
                }

    def _count_enum(self, values: list[Any], path: str) -> None:
        self.enum_values += len(values)
        chars = sum(len(str(v)) for v in values)
        self.chars += chars
        if len(values) > LARGE_ENUM and chars > LARGE_ENUM_CHARS:
            self.add(
                path,
                "limit",
                f"enum of {len(values)} values has {chars} characters (limit "
                f"{LARGE_ENUM_CHARS} above {LARGE_ENUM} values)",
                False,
            )

    def _object(self, out: dict[str, Any], path: str, depth: int) -> dict[str, Any]:
        if depth > MAX_DEPTH:
            self.add(path, "limit", f"object nesting depth {depth} exceeds {MAX_DEPTH}", False)
        props = out.get("properties")
        if props is not None and not isinstance(props, dict):
            self.add(_ptr(path, "properties"), "properties", "properties must be an object", False)
            return out
        props = props or {}
        extra = out.get("additionalProperties", True)
        if isinstance(extra, dict) and extra:
            self.add(
                _ptr(path, "additionalProperties"),
                "additionalProperties",
                "additionalProperties with a schema (a map) has no strict equivalent",
                False,
            )
        elif extra is not False and not props:
            self.add(
                path,
                "free-form",
                "free-form object (no properties, additionalProperties not false) has "
                "no strict equivalent",
                False,
            )
        elif extra is not False:
            self.add(
                _ptr(path, "additionalProperties"),
                "additionalProperties",
                "additionalProperties must be false; set to false",
                True,
            )
            out["additionalProperties"] = False
        required = out.get("required", [])
        for name in required:
            if name not in props:
                self.add(
                    _ptr(path, "required"),
                    "required-undefined",
                    f"required key {name!r} is not among the properties",
                    False,
                )
        new_props: dict[str, Any] = {}
        for name, sub in props.items():
            self.properties += 1
            self.chars += len(name)
            walked = self.walk(sub, _ptr(path, "properties", name), depth + 1)
            if name not in required:
                self.add(
                    _ptr(path, "properties", name),
                    "required",
                    f"optional property {name!r} made required and nullable",
                    True,
                )
                if not _accepts_null(walked, self.root) and isinstance(walked, dict):
                    walked = make_nullable(walked)
            new_props[name] = walked
        if props:
            out["properties"] = new_props
            out["required"] = list(props)
        return out

    def _array(self, out: dict[str, Any], path: str, depth: int) -> dict[str, Any]:
        items = out.get("items")
        if items is None:
            self.add(path, "items", "array without 'items' has no strict equivalent", False)
        elif isinstance(items, list):
            self.add(
                _ptr(path, "items"), "items", "tuple-form items (a list) is not supported", False
            )
        else:
            out["items"] = self.walk(items, _ptr(path, "items"), depth)
        return out


def _merge(target: dict[str, Any], siblings: dict[str, Any]) -> dict[str, Any]:
    """Inline a ``$ref`` target under its siblings: properties and required are united,
    siblings win otherwise."""
    out = {**target, **siblings}
    if isinstance(target.get("properties"), dict) and isinstance(siblings.get("properties"), dict):
        out["properties"] = {**target["properties"], **siblings["properties"]}
    if isinstance(target.get("required"), list) and isinstance(siblings.get("required"), list):
        out["required"] = list(dict.fromkeys([*target["required"], *siblings["required"]]))
    elif isinstance(target.get("required"), list):
        out["required"] = target["required"]
    return out


def _walk(schema: Any) -> tuple[Any, _Walker]:
    root = copy.deepcopy(schema)
    walker = _Walker(root if isinstance(root, dict) else {})
    if not isinstance(root, dict):
        walker.add("#", "root", "the root must be an object schema", False)
        return root, walker
    if "anyOf" in root or "oneOf" in root:
        walker.add("#", "root", "the root must be an object, not anyOf/oneOf", False)
    elif _types(root) != ["object"] and "$ref" not in root:
        walker.add(
            "#",
            "root",
            f"the root must have type 'object' (got {json.dumps(root.get('type'))})",
            False,
        )
    try:
        out = walker.walk(root, "", 1)
    except (_TooComplex, RecursionError):
        walker.add(
            "#",
            "limit",
            f"the schema expands to more than {MAX_WALK} sub-schemas ($ref inlining)",
            False,
        )
        return root, walker
    if walker.properties > MAX_PROPERTIES:
        walker.add(
            "#",
            "limit",
            f"{walker.properties} properties exceed the limit of {MAX_PROPERTIES}",
            False,
        )
    if walker.enum_values > MAX_ENUM_VALUES:
        walker.add(
            "#",
            "limit",
            f"{walker.enum_values} enum values exceed the limit of {MAX_ENUM_VALUES}",
            False,
        )
    if walker.chars > MAX_TOTAL_CHARS:
        walker.add(
            "#",
            "limit",
            f"{walker.chars} characters of names and values exceed {MAX_TOTAL_CHARS}",
            False,
        )
    return out, walker


def check(schema: Any) -> list[Violation]:
    """Every strict-mode violation of ``schema``, in document order."""
    return _walk(schema)[1].violations


def strictify(schema: Any) -> StrictResult:
    """A strict-compatible equivalent of ``schema``, or the blockers explaining why there is
    none."""
    out, walker = _walk(schema)
    violations = walker.violations
    blockers = [v for v in violations if not v.fixable]
    changes = [str(v) for v in violations if v.fixable]
    return StrictResult(
        schema=None if blockers else out, violations=violations, changes=changes, partial=out
    )


def is_strict(schema: Any) -> bool:
    return not check(schema)


def denull(value: Any, schema: Any, root: Any | None = None, _depth: int = 0) -> Any:
    """Drop ``null`` values of optional properties whose original schema does not admit null.

    Walks ``value`` along the client's original ``schema`` (local ``$ref``s,
    ``anyOf``/``oneOf`` branches chosen by JSON type, ``allOf`` members).
    Returns a new value; ``value`` is not modified.
    """
    root = schema if root is None else root
    if not isinstance(schema, dict) or _depth > 64:
        return value
    value = _denull_subschemas(value, schema, root, _depth + 1)
    if isinstance(value, dict):
        return _denull_object(value, schema, root, _depth + 1)
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [denull(v, schema["items"], root, _depth + 1) for v in value]
    return value


def _denull_subschemas(value: Any, schema: dict[str, Any], root: Any, depth: int) -> Any:
    """``value`` denulled along the ``$ref`` target, the ``anyOf``/``oneOf`` branch its type
    picks and every ``allOf`` member of ``schema``."""
    ref = schema.get("$ref")
    if isinstance(ref, str) and isinstance(root, dict):
        target = resolve_ref(root, ref)
        if isinstance(target, dict):
            value = denull(value, target, root, depth)
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list):
            branch = _pick_branch(value, branches, root)
            if branch is not None:
                value = denull(value, branch, root, depth)
    members = schema.get("allOf")
    for member in members if isinstance(members, list) else []:
        value = denull(value, member, root, depth)
    return value


def _denull_object(
    value: dict[str, Any], schema: dict[str, Any], root: Any, depth: int
) -> dict[str, Any]:
    """The object without the strict-mode ``null``s of its optional properties,
    each value denulled."""
    props = schema.get("properties")
    if not isinstance(props, dict):
        props = {}
    required = set(schema.get("required", []))
    refs = root if isinstance(root, dict) else {}
    out: dict[str, Any] = {}
    for k, v in value.items():
        sub = props.get(k)
        if sub is None:
            out[k] = v
        elif not _strict_mode_null(v, sub, k in required, refs):
            out[k] = denull(v, sub, root, depth)
    return out


def _strict_mode_null(value: Any, sub: Any, required: bool, root: dict[str, Any]) -> bool:
    """Whether ``value`` is a ``null`` that only strict mode allowed: an optional property whose
    own schema ``sub`` does not admit null."""
    return value is None and not required and not _accepts_null(sub, root)


def _pick_branch(value: Any, branches: list[Any], root: Any) -> Any:
    kind = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value)
    )
    if kind is None:
        kind = "integer" if isinstance(value, int) else "number"
    for branch in branches:
        node = branch
        if isinstance(node, dict) and isinstance(node.get("$ref"), str) and isinstance(root, dict):
            node = resolve_ref(root, node["$ref"]) or node
        if not isinstance(node, dict):
            continue
        types = _types(node)
        if (
            kind in types
            or (kind == "integer" and "number" in types)
            or (kind == "object" and "properties" in node and not types)
        ):
            return branch
    return None
