"""``pattern`` matching in linear time, for every validator of a client's schema.

JSON Schema patterns are matched by the ``regex`` crate through ``jsonschema-rs``
(``RegexOptions``): a finite-automaton engine whose time is linear in the text,
so no pattern can backtrack catastrophically. Neither alternative is safe on a
client's pattern: Python's ``re`` (what the ``jsonschema`` package uses) backtracks
exponentially on ``^(a+)+$``; ``jsonschema-rs``'s default ``fancy-regex`` backtracks on
lookahead patterns while holding the GIL, and its backtrack limit does not bound counted
repeats (the figures and how to reproduce them: docs/gate.md).

The price: lookaround and backreferences are not patterns this engine accepts,
nor is a pattern compiling past ``PATTERN_SIZE_LIMIT`` (the compiled size is the
factor of the linear time); a schema using one is refused like any invalid schema.

``search(pattern, text)`` is the match itself. ``bounded(cls)`` gives a
``jsonschema`` validator class (the python backend, the safety net's detailed
validator, the review queue's and the built-in model's generator) whose
``pattern``, ``patternProperties``, ``additionalProperties`` and
``unevaluatedProperties`` match with it, and whose ``uniqueItems`` is checked by
``jsonschema-rs`` (``jsonschema`` compares unhashable items pairwise: 3,000
objects took over a minute).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

import jsonschema_rs

#: Largest compiled pattern: matching costs up to (compiled size × text length), and nested
#: counted repeats compile big (``^(\w{1,40}){1,40}$`` is past it; ``^[\p{L}\p{N}]{1000}$``
#: fits). Figures in docs/gate.md.
PATTERN_SIZE_LIMIT = 64 * 1024

#: Why a pattern is refused, for the error a client gets.
PATTERN_HINT = (
    "patterns are matched in linear time: lookaround, backreferences and patterns "
    f"compiling to more than {PATTERN_SIZE_LIMIT // 1024} KiB are not supported"
)

#: The options every compiled schema gets: linear-time matching, bounded compiled size.
PATTERN_OPTIONS = jsonschema_rs.RegexOptions(size_limit=PATTERN_SIZE_LIMIT)


@functools.lru_cache(maxsize=1024)
def _matcher(pattern: str) -> Callable[[str], bool] | None:
    """``text → matched`` for one pattern (searched, as JSON Schema does);
    None if not a valid pattern."""
    try:
        validator = jsonschema_rs.validator_for(
            {"pattern": pattern}, pattern_options=PATTERN_OPTIONS
        )
    except Exception:  # noqa: BLE001 - an invalid (or unsupported) pattern
        return None
    return validator.is_valid


def valid(pattern: str) -> bool:
    """Whether the engine accepts ``pattern``."""
    return _matcher(pattern) is not None


def search(pattern: str, text: str) -> bool:
    """Whether ``pattern`` matches somewhere in ``text``; an invalid pattern matches nothing."""
    match = _matcher(pattern)
    return match is not None and match(text)


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    if validator.is_type(instance, "string") and not search(pattern, instance):
        from jsonschema.exceptions import ValidationError

        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: dict[str, Any], instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(
    validator: Any, additional: Any, instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = [
        k for k in instance if k not in properties and not any(search(p, k) for p in patterns)
    ]
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif additional is False and extras:
        from jsonschema.exceptions import ValidationError

        listed = ", ".join(repr(k) for k in sorted(extras))
        if patterns:
            verb = "does" if len(extras) == 1 else "do"
            yield ValidationError(
                f"{listed} {verb} not match any of the regexes: "
                f"{', '.join(map(repr, sorted(patterns)))}"
            )
        else:
            verb = "was" if len(extras) == 1 else "were"
            yield ValidationError(
                f"Additional properties are not allowed ({listed} {verb} unexpected)"
            )


_UNIQUE = jsonschema_rs.validator_for({"uniqueItems": True})


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[Any]:
    # ``jsonschema`` compares unhashable items pairwise: O(n²), minutes for a few thousand objects.
    if unique and validator.is_type(instance, "array") and not _UNIQUE.is_valid(instance):
        from jsonschema.exceptions import ValidationError

        yield ValidationError(f"{instance!r} has non-unique elements")


def _no_error(errors: Iterator[Any]) -> bool:
    return next(errors, None) is None


def _evaluated_keys(validator: Any, instance: dict[str, Any], schema: Any) -> set[str]:
    """The keys of ``instance`` that ``schema`` evaluates (Draft 2020-12's annotation rules,
    as ``jsonschema`` computes them, with ``patternProperties`` matched by this engine)."""
    if not isinstance(schema, dict):
        return set()
    return (
        _keys_through_refs(validator, instance, schema)
        | _keys_of_own_keywords(validator, instance, schema)
        | _keys_through_subschemas(validator, instance, schema)
    )


def _keys_through_refs(
    validator: Any, instance: dict[str, Any], schema: dict[str, Any]
) -> set[str]:
    """The keys the schemas ``$ref`` and ``$dynamicRef`` point to evaluate."""
    keys: set[str] = set()
    for ref_keyword in ("$ref", "$dynamicRef"):
        ref = schema.get(ref_keyword)
        if ref is not None:
            resolved = validator._resolver.lookup(ref)
            inner = validator.evolve(schema=resolved.contents, _resolver=resolved.resolver)
            keys |= _evaluated_keys(inner, instance, resolved.contents)
    return keys


def _keys_of_own_keywords(
    validator: Any, instance: dict[str, Any], schema: dict[str, Any]
) -> set[str]:
    """The keys ``properties``, ``patternProperties`` and the valid members under
    ``additionalProperties`` / ``unevaluatedProperties`` evaluate."""
    keys: set[str] = set()
    properties = schema.get("properties")
    if isinstance(properties, dict):
        keys |= properties.keys() & instance.keys()
    for keyword in ("additionalProperties", "unevaluatedProperties"):
        sub = schema.get(keyword)
        if sub is not None:
            keys |= {k for k, v in instance.items() if _no_error(validator.descend(v, sub))}
    for pattern in schema.get("patternProperties") or {}:
        keys |= {k for k in instance if search(pattern, k)}
    return keys


def _keys_through_subschemas(
    validator: Any, instance: dict[str, Any], schema: dict[str, Any]
) -> set[str]:
    """The keys evaluated by the subschemas that apply to ``instance``: ``dependentSchemas`` of
    present keys, the valid branches of ``allOf`` / ``oneOf`` / ``anyOf``, and ``if`` with
    ``then`` or ``else``."""
    keys: set[str] = set()
    for name, sub in (schema.get("dependentSchemas") or {}).items():
        if name in instance:
            keys |= _evaluated_keys(validator, instance, sub)
    for keyword in ("allOf", "oneOf", "anyOf"):
        for sub in schema.get(keyword) or []:
            if _no_error(validator.descend(instance, sub)):
                keys |= _evaluated_keys(validator, instance, sub)
    if "if" in schema:
        if validator.evolve(schema=schema["if"]).is_valid(instance):
            keys |= _evaluated_keys(validator, instance, schema["if"])
            keys |= _evaluated_keys(validator, instance, schema.get("then"))
        else:
            keys |= _evaluated_keys(validator, instance, schema.get("else"))
    return keys


def _unevaluated_properties(
    validator: Any, unevaluated: Any, instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    evaluated = _evaluated_keys(validator, instance, schema)
    bad = [
        k
        for k in instance
        if k not in evaluated
        and not _no_error(validator.descend(instance[k], unevaluated, path=k, schema_path=k))
    ]
    if bad:
        from jsonschema.exceptions import ValidationError

        listed = ", ".join(repr(k) for k in sorted(bad))
        verb = "was" if len(bad) == 1 else "were"
        if unevaluated is False:
            yield ValidationError(
                f"Unevaluated properties are not allowed ({listed} {verb} unexpected)"
            )
        else:
            yield ValidationError(
                "Unevaluated properties are not valid under the given schema "
                f"({listed} {verb} unevaluated and invalid)"
            )


@functools.cache
def bounded(cls: Any) -> Any:
    """``cls`` (a ``jsonschema`` validator class, Draft 2019-09 or later for
    ``unevaluatedProperties``) matching patterns in linear time: every keyword of
    ``jsonschema`` that matches a pattern is replaced, and ``uniqueItems`` is checked by
    ``jsonschema-rs`` (hashing, not ``jsonschema``'s pairwise comparison)."""
    from jsonschema.validators import extend

    return extend(
        cls,
        {
            "pattern": _pattern,
            "patternProperties": _pattern_properties,
            "additionalProperties": _additional_properties,
            "uniqueItems": _unique_items,
            **(
                {"unevaluatedProperties": _unevaluated_properties}
                if "unevaluatedProperties" in cls.VALIDATORS
                else {}
            ),
        },
    )
