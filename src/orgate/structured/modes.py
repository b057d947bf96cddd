"""Capability branching: how a JSON request is actually sent to one model.

For ``text.format`` ``json_schema`` the net goes down this ladder and sends the first mode
the deployment has (``Capabilities``; what its upstream refused is taken off first,
structured/downgrades.py):

============================  =========================================================
mode                          when / what is sent upstream
============================  =========================================================
a schema dialect              the first of ``capabilities.schema_dialects`` that fits the
                              schema (neutral/dialects.py): the upstream constrains its
                              decoding to the schema itself
``json_object_instructions``  no dialect left, json_object supported: json_object plus the
                              schema in the instructions
``instructions``              neither: plain text, the schema in the instructions
============================  =========================================================

The dialect ``json_schema`` is the mode ``json_schema_strict`` when the model wants the
strict subset and the schema is strict or can be made strict (``strict.strictify``; the
client did not say ``strict: false``), else ``json_schema`` (the schema sent non-strict).
``output_config`` (Anthropic) needs that strict subset too and is skipped without it;
``forced_tool`` is skipped when the request has tools of its own (the forced answer would
keep the model from them) or asks for reasoning (Anthropic refuses a forced tool with
extended thinking). The other dialects (grammar engines) take the client's schema
as it is. Each dialect's mode has the dialect's name.

For ``json_object``: ``json_object`` when supported, else ``instructions``.
A schema whose root is not ``type: "object"`` (an array, a string…) cannot be a
response format upstream (OpenAI refuses it even non-strict), so it always goes
the ``instructions`` way.

Whenever ``json_object`` is sent upstream, the word "json" must appear in the
messages (OpenAI answers 400 otherwise): ``ensure_json_word`` appends
"Respond in JSON." to the instructions when neither the instructions nor any
input message mentions it. In every mode the safety net validates the output
against the client's original schema (``{"type": "object"}`` for json_object).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from orgate.neutral import Capabilities, ModelRequest, TextFormat
from orgate.neutral.dialects import GRAMMAR_DIALECTS, SchemaDialect
from orgate.structured import strict

Mode = Literal[
    "json_schema_strict",
    "json_schema",
    "json_object_schema",
    "guided_json",
    "structured_outputs",
    "json_schema_field",
    "output_config",
    "forced_tool",
    "json_object",
    "json_object_instructions",
    "instructions",
]
#: What a mode sends that an upstream may refuse: its dialect, ``json_object``, or None.
Level = SchemaDialect | Literal["json_object"]
JSON_WORD_SUFFIX = "Respond in JSON."
OBJECT_SCHEMA: dict[str, Any] = {"type": "object"}
DEFAULT_FORMAT_NAME = "response"


@dataclass(slots=True, frozen=True)
class Plan:
    """The rewritten request and what to validate against."""

    mode: Mode
    request: ModelRequest
    validation_schema: dict[str, Any]  # the client's schema (or {"type": "object"})
    format_name: str  # label for metrics/config: format name, or "json_object"
    denull: bool = False  # strictify made optional properties nullable: drop their nulls
    strict_changes: tuple[str, ...] = ()
    strict_blockers: tuple[str, ...] = field(default_factory=tuple)
    level: Level | None = None  # what the upstream may refuse of it (downgrades.py)

    @property
    def constrained(self) -> bool:
        """Whether the upstream constrains its decoding to the schema (a schema dialect)."""
        return self.level is not None and self.level != "json_object"


def format_label(fmt: TextFormat) -> str:
    if fmt.type == "json_object":
        return fmt.name or "json_object"
    return fmt.name or DEFAULT_FORMAT_NAME


def _text_of(part: Any) -> str:
    if isinstance(part, str):
        return part
    if isinstance(part, dict):
        return str(part.get("text") or "")
    return str(getattr(part, "text", "") or "")


def message_texts(item: Any) -> list[str]:
    content = item.get("content") if isinstance(item, dict) else getattr(item, "content", None)
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [_text_of(p) for p in content]
    return []


def mentions_json(request: ModelRequest) -> bool:
    """Whether the word "json" (any case) appears in the instructions or any input message text."""
    if request.instructions and "json" in request.instructions.lower():
        return True
    return any("json" in text.lower() for item in request.input for text in message_texts(item))


def ensure_json_word(request: ModelRequest) -> ModelRequest:
    """Append "Respond in JSON." to the instructions unless "json" is already mentioned."""
    if mentions_json(request):
        return request
    return append_instructions(request, JSON_WORD_SUFFIX)


def append_instructions(request: ModelRequest, text: str) -> ModelRequest:
    joined = f"{request.instructions.rstrip()}\n\n{text}" if request.instructions else text
    return dataclasses.replace(request, instructions=joined)


def schema_instructions(schema: dict[str, Any], fmt: TextFormat) -> str:
    head = (
        "Respond with a single JSON value only: no prose before or after it, no Markdown "
        "code fences."
    )
    desc = f"\nThe value is: {fmt.description}" if fmt.description else ""
    body = json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
    return f"{head}{desc}\nIt must validate against this JSON Schema:\n{body}"


OBJECT_INSTRUCTIONS = (
    "Respond with a single JSON object only: no prose before or after it, no Markdown code fences."
)


def plan(request: ModelRequest, caps: Capabilities, *, prefer_strict: bool = True) -> Plan:
    """Choose the mode for ``request`` (whose ``text_format`` is json_schema or json_object)."""
    fmt = request.text_format
    assert fmt is not None and fmt.type in ("json_schema", "json_object")
    label = format_label(fmt)
    if fmt.type == "json_object":
        if caps.json_object:
            return Plan(
                "json_object", ensure_json_word(request), OBJECT_SCHEMA, label, level="json_object"
            )
        sent = append_instructions(
            dataclasses.replace(request, text_format=None), OBJECT_INSTRUCTIONS
        )
        return Plan("instructions", sent, OBJECT_SCHEMA, label)

    schema = fmt.schema if isinstance(fmt.schema, dict) else {}
    if caps.json_schema and schema.get("type") == "object":
        for dialect in caps.schema_dialects:
            chosen = _constrained(request, fmt, schema, dialect, caps, prefer_strict)
            if chosen is not None:
                return chosen
    instructions = schema_instructions(schema, fmt)
    if caps.json_object and schema.get("type") == "object":
        sent = append_instructions(
            dataclasses.replace(request, text_format=TextFormat("json_object")), instructions
        )
        return Plan(
            "json_object_instructions",
            ensure_json_word(sent),
            schema,
            label,
            level="json_object",
        )
    sent = append_instructions(dataclasses.replace(request, text_format=None), instructions)
    return Plan("instructions", sent, schema, label)


def _constrained(
    request: ModelRequest,
    fmt: TextFormat,
    schema: dict[str, Any],
    dialect: SchemaDialect,
    caps: Capabilities,
    prefer_strict: bool,
) -> Plan | None:
    """The plan that sends ``schema`` in ``dialect``, or None when the dialect cannot take it."""
    if dialect in GRAMMAR_DIALECTS or (dialect == "json_schema" and caps.schema_in_prompt):
        # a grammar engine constrains the model without showing it the schema: it reads it here
        request = append_instructions(request, schema_instructions(schema, fmt))
    if dialect == "json_schema":
        return _json_schema(request, fmt, schema, caps, prefer_strict)
    label, name = format_label(fmt), fmt.name or DEFAULT_FORMAT_NAME
    if dialect == "output_config":
        result = strict.strictify(schema)  # Anthropic takes the strict subset only
        if result.schema is None:
            return None
        sent = TextFormat("json_schema", name, result.schema, True, fmt.description, dialect)
        return Plan(
            dialect,
            dataclasses.replace(request, text_format=sent),
            schema,
            label,
            denull=result.optionalized,
            strict_changes=tuple(result.changes),
            level=dialect,
        )
    if dialect == "forced_tool" and (
        request.tools or request.reasoning_effort not in (None, "none")
    ):
        # forcing the answer's tool would keep the model from the client's tools, and
        # Anthropic refuses a forced tool with extended thinking
        return None
    sent = TextFormat("json_schema", name, schema, None, fmt.description, dialect)
    return Plan(
        dialect, dataclasses.replace(request, text_format=sent), schema, label, level=dialect
    )


def _json_schema(
    request: ModelRequest,
    fmt: TextFormat,
    schema: dict[str, Any],
    caps: Capabilities,
    prefer_strict: bool,
) -> Plan:
    """The standard ``json_schema`` format: strict when the model wants it and it can be."""
    label, name = format_label(fmt), fmt.name or DEFAULT_FORMAT_NAME
    blockers: tuple[str, ...] = ()
    if prefer_strict and fmt.strict is not False and caps.strict_json_schema:
        result = strict.strictify(schema)
        if result.schema is not None:
            sent_fmt = TextFormat("json_schema", name, result.schema, True, fmt.description)
            return Plan(
                "json_schema_strict",
                dataclasses.replace(request, text_format=sent_fmt),
                schema,
                label,
                denull=result.optionalized,
                strict_changes=tuple(result.changes),
                level="json_schema",
            )
        blockers = tuple(str(v) for v in result.blockers)
    sent_fmt = TextFormat("json_schema", name, schema, False, fmt.description)
    return Plan(
        "json_schema",
        dataclasses.replace(request, text_format=sent_fmt),
        schema,
        label,
        strict_blockers=blockers,
        level="json_schema",
    )
