"""The official openai SDK's ``chat.completions.create`` against a running ``orgate serve``.

Uses the suite's ``server`` (chat completions enabled, ``fake-chat`` model in
front of the fake OpenAI-compatible upstream), ``client`` and ``fake`` fixtures
from ``tests/conftest.py``.
"""

from __future__ import annotations

import json

import httpx
import openai
import pytest
from tests.fakes.openai_chat_upstream import cut, http_error, rate_limited, text, tool_calls
from tests.server_process import OrgateServer

from orgate.legacy_chat import STARTUP_WARNING

MODEL = "fake-chat"

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}


def test_non_streaming_text(client: openai.OpenAI, fake) -> None:
    fake.enqueue(text("Hello from the fake"))
    completion = client.chat.completions.create(
        model=MODEL,
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "hi"},
        ],
        max_completion_tokens=64,
        temperature=0.5,
        stop=["\n\n"],
    )
    assert completion.object == "chat.completion"
    assert completion.id.startswith("chatcmpl-")
    assert completion.model == MODEL
    choice = completion.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content == "Hello from the fake"
    assert choice.finish_reason == "stop"
    assert completion.usage is not None and completion.usage.total_tokens > 0
    upstream = fake.bodies[-1]
    assert upstream["stop"] == ["\n\n"]
    assert upstream["temperature"] == 0.5
    assert upstream["messages"][0]["role"] == "system"


def test_streaming_text_with_usage(client: openai.OpenAI, fake) -> None:
    fake.enqueue(text("one two three"))
    stream = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "count"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == "one two three"
    finishes = [
        c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason
    ]
    assert finishes == ["stop"]
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert len({c.id for c in chunks}) == 1


def test_tools_non_streaming_and_tool_result_round_trip(client: openai.OpenAI, fake) -> None:
    fake.enqueue(tool_calls(("get_weather", '{"city": "Paris"}')))
    first = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Weather in Paris?"}],
        tools=[WEATHER_TOOL],
        tool_choice="auto",
    )
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    call = choice.message.tool_calls[0]
    assert call.type == "function" and call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}

    fake.enqueue(text("Sunny."))
    second = client.chat.completions.create(
        model=MODEL,
        messages=[
            {"role": "user", "content": "Weather in Paris?"},
            choice.message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "sunny, 21C"},
        ],
        tools=[WEATHER_TOOL],
    )
    assert second.choices[0].message.content == "Sunny."
    upstream = fake.bodies[-1]["messages"]
    assert upstream[-1]["role"] == "tool" and upstream[-1]["tool_call_id"] == call.id
    assert upstream[-2]["tool_calls"][0]["id"] == call.id


def test_tools_streaming_deltas_concatenate(client: openai.OpenAI, fake) -> None:
    fake.enqueue(
        tool_calls(("get_weather", '{"city": "Paris"}'), ("get_weather", '{"city": "Rome"}'))
    )
    stream = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Paris and Rome?"}],
        tools=[WEATHER_TOOL],
        stream=True,
    )
    calls: dict[int, dict[str, str]] = {}
    finish = []
    for chunk in stream:
        for choice in chunk.choices:
            for tc in choice.delta.tool_calls or ():
                slot = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                if tc.id:
                    slot["id"] = tc.id
                if tc.function and tc.function.name:
                    slot["name"] = tc.function.name
                if tc.function and tc.function.arguments:
                    slot["arguments"] += tc.function.arguments
            if choice.finish_reason:
                finish.append(choice.finish_reason)
    assert finish == ["tool_calls"]
    assert [json.loads(calls[i]["arguments"]) for i in sorted(calls)] == [
        {"city": "Paris"},
        {"city": "Rome"},
    ]
    assert all(c["id"] and c["name"] == "get_weather" for c in calls.values())


def test_response_format_json_schema(client: openai.OpenAI, fake) -> None:
    fake.enqueue(text('{"name": "Ada", "age": 36}'))
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "required": ["name", "age"],
        "additionalProperties": False,
    }
    completion = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Who?"}],
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "person", "schema": schema, "strict": True},
        },
    )
    assert json.loads(completion.choices[0].message.content) == {"name": "Ada", "age": 36}
    fmt = fake.bodies[-1]["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "person"


def test_unsupported_feature_is_a_400_with_a_chat_param(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hi"}], n=2
        )
    assert info.value.body["param"] == "n"
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": [{"type": "video", "video": "x"}]}],
        )
    assert info.value.body["param"] == "messages[0].content[0].type"


def test_auth_and_unknown_model(server: OrgateServer) -> None:
    bad = openai.OpenAI(base_url=server.base_url, api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
    good = openai.OpenAI(base_url=server.base_url, api_key=server.api_key, max_retries=0)
    with pytest.raises(openai.NotFoundError):
        good.chat.completions.create(model="nope", messages=[{"role": "user", "content": "hi"}])


def test_upstream_errors_keep_their_status(client: openai.OpenAI, fake) -> None:
    fake.enqueue(rate_limited("3"))
    with pytest.raises(openai.RateLimitError):
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
    fake.enqueue(http_error(500))
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])


def test_raw_sse_framing(server: OrgateServer, fake) -> None:
    fake.enqueue(text("a b"))
    body = {"model": MODEL, "messages": [{"role": "user", "content": "x"}], "stream": True}
    with httpx.Client(timeout=20) as http:
        r = http.post(f"{server.base_url}/chat/completions", json=body, headers=server.headers())
    assert r.headers["content-type"].startswith("text/event-stream")
    blocks = [b for b in r.text.split("\n\n") if b]
    assert all(b.startswith("data: ") and "\nevent:" not in b for b in blocks)
    assert blocks[-1] == "data: [DONE]"
    payloads = [json.loads(b[6:]) for b in blocks[:-1]]
    assert payloads[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert all(p["object"] == "chat.completion.chunk" for p in payloads)


def test_startup_warning_points_to_responses(server: OrgateServer) -> None:
    assert "/v1/responses" in STARTUP_WARNING
    assert STARTUP_WARNING in server.output()


def test_disabled_by_default_answers_404(fake_chat) -> None:
    config = (
        f'[[models]]\nname = "{MODEL}"\nprovider = "openai-chat"\n'
        f'base_url = "{fake_chat.base_url}"\nupstream_model = "fake-model"\n'
    )
    with OrgateServer(config) as off:
        with httpx.Client(timeout=20) as http:
            r = http.post(
                f"{off.base_url}/chat/completions",
                json={"model": MODEL, "messages": [{"role": "user", "content": "x"}]},
                headers=off.headers(),
            )
            assert r.status_code == 404
            assert set(r.json()["error"]) == {"message", "type", "param", "code"}
        assert "legacy" not in off.output()


def test_engine_errors_name_chat_params(client: openai.OpenAI) -> None:
    # The engine refuses json_schema without a schema with param text.format.schema.
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "hi"}],
            response_format={"type": "json_schema", "json_schema": {"name": "x"}},
        )
    assert info.value.body["param"] == "response_format.json_schema.schema"


def test_mid_stream_failure_is_an_error_line_then_done(server: OrgateServer, fake) -> None:
    fake.enqueue(cut("one two three four", after=2))
    body = {"model": MODEL, "messages": [{"role": "user", "content": "x"}], "stream": True}
    with httpx.Client(timeout=20) as http:
        r = http.post(f"{server.base_url}/chat/completions", json=body, headers=server.headers())
    assert r.status_code == 200
    blocks = [b for b in r.text.split("\n\n") if b]
    assert blocks[-1] == "data: [DONE]"
    last = json.loads(blocks[-2][6:])
    assert set(last["error"]) == {"message", "type", "param", "code"}
    assert not any('"finish_reason":"' in b for b in blocks)


def test_sdk_raises_on_mid_stream_error(client: openai.OpenAI, fake) -> None:
    fake.enqueue(cut("one two three four", after=2))
    stream = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "x"}], stream=True
    )
    with pytest.raises(openai.APIError):
        for _ in stream:
            pass


def test_streaming_upstream_429_before_first_byte(client: openai.OpenAI, fake) -> None:
    fake.enqueue(rate_limited("3"))
    with pytest.raises(openai.RateLimitError) as info:
        client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "x"}], stream=True
        )
    assert info.value.response.headers.get("retry-after") == "3"


def test_replay_gate_applies_with_chat_params(client: openai.OpenAI) -> None:
    # A tool result without its call: the gate's call_id pairing check.
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(
            model=MODEL,
            messages=[
                {"role": "user", "content": "hi"},
                {"role": "tool", "tool_call_id": "call_missing", "content": "x"},
            ],
        )
    assert info.value.body["param"] == "messages[1].tool_call_id"
    # A replayed call whose arguments are not JSON.
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(
            model=MODEL,
            messages=[
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{"},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "x"},
            ],
        )
    assert info.value.body["param"].startswith("messages[1].tool_calls[0]")
