"""Pure mapping tests: ModelRequest (with real protocol input models) → Anthropic Messages body."""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest

from orgate.neutral import ModelRequest, OpaqueItem, TextFormat
from orgate.protocol import (
    AllowedToolsParam,
    AssistantMessageItemParam,
    CompactionSummaryItemParam,
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
from orgate.providers.anthropic import build_body, decode_blocks, encode_blocks
from orgate.providers.anthropic.mapping import DEFAULT_MAX_TOKENS

WEATHER = FunctionToolParam(
    name="get_weather",
    description="Weather for a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    strict=True,
)
TIME = FunctionToolParam(name="get_time")


def req(*items: Any, **kw: Any) -> ModelRequest:
    return ModelRequest(model="claude-x", input=list(items), **kw)


def user(content: Any) -> UserMessageItemParam:
    return UserMessageItemParam(content=content)


def assistant(content: Any) -> AssistantMessageItemParam:
    return AssistantMessageItemParam(content=content)


def call(call_id: str, name: str = "get_weather", arguments: str = '{"city": "Paris"}') -> Any:
    return FunctionCallItemParam(call_id=call_id, name=name, arguments=arguments)


def result(call_id: str, output: Any = "sunny") -> Any:
    return FunctionCallOutputItemParam(call_id=call_id, output=output)


def test_minimal_body() -> None:
    body = build_body(req(user("hi")), stream=False)
    assert body == {
        "model": "claude-x",
        "max_tokens": DEFAULT_MAX_TOKENS,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    }
    assert build_body(req(user("hi")))["stream"] is True


def test_max_tokens_from_request_then_capability_then_default() -> None:
    assert build_body(req(user("hi"), max_output_tokens=77))["max_tokens"] == 77
    assert build_body(req(user("hi")), max_tokens_cap=64000)["max_tokens"] == 64000
    assert build_body(req(user("hi")))["max_tokens"] == 4096


def test_system_from_instructions_system_and_developer_messages_in_order() -> None:
    body = build_body(
        req(
            SystemMessageItemParam(content="Be brief."),
            user("hi"),
            DeveloperMessageItemParam(content=[InputTextContentParam(text="Use French.")]),
            instructions="You are a bot.",
        )
    )
    assert body["system"] == "You are a bot.\n\nBe brief.\n\nUse French."
    assert [m["role"] for m in body["messages"]] == ["user"]


def test_consecutive_same_role_turns_merge() -> None:
    body = build_body(req(user("a"), user("b"), assistant("c"), assistant("d"), user("e")))
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "c"}, {"type": "text", "text": "d"}],
        },
        {"role": "user", "content": [{"type": "text", "text": "e"}]},
    ]


def test_assistant_parts_and_refusal_become_text_and_empty_text_is_left_out() -> None:
    body = build_body(
        req(
            user("hi"),
            assistant([OutputTextContentParam(text="Sure"), RefusalContentParam(refusal="no")]),
            assistant(""),
        )
    )
    assert body["messages"][1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Sure"}, {"type": "text", "text": "no"}],
    }
    assert len(body["messages"]) == 2


def test_images_url_and_data_url() -> None:
    body = build_body(
        req(
            user(
                [
                    InputTextContentParam(text="what is this?"),
                    InputImageContentParamAutoParam(image_url="https://x.test/cat.png"),
                    InputImageContentParamAutoParam(image_url="data:image/png;base64,iVBORw0KGgo="),
                ]
            )
        )
    )
    assert body["messages"][0]["content"] == [
        {"type": "text", "text": "what is this?"},
        {"type": "image", "source": {"type": "url", "url": "https://x.test/cat.png"}},
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
        },
    ]


def test_image_without_url_and_bad_data_url_are_refused() -> None:
    with pytest.raises(ApiError) as err:
        build_body(req(user([InputImageContentParamAutoParam()])))
    assert err.value.status == 400 and err.value.param == "input[0].content[0].image_url"
    with pytest.raises(ApiError) as err:
        build_body(req(user([InputImageContentParamAutoParam(image_url="data:image/png,xyz")])))
    assert err.value.code == "invalid_data_url"


def test_files_pdf_and_text_become_documents_others_are_refused() -> None:
    text_data = base64.b64encode(b"hello file").decode()
    body = build_body(
        req(
            user(
                [
                    InputFileContentParam(
                        filename="a.pdf", file_data="data:application/pdf;base64,JVBERi0="
                    ),
                    InputFileContentParam(filename="notes.txt", file_data=text_data),
                    InputFileContentParam(file_url="https://x.test/doc.pdf"),
                ]
            )
        )
    )
    assert body["messages"][0]["content"] == [
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="},
            "title": "a.pdf",
        },
        {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": "hello file"},
            "title": "notes.txt",
        },
        {"type": "document", "source": {"type": "url", "url": "https://x.test/doc.pdf"}},
    ]
    with pytest.raises(ApiError) as err:
        build_body(req(user([InputFileContentParam(filename="a.bin", file_data="AAAA")])))
    assert err.value.status == 400 and err.value.code == "unsupported_content"


def test_function_call_and_output_round_trip_as_tool_use_and_tool_result() -> None:
    body = build_body(
        req(
            user("weather?"),
            assistant("Let me check."),
            call("call_1"),
            call("call_2", arguments='{"city": "Rome"}'),
            result("call_1"),
            result("call_2", [InputTextContentParam(text="rainy")]),
            user("thanks"),
        )
    )
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "weather?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me check."},
                {
                    "type": "tool_use",
                    "id": "call_1",
                    "name": "get_weather",
                    "input": {"city": "Paris"},
                },
                {
                    "type": "tool_use",
                    "id": "call_2",
                    "name": "get_weather",
                    "input": {"city": "Rome"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": "sunny"},
                {
                    "type": "tool_result",
                    "tool_use_id": "call_2",
                    "content": [{"type": "text", "text": "rainy"}],
                },
                {"type": "text", "text": "thanks"},
            ],
        },
    ]


def test_tool_results_come_first_in_their_user_turn() -> None:
    body = build_body(req(call("c1"), user("also this"), result("c1")))
    assert [b["type"] for b in body["messages"][1]["content"]] == ["tool_result", "text"]


def test_empty_arguments_and_empty_output() -> None:
    body = build_body(req(call("c1", name="get_time", arguments=""), result("c1", "")))
    assert body["messages"][0]["content"][0]["input"] == {}
    assert body["messages"][1]["content"][0] == {"type": "tool_result", "tool_use_id": "c1"}


@pytest.mark.parametrize("arguments", ["{not json", "[1, 2]"])
def test_bad_arguments_are_refused(arguments: str) -> None:
    with pytest.raises(ApiError) as err:
        build_body(req(call("c1", arguments=arguments)))
    assert err.value.status == 400 and err.value.param == "input[0].arguments"


def test_anthropic_reasoning_round_trips_as_thinking_blocks_others_are_dropped() -> None:
    blocks = [
        {"type": "thinking", "thinking": "step 1", "signature": "sig-A"},
        {"type": "redacted_thinking", "data": "opaque"},
    ]
    ours = ReasoningItemParam(summary=[], encrypted_content=encode_blocks(blocks))
    foreign = ReasoningItemParam(summary=[], encrypted_content="gAAAAB-openai")
    plain = ReasoningItemParam(summary=[])
    compaction = CompactionSummaryItemParam(encrypted_content="gAAAA-compacted")
    body = build_body(req(user("q"), foreign, plain, compaction, ours, call("c1"), result("c1")))
    assert body["messages"][1] == {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "step 1", "signature": "sig-A"},
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "tool_use", "id": "c1", "name": "get_weather", "input": {"city": "Paris"}},
        ],
    }
    assert len(body["messages"]) == 3


def test_envelope_round_trip_and_rejects_tampering() -> None:
    blocks = [{"type": "thinking", "thinking": "é ü 🙂", "signature": "s"}]
    assert decode_blocks(encode_blocks(blocks)) == blocks
    assert decode_blocks("orgate.anthropic.v1:!!!") is None
    assert decode_blocks("gAAAA") is None
    assert decode_blocks(None) is None


def test_tools_and_input_schema() -> None:
    body = build_body(req(user("hi"), tools=[WEATHER, TIME]))
    assert body["tools"] == [
        {
            "name": "get_weather",
            "description": "Weather for a city",
            "input_schema": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
        {"name": "get_time", "input_schema": {"type": "object", "properties": {}}},
    ]
    assert "tool_choice" not in body


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("auto", {"type": "auto"}),
        ("required", {"type": "any"}),
        ("none", {"type": "none"}),
        (SpecificFunctionParam(name="get_time"), {"type": "tool", "name": "get_time"}),
    ],
)
def test_tool_choice(choice: Any, expected: dict[str, Any]) -> None:
    body = build_body(req(user("hi"), tools=[WEATHER, TIME], tool_choice=choice))
    assert body["tool_choice"] == expected


def test_allowed_tools_filters_tools_and_maps_mode() -> None:
    choice = AllowedToolsParam(tools=[SpecificFunctionParam(name="get_time")], mode="required")
    body = build_body(req(user("hi"), tools=[WEATHER, TIME], tool_choice=choice))
    assert [t["name"] for t in body["tools"]] == ["get_time"]
    assert body["tool_choice"] == {"type": "any"}
    choice = AllowedToolsParam(tools=[SpecificFunctionParam(name="nope")], mode="required")
    with pytest.raises(ApiError):
        build_body(req(user("hi"), tools=[WEATHER], tool_choice=choice))


def test_parallel_tool_calls_false_disables_parallel_use() -> None:
    body = build_body(req(user("hi"), tools=[WEATHER], parallel_tool_calls=False))
    assert body["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    body = build_body(
        req(user("hi"), tools=[WEATHER], tool_choice="required", parallel_tool_calls=False)
    )
    assert body["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
    body = build_body(
        req(user("hi"), tools=[WEATHER], tool_choice="none", parallel_tool_calls=False)
    )
    assert body["tool_choice"] == {"type": "none"}


def test_tool_choice_without_tools_is_omitted() -> None:
    body = build_body(req(user("hi"), tool_choice="required"))
    assert "tools" not in body and "tool_choice" not in body


def test_sampling_stop_and_user() -> None:
    body = build_body(
        req(user("hi"), temperature=0.2, top_p=0.9, stop=["END"], user="u-1", metadata={"a": "b"})
    )
    assert body["temperature"] == 0.2
    assert body["top_p"] == 0.9
    assert body["stop_sequences"] == ["END"]
    assert body["metadata"] == {"user_id": "u-1"}


@pytest.mark.parametrize("name", ["presence_penalty", "frequency_penalty"])
def test_penalties_are_refused_not_dropped(name: str) -> None:
    with pytest.raises(ApiError) as err:
        build_body(req(user("hi"), **{name: 0.5}))
    assert err.value.status == 400 and err.value.param == name
    assert name not in build_body(req(user("hi"), **{name: 0.0}))


def test_json_text_format_becomes_an_instruction() -> None:
    fmt = TextFormat(type="json_schema", name="x", schema={"type": "object"})
    body = build_body(req(user("hi"), instructions="Be nice.", text_format=fmt))
    assert body["system"].startswith("Be nice.\n\nRespond with a single valid JSON value")
    assert '{"type":"object"}' in body["system"]
    body = build_body(req(user("hi"), text_format=TextFormat(type="json_object")))
    assert "JSON object" in body["system"]
    assert "system" not in build_body(req(user("hi"), text_format=TextFormat(type="text")))


SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


def test_structured_outputs_send_the_schema_as_output_config_and_no_instruction() -> None:
    fmt = TextFormat("json_schema", "x", SCHEMA, True, None, "output_config")
    body = build_body(req(user("hi"), text_format=fmt))
    assert body["output_config"] == {"format": {"type": "json_schema", "schema": SCHEMA}}
    assert "system" not in body and "tools" not in body


def test_a_forced_tool_carries_the_format_as_its_input_schema() -> None:
    fmt = TextFormat("json_schema", "x", SCHEMA, None, "the answer", "forced_tool")
    request = req(user("hi"), text_format=fmt)
    body = build_body(request)
    assert [e.code for e in request.ledger] == ["json_format_as_forced_tool"]
    (tool,) = body["tools"]
    assert tool["name"] == "json_answer" and tool["input_schema"] == SCHEMA
    assert tool["description"].endswith("the answer")
    assert body["tool_choice"] == {"type": "tool", "name": "json_answer"}
    assert "system" not in body and "output_config" not in body


def test_reasoning_effort_enables_thinking_within_max_tokens() -> None:
    body = build_body(req(user("hi"), reasoning_effort="medium"))
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 8192}
    assert body["max_tokens"] > 8192
    body = build_body(req(user("hi"), reasoning_effort="high", max_output_tokens=5000))
    assert body["max_tokens"] == 5000
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 4999}
    body = build_body(req(user("hi"), reasoning_effort="low", max_output_tokens=500))
    assert "thinking" not in body  # no room for the minimum budget
    assert "thinking" not in build_body(req(user("hi"), reasoning_effort="none"))


def test_unknown_item_types_are_refused() -> None:
    item = {"type": "openai:web_search_call", "id": "ws_1"}
    with pytest.raises(ApiError) as err:
        build_body(req(user("hi"), item))
    assert err.value.status == 400 and err.value.param == "input[1]"
    assert err.value.code == "unsupported_item"


def test_opaque_history_items_are_left_out() -> None:
    item = OpaqueItem(
        id="ext_1",
        origin="openai-responses https://api.openai.com/v1",
        item={"type": "web_search_call", "id": "ws_1", "status": "completed"},
    )
    body = build_body(req(user("hi"), assistant("one"), item, assistant("two"), user("more")))
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}],
        },
        {"role": "user", "content": [{"type": "text", "text": "more"}]},
    ]


def test_plain_dict_items_work_too() -> None:
    body = build_body(
        req(
            {"type": "message", "role": "user", "content": "hi"},
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
        )
    )
    assert body["messages"][1]["content"][0]["type"] == "tool_use"


def test_overlapping_envelopes_do_not_repeat_blocks() -> None:
    first = {"type": "thinking", "thinking": "a", "signature": "S1"}
    second = {"type": "thinking", "thinking": "b", "signature": "S2"}
    items = [
        user("q"),
        ReasoningItemParam(summary=[], encrypted_content=encode_blocks([first])),
        ReasoningItemParam(summary=[], encrypted_content=encode_blocks([first, second])),
    ]
    assert build_body(req(*items))["messages"][1]["content"] == [first, second]


def test_thinking_refuses_sampling_and_forced_tools_it_cannot_take() -> None:
    """Anthropic refuses these with extended thinking: the client gets a 400 naming its
    parameter."""
    tool = {"type": "function", "name": "f", "parameters": {"type": "object"}}
    cases = [
        ({"temperature": 0.2}, "temperature"),
        ({"top_p": 0.5}, "top_p"),
        ({"tools": [tool], "tool_choice": "required"}, "tool_choice"),
        ({"tools": [tool], "tool_choice": {"type": "function", "name": "f"}}, "tool_choice"),
    ]
    for extra, param in cases:
        with pytest.raises(ApiError) as err:
            build_body(req(user("hi"), reasoning_effort="low", **extra))
        assert err.value.status == 400 and err.value.param == param
        build_body(req(user("hi"), **extra))  # without thinking: fine
    body = build_body(
        req(
            user("hi"),
            reasoning_effort="low",
            temperature=1,
            top_p=0.95,
            tools=[tool],
            tool_choice="auto",
        )
    )
    assert (
        body["temperature"] == 1
        and body["top_p"] == 0.95
        and body["tool_choice"] == {"type": "auto"}
    )


# --------------------------------------------------------------------------- prompt caching

CACHED = {"type": "ephemeral"}


def test_prompt_cache_marks_system_last_tool_and_the_last_message() -> None:
    request = req(
        user("what is the weather?"),
        call("call_1"),
        result("call_1", "sunny"),
        instructions="You are terse.",
        tools=[WEATHER, TIME],
    )
    plain = build_body(request)
    body = build_body(request, prompt_cache=True)
    assert body["system"] == [{"type": "text", "text": "You are terse.", "cache_control": CACHED}]
    assert [t.get("cache_control") for t in body["tools"]] == [None, CACHED]
    last = body["messages"][-1]["content"]
    assert last[-1]["type"] == "tool_result" and last[-1]["cache_control"] == CACHED
    marks = orjson.dumps(body).count(b'"cache_control"')
    assert marks == 3  # of the four breakpoints Anthropic allows
    # nothing else changes, and the plain body has none
    assert b"cache_control" not in orjson.dumps(plain)
    assert {
        **body,
        "system": plain["system"],
        "tools": plain["tools"],
        "messages": plain["messages"],
    } == plain
    assert body["messages"][:-1] == plain["messages"][:-1]


def test_prompt_cache_skips_blocks_that_cannot_carry_a_breakpoint() -> None:
    thinking = ReasoningItemParam(
        summary=[],
        encrypted_content=encode_blocks([{"type": "thinking", "thinking": "hm", "signature": "s"}]),
    )
    body = build_body(
        req(user("hi"), thinking), prompt_cache=True
    )  # the last message: assistant thinking only
    assert "system" not in body and "tools" not in body
    assert all("cache_control" not in b for b in body["messages"][-1]["content"])
    body = build_body(
        req(user([InputTextContentParam(text="a"), InputTextContentParam(text="b")])),
        prompt_cache=True,
    )
    assert [b.get("cache_control") for b in body["messages"][-1]["content"]] == [None, CACHED]


def test_unresolved_item_reference_and_unknown_role_are_refused() -> None:
    with pytest.raises(ApiError) as err:
        build_body(req(user("hi"), {"type": "item_reference", "id": "msg_1"}))
    assert err.value.param == "input[1]" and "resolved" in str(err.value)
    with pytest.raises(ApiError) as err:
        build_body(req({"role": "tool", "content": "x"}))
    assert err.value.param == "input[0].role" and "'tool'" in str(err.value)
    with pytest.raises(ApiError) as err:
        build_body(req({"type": "message", "content": "no role"}))
    assert err.value.param == "input[0]" and err.value.code == "unsupported_item"


def test_empty_system_messages_add_nothing_to_the_system_prompt() -> None:
    body = build_body(req(SystemMessageItemParam(content=""), user("hi"), instructions="be brief"))
    assert body["system"] == "be brief"


def test_tools_other_than_functions_and_non_object_parameters_are_refused() -> None:
    with pytest.raises(ApiError) as err:
        build_body(req(user("hi"), tools=[TIME, {"type": "web_search"}]))
    assert err.value.param == "tools[1]" and err.value.code == "unsupported_tool"
    with pytest.raises(ApiError) as err:
        build_body(req(user("hi"), tools=[{"type": "function", "name": "f", "parameters": [1]}]))
    assert err.value.param == "tools[0].parameters"


@pytest.mark.parametrize(
    ("choice", "code"),
    [("sometimes", "invalid_request_error"), ({"type": "web_search"}, "unsupported_tool_choice")],
)
def test_unknown_tool_choices_are_refused(choice: Any, code: str) -> None:
    with pytest.raises(ApiError) as err:
        build_body(req(user("hi"), tools=[TIME], tool_choice=choice))
    assert err.value.param == "tool_choice" and code in (err.value.code, err.value.type)


def test_allowed_tools_without_mode_or_with_an_unknown_one_mean_auto() -> None:
    for choice in (
        {"type": "allowed_tools", "tools": [{"name": "get_time"}]},
        {"type": "allowed_tools", "mode": "weird", "tools": [{"name": "get_time"}]},
    ):
        body = build_body(req(user("hi"), tools=[WEATHER, TIME], tool_choice=choice))
        assert [t["name"] for t in body["tools"]] == ["get_time"]
        assert body["tool_choice"] == {"type": "auto"}
