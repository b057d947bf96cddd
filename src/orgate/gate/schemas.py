"""JSON Schema compilation and validation for tool arguments, with a cache.

Validators are complete Draft 2020-12 implementations (a schema's own
``$schema`` is honoured; 2020-12 is the default). The fast Rust
``jsonschema-rs`` is used when installed, the pure-Python ``jsonschema`` package
otherwise; both run offline (a ``$ref`` to a remote URL is a schema error, never
a network fetch) and both match ``pattern`` in linear time (``orgate.gate.patterns``). Compiled
validators are cached by schema content: the
SHA-256 of the schema's canonical JSON (sorted keys, no whitespace), so equal
schemas from different requests share one compiled validator.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema_rs as _rs
import orjson

from orgate.gate.patterns import PATTERN_HINT, PATTERN_OPTIONS, bounded
from orgate.gate.verdict import SchemaError

#: Names of the backends, fastest first (``jsonschema-rs`` is a dependency, as for patterns).
BACKENDS: tuple[str, ...] = ("rust", "python")
DEFAULT_BACKEND: str = BACKENDS[0]

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class SchemaProblem(ValueError):
    """A tool's ``parameters`` is not a valid JSON Schema (or cannot be resolved offline)."""


def json_path(parts: Iterable[str | int]) -> str:
    """``["a", 0, "b c"]`` → ``$.a[0]['b c']``."""
    out = ["$"]
    for p in parts:
        if isinstance(p, int):
            out.append(f"[{p}]")
        elif _IDENT.match(p):
            out.append(f".{p}")
        else:
            out.append("['" + p.replace("\\", "\\\\").replace("'", "\\'") + "']")
    return "".join(out)


def canonical_json(schema: Any) -> bytes:
    """Canonical bytes of a JSON value: sorted keys, compact."""
    try:
        return orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # e.g. integers wider than 64 bits
        return json.dumps(schema, sort_keys=True, separators=(",", ":")).encode()


def schema_key(schema: Any) -> str:
    """The cache key of a schema: SHA-256 of its canonical JSON."""
    return hashlib.sha256(canonical_json(schema)).hexdigest()


#: Longest error message kept (messages quote the offending value, which may be huge).
MAX_MESSAGE = 1000


def _clip(message: str) -> str:
    return message if len(message) <= MAX_MESSAGE else message[: MAX_MESSAGE - 1] + "…"


def _first_line(text: str) -> str:
    return text.strip().split("\n", 1)[0]


@dataclass(frozen=True, slots=True)
class CompiledSchema:
    """A compiled validator. ``validate(instance)`` returns every error (empty when valid)."""

    key: str
    backend: str
    is_valid: Callable[[Any], bool]
    _iter_errors: Callable[[Any], Iterable[Any]]
    _convert: Callable[[Any], SchemaError]
    _first_error: Callable[[Any], Iterable[Any]]

    def validate(self, instance: Any, *, every: bool = True) -> tuple[SchemaError, ...]:
        """Every error of ``instance``, or (``every=False``) its first one only: the native
        validator builds all of them before it hands over one, which for a large instance of
        a schema that branches is minutes of work and gigabytes of errors."""
        try:
            if self.is_valid(instance):
                return ()
            found = self._iter_errors(instance) if every else self._first_error(instance)
            errors = tuple(self._convert(e) for e in found)
        except Exception as exc:  # noqa: BLE001 - e.g. a $ref only reached by this instance
            return (SchemaError("$", f"the tool's schema could not be evaluated: {exc}"),)
        # A validator that said "invalid" always yields at least one error.
        return errors or (SchemaError("$", "arguments do not match the tool's schema"),)


def _rs_first(validator: Any, instance: Any) -> list[Any]:
    """The native validator's first error of ``instance`` (``validate`` raises it alone)."""
    try:
        validator.validate(instance)
    except _rs.ValidationError as error:
        return [error]
    return []


def _rs_convert(err: Any) -> SchemaError:
    kind = type(err.kind).__name__
    keyword = kind[0].lower() + kind[1:] if kind else ""
    return SchemaError(json_path(err.instance_path), _clip(err.message), keyword)


def _compile_rust(schema: Any, key: str) -> CompiledSchema:
    try:
        v = _rs.validator_for(schema, offline=True, pattern_options=PATTERN_OPTIONS)
    except Exception as exc:  # ValidationError / ReferencingError / ValueError
        message = _first_line(str(exc))
        if message.endswith('is not a "regex"'):
            message += f" ({PATTERN_HINT})"
        raise SchemaProblem(message) from None
    return CompiledSchema(
        key, "rust", v.is_valid, v.iter_errors, _rs_convert, functools.partial(_rs_first, v)
    )


def _no_retrieve(uri: str) -> Any:
    import referencing.exceptions

    raise referencing.exceptions.NoSuchResource(uri)


def _py_convert(err: Any) -> SchemaError:
    return SchemaError(json_path(err.absolute_path), _clip(err.message), str(err.validator or ""))


def _compile_python(schema: Any, key: str) -> CompiledSchema:
    # Imported here, not at module top: ``jsonschema`` is heavy to import (bench/startup.py)
    # and is only the fallback backend.
    import jsonschema as _js
    import referencing
    import referencing.exceptions

    if not isinstance(schema, dict | bool):
        raise SchemaProblem(f"a schema must be an object or a boolean, not {type(schema).__name__}")
    cls = bounded(_js.validators.validator_for(schema, default=_js.Draft202012Validator))
    try:
        cls.check_schema(schema)
    except _js.SchemaError as exc:
        raise SchemaProblem(_first_line(exc.message)) from None
    # referencing's stub declares Registry with a decorator mypy does not read as a
    # dataclass_transform: the constructor's keywords are unknown to the checker.
    registry = referencing.Registry(retrieve=_no_retrieve)  # type: ignore[call-arg]  # see above
    v = cls(schema, registry=registry)
    # Resolve every $ref once now so a dangling one is a load-time schema error.
    try:
        list(v.iter_errors(None))
        list(v.iter_errors({}))
    except referencing.exceptions.Unresolvable as exc:
        raise SchemaProblem(f"unresolvable $ref: {exc}") from None
    except Exception:  # noqa: BLE001 - probing only
        pass
    return CompiledSchema(
        key,
        "python",
        v.is_valid,
        v.iter_errors,
        _py_convert,
        lambda instance: itertools.islice(v.iter_errors(instance), 1),
    )


_COMPILERS: dict[str, Callable[[Any, str], CompiledSchema]] = {
    "rust": _compile_rust,
    "python": _compile_python,
}


class SchemaCache:
    """A bounded LRU of compiled validators keyed by (backend, schema content hash).

    Invalid schemas are cached too (as their ``SchemaProblem``), so a bad schema
    is diagnosed once.
    """

    def __init__(self, maxsize: int = 4096, backend: str | None = None) -> None:
        backend = backend or DEFAULT_BACKEND
        if backend not in BACKENDS:
            raise ValueError(f"unknown or unavailable schema backend {backend!r} (have {BACKENDS})")
        self.backend = backend
        self.maxsize = maxsize
        self._entries: OrderedDict[str, CompiledSchema | SchemaProblem] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def compile(self, schema: Any) -> CompiledSchema:
        """The compiled validator for ``schema``; raises ``SchemaProblem`` if it is invalid."""
        key = schema_key(schema)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
                self.hits += 1
        if entry is None:
            self.misses += 1
            try:
                entry = _COMPILERS[self.backend](schema, key)
            except SchemaProblem as exc:
                entry = exc
            with self._lock:
                self._entries[key] = entry
                while len(self._entries) > self.maxsize:
                    self._entries.popitem(last=False)
        if isinstance(entry, SchemaProblem):
            raise SchemaProblem(str(entry))
        return entry

    def __len__(self) -> int:
        return len(self._entries)

    def __bool__(
        self,
    ) -> bool:  # an empty cache is still a cache: `cache or SchemaCache()` keeps it
        return True

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


#: The process-wide default cache (used when no cache is passed explicitly).
DEFAULT_CACHE = SchemaCache()


def compile_schema(schema: Any, cache: SchemaCache | None = None) -> CompiledSchema:
    """Compile (or fetch from the cache) a validator for ``schema``."""
    return (DEFAULT_CACHE if cache is None else cache).compile(schema)


def validate(schema: Any, instance: Any, cache: SchemaCache | None = None) -> Sequence[SchemaError]:
    """Every error of ``instance`` against ``schema`` (empty when valid)."""
    return compile_schema(schema, cache).validate(instance)
