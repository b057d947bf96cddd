"""The three checks of a model's JSON output: parse, schema, semantic.

Each layer is a pure function returning either a value or a ``Failure`` with its
``stage`` and precise, human-and-model-readable messages::

    price: expected number, got string "12.5"
    missing required key sku
    unexpected key colour
    line 1, column 27: expected ',' or '}' after an object member; near: {"sku": "A1" "price": 3}

``check_output`` runs them in order and stops at the first failing stage.
"""

from __future__ import annotations

import functools
import itertools
import json
import re
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

import jsonschema_rs
import orjson
import referencing
import referencing.exceptions
from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import ValidationError
from jsonschema.validators import validator_for

from orgate.gate.cost import cost_of
from orgate.gate.patterns import bounded
from orgate.gate.patterns import search as patterns_search
from orgate.gate.schemas import CompiledSchema, SchemaCache, SchemaProblem
from orgate.structured.settings import AskedCheck

Stage = Literal["truncation", "parse", "schema", "semantic"]
MAX_MESSAGES = 20
#: Errors looked at, at most: a value with thousands of errors is not worded thousands of times.
MAX_ERRORS = 100
#: Errors × the schema's fan-out looked at, at most: an error of a schema that branches is
#: found (and worded) in each branch it was checked against.
WORDING_WORK = 1024


@dataclass(slots=True, frozen=True)
class Failure:
    """Why one attempt was rejected: the stage and one message per problem."""

    stage: Stage
    errors: tuple[str, ...]

    def summary(self) -> str:
        return f"{self.stage}: " + "; ".join(self.errors)


@dataclass(slots=True, frozen=True)
class Accepted:
    """A valid attempt: the parsed value and the JSON text to release to the client."""

    value: Any
    text: str
    changed: (
        bool  # True when ``text`` differs from what the model wrote (fences, prose, nulls removed)
    )


# --------------------------------------------------------------------------- parse

_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*[ \t]*\r?\n(?P<body>.*?)\r?\n?```\s*$", re.DOTALL)
_JSON_MSG = {
    "Expecting value": "expected a JSON value",
    "Expecting ',' delimiter": "expected ',' or a closing bracket",
    "Expecting ':' delimiter": "expected ':' after an object key",
    "Expecting property name enclosed in double quotes": "expected a key in double quotes",
    "Unterminated string starting at": "unterminated string",
    "Invalid control character at": "raw control character inside a string (escape it)",
    "Extra data": "unexpected text after the JSON value",
    "Invalid \\escape": "invalid backslash escape",
}


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _snippet(text: str, pos: int, width: int = 30) -> str:
    start, end = max(0, pos - width), min(len(text), pos + width)
    piece = text[start:end].replace("\n", "\\n").replace("\r", "\\r")
    return ("…" if start else "") + piece + ("…" if end < len(text) else "")


def _describe_decode_error(text: str, exc: json.JSONDecodeError) -> str:
    msg = exc.msg
    for prefix, nicer in _JSON_MSG.items():
        if msg.startswith(prefix):
            msg = nicer
            break
    if (
        exc.pos >= len(text.rstrip()) or msg == "unterminated string"
    ) and msg != "unexpected text after the JSON value":
        msg += " (the text ends early: the JSON is incomplete)"
    return f"line {exc.lineno}, column {exc.colno}: {msg}; near: {_snippet(text, exc.pos)}"


def strip_code_fence(text: str) -> str | None:
    """The body of a text that is exactly one Markdown code fence, else None."""
    m = _FENCE.match(text)
    return m.group("body") if m else None


def _extract_embedded(text: str) -> tuple[Any, str] | None:
    """Find the first JSON object/array in text surrounded by prose."""
    decoder = json.JSONDecoder(parse_constant=_reject_constant)
    for m in re.finditer(r"[\[{]", text):
        try:
            value, end = decoder.raw_decode(text, m.start())
        except (json.JSONDecodeError, ValueError):
            continue
        return value, text[m.start() : end]
    return None


def parse_layer(
    text: str, *, strip_fences: bool = False, strip_prose: bool = False
) -> tuple[Any, str] | Failure:
    """Parse the output as one JSON value; returns ``(value, json_text)`` or a parse ``Failure``.

    ``NaN``/``Infinity`` are rejected (they are not JSON). Code fences and
    surrounding prose are removed only when configured; otherwise they are
    named in the failure message so the model can drop them.
    """
    candidate = text
    if strip_fences:
        body = strip_code_fence(text)
        if body is not None:
            candidate = body
    if not candidate.strip():
        return Failure("parse", ("the reply is empty: expected a JSON value",))
    try:
        return json.loads(candidate, parse_constant=_reject_constant), candidate
    except ValueError as exc:
        if strip_prose:
            found = _extract_embedded(candidate)
            if found is not None:
                return found
        if not isinstance(exc, json.JSONDecodeError):
            return Failure("parse", (str(exc),))
        if strip_code_fence(text) is not None:
            return Failure(
                "parse",
                (
                    "the reply is wrapped in a Markdown code fence (```); send the "
                    "bare JSON value without fences",
                ),
            )
        message = _describe_decode_error(candidate, exc)
        if exc.msg == "Extra data":
            message += " — send only the JSON value, with no text after it"
        elif (
            exc.pos == 0
            and candidate.lstrip()[:1] not in ("{", "[", '"')
            and not candidate.lstrip()[:1].isdigit()
        ):
            message += " — the reply must start with the JSON value, with no text before it"
        return Failure("parse", (message,))


# --------------------------------------------------------------------------- schema

_TYPE_NAMES: dict[type, str] = {
    bool: "boolean",
    int: "integer",
    float: "number",
    str: "string",
    list: "array",
    dict: "object",
    type(None): "null",
}


def json_type(value: Any) -> str:
    return _TYPE_NAMES.get(type(value), type(value).__name__)


def dump_json(value: Any) -> str:
    """Compact JSON text (orjson; the stdlib for integers wider than 64 bits)."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def render_value(value: Any, limit: int = 60) -> str:
    """Compact JSON rendering for messages, cut at ``limit`` characters."""
    out = dump_json(value)
    return out if len(out) <= limit else out[: limit - 1] + "…"


_SIMPLE_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def format_path(path: Iterable[Any]) -> str:
    """``items[0].sku``; keys that are not identifiers are quoted: ``["unit price"]``;
    root is ``$``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _SIMPLE_KEY.match(str(part)):
            out += f".{part}" if out else str(part)
        else:
            out += f"[{json.dumps(str(part))}]"
    return out or "$"


def _expected_types(spec: Any) -> str:
    types = spec if isinstance(spec, list) else [spec]
    return " or ".join(str(t) for t in types)


def _got(value: Any) -> str:
    kind = json_type(value)
    if kind in ("object", "array"):
        return kind
    if kind == "null":
        return "null"
    return f"{kind} {render_value(value)}"


def _undeclared_keys(error: ValidationError) -> list[str]:
    schema = error.schema if isinstance(error.schema, dict) else {}
    props = schema.get("properties", {}) or {}
    patterns = list((schema.get("patternProperties") or {}).keys())
    instance = error.instance if isinstance(error.instance, dict) else {}
    return [
        k for k in instance if k not in props and not any(patterns_search(p, k) for p in patterns)
    ]


_SIZE_WORDS: dict[str, tuple[str, str, str]] = {
    "minLength": ("character", "at least", "at most"),
    "maxLength": ("character", "at least", "at most"),
    "minItems": ("item", "at least", "at most"),
    "maxItems": ("item", "at least", "at most"),
    "minProperties": ("key", "at least", "at most"),
    "maxProperties": ("key", "at least", "at most"),
}


def describe_error(error: ValidationError, *, relative: bool = False) -> list[str]:
    """One or more precise messages for one jsonschema error (``relative``:
    path from its parent error)."""
    path = format_path(error.relative_path if relative else error.absolute_path)
    describe = _DESCRIBERS.get(error.validator)
    messages = describe(error, path) if describe is not None else None
    return messages if messages is not None else [f"{_at(path)}{error.message}"]


def _at(path: str) -> str:
    """The prefix naming where a message applies (nothing at the root)."""
    return "" if path == "$" else f"{path}: "


def _missing_keys(error: ValidationError, path: str) -> list[str] | None:
    required = error.validator_value if isinstance(error.validator_value, list) else []
    instance = error.instance if isinstance(error.instance, dict) else {}
    where = "" if path == "$" else f" in {path}"
    return [f"missing required key {k}{where}" for k in required if k not in instance]


def _unexpected_keys(error: ValidationError, path: str) -> list[str] | None:
    if error.validator_value is not False:
        return None
    where = "" if path == "$" else f" in {path}"
    return [f"unexpected key {k}{where}" for k in _undeclared_keys(error)] or None


def _wrong_type(error: ValidationError, path: str) -> list[str] | None:
    return [
        f"{_at(path)}expected {_expected_types(error.validator_value)}, got {_got(error.instance)}"
    ]


def _not_in_enum(error: ValidationError, path: str) -> list[str] | None:
    # an ``enum`` error's value is the schema's list (jsonschema types it "value or unset")
    values = cast(list[Any], error.validator_value)
    options = ", ".join(render_value(v, 40) for v in values[:20])
    more = ", …" if len(values) > 20 else ""
    return [f"{_at(path)}expected one of {options}{more}, got {render_value(error.instance)}"]


def _not_const(error: ValidationError, path: str) -> list[str] | None:
    return [
        f"{_at(path)}expected {render_value(error.validator_value)}, got "
        f"{render_value(error.instance)}"
    ]


def _wrong_size(error: ValidationError, path: str) -> list[str] | None:
    """``minLength``/``maxItems``/``minProperties``…: the size found against the bound."""
    bound = error.validator_value
    if not isinstance(bound, int):
        return None
    kind = str(error.validator)
    noun, least, most = _SIZE_WORDS[kind]
    size = len(error.instance) if isinstance(error.instance, str | list | dict) else 0
    words = least if kind.startswith("min") else most
    unit = noun if bound == 1 else noun + "s"
    if noun == "key":
        verdict = "has too few keys" if kind.startswith("min") else "has too many keys"
    else:
        verdict = "is too short" if kind.startswith("min") else "is too long"
    return [
        f"{_at(path)}{render_value(error.instance)} {verdict} (expected {words} "
        f"{bound} {unit}, got {size})"
    ]


def _no_pattern_match(error: ValidationError, path: str) -> list[str] | None:
    return [
        f"{_at(path)}{render_value(error.instance)} does not match the pattern "
        f"{json.dumps(error.validator_value)}"
    ]


def _wrong_format(error: ValidationError, path: str) -> list[str] | None:
    return [
        f"{_at(path)}expected a string in format {error.validator_value}, got "
        f"{render_value(error.instance)}"
    ]


def _duplicates(error: ValidationError, path: str) -> list[str] | None:
    if not isinstance(error.instance, list):
        return None
    return [f"{_at(path)}expected unique items, got duplicates in {render_value(error.instance)}"]


def _no_alternative(error: ValidationError, path: str) -> list[str] | None:
    """``anyOf``/``oneOf``: what each of the first four alternatives found wrong."""
    if not error.context:
        return None
    subs: list[str] = []
    for sub in sorted(
        error.context, key=lambda e: (list(e.relative_schema_path)[:1], len(e.relative_path))
    )[:4]:
        subs.extend(describe_error(sub, relative=True))
    label = (
        "none of the allowed alternatives matched"
        if error.validator == "anyOf"
        else "must match exactly one alternative"
    )
    return [f"{_at(path)}{label} ({'; '.join(dict.fromkeys(subs))})"]


# The messages of one keyword; None falls back to jsonschema's own message.
# Keyed by object: an error's ``validator`` is typed "keyword or unset" by jsonschema.
_DESCRIBERS: dict[object, Callable[[ValidationError, str], list[str] | None]] = {
    "required": _missing_keys,
    "additionalProperties": _unexpected_keys,
    "unevaluatedProperties": _unexpected_keys,
    "type": _wrong_type,
    "enum": _not_in_enum,
    "const": _not_const,
    **dict.fromkeys(_SIZE_WORDS, _wrong_size),
    "pattern": _no_pattern_match,
    "format": _wrong_format,
    "uniqueItems": _duplicates,
    "anyOf": _no_alternative,
    "oneOf": _no_alternative,
}


def _path_key(error: ValidationError) -> tuple[str, ...]:
    return tuple(f"{p:08d}" if isinstance(p, int) else str(p) for p in error.absolute_path)


def schema_layer(value: Any, validator: Any, limit: int = MAX_ERRORS) -> Failure | None:
    """Validate against a compiled Draft 2020-12 validator; the errors sorted by path — the
    first ``limit`` found, so that wording them costs the same for any size of value."""
    found = list(itertools.islice(validator.iter_errors(value), limit + 1))
    more = len(found) > limit
    errors = sorted(found[:limit], key=lambda e: (_path_key(e), e.message))
    if not errors:
        return None
    messages: list[str] = []
    for error in errors:
        messages.extend(describe_error(error))
    messages = list(dict.fromkeys(messages))
    if len(messages) > MAX_MESSAGES or more:
        left = len(messages) - MAX_MESSAGES
        tail = "… and more problems" if more else f"… and {left} more problems"
        messages = [*messages[:MAX_MESSAGES], tail]
    return Failure("schema", tuple(messages))


def _no_retrieve(uri: str) -> referencing.Resource[Any]:
    raise referencing.exceptions.NoSuchResource(uri)


# referencing's stubs declare its attrs classes with a decorator mypy does not read as
# dataclass_transform: its constructor's keywords are unknown to the checker.
_OFFLINE: referencing.Registry[Any] = referencing.Registry(
    retrieve=_no_retrieve  # type: ignore[call-arg]  # see above
)


def _format_names(schema: Any, out: set[str], depth: int = 0) -> set[str]:
    """Every ``format`` value used anywhere in ``schema``."""
    if depth > 64:
        return out
    if isinstance(schema, dict):
        fmt = schema.get("format")
        if isinstance(fmt, str):
            out.add(fmt)
        for sub in schema.values():
            if isinstance(sub, dict | list):
                _format_names(sub, out, depth + 1)
    elif isinstance(schema, list):
        for sub in schema:
            _format_names(sub, out, depth + 1)
    return out


@functools.lru_cache(maxsize=128)
def _format_check(name: str) -> Callable[[Any], bool]:
    """``jsonschema-rs``'s check of one format (unknown formats always pass)."""
    validator = jsonschema_rs.validator_for({"format": name}, validate_formats=True, offline=True)
    return validator.is_valid


def format_checker(schema: Any) -> FormatChecker | None:
    """A checker asserting the formats ``schema`` uses (``date-time``, ``email``, ``uri``…),
    or None.

    Draft 2020-12 treats ``format`` as an annotation unless a checker is given;
    the safety net asserts it (strict mode moves unsupported formats into the
    description, and non-strict upstreams ignore them: only validation enforces them).
    """
    names = _format_names(schema, set())
    if not names:
        return None
    checker = FormatChecker(formats=())
    for name in sorted(names):
        checker.checks(name)(_format_check(name))
    return checker


@dataclass(slots=True)
class OutputSchema:
    """One compiled output schema: the gate's fast validator, plus a detailed one on failure.

    A schema that uses ``format`` is always checked by the detailed validator,
    which asserts the formats (the fast one treats them as annotations).
    """

    schema: dict[str, Any] | bool
    compiled: CompiledSchema
    _detail: Any = None
    _formats: Any = None  # FormatChecker, or False when the schema uses no format

    def _format_checker(self) -> FormatChecker | None:
        if self._formats is None:
            self._formats = format_checker(self.schema) or False
        return self._formats or None

    def _error_limit(self) -> int:
        """How many errors to word: fewer as the schema's fan-out grows (``WORDING_WORK``)."""
        return max(1, min(MAX_ERRORS, WORDING_WORK // cost_of(self.schema).fanout))

    def _detailed(self) -> Any:
        if self._detail is None:
            cls = bounded(validator_for(self.schema, default=Draft202012Validator))
            self._detail = cls(
                self.schema, registry=_OFFLINE, format_checker=self._format_checker()
            )
        return self._detail

    def validate(self, value: Any) -> Failure | None:
        """None when valid; else a schema ``Failure`` with precise messages (sorted by path)."""
        fast_ok = self.compiled.is_valid(value)
        if fast_ok and self._format_checker() is None:
            return None
        failure = schema_layer(value, self._detailed(), self._error_limit())
        if failure is not None or fast_ok:
            return failure
        # The two validators disagree (rare: backend differences): report the fast one's first.
        gate_errors = self.compiled.validate(value, every=False)
        return Failure(
            "schema",
            tuple(f"{e.path}: {e.message}" for e in gate_errors) or ("does not match the schema",),
        )


class ValidatorCache:
    """Output schemas compiled once, cached by content.

    Compilation and the fast validity check reuse ``orgate.gate.schemas.SchemaCache``
    (the gateway's one compile cache, keyed by the SHA-256 of the canonical
    schema JSON); the detailed pure-Python validator that words the feedback is
    built only when an output fails, and kept in a small LRU here.
    """

    def __init__(self, gate_cache: SchemaCache | None = None, maxsize: int = 256) -> None:
        self.gate_cache = gate_cache if gate_cache is not None else SchemaCache()
        self._maxsize = maxsize
        self._items: OrderedDict[str, OutputSchema] = OrderedDict()

    def get(self, schema: dict[str, Any] | bool) -> OutputSchema:
        """Compile (or reuse); raises ``SchemaProblem`` for an invalid or unresolvable schema."""
        compiled = self.gate_cache.compile(schema)
        found = self._items.get(compiled.key)
        if found is not None:
            self._items.move_to_end(compiled.key)
            return found
        out = OutputSchema(schema, compiled)
        self._items[compiled.key] = out
        if len(self._items) > self._maxsize:
            self._items.popitem(last=False)
        return out

    def __len__(self) -> int:
        return len(self._items)


# --------------------------------------------------------------------------- semantic


class SemanticCheckError(Exception):
    """A configured semantic check raised or returned something other than a list of strings."""


def semantic_layer(
    value: Any, checks: Sequence[tuple[str, Callable[[Any], list[str]]]], asked: str = ""
) -> Failure | None:
    """Run every domain check (an ``AskedCheck`` reads ``asked`` too: what the request asked);
    collect all their messages. A check that raises is a bug: ``SemanticCheckError``."""
    messages: list[str] = []
    for name, check in checks:
        try:
            result = check(value, asked) if isinstance(check, AskedCheck) else check(value)
        except Exception as exc:  # a broken check is not the model's fault
            raise SemanticCheckError(
                f"semantic check {name} raised {type(exc).__name__}: {exc}"
            ) from exc
        if result is None:
            continue
        if isinstance(result, str) or not all(isinstance(m, str) for m in result):
            raise SemanticCheckError(
                f"semantic check {name} must return a list of strings, got {result!r}"
            )
        messages.extend(result)
    return Failure("semantic", tuple(messages)) if messages else None


# --------------------------------------------------------------------------- all three


def check_output(
    text: str,
    *,
    schema: OutputSchema,
    checks: Sequence[tuple[str, Callable[[Any], list[str]]]] = (),
    strip_fences: bool = False,
    strip_prose: bool = False,
    normalize: Callable[[Any], Any] | None = None,
    asked: str = "",
) -> Accepted | Failure:
    """Parse, (optionally normalize, e.g. drop strict-mode nulls), validate, run domain checks
    (``asked``: the request's text, for the checks that read it)."""
    result = check_json(
        text,
        schema=schema,
        strip_fences=strip_fences,
        strip_prose=strip_prose,
        normalize=normalize,
    )
    return result if isinstance(result, Failure) else check_semantics(result, checks, asked)


def check_json(
    text: str,
    *,
    schema: OutputSchema,
    strip_fences: bool = False,
    strip_prose: bool = False,
    normalize: Callable[[Any], Any] | None = None,
) -> Accepted | Failure:
    """The parse and schema layers of ``check_output`` (the work a client's schema costs)."""
    parsed = parse_layer(text, strip_fences=strip_fences, strip_prose=strip_prose)
    if isinstance(parsed, Failure):
        return parsed
    value, json_text = parsed
    changed = json_text != text
    if normalize is not None:
        before = dump_json(value)
        value = normalize(value)
        if dump_json(value) != before:
            changed = True
    failure = schema.validate(value)
    if failure is not None:
        return failure
    out = dump_json(value) if changed else text
    return Accepted(value=value, text=out, changed=changed)


def check_semantics(
    accepted: Accepted,
    checks: Sequence[tuple[str, Callable[[Any], list[str]]]],
    asked: str = "",
) -> Accepted | Failure:
    """The semantic layer of ``check_output`` over a value that passed the others."""
    failure = semantic_layer(accepted.value, checks, asked)
    return accepted if failure is None else failure


#: A worker process's compiled output schemas (``check_json_in_worker``).
_WORKER_SCHEMAS = ValidatorCache()


def check_json_in_worker(
    text: str,
    schema: dict[str, Any] | bool,
    strip_fences: bool,
    strip_prose: bool,
    normalize: Callable[[Any], Any] | None,
) -> Accepted | Failure:
    """``check_json`` as a job of a schema work process (``orgate.gate.work``): the schema
    arrives as JSON and is compiled there (once per content)."""
    return check_json(
        text,
        schema=_WORKER_SCHEMAS.get(schema),
        strip_fences=strip_fences,
        strip_prose=strip_prose,
        normalize=normalize,
    )


__all__ = [
    "Accepted",
    "Failure",
    "OutputSchema",
    "SchemaProblem",
    "SemanticCheckError",
    "Stage",
    "ValidatorCache",
    "check_json",
    "check_json_in_worker",
    "check_output",
    "check_semantics",
    "describe_error",
    "format_checker",
    "format_path",
    "parse_layer",
    "schema_layer",
    "semantic_layer",
    "strip_code_fence",
]
