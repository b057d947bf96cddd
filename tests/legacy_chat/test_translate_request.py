"""Chat request → ``CreateResponseBody``: one test per field family.

Every translated body is also validated against the spec's ``CreateResponseBody``
schema (the ``stop`` extension is an additional property, which the schema allows).
"""

from __future__ import annotations

from typing import Any

import pytest
from tests.support import spec

from orgate.legacy_chat import translate, validate
from orgate.protocol.errors import ApiError
from orgate.protocol.request import CreateResponseBody


def body_of(**fields: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    data.update(fields)
    body = translate.to_create_response_body(validate.parse_request(data))
    assert isinstance(body, CreateResponseBody)
    wire = body.model_dump(mode="json", exclude_none=True, by_alias=True)
    fmt = (wire.get("text") or {}).get("format") or {}
    if fmt.get("type") != "json_object":  # an orgate extension of the request schema
        spec.validate("CreateResponseBody", wire)
    return wire


def test_minimal_request() -> None:
    wire = body_of()
    assert wire == {
        "model": "m",
        "input": [{"type": "message", "role": "user", "content": "hi"}],
        "store": False,
    }


def test_all_roles_keep_their_order() -> None:
    wire = body_of(
        messages=[
            {"role": "system", "content": "sys"},
            {"role": "developer", "content": [{"type": "text", "text": "dev"}]},
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "a"},
            {"role": "user", "content": "q2"},
        ]
    )
    assert wire["input"] == [
        {"type": "message", "role": "system", "content": "sys"},
        {
            "type": "message",
            "role": "developer",
            "content": [{"type": "input_text", "text": "dev"}],
        },
        {"type": "message", "role": "user", "content": "q"},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "a", "annotations": []}],
        },
        {"type": "message", "role": "user", "content": "q2"},
    ]


def test_user_content_parts_images_and_files() -> None:
    wire = body_of(
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "look"},
                    {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}},
                    {
                        "type": "image_url",
                        "image_url": {
                            "url": "data:image/png;base64,iVBORw0KGgo=",
                            "detail": "high",
                        },
                    },
                    {
                        "type": "file",
                        "file": {
                            "file_data": "data:application/pdf;base64,JVBE",
                            "filename": "a.pdf",
                        },
                    },
                ],
            }
        ]
    )
    assert wire["input"][0]["content"] == [
        {"type": "input_text", "text": "look"},
        {"type": "input_image", "image_url": "https://x.test/a.png", "detail": "auto"},
        {
            "type": "input_image",
            "image_url": "data:image/png;base64,iVBORw0KGgo=",
            "detail": "high",
        },
        {
            "type": "input_file",
            "file_data": "data:application/pdf;base64,JVBE",
            "filename": "a.pdf",
        },
    ]


def test_assistant_tool_calls_and_tool_results() -> None:
    wire = body_of(
        messages=[
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                    },
                    {
                        "id": "call_2",
                        "type": "function",
                        "function": {"name": "get_time", "arguments": "{}"},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
            {
                "role": "tool",
                "tool_call_id": "call_2",
                "content": [{"type": "text", "text": "noon"}],
            },
        ]
    )
    assert wire["input"][1:] == [
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"city":"Paris"}',
        },
        {"type": "function_call", "call_id": "call_2", "name": "get_time", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
        {"type": "function_call_output", "call_id": "call_2", "output": "noon"},
    ]


def test_assistant_text_with_tool_calls_and_refusal() -> None:
    wire = body_of(
        messages=[
            {"role": "user", "content": "x"},
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "let me check"}],
                "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c", "content": "ok"},
            {"role": "assistant", "content": None, "refusal": "no"},
        ]
    )
    assert wire["input"][1] == {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "let me check", "annotations": []}],
    }
    assert wire["input"][2]["type"] == "function_call"
    assert wire["input"][4] == {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "refusal", "refusal": "no"}],
    }


def test_tools_and_every_tool_choice() -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "f",
                "description": "d",
                "parameters": {"type": "object", "properties": {}},
                "strict": True,
            },
        }
    ]
    wire = body_of(tools=tools)
    assert wire["tools"] == [
        {
            "type": "function",
            "name": "f",
            "description": "d",
            "parameters": {"type": "object", "properties": {}},
            "strict": True,
        }
    ]
    assert "tool_choice" not in wire
    for mode in ("none", "auto", "required"):
        assert body_of(tools=tools, tool_choice=mode)["tool_choice"] == mode
    named = {"type": "function", "function": {"name": "f"}}
    assert body_of(tools=tools, tool_choice=named)["tool_choice"] == {
        "type": "function",
        "name": "f",
    }
    allowed = {
        "type": "allowed_tools",
        "allowed_tools": {
            "mode": "required",
            "tools": [{"type": "function", "function": {"name": "f"}}],
        },
    }
    assert body_of(tools=tools, tool_choice=allowed)["tool_choice"] == {
        "type": "allowed_tools",
        "mode": "required",
        "tools": [{"type": "function", "name": "f"}],
    }
    assert body_of(tools=tools, parallel_tool_calls=False)["parallel_tool_calls"] is False


@pytest.mark.parametrize(
    ("fmt", "expected"),
    [
        ({"type": "text"}, {"type": "text"}),
        ({"type": "json_object"}, {"type": "json_object"}),
        (
            {
                "type": "json_schema",
                "json_schema": {
                    "name": "person",
                    "description": "a person",
                    "schema": {"type": "object", "properties": {"n": {"type": "string"}}},
                    "strict": True,
                },
            },
            {
                "type": "json_schema",
                "name": "person",
                "description": "a person",
                "schema": {"type": "object", "properties": {"n": {"type": "string"}}},
                "strict": True,
            },
        ),
        (
            {"type": "json_schema", "json_schema": {"name": "bare"}},
            {"type": "json_schema", "name": "bare"},
        ),
    ],
)
def test_response_format(fmt: dict[str, Any], expected: dict[str, Any]) -> None:
    assert body_of(response_format=fmt)["text"] == {"format": expected}


def test_json_object_is_accepted_by_the_protocol_model() -> None:
    # The spec's request TextFormatParam omits json_object; orgate accepts it as an extension.
    body = translate.to_create_response_body(
        validate.parse_request(
            {
                "model": "m",
                "messages": [{"role": "user", "content": "hi"}],
                "response_format": {"type": "json_object"},
            }
        )
    )
    assert body.model_dump(mode="json", exclude_none=True)["text"] == {
        "format": {"type": "json_object"}
    }


@pytest.mark.parametrize("field", ["max_tokens", "max_completion_tokens"])
def test_max_tokens(field: str) -> None:
    assert body_of(**{field: 256})["max_output_tokens"] == 256


def test_sampling_and_penalties() -> None:
    wire = body_of(temperature=0.2, top_p=0.9, presence_penalty=0.5, frequency_penalty=-0.5)
    assert (wire["temperature"], wire["top_p"]) == (0.2, 0.9)
    assert (wire["presence_penalty"], wire["frequency_penalty"]) == (0.5, -0.5)


@pytest.mark.parametrize(("stop", "expected"), [("END", ["END"]), (["a", "b"], ["a", "b"])])
def test_stop_rides_as_extension_field(stop: Any, expected: list[str]) -> None:
    data = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stop": stop}
    body = translate.to_create_response_body(validate.parse_request(data))
    assert body.model_extra == {"stop": expected}
    assert body_of(stop=stop)["stop"] == expected


def test_empty_or_null_stop_is_no_stop() -> None:
    assert "stop" not in body_of(stop=None)
    assert "stop" not in body_of(stop=[])


def test_identity_metadata_store_and_misc() -> None:
    wire = body_of(
        user="u-1",
        metadata={"k": "v"},
        store=True,
        prompt_cache_key="pck",
        service_tier="flex",
        reasoning_effort="high",
        verbosity="low",
    )
    assert wire["user"] == "u-1"  # the engine's extension field
    assert wire["metadata"] == {"k": "v"}
    assert wire["store"] is True
    assert wire["prompt_cache_key"] == "pck"
    assert wire["service_tier"] == "flex"
    assert wire["reasoning"] == {"effort": "high"}
    assert wire["text"] == {"verbosity": "low"}
    both = body_of(safety_identifier="s", user="u")
    assert (both["safety_identifier"], both["user"]) == ("s", "u")
    assert body_of(reasoning_effort="minimal")["reasoning"] == {"effort": "low"}


def test_stream_flag_and_accepted_noops() -> None:
    wire = body_of(stream=True, stream_options={"include_usage": True}, n=1, logprobs=False)
    assert wire["stream"] is True
    assert "stream_options" not in wire  # include_usage is the adapter's business
    assert "stream" not in body_of(stream=False)
    assert "input" in body_of(modalities=["text"])


def test_sdk_echoed_assistant_message_is_accepted() -> None:
    # What `completion.choices[0].message.model_dump()` sends back on the next turn.
    echoed = {
        "role": "assistant",
        "content": "See [x].",
        "refusal": None,
        "annotations": [
            {
                "type": "url_citation",
                "url_citation": {
                    "start_index": 4,
                    "end_index": 7,
                    "title": "X",
                    "url": "https://x.test",
                },
            }
        ],
        "audio": None,
        "function_call": None,
        "tool_calls": None,
    }
    wire = body_of(messages=[{"role": "user", "content": "q"}, echoed])
    assert wire["input"][1]["content"] == [
        {
            "type": "output_text",
            "text": "See [x].",
            "annotations": [
                {
                    "type": "url_citation",
                    "url": "https://x.test",
                    "title": "X",
                    "start_index": 4,
                    "end_index": 7,
                }
            ],
        }
    ]


def test_param_map_names_chat_fields() -> None:
    req = validate.parse_request(
        {
            "model": "m",
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "a"},
                        {"type": "image_url", "image_url": {"url": "u"}},
                    ],
                },
                {
                    "role": "assistant",
                    "content": "calling",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        },
                        {
                            "id": "c2",
                            "type": "function",
                            "function": {"name": "g", "arguments": "{}"},
                        },
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "x"},
            ],
            "tools": [{"type": "function", "function": {"name": "f"}}],
            "max_tokens": 100,
        }
    )
    _, params = translate.translate_request(req)
    to_chat = params.to_chat
    assert to_chat(None) is None
    assert to_chat("input[0].content[1]") == "messages[0].content[1]"
    assert to_chat("input[1]") == "messages[1]"
    assert to_chat("input[2].arguments") == "messages[1].tool_calls[0].function.arguments"
    assert to_chat("input[3].call_id") == "messages[1].tool_calls[1].id"
    assert to_chat("input[4].call_id") == "messages[2].tool_call_id"
    assert to_chat("input[4].output") == "messages[2].content"
    assert to_chat("input") == "messages"
    assert to_chat("tools[0].parameters") == "tools[0].function.parameters"
    assert to_chat("max_output_tokens") == "max_tokens"
    assert to_chat("text.format.schema") == "response_format.json_schema.schema"
    assert to_chat("text.format") == "response_format"
    assert to_chat("reasoning.effort") == "reasoning_effort"
    assert to_chat("tool_choice.name") == "tool_choice.function.name"
    assert to_chat("temperature") == "temperature"


@pytest.mark.parametrize(("field", "value"), [("max_tokens", 1), ("max_completion_tokens", 15)])
def test_max_tokens_below_the_responses_minimum_is_kept(field: str, value: int) -> None:
    data: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    body = translate.to_create_response_body(validate.parse_request({**data, field: value}))
    assert body.max_output_tokens == value
    assert "max_output_tokens" not in body_of()


def test_logprobs_without_top_logprobs_ask_for_the_tokens_only() -> None:
    wire = body_of(logprobs=True)
    assert wire["include"] == ["message.output_text.logprobs"]
    assert "top_logprobs" not in wire


def test_store_defaults_to_false_and_text_is_left_out_when_unset() -> None:
    wire = body_of()
    assert wire["store"] is False
    assert "text" not in wire and "reasoning" not in wire and "tools" not in wire


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"temperature": 3}, "temperature"),
        ({"verbosity": "loud"}, "verbosity"),
    ],
)
def test_a_body_the_protocol_refuses_names_the_chat_field(
    fields: dict[str, Any], param: str
) -> None:
    data: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}], **fields}
    with pytest.raises(ApiError) as info:
        translate.translate_request(validate.parse_request(data))
    assert info.value.param == param


def test_param_map_names_the_nested_chat_fields_of_tools_and_allowed_tools() -> None:
    req = validate.parse_request(
        {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 20}
    )
    to_chat = translate.translate_request(req)[1].to_chat
    assert to_chat("max_output_tokens") == "max_completion_tokens"
    assert to_chat("tool_choice.tools") == "tool_choice.allowed_tools.tools"
    assert to_chat("tool_choice.tools[1]") == "tool_choice.allowed_tools.tools[1]"
    assert to_chat("tool_choice.tools[1].type") == "tool_choice.allowed_tools.tools[1].type"
    assert (
        to_chat("tool_choice.tools[1].name") == "tool_choice.allowed_tools.tools[1].function.name"
    )
    assert to_chat("tool_choice.mode") == "tool_choice.allowed_tools.mode"
    assert to_chat("tools[2]") == "tools[2]"
    assert to_chat("tools[2].type") == "tools[2].type"
    assert to_chat("tools[2].strict") == "tools[2].function.strict"
    assert to_chat("input[0]") == "messages[0]"
    assert to_chat("input[0].content[0].text") == "messages[0].content[0].text"
    assert to_chat("input[1]") == to_chat("input[7].content") == "messages"  # no such item
    assert to_chat("text") == "response_format"
    assert to_chat("textual") == "textual"  # a prefix only when a whole segment
    assert to_chat("") == ""
