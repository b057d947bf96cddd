"""Capability branching and the json-word rule."""

from __future__ import annotations

from typing import Any

from orgate.neutral import Capabilities, ModelRequest, TextFormat
from orgate.protocol import InputTextContentParam, UserMessageItemParam
from orgate.structured.modes import JSON_WORD_SUFFIX, ensure_json_word, mentions_json, plan

SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "string"}},
    "required": ["a"],
    "additionalProperties": False,
}
LOOSE = {
    "type": "object",
    "properties": {"m": {"type": "object", "additionalProperties": {"type": "number"}}},
}


def req(fmt: TextFormat, **kw: Any) -> ModelRequest:
    return ModelRequest("up", [UserMessageItemParam(content="hello")], text_format=fmt, **kw)


def test_native_strict_when_supported() -> None:
    p = plan(req(TextFormat("json_schema", "x", SCHEMA)), Capabilities())
    assert p.mode == "json_schema_strict" and p.request.text_format == TextFormat(
        "json_schema", "x", SCHEMA, True
    )
    assert p.validation_schema == SCHEMA and not p.denull


def test_unstrictifiable_schema_is_sent_non_strict() -> None:
    p = plan(req(TextFormat("json_schema", "x", LOOSE, True)), Capabilities())
    assert (
        p.mode == "json_schema"
        and p.request.text_format is not None
        and p.request.text_format.strict is False
    )
    assert p.strict_blockers and "map" in p.strict_blockers[0]


def test_client_strict_false_is_respected() -> None:
    p = plan(req(TextFormat("json_schema", "x", SCHEMA, False)), Capabilities())
    assert p.mode == "json_schema"
    assert (
        plan(req(TextFormat("json_schema", "x", SCHEMA)), Capabilities(), prefer_strict=False).mode
        == "json_schema"
    )


def test_json_object_with_schema_in_instructions() -> None:
    p = plan(
        req(TextFormat("json_schema", "x", SCHEMA), instructions="Be nice."),
        Capabilities(json_schema=False),
    )
    assert p.mode == "json_object_instructions"
    assert p.request.text_format == TextFormat("json_object")
    assert p.request.instructions is not None and p.request.instructions.startswith(
        "Be nice.\n\nRespond with a single JSON value"
    )
    assert '"required":["a"]' in p.request.instructions


def test_instructions_only() -> None:
    p = plan(
        req(TextFormat("json_schema", "x", SCHEMA)),
        Capabilities(json_schema=False, json_object=False),
    )
    assert (
        p.mode == "instructions"
        and p.request.text_format is None
        and "JSON Schema" in (p.request.instructions or "")
    )
    p = plan(req(TextFormat("json_object")), Capabilities(json_schema=False, json_object=False))
    assert p.mode == "instructions" and p.validation_schema == {"type": "object"}


def test_non_object_root_goes_through_instructions() -> None:
    p = plan(
        req(TextFormat("json_schema", "list", {"type": "array", "items": {"type": "string"}})),
        Capabilities(),
    )
    assert p.mode == "instructions"


def test_json_object_mode_and_label() -> None:
    p = plan(req(TextFormat("json_object")), Capabilities())
    assert p.mode == "json_object" and p.format_name == "json_object"
    assert p.request.instructions == JSON_WORD_SUFFIX


def test_json_word_rule() -> None:
    r = req(TextFormat("json_object"), instructions="Answer briefly.")
    assert ensure_json_word(r).instructions == "Answer briefly.\n\nRespond in JSON."
    assert (
        ensure_json_word(ensure_json_word(r)).instructions == "Answer briefly.\n\nRespond in JSON."
    )
    already = req(TextFormat("json_object"), instructions="Return Json please")
    assert ensure_json_word(already) is already
    in_message = ModelRequest(
        "up", [UserMessageItemParam(content=[InputTextContentParam(text="give me JSON")])]
    )
    assert mentions_json(in_message) and ensure_json_word(in_message) is in_message
    as_dict = ModelRequest("up", [{"type": "message", "role": "user", "content": "a json list"}])
    assert mentions_json(as_dict)
    assert not mentions_json(ModelRequest("up", [{"type": "function_call_output", "output": "x"}]))


def test_a_deployment_without_strict_mode_gets_the_schema_as_written() -> None:
    """``strict_json_schema = false`` (the built-in model, or a configured server):
    no strict subset."""
    p = plan(req(TextFormat("json_schema", "x", SCHEMA)), Capabilities(strict_json_schema=False))
    assert p.mode == "json_schema"
    assert p.request.text_format is not None and p.request.text_format.schema == SCHEMA


GRAMMAR = Capabilities(schema_dialects=("json_object_schema",), strict_json_schema=False)


def test_each_schema_dialect_is_its_own_mode_with_the_clients_schema() -> None:
    for dialect in ("json_object_schema", "guided_json", "structured_outputs", "json_schema_field"):
        caps = Capabilities(schema_dialects=(dialect,))
        p = plan(req(TextFormat("json_schema", "x", LOOSE, True)), caps)
        sent = p.request.text_format
        assert p.mode == dialect and p.level == dialect and p.constrained
        assert sent is not None and sent.dialect == dialect and sent.schema == LOOSE
        # a grammar engine never shows the model the schema: it is in the instructions too
        assert '"additionalProperties":{"type":"number"}' in (p.request.instructions or "")


def test_the_first_dialect_that_fits_wins_and_the_ladder_ends_in_json_object() -> None:
    caps = Capabilities(schema_dialects=("output_config", "forced_tool"), json_object=False)
    # output_config takes the strict subset only: a map has none, so the forced tool
    p = plan(req(TextFormat("json_schema", "x", LOOSE)), caps)
    assert p.mode == "forced_tool" and p.request.instructions is None
    strictable = plan(req(TextFormat("json_schema", "x", SCHEMA)), caps)
    assert strictable.mode == "output_config"
    assert strictable.request.text_format is not None
    assert strictable.request.text_format.strict is True
    # a request with tools of its own, or with reasoning: no forced tool, the prompt then
    for kw in ({"tools": [{"type": "function", "name": "f"}]}, {"reasoning_effort": "low"}):
        assert plan(req(TextFormat("json_schema", "x", LOOSE), **kw), caps).mode == "instructions"
    none_left = Capabilities(schema_dialects=())
    assert plan(req(TextFormat("json_schema", "x", SCHEMA)), none_left).mode == (
        "json_object_instructions"
    )


def test_json_schema_on_a_grammar_server_shows_the_model_the_schema() -> None:
    shown = Capabilities(schema_in_prompt=True)
    p = plan(req(TextFormat("json_schema", "x", SCHEMA)), shown)
    assert p.mode == "json_schema_strict" and "JSON Schema" in (p.request.instructions or "")
    hidden = plan(req(TextFormat("json_schema", "x", SCHEMA)), Capabilities())
    assert hidden.request.instructions is None
