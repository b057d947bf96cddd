"""Capability branching: how a JSON request is actually sent to one model.

For ``text.format`` ``json_schema``:

==========================  ===========================================================
mode                        when / what is sent upstream
==========================  ===========================================================
``json_schema_strict``      the model supports json_schema and the schema is strict or
                            can be made strict (``strict.strictify``); the client did not
                            say ``strict: false``
``json_schema``             json_schema supported but no strict equivalent (or the client
                            asked for ``strict: false``): the schema is sent non-strict
``json_object_instructions`` no json_schema, json_object supported: json_object plus the
                            schema in the instructions
``instructions``            neither: plain text, the schema in the instructions
==========================  ===========================================================

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
from orgate.structured import strict

Mode = Literal[
    "json_schema_strict", "json_schema", "json_object", "json_object_instructions", "instructions"
]
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


def _message_texts(item: Any) -> list[str]:
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
    return any("json" in text.lower() for item in request.input for text in _message_texts(item))


def ensure_json_word(request: ModelRequest) -> ModelRequest:
    """Append "Respond in JSON." to the instructions unless "json" is already mentioned."""
    if mentions_json(request):
        return request
    return append_instructions(request, JSON_WORD_SUFFIX)


def append_instructions(request: ModelRequest, text: str) -> ModelRequest:
    joined = f"{request.instructions.rstrip()}\n\n{text}" if request.instructions else text
    return dataclasses.replace(request, instructions=joined)


def schema_instructions(schema: dict[str, Any], fmt: TextFormat) -> str:
    head = "Respond with a single JSON value only: no prose before or after it, no Markdown code fences."
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
            return Plan("json_object", ensure_json_word(request), OBJECT_SCHEMA, label)
        sent = append_instructions(
            dataclasses.replace(request, text_format=None), OBJECT_INSTRUCTIONS
        )
        return Plan("instructions", sent, OBJECT_SCHEMA, label)

    schema = fmt.schema if isinstance(fmt.schema, dict) else {}
    name = fmt.name or DEFAULT_FORMAT_NAME
    root_object = schema.get("type") == "object"
    if caps.json_schema and root_object:
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
                )
            blockers = tuple(str(v) for v in result.blockers)
        else:
            blockers = ()
        sent_fmt = TextFormat("json_schema", name, schema, False, fmt.description)
        return Plan(
            "json_schema",
            dataclasses.replace(request, text_format=sent_fmt),
            schema,
            label,
            strict_blockers=blockers,
        )
    instructions = schema_instructions(schema, fmt)
    if caps.json_object and root_object:
        sent = append_instructions(
            dataclasses.replace(request, text_format=TextFormat("json_object")), instructions
        )
        return Plan("json_object_instructions", ensure_json_word(sent), schema, label)
    sent = append_instructions(dataclasses.replace(request, text_format=None), instructions)
    return Plan("instructions", sent, schema, label)
