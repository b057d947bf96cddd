"""Pure mapping tests: ModelRequest (with real protocol input models) → Chat Completions body."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from orgate.neutral import ModelRequest, OpaqueItem, TextFormat
from orgate.protocol import (
    AllowedToolsParam,
    AssistantMessageItemParam,
    DeveloperMessageItemParam,
    FunctionCallItemParam,
    FunctionCallOutputItemParam,
    FunctionToolParam,
    InputFileContentParam,
    InputImageContentParamAutoParam,
    InputTextContentParam,
    OutputTextContentParam,
    ReasoningItemParam,
    RefusalContentParam,
    SpecificFunctionParam,
    SystemMessageItemParam,
    UserMessageItemParam,
)
from orgate.protocol.errors import ApiError
from orgate.providers.openai_chat import ChatOptions, build_body

WEATHER = FunctionToolParam(
    name="get_weather",
    description="Weather for a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    strict=True,
)
TIME = FunctionToolParam(name="get_time", parameters={"type": "object", "properties": {}})


def req(*items: Any, **kw: Any) -> ModelRequest:
    return ModelRequest(model="up-model", input=list(items), **kw)


def user(content: Any) -> UserMessageItemParam:
    return UserMessageItemParam(content=content)


def test_minimal_body_omits_every_unset_field() -> None:
    body = build_body(req(user("hi")), stream=False)
    assert body == {"model": "up-model", "messages": [{"role": "user", "content": "hi"}]}


def test_stream_asks_for_usage() -> None:
    body = build_body(req(user("hi")))
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    body = build_body(req(user("hi")), options=ChatOptions(include_usage=False))
    assert "stream_options" not in body


def test_instructions_come_first_as_system() -> None:
    body = build_body(
        req(SystemMessageItemParam(content="sys"), user("hi"), instructions="be brief"),
        stream=False,
    )
    assert body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "hi"},
    ]


def test_developer_maps_to_system_by_default_and_is_configurable() -> None:
    item = DeveloperMessageItemParam(content=[InputTextContentParam(text="rules")])
    assert build_body(req(item), stream=False)["messages"] == [
        {"role": "system", "content": "rules"}
    ]
    opts = ChatOptions(developer_role="developer")
    assert build_body(req(item), stream=False, options=opts)["messages"][0]["role"] == "developer"


def test_user_parts_text_and_images() -> None:
    item = user(
        [
            InputTextContentParam(text="what is this?"),
            InputImageContentParamAutoParam(image_url="https://x.test/cat.png", detail="low"),
            InputImageContentParamAutoParam(image_url="data:image/png;base64,iVBORw0KGgo="),
        ]
    )
    assert build_body(req(item), stream=False)["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is this?"},
                {
                    "type": "image_url",
                    "image_url": {"url": "https://x.test/cat.png", "detail": "low"},
                },
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            ],
        }
    ]


def test_input_file_data_becomes_a_chat_file_part() -> None:
    pdf = "JVBERi0xLjQK"  # base64 of "%PDF-1.4"
    body = build_body(
        req(
            user(
                [
                    InputTextContentParam(text="read"),
                    InputFileContentParam(
                        filename="report.pdf", file_data=f"data:application/pdf;base64,{pdf}"
                    ),
                    InputFileContentParam(file_data=pdf),  # bare base64, no name: a PDF
                    InputFileContentParam(filename="notes.txt", file_data="aGk="),
                ]
            )
        )
    )
    assert body["messages"][0]["content"][1:] == [
        {
            "type": "file",
            "file": {"file_data": f"data:application/pdf;base64,{pdf}", "filename": "report.pdf"},
        },
        {"type": "file", "file": {"file_data": f"data:application/pdf;base64,{pdf}"}},
        {
            "type": "file",
            "file": {"file_data": "data:text/plain;base64,aGk=", "filename": "notes.txt"},
        },
    ]


def test_input_file_url_is_refused_with_param() -> None:
    item = user(
        [InputTextContentParam(text="read"), InputFileContentParam(file_url="https://x/f.pdf")]
    )
    with pytest.raises(ApiError) as err:
        build_body(req(user("first"), item))
    assert err.value.status == 400 and err.value.code == "unsupported_content"
    assert err.value.param == "input[1].content[1].file_url"
    assert "file_url" in err.value.message and "file_data" in err.value.message


def test_image_without_url_is_refused() -> None:
    with pytest.raises(ApiError) as err:
        build_body(req(user([InputImageContentParamAutoParam()])))
    assert err.value.status == 400 and err.value.param == "input[0].content[0].image_url"


def test_assistant_history_parts_join_into_a_string() -> None:
    body = build_body(
        req(
            user("hi"),
            AssistantMessageItemParam(
                content=[
                    OutputTextContentParam(text="Hello "),
                    OutputTextContentParam(text="there"),
                ]
            ),
            AssistantMessageItemParam(content=[RefusalContentParam(refusal="I can't")]),
            user("again"),
        ),
        stream=False,
    )
    assert body["messages"] == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Hello there"},
        {"role": "assistant", "content": "I can't"},
        {"role": "user", "content": "again"},
    ]


def test_function_calls_merge_into_one_assistant_message_with_preceding_text() -> None:
    body = build_body(
        req(
            user("weather in Paris and the time?"),
            AssistantMessageItemParam(content="Let me check."),
            FunctionCallItemParam(call_id="c1", name="get_weather", arguments='{"city":"Paris"}'),
            FunctionCallItemParam(call_id="c2", name="get_time", arguments="{}"),
            FunctionCallOutputItemParam(call_id="c1", output='{"temp":21}'),
            FunctionCallOutputItemParam(
                call_id="c2",
                output=[InputTextContentParam(text="12:"), InputTextContentParam(text="00")],
            ),
            ReasoningItemParam(summary=[]),
            FunctionCallItemParam(call_id="c3", name="get_time", arguments="{}"),
        ),
        stream=False,
    )
    assert body["messages"] == [
        {"role": "user", "content": "weather in Paris and the time?"},
        {
            "role": "assistant",
            "content": "Let me check.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "get_time", "arguments": "{}"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"temp":21}'},
        {"role": "tool", "tool_call_id": "c2", "content": "12:00"},
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "c3",
                    "type": "function",
                    "function": {"name": "get_time", "arguments": "{}"},
                }
            ],
        },
    ]


def test_tool_output_with_image_keeps_content_parts() -> None:
    body = build_body(
        req(
            FunctionCallItemParam(call_id="c1", name="shot", arguments="{}"),
            FunctionCallOutputItemParam(
                call_id="c1",
                output=[
                    InputTextContentParam(text="here"),
                    InputImageContentParamAutoParam(image_url="https://x/i.png"),
                ],
            ),
        ),
        stream=False,
    )
    assert body["messages"][1]["content"] == [
        {"type": "text", "text": "here"},
        {"type": "image_url", "image_url": {"url": "https://x/i.png"}},
    ]


def test_replayed_output_models_and_dicts_work() -> None:
    from orgate.protocol import FunctionCall, Message

    message = Message.model_validate(
        {
            "type": "message",
            "id": "msg_1",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "ok", "annotations": [], "logprobs": []}],
        }
    )
    call = FunctionCall(id="fc_1", call_id="c9", name="f", arguments="{}", status="completed")
    raw = {"type": "function_call_output", "call_id": "c9", "output": "done"}
    msgs = build_body(req(message, call, raw), stream=False)["messages"]
    assert msgs == [
        {
            "role": "assistant",
            "content": "ok",
            "tool_calls": [
                {"id": "c9", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c9", "content": "done"},
    ]


@dataclass
class LocalItem:
    """A duck-typed item (what a test may build without the protocol models)."""

    type: str
    role: str
    content: Any


def test_duck_typed_items() -> None:
    msgs = build_body(req(LocalItem("message", "user", "hey")), stream=False)["messages"]
    assert msgs == [{"role": "user", "content": "hey"}]


def test_tools_and_tool_choice_values() -> None:
    body = build_body(req(user("x"), tools=[WEATHER, TIME], tool_choice="required"), stream=False)
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather for a city",
                "parameters": WEATHER.parameters,
                "strict": True,
            },
        },
        {"type": "function", "function": {"name": "get_time", "parameters": TIME.parameters}},
    ]
    assert body["tool_choice"] == "required"
    for choice in ("auto", "none"):
        assert build_body(req(user("x"), tools=[TIME], tool_choice=choice))["tool_choice"] == choice


def test_named_function_choice() -> None:
    body = build_body(
        req(user("x"), tools=[WEATHER, TIME], tool_choice=SpecificFunctionParam(name="get_time"))
    )
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_time"}}


def test_allowed_tools_restricts_the_list_and_maps_mode() -> None:
    choice = AllowedToolsParam(tools=[SpecificFunctionParam(name="get_time")], mode="required")
    body = build_body(req(user("x"), tools=[WEATHER, TIME], tool_choice=choice))
    assert [t["function"]["name"] for t in body["tools"]] == ["get_time"]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_time"}}

    choice = AllowedToolsParam(
        tools=[SpecificFunctionParam(name="get_time"), SpecificFunctionParam(name="get_weather")],
    )
    body = build_body(req(user("x"), tools=[WEATHER, TIME], tool_choice=choice))
    assert [t["function"]["name"] for t in body["tools"]] == ["get_weather", "get_time"]
    assert body["tool_choice"] == "auto"

    choice = AllowedToolsParam(
        tools=[SpecificFunctionParam(name="get_time"), SpecificFunctionParam(name="get_weather")],
        mode="required",
    )
    assert (
        build_body(req(user("x"), tools=[WEATHER, TIME], tool_choice=choice))["tool_choice"]
        == "required"
    )


def test_allowed_tools_naming_no_tool_cannot_be_required() -> None:
    choice = AllowedToolsParam(tools=[SpecificFunctionParam(name="nope")], mode="required")
    with pytest.raises(ApiError) as err:
        build_body(req(user("x"), tools=[WEATHER, TIME], tool_choice=choice))
    assert err.value.param == "tool_choice" and "names no tool" in str(err.value)
    choice = AllowedToolsParam(tools=[SpecificFunctionParam(name="nope")], mode="auto")
    body = build_body(req(user("x"), tools=[WEATHER, TIME], tool_choice=choice))
    assert "tools" not in body and "tool_choice" not in body


def test_tool_choice_of_another_type_is_refused() -> None:
    with pytest.raises(ApiError) as err:
        build_body(req(user("x"), tools=[TIME], tool_choice={"type": "web_search"}))
    assert err.value.param == "tool_choice" and "'web_search'" in str(err.value)


def test_tool_choice_without_a_mode_in_allowed_tools_dict_is_auto() -> None:
    choice = {"type": "allowed_tools", "tools": [{"name": "get_time"}]}
    body = build_body(req(user("x"), tools=[WEATHER, TIME], tool_choice=choice))
    assert [t["function"]["name"] for t in body["tools"]] == ["get_time"]
    assert body["tool_choice"] == "auto"


def test_no_tools_means_no_tool_fields() -> None:
    body = build_body(req(user("x"), tool_choice="none", parallel_tool_calls=False))
    assert "tools" not in body and "tool_choice" not in body and "parallel_tool_calls" not in body


def test_parallel_tool_calls_only_with_tools() -> None:
    body = build_body(req(user("x"), tools=[TIME], parallel_tool_calls=False))
    assert body["parallel_tool_calls"] is False


def test_sampling_and_misc_fields() -> None:
    body = build_body(
        req(
            user("x"),
            temperature=0.2,
            top_p=0.9,
            presence_penalty=0.1,
            frequency_penalty=-0.1,
            max_output_tokens=64,
            user="u-1",
            stop=["END"],
            reasoning_effort="low",
            prompt_cache_key="k1",
            metadata={"a": "b"},
            verbosity="low",
            service_tier="flex",
        ),
        stream=False,
    )
    assert body == {
        "model": "up-model",
        "messages": [{"role": "user", "content": "x"}],
        "temperature": 0.2,
        "top_p": 0.9,
        "presence_penalty": 0.1,
        "frequency_penalty": -0.1,
        "verbosity": "low",
        "service_tier": "flex",
        "max_tokens": 64,
        "user": "u-1",
        "stop": ["END"],
        "reasoning_effort": "low",
        "prompt_cache_key": "k1",
    }
    body = build_body(
        req(user("x"), max_output_tokens=8),
        options=ChatOptions(max_tokens_field="max_completion_tokens"),
    )
    assert body["max_completion_tokens"] == 8 and "max_tokens" not in body


def test_response_format() -> None:
    assert "response_format" not in build_body(req(user("x"), text_format=TextFormat()))
    body = build_body(req(user("x"), text_format=TextFormat(type="json_object")))
    assert body["response_format"] == {"type": "json_object"}
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    fmt = TextFormat(
        type="json_schema", name="thing", schema=schema, strict=True, description="a thing"
    )
    body = build_body(req(user("x"), text_format=fmt))
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "thing",
            "description": "a thing",
            "schema": schema,
            "strict": True,
        },
    }


@pytest.mark.parametrize(
    ("dialect", "expected"),
    [
        ("json_object_schema", {"response_format": {"type": "json_object", "schema": "S"}}),
        ("guided_json", {"guided_json": "S"}),
        ("structured_outputs", {"structured_outputs": {"json": "S"}}),
        ("json_schema_field", {"json_schema": "S"}),
    ],
)
def test_each_schema_dialect_goes_where_its_server_reads_it(
    dialect: Any, expected: dict[str, Any]
) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    fmt = TextFormat("json_schema", "thing", schema, None, None, dialect)
    request = req(user("x"), text_format=fmt)
    body = build_body(request)
    assert [(e.code, e.path, e.detail) for e in request.ledger] == [
        ("json_schema_in_dialect", "text.format", dialect)
    ]
    shown = {
        k: body[k]
        for k in ("response_format", "guided_json", "structured_outputs", "json_schema")
        if k in body
    }
    assert repr(shown).replace(repr(schema), "'S'") == repr(expected)


def test_opaque_history_items_are_left_out_as_if_absent() -> None:
    item = OpaqueItem(
        id="ext_1",
        origin="openai-responses https://api.openai.com/v1",
        item={"type": "web_search_call", "id": "ws_1", "status": "completed"},
    )
    call = FunctionCallItemParam(call_id="c1", name="get_weather", arguments="{}")
    body = build_body(req(user("x"), AssistantMessageItemParam(content="looking"), item, call))
    # the call still joins the assistant message the opaque item stood after
    assert body["messages"][1:] == [
        {
            "role": "assistant",
            "content": "looking",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": "{}"},
                }
            ],
        }
    ]


def test_unknown_item_type_is_refused() -> None:
    with pytest.raises(ApiError) as err:
        build_body(req(user("x"), {"type": "web_search_call", "id": "ws_1"}))
    assert err.value.status == 400 and err.value.param == "input[1]"


TWO_TEXTS = [InputTextContentParam(text="Hello, "), InputTextContentParam(text="world")]
WITH_IMAGE = [
    InputTextContentParam(text="what is this?"),
    InputImageContentParamAutoParam(image_url="https://x.test/cat.png"),
]


def test_text_only_user_parts_become_one_string_by_default() -> None:
    """Many servers' chat templates concatenate ``content`` and fail on a list."""
    body = build_body(req(user(TWO_TEXTS)), stream=False)
    assert body["messages"] == [{"role": "user", "content": "Hello, world"}]


def test_content_format_parts_keeps_text_parts() -> None:
    body = build_body(
        req(user(TWO_TEXTS)), stream=False, options=ChatOptions(content_format="parts")
    )
    assert body["messages"][0]["content"] == [
        {"type": "text", "text": "Hello, "},
        {"type": "text", "text": "world"},
    ]


def test_content_format_auto_keeps_parts_where_an_image_needs_them() -> None:
    content = build_body(req(user(WITH_IMAGE)), stream=False)["messages"][0]["content"]
    assert [p["type"] for p in content] == ["text", "image_url"]


def test_content_format_string_refuses_an_image_with_its_path() -> None:
    with pytest.raises(ApiError) as info:
        build_body(
            req(user(WITH_IMAGE)), stream=False, options=ChatOptions(content_format="string")
        )
    assert info.value.status == 400
    assert info.value.param == "input[0].content[1].type"
    assert info.value.code == "unsupported_content"
