"""The official ``openai`` Python SDK as a client: create, stream, tool calls,
and upstream failures."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from tests.fakes.openai_chat_upstream import (
    FakeOpenAIChat,
    cut,
    http_error,
    rate_limited,
    stall,
    text,
    tool_calls,
)
from tests.server.test_conformance import WEATHER_TOOL
from tests.support.spec import check_sse, validate

MODELS = ["orgate/echo", "fake-chat"]


@pytest.mark.parametrize("model", MODELS)
def test_create_output_text(client: openai.OpenAI, fake: FakeOpenAIChat, model: str) -> None:
    fake.handler = lambda body: text("Hello there, SDK")
    response = client.responses.create(model=model, input="Hello there, SDK")
    assert response.status == "completed"
    assert response.output_text == "Hello there, SDK"
    assert response.usage is not None and response.usage.output_tokens > 0


@pytest.mark.parametrize("model", MODELS)
def test_stream_and_final_response(client: openai.OpenAI, fake: FakeOpenAIChat, model: str) -> None:
    fake.handler = lambda body: text("streamed words arrive one by one")
    deltas: list[str] = []
    with client.responses.stream(model=model, input="streamed words arrive one by one") as stream:
        for event in stream:
            if event.type == "response.output_text.delta":
                deltas.append(event.delta)
        final = stream.get_final_response()
    assert "".join(deltas) == "streamed words arrive one by one"
    assert len(deltas) > 1
    assert final.output_text == "streamed words arrive one by one"
    validate("ResponseResource", final.model_dump(mode="json", exclude_unset=True) | {})


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("streaming", [False, True])
def test_tool_call_arguments_parse(
    client: openai.OpenAI, fake: FakeOpenAIChat, model: str, streaming: bool
) -> None:
    fake.handler = lambda body: tool_calls(
        ("get_weather", '{"city": "Paris", "unit": "c"}'), fragments=5
    )
    kwargs = {"model": model, "input": "What is the weather in Paris?", "tools": [WEATHER_TOOL]}
    if streaming:
        with client.responses.stream(**kwargs) as stream:
            for _ in stream:
                pass
            response = stream.get_final_response()
    else:
        response = client.responses.create(**kwargs)
    calls = [item for item in response.output if item.type == "function_call"]
    assert len(calls) == 1
    args = json.loads(calls[0].arguments)
    assert set(args) == {"city", "unit"}
    assert calls[0].call_id


def test_parallel_tool_calls_through_openai_chat(
    client: openai.OpenAI, fake: FakeOpenAIChat
) -> None:
    fake.handler = lambda body: tool_calls(
        ("get_weather", '{"city": "Paris", "unit": "c"}'),
        ("get_weather", '{"city": "Oslo", "unit": "f"}'),
        interleave=True,
    )
    response = client.responses.create(
        model="fake-chat", input="Weather in Paris and Oslo?", tools=[WEATHER_TOOL]
    )
    cities = [
        json.loads(item.arguments)["city"]
        for item in response.output
        if item.type == "function_call"
    ]
    assert cities == ["Paris", "Oslo"]


def test_function_call_output_round_trip(client: openai.OpenAI) -> None:
    first = client.responses.create(
        model="orgate/echo", input="What is the weather in Paris?", tools=[WEATHER_TOOL]
    )
    call = next(item for item in first.output if item.type == "function_call")
    second = client.responses.create(
        model="orgate/echo",
        tools=[WEATHER_TOOL],
        input=[
            {"role": "user", "content": "What is the weather in Paris?"},
            {
                "type": "function_call",
                "call_id": call.call_id,
                "name": call.name,
                "arguments": call.arguments,
                "status": "completed",
            },
            {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"},
        ],
    )
    assert second.output_text == "get_weather returned: sunny"


def test_length_finish_is_incomplete(client: openai.OpenAI, fake: FakeOpenAIChat) -> None:
    fake.handler = lambda body: text("a b c d e f", finish_reason="length")
    response = client.responses.create(model="fake-chat", input="long please", max_output_tokens=16)
    assert response.status == "incomplete"
    assert (
        response.incomplete_details is not None
        and response.incomplete_details.reason == "max_output_tokens"
    )


def test_upstream_429_passes_retry_after(client: openai.OpenAI, fake: FakeOpenAIChat) -> None:
    fake.enqueue(rate_limited("7"))
    with pytest.raises(openai.RateLimitError) as info:
        client.responses.create(model="fake-chat", input="hi")
    assert info.value.status_code == 429
    assert info.value.response.headers.get("retry-after") == "7"
    body = info.value.response.json()
    assert set(body["error"]) == {"message", "type", "param", "code"}


@pytest.mark.parametrize("streaming", [False, True])
def test_upstream_500_is_a_server_error(
    client: openai.OpenAI, fake: FakeOpenAIChat, streaming: bool
) -> None:
    fake.enqueue(http_error(500, "boom"))
    with pytest.raises(openai.APIStatusError) as info:
        if streaming:
            with client.responses.stream(model="fake-chat", input="hi") as stream:
                for _ in stream:
                    pass
        else:
            client.responses.create(model="fake-chat", input="hi")
    assert info.value.status_code >= 500
    error = info.value.response.json()["error"]
    assert "fake-chat" in error["message"]
    assert "upstream-secret" not in info.value.response.text


def test_upstream_timeout_is_a_gateway_error(client: openai.OpenAI, fake: FakeOpenAIChat) -> None:
    fake.enqueue(stall(10, after=0))
    with pytest.raises(openai.APIStatusError) as info:
        client.responses.create(model="fake-chat", input="hi")
    assert info.value.status_code in (502, 504)


def test_connection_cut_mid_stream_fails_the_stream_cleanly(
    client: openai.OpenAI, http: httpx.Client, fake: FakeOpenAIChat
) -> None:
    fake.enqueue(cut("one two three four five six", after=3))
    res = http.post("/v1/responses", json={"model": "fake-chat", "input": "hi", "stream": True})
    events = check_sse(res.text)
    assert [e["type"] for e in events[-2:]] == ["error", "response.failed"]
    assert events[-1]["response"]["status"] == "failed"
    # The SDK surfaces the same stream as an error.
    fake.enqueue(cut("one two three four five six", after=3))
    with (
        pytest.raises(openai.APIError),
        client.responses.stream(model="fake-chat", input="hi") as stream,
    ):
        for _ in stream:
            pass


def test_builtin_fail_directive_is_a_500(client: openai.OpenAI) -> None:
    with pytest.raises(openai.InternalServerError):
        client.responses.create(model="orgate/echo", input="please orgate:fail now")
