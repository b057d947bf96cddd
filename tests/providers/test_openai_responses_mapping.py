"""Pure mapping tests: ModelRequest (with real protocol input models) → Responses request body."""

from __future__ import annotations

from typing import Any

import pytest

from orgate.neutral import Deployment, ModelRequest, OpaqueItem, TextFormat, origin_of
from orgate.protocol import (
    AllowedToolsParam,
    AssistantMessageItemParam,
    CompactionSummaryItemParam,
    FunctionCallItemParam,
    FunctionCallOutputItemParam,
    FunctionToolParam,
    InputImageContentParamAutoParam,
    InputTextContentParam,
    ItemReferenceParam,
    ReasoningItemParam,
    SpecificFunctionParam,
    UserMessageItemParam,
)
from orgate.protocol.errors import ApiError
from orgate.providers.anthropic import encode_blocks
from orgate.providers.openai_responses import build_body

WEATHER = FunctionToolParam(
    name="get_weather",
    description="Weather for a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
    strict=True,
)


def req(*items: Any, **kw: Any) -> ModelRequest:
    return ModelRequest(model="gpt-up", input=list(items), **kw)


def user(content: Any, **kw: Any) -> UserMessageItemParam:
    return UserMessageItemParam(content=content, **kw)


def test_minimal_body() -> None:
    assert build_body(req(user("hi")), stream=False) == {
        "model": "gpt-up",
        "input": [{"type": "message", "role": "user", "content": "hi"}],
        "store": False,
    }
    assert build_body(req(user("hi")))["stream"] is True


def test_items_go_out_as_wire_json_without_ids() -> None:
    items = [
        user(
            [
                InputTextContentParam(text="look"),
                InputImageContentParamAutoParam(image_url="https://x.test/a.png", detail="low"),
            ],
            id="msg_orgate_1",
        ),
        AssistantMessageItemParam(
            content="calling", id="msg_2", status="completed", phase="commentary"
        ),
        FunctionCallItemParam(
            id="fc_1", call_id="call_1", name="get_weather", arguments='{"a":1}', status="completed"
        ),
        FunctionCallOutputItemParam(call_id="call_1", output="sunny"),
        ReasoningItemParam(
            id="rs_1", summary=[{"type": "summary_text", "text": "hm"}], encrypted_content="gAAAA"
        ),
        CompactionSummaryItemParam(id="cmp_1", encrypted_content="gAAAAcmp"),
    ]
    body = build_body(req(*items))
    assert body["input"] == [
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "look"},
                {"type": "input_image", "image_url": "https://x.test/a.png", "detail": "low"},
            ],
        },
        {
            "type": "message",
            "role": "assistant",
            "content": "calling",
            "phase": "commentary",
            "status": "completed",
        },
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"a":1}',
            "status": "completed",
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
        {
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "hm"}],
            "encrypted_content": "gAAAA",
        },
        {"type": "compaction", "encrypted_content": "gAAAAcmp"},
    ]


def test_namespaced_items_and_dicts_pass_through() -> None:
    item = {
        "type": "openai:web_search_call",
        "id": "ws_1",
        "status": "completed",
        "action": {"query": "x"},
    }
    body = build_body(req(user("hi"), item))
    assert body["input"][1] == {
        "type": "openai:web_search_call",
        "status": "completed",
        "action": {"query": "x"},
    }


def test_anthropic_reasoning_is_not_sent_here() -> None:
    envelope = encode_blocks([{"type": "thinking", "thinking": "x", "signature": "s"}])
    body = build_body(req(user("hi"), ReasoningItemParam(summary=[], encrypted_content=envelope)))
    assert [i["type"] for i in body["input"]] == ["message"]


def test_item_reference_must_be_resolved() -> None:
    with pytest.raises(ApiError) as err:
        build_body(req(ItemReferenceParam(id="msg_1")))
    assert err.value.param == "input[0]"


def test_instructions_tools_choice_and_sampling() -> None:
    body = build_body(
        req(
            user("hi"),
            instructions="Be brief.",
            tools=[WEATHER],
            tool_choice=SpecificFunctionParam(name="get_weather"),
            parallel_tool_calls=False,
            temperature=0.3,
            top_p=0.8,
            presence_penalty=0.1,
            frequency_penalty=0.2,
            max_output_tokens=100,
            user="u1",
            prompt_cache_key="k",
            metadata={"orgate": "only"},
        )
    )
    assert body["instructions"] == "Be brief."
    assert body["tools"] == [
        {
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            "strict": True,
            "type": "function",
        }
    ]
    assert body["tool_choice"] == {"type": "function", "name": "get_weather"}
    assert body["parallel_tool_calls"] is False
    for key, value in [
        ("temperature", 0.3),
        ("top_p", 0.8),
        ("presence_penalty", 0.1),
        ("frequency_penalty", 0.2),
        ("max_output_tokens", 100),
        ("user", "u1"),
        ("prompt_cache_key", "k"),
    ]:
        assert body[key] == value
    assert "metadata" not in body


@pytest.mark.parametrize("choice", ["auto", "required", "none"])
def test_string_tool_choice(choice: str) -> None:
    assert build_body(req(user("hi"), tools=[WEATHER], tool_choice=choice))["tool_choice"] == choice


def test_allowed_tools_pass_through() -> None:
    choice = AllowedToolsParam(tools=[SpecificFunctionParam(name="get_weather")], mode="required")
    body = build_body(req(user("hi"), tools=[WEATHER], tool_choice=choice))
    assert body["tool_choice"] == {
        "type": "allowed_tools",
        "tools": [{"type": "function", "name": "get_weather"}],
        "mode": "required",
    }


def test_text_format() -> None:
    fmt = TextFormat(type="json_schema", name="person", schema={"type": "object"}, strict=True)
    assert build_body(req(user("hi"), text_format=fmt))["text"] == {
        "format": {
            "type": "json_schema",
            "name": "person",
            "schema": {"type": "object"},
            "strict": True,
        }
    }
    body = build_body(req(user("hi"), text_format=TextFormat(type="json_object")))
    assert body["text"] == {"format": {"type": "json_object"}}
    assert "text" not in build_body(req(user("hi"), text_format=TextFormat()))


def test_reasoning_and_include() -> None:
    body = build_body(
        req(user("hi"), reasoning_effort="high", reasoning_summary="auto"),
        include_encrypted_reasoning=True,
    )
    assert body["reasoning"] == {"effort": "high", "summary": "auto"}
    assert body["include"] == ["reasoning.encrypted_content"]
    assert "include" not in build_body(req(user("hi")))


def test_verbosity_and_logprobs() -> None:
    body = build_body(
        req(user("hi"), verbosity="low", logprobs=True, top_logprobs=2),
        include_encrypted_reasoning=True,
    )
    assert body["text"] == {"verbosity": "low"}
    assert body["include"] == ["reasoning.encrypted_content", "message.output_text.logprobs"]
    assert body["top_logprobs"] == 2
    body = build_body(req(user("hi"), logprobs=True))
    assert body["include"] == ["message.output_text.logprobs"] and "top_logprobs" not in body


def test_hosted_tools_alone_carry_the_tool_fields() -> None:
    web = {"type": "web_search"}
    body = build_body(
        req(user("hi"), hosted_tools=[web], tool_choice="auto", parallel_tool_calls=True)
    )
    assert (body["tools"], body["tool_choice"], body["parallel_tool_calls"]) == (
        [web],
        "auto",
        True,
    )
    body = build_body(req(user("hi"), tool_choice="auto", parallel_tool_calls=True))
    assert "tools" not in body and "tool_choice" not in body and "parallel_tool_calls" not in body


def test_body_fields_come_in_a_fixed_order() -> None:
    """The body's bytes follow its key order: the same request always sends the same bytes."""
    body = build_body(
        req(
            user("hi"),
            instructions="Be brief.",
            tools=[WEATHER],
            tool_choice="auto",
            parallel_tool_calls=False,
            temperature=0.3,
            service_tier="flex",
            text_format=TextFormat(type="json_object"),
            verbosity="low",
            reasoning_effort="low",
            logprobs=True,
            top_logprobs=1,
        ),
    )
    assert list(body) == [
        "model", "input", "instructions", "tools", "parallel_tool_calls", "tool_choice",
        "temperature", "service_tier", "text", "reasoning", "top_logprobs", "include", "store",
        "stream",
    ]  # fmt: skip


def test_stop_is_refused() -> None:
    with pytest.raises(ApiError) as err:
        build_body(req(user("hi"), stop=["END"]))
    assert (err.value.status, err.value.param) == (400, "stop")


# --- opaque history items (an upstream's own items, kept for that upstream) ----------------------

ORIGIN = "openai-responses https://api.openai.com/v1"
WEB_SEARCH = {
    "id": "ws_1",
    "type": "web_search_call",
    "status": "completed",
    "action": {"type": "search", "query": "x", "sources": None},
}


def opaque(item: dict[str, Any], origin: str = ORIGIN) -> OpaqueItem:
    return OpaqueItem(id="ext_1", origin=origin, item=item)


def test_opaque_items_of_this_origin_go_back_unchanged_in_place() -> None:
    namespaced = {"type": "openai:web_search_preview_call", "id": "wsp_1", "status": "completed"}
    body = build_body(
        req(user("hi"), opaque(WEB_SEARCH), opaque(namespaced), user("again")), origin=ORIGIN
    )
    # the raw items, with their own ids (OpenAI's web_search_call requires it) and null fields
    assert body["input"] == [
        {"type": "message", "role": "user", "content": "hi"},
        WEB_SEARCH,
        namespaced,
        {"type": "message", "role": "user", "content": "again"},
    ]
    assert body["input"][1] is not WEB_SEARCH  # a copy: the history item is not changed


@pytest.mark.parametrize(
    "origin",
    [
        "openai-responses http://127.0.0.1:8000/v1",  # same protocol, another upstream
        "openai-chat https://api.openai.com/v1",  # same host, another protocol
        None,  # a body built without a deployment
    ],
)
def test_opaque_items_of_another_origin_are_left_out(origin: str | None) -> None:
    body = build_body(req(user("hi"), opaque(WEB_SEARCH), user("again")), origin=origin)
    assert [i["content"] for i in body["input"]] == ["hi", "again"]


def test_origin_of_ignores_credentials_query_case_and_default_port() -> None:
    def origin(provider: str, base_url: str) -> str:
        return origin_of(
            Deployment(name="d", provider=provider, upstream_model="m", base_url=base_url)
        )

    assert origin("openai-responses", "https://api.openai.com/v1") == ORIGIN
    assert origin("openai-responses", "HTTPS://u:secret@API.OpenAI.com:443/v1/?k=secret") == ORIGIN
    assert origin("openai-responses", "http://127.0.0.1:8000/v1") != origin(
        "openai-responses", "http://127.0.0.1:8001/v1"
    )
    assert origin("anthropic", "https://api.openai.com/v1") != ORIGIN
