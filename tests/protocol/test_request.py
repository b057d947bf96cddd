"""``CreateResponseBody`` and friends: strict types, the schema's limits, extensions."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from orgate.protocol import (
    AllowedToolsParam,
    CompactResponseMethodPublicBody,
    CreateResponseBody,
    FunctionToolParam,
    JsonObjectResponseFormat,
    JsonSchemaResponseFormatParam,
    SpecificFunctionParam,
    TextResponseFormat,
    UserMessageItemParam,
    WebSocketResponseCreateEvent,
    from_validation_error,
    param_from_loc,
)
from tests.support.spec import errors as spec_errors
from tests.support.spec import validate

FULL: dict[str, Any] = {
    "model": "gpt-test",
    "input": [
        {"type": "message", "role": "system", "content": "be brief"},
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "weather?"}],
        },
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"city":"Paris"}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
    ],
    "previous_response_id": "resp_0",
    "include": ["reasoning.encrypted_content"],
    "tools": [
        {
            "type": "function",
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
            "strict": True,
        }
    ],
    "tool_choice": {
        "type": "allowed_tools",
        "tools": [{"type": "function", "name": "get_weather"}],
        "mode": "required",
    },
    "metadata": {"team": "a"},
    "text": {
        "format": {
            "type": "json_schema",
            "name": "w",
            "schema": {"type": "object"},
            "strict": True,
        },
        "verbosity": "low",
    },
    "temperature": 0.5,
    "top_p": 1,
    "presence_penalty": 0,
    "frequency_penalty": 0.1,
    "parallel_tool_calls": False,
    "stream": True,
    "stream_options": {"include_obfuscation": False},
    "background": False,
    "max_output_tokens": 16,
    "max_tool_calls": 1,
    "reasoning": {"effort": "low", "summary": "auto"},
    "safety_identifier": "u" * 64,
    "prompt_cache_key": "k",
    "truncation": "disabled",
    "instructions": "You are terse.",
    "store": False,
    "service_tier": "flex",
    "top_logprobs": 20,
}


def parse(body: dict[str, Any]) -> CreateResponseBody:
    return CreateResponseBody.model_validate_json(json.dumps(body))


def first_error(body: dict[str, Any]) -> tuple[str | None, str]:
    with pytest.raises(ValidationError) as info:
        parse(body)
    err = info.value.errors()[0]
    return param_from_loc(err["loc"]), err["type"]


def test_full_body_round_trips_and_matches_the_spec() -> None:
    validate("CreateResponseBody", FULL)
    body = parse(FULL)
    assert isinstance(body.tool_choice, AllowedToolsParam)
    assert isinstance(body.tools[0], FunctionToolParam)  # type: ignore[index]
    assert isinstance(body.text.format, JsonSchemaResponseFormatParam)  # type: ignore[union-attr]
    assert body.text.format.schema_ == {"type": "object"}  # type: ignore[union-attr]
    dumped = body.model_dump(mode="json", exclude_none=True)
    assert dumped == {**FULL, "top_p": 1.0, "presence_penalty": 0.0}
    validate("CreateResponseBody", body.model_dump(mode="json"))


def test_minimal_bodies() -> None:
    body = parse({"model": "m", "input": "hello"})
    assert body.input == "hello"
    assert body.stream is None and body.tools is None
    validate("CreateResponseBody", body.model_dump(mode="json"))
    assert parse({}).model is None  # the spec makes model optional


def test_untyped_messages_dump_spec_valid() -> None:
    body = parse({"model": "m", "input": [{"role": "user", "content": "hi"}]})
    assert isinstance(body.input[0], UserMessageItemParam)  # type: ignore[index]
    validate("CreateResponseBody", body.model_dump(mode="json"))


def test_unknown_top_level_fields_are_kept() -> None:
    body = parse({"model": "m", "user": "u-1", "x_custom": {"a": 1}})
    assert body.model_extra == {"user": "u-1", "x_custom": {"a": 1}}


@pytest.mark.parametrize(
    ("choice", "cls"),
    [
        ("auto", str),
        ("none", str),
        ("required", str),
        ({"type": "function", "name": "f"}, SpecificFunctionParam),
        (
            {"type": "allowed_tools", "tools": [{"type": "function", "name": "f"}]},
            AllowedToolsParam,
        ),
    ],
)
def test_tool_choice_forms(choice: Any, cls: type) -> None:
    body = parse({"model": "m", "tool_choice": choice})
    assert isinstance(body.tool_choice, cls)
    validate("CreateResponseBody", body.model_dump(mode="json"))


@pytest.mark.parametrize(
    ("fmt", "cls"),
    [
        ({"type": "text"}, TextResponseFormat),
        ({"type": "json_schema", "name": "x", "schema": {}}, JsonSchemaResponseFormatParam),
        ({"type": "json_object"}, JsonObjectResponseFormat),  # orgate extension, see config.py
    ],
)
def test_text_formats(fmt: dict[str, Any], cls: type) -> None:
    body = parse({"model": "m", "text": {"format": fmt}})
    assert isinstance(body.text.format, cls)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("patch", "param", "err_type"),
    [
        ({"model": 5}, "model", "string_type"),
        ({"input": {"role": "user"}}, "input", "string_or_array_type"),
        ({"temperature": "1"}, "temperature", "float_type"),
        ({"temperature": True}, "temperature", "float_type"),
        ({"stream": "true"}, "stream", "bool_type"),
        ({"max_output_tokens": 5}, "max_output_tokens", "greater_than_equal"),
        ({"max_output_tokens": "100"}, "max_output_tokens", "int_type"),
        ({"max_tool_calls": 0}, "max_tool_calls", "greater_than_equal"),
        ({"top_logprobs": 21}, "top_logprobs", "less_than_equal"),
        ({"top_logprobs": -1}, "top_logprobs", "greater_than_equal"),
        ({"metadata": {"k": "v" * 513}}, "metadata.k", "string_too_long"),
        ({"metadata": {f"k{i}": "v" for i in range(17)}}, "metadata", "too_long"),
        ({"metadata": {"k": 1}}, "metadata.k", "string_type"),
        ({"safety_identifier": "x" * 65}, "safety_identifier", "string_too_long"),
        ({"prompt_cache_key": "x" * 65}, "prompt_cache_key", "string_too_long"),
        ({"truncation": "sometimes"}, "truncation", "literal_error"),
        ({"service_tier": "gold"}, "service_tier", "literal_error"),
        ({"include": ["everything"]}, "include[0]", "literal_error"),
        ({"reasoning": {"effort": "max"}}, "reasoning.effort", "literal_error"),
        (
            {"tools": [{"type": "function", "name": "bad name"}]},
            "tools[0].name",
            "string_pattern_mismatch",
        ),
        ({"tools": [{"type": "function", "name": ""}]}, "tools[0].name", "string_too_short"),
        ({"tools": [{"type": "teleport"}]}, "tools[0].type", "literal_error"),
        # a type that is an object or an array (unhashable) is an invalid type, not a crash
        ({"tools": [{"type": {}}]}, "tools[0].type", "literal_error"),
        ({"tools": [{"type": []}]}, "tools[0].type", "literal_error"),
        ({"tools": [{"name": "f"}]}, "tools[0].type", "missing"),
        (
            {"tools": [{"type": "function", "name": "f", "parameters": "{}"}]},
            "tools[0].parameters",
            "dict_type",
        ),
        ({"tool_choice": "sometimes"}, "tool_choice", "literal_error"),
        ({"tool_choice": {"type": "mcp"}}, "tool_choice.type", "literal_error"),
        ({"tool_choice": {"type": "allowed_tools", "tools": []}}, "tool_choice.tools", "too_short"),
        (
            {
                "tool_choice": {
                    "type": "allowed_tools",
                    "tools": [{"type": "function", "name": "f"}] * 129,
                }
            },
            "tool_choice.tools",
            "too_long",
        ),
        ({"text": {"format": {"type": "yaml"}}}, "text.format.type", "literal_error"),
        (
            {"text": {"format": {"type": "json_schema", "schema": "{}"}}},
            "text.format.schema",
            "dict_type",
        ),
        (
            {
                "input": [
                    {"role": "user", "content": "a"},
                    {"type": "function_call", "call_id": "c", "name": "f", "arguments": {}},
                ]
            },
            "input[1].arguments",
            "string_type",
        ),
        ({"input": [{"type": "bogus"}]}, "input[0].type", "literal_error"),
        ({"input": [{"role": "tool", "content": "x"}]}, "input[0].role", "literal_error"),
    ],
)
def test_rejections(patch: dict[str, Any], param: str, err_type: str) -> None:
    body = {"model": "m", **patch}
    assert first_error(body) == (param, err_type)
    # differential check: the spec rejects the same body
    assert spec_errors("CreateResponseBody", body)


def test_api_error_from_validation_error() -> None:
    with pytest.raises(ValidationError) as info:
        parse({"model": "m", "input": [{"type": "bogus"}]})
    err = from_validation_error(info.value)
    assert err.status == 400
    assert err.param == "input[0].type"
    assert err.body()["error"]["type"] == "invalid_request_error"
    assert "input[0].type" in err.message


def test_invalid_json_is_a_validation_error() -> None:
    with pytest.raises(ValidationError) as info:
        CreateResponseBody.model_validate_json(b"{not json")
    err = from_validation_error(info.value)
    assert err.code == "invalid_json" and err.param is None


def test_websocket_create_event() -> None:
    evt = WebSocketResponseCreateEvent.model_validate(
        {"type": "response.create", "model": "m", "input": "hi"}
    )
    assert evt.input == "hi"
    validate("WebSocketResponseCreateEvent", evt.model_dump(mode="json", exclude_none=True))
    for field, value in (("stream", True), ("background", False), ("stream_options", {})):
        with pytest.raises(ValidationError) as info:
            WebSocketResponseCreateEvent.model_validate({"type": "response.create", field: value})
        assert param_from_loc(info.value.errors()[0]["loc"]) == field
    with pytest.raises(ValidationError):
        WebSocketResponseCreateEvent.model_validate({"model": "m"})


def test_compact_body() -> None:
    body = CompactResponseMethodPublicBody.model_validate(
        {"model": "m", "input": [{"role": "user", "content": "x"}]}
    )
    validate("CompactResponseMethodPublicBody", body.model_dump(mode="json", exclude_none=True))
    with pytest.raises(ValidationError):
        CompactResponseMethodPublicBody.model_validate({"input": "x"})
