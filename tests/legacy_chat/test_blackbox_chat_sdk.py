"""Black-box audit of ``/v1/chat/completions`` with the official ``openai`` SDK (sync and async).

The running server (``server`` / ``client`` / ``http`` / ``fake`` fixtures from
``tests/conftest.py``) is driven the way Chat Completions clients drive
api.openai.com: the SDK's ``create``, ``stream`` and ``parse`` helpers, and raw
httpx for the exact wire shapes. Models: the offline ``orgate/echo`` and
``fake-chat`` (``openai-chat`` → the loopback fake upstream).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import openai
import pytest
from pydantic import BaseModel
from tests.fakes.openai_chat_upstream import FakeOpenAIChat, Script, text
from tests.server_process import OrgateServer

ECHO = "orgate/echo"
FAKE = "fake-chat"
USER: list[Any] = [{"role": "user", "content": "hello there"}]
REFUSE: list[Any] = [{"role": "user", "content": "please orgate:refuse"}]
TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            # required: the built-in model fills required arguments with the prompt, optional
            # ones only when the prompt names them
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]


class Person(BaseModel):
    name: str
    age: int


class GetWeather(BaseModel):
    city: str


def _chunks(r: httpx.Response) -> list[dict[str, Any]]:
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/event-stream")
    lines = [line.removeprefix("data: ") for line in r.text.splitlines() if line]
    assert all(not line.startswith(("event:", "id:")) for line in lines)
    assert lines[-1] == "[DONE]"
    return [json.loads(line) for line in lines[:-1]]


def _post(http: httpx.Client, **body: Any) -> httpx.Response:
    return http.post("/v1/chat/completions", json=body)


# -- the role chunk has OpenAI's shape for what follows ------------------------------------
#
# api.openai.com starts a tool-call answer with
#   {"role": "assistant", "content": null, "tool_calls": [{"index": 0, "id", "type", "function"}]}
# and a refusal with {"role": "assistant", "content": null, "refusal": ""}; only text starts
# with "content": "". The adapter used to send {"role", "content": ""} first in every case,
# so the SDK's stream helper (and every accumulator) ended with content "" where the
# non-streamed message has null.


def test_stream_tool_call_answer_starts_with_role_and_null_content(http: httpx.Client) -> None:
    chunks = _chunks(_post(http, model=ECHO, messages=USER, tools=TOOLS, stream=True))
    first = chunks[0]["choices"][0]["delta"]
    assert first["role"] == "assistant" and first["content"] is None
    assert first["tool_calls"] == [
        {
            "index": 0,
            "id": first["tool_calls"][0]["id"],
            "type": "function",
            "function": {"name": "get_weather", "arguments": ""},
        }
    ]
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert sum("role" in d for d in deltas) == 1
    assert not any(d.get("content") for d in deltas)
    args = "".join(tc["function"]["arguments"] for d in deltas for tc in d.get("tool_calls", ()))
    assert json.loads(args) == {"city": "hello there"}
    assert [c["choices"][0]["finish_reason"] for c in chunks][-1] == "tool_calls"


def test_stream_refusal_starts_with_role_null_content_and_empty_refusal(http: httpx.Client) -> None:
    chunks = _chunks(_post(http, model=ECHO, messages=REFUSE, stream=True))
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": None, "refusal": ""}
    assert all("content" not in c["choices"][0]["delta"] for c in chunks[1:])


def test_stream_text_shape_with_usage(http: httpx.Client) -> None:
    chunks = _chunks(
        _post(
            http,
            model=ECHO,
            messages=USER,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert (
        "".join(c["choices"][0]["delta"].get("content", "") for c in chunks[:-1]) == "hello there"
    )
    finish, usage = chunks[-2], chunks[-1]
    assert finish["choices"] == [
        {"index": 0, "delta": {}, "finish_reason": "stop", "logprobs": None}
    ]
    assert usage["choices"] == [] and usage["usage"]["total_tokens"] == 4
    assert all(c["usage"] is None for c in chunks[:-1])
    for c in chunks:
        assert c["object"] == "chat.completion.chunk" and c["id"].startswith("chatcmpl-")
        assert c["system_fingerprint"] is None and c["service_tier"] == "default"
    assert len({(c["id"], c["created"], c["model"]) for c in chunks}) == 1


@pytest.mark.parametrize("case", ["tools", "refusal", "text"])
def test_sdk_stream_helper_final_message_equals_non_streamed(
    client: openai.OpenAI, case: str
) -> None:
    kwargs: dict[str, Any] = {"model": ECHO, "messages": REFUSE if case == "refusal" else USER}
    if case == "tools":
        kwargs["tools"] = TOOLS
    whole = client.chat.completions.create(**kwargs).choices[0]
    with client.chat.completions.stream(**kwargs) as stream:
        events = [event.type for event in stream]
        final = stream.get_final_completion().choices[0]
    assert final.message.content == whole.message.content
    assert final.message.refusal == whole.message.refusal
    assert final.finish_reason == whole.finish_reason
    if case == "tools":
        assert whole.message.content is None
        assert "content.delta" not in events
        assert final.message.tool_calls and whole.message.tool_calls
        assert final.message.tool_calls[0].function.name == "get_weather"
        assert (
            final.message.tool_calls[0].function.arguments
            == whole.message.tool_calls[0].function.arguments
        )
    if case == "refusal":
        assert whole.message.content is None and final.message.refusal
        assert "content.delta" not in events and "refusal.done" in events


# -- the SDK's parse helpers and pydantic_function_tool ---------------------------------------


def test_sdk_parse_pydantic_model_and_tool_loop(client: openai.OpenAI) -> None:
    parsed = client.chat.completions.parse(
        model=ECHO, messages=[{"role": "user", "content": "Ada"}], response_format=Person
    )
    person = parsed.choices[0].message.parsed
    assert isinstance(person, Person) and person.name == "Ada"

    tools = [openai.pydantic_function_tool(GetWeather)]
    messages: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]
    first = client.chat.completions.parse(model=ECHO, messages=messages, tools=tools)
    assert first.choices[0].finish_reason == "tool_calls"
    call = (first.choices[0].message.tool_calls or [])[0]
    assert isinstance(call.function.parsed_arguments, GetWeather)
    # The documented loop: the parsed message (with its SDK-only fields) goes back as is.
    messages += [
        first.choices[0].message,
        {"role": "tool", "tool_call_id": call.id, "content": "sunny"},
    ]
    second = client.chat.completions.parse(model=ECHO, messages=messages, tools=tools)
    assert second.choices[0].message.content == "GetWeather returned: sunny"


def test_sdk_parse_refusal_and_length(client: openai.OpenAI) -> None:
    refused = client.chat.completions.parse(model=ECHO, messages=REFUSE, response_format=Person)
    message = refused.choices[0].message
    assert message.parsed is None and message.content is None and message.refusal
    words = " ".join(f"w{i}" for i in range(40))
    with pytest.raises(openai.LengthFinishReasonError):
        client.chat.completions.parse(
            model=ECHO,
            messages=[{"role": "user", "content": words}],
            max_completion_tokens=16,
        )


def test_async_sdk_create_stream_and_parse(server: OrgateServer) -> None:
    async def main() -> None:
        async with openai.AsyncOpenAI(
            base_url=server.base_url, api_key=server.api_key, max_retries=0, timeout=20
        ) as aclient:
            stream = await aclient.chat.completions.create(
                model=ECHO,
                messages=USER,
                stream=True,
                stream_options={"include_usage": True},
            )
            chunks = [chunk async for chunk in stream]
            assert chunks[0].choices[0].delta.role == "assistant"
            assert chunks[-1].choices == [] and chunks[-1].usage is not None
            assert chunks[-1].usage.prompt_tokens_details is not None
            assert chunks[-1].usage.prompt_tokens_details.cached_tokens == 0

            async with aclient.chat.completions.stream(
                model=ECHO,
                messages=[{"role": "user", "content": "Weather in Paris?"}],
                tools=[openai.pydantic_function_tool(GetWeather)],
            ) as tool_stream:
                async for _ in tool_stream:
                    pass
                final = await tool_stream.get_final_completion()
            message = final.choices[0].message
            assert message.content is None
            assert isinstance((message.tool_calls or [])[0].function.parsed_arguments, GetWeather)

            parsed = await aclient.chat.completions.parse(
                model=ECHO, messages=[{"role": "user", "content": "Ada"}], response_format=Person
            )
            assert isinstance(parsed.choices[0].message.parsed, Person)

            with pytest.raises(openai.APIError) as info:
                failing = await aclient.chat.completions.create(
                    model=ECHO,
                    messages=[{"role": "user", "content": "a b c d orgate:fail-mid"}],
                    stream=True,
                )
                async for _ in failing:
                    pass
            assert "fail-mid" in info.value.message

    asyncio.run(main())


# -- non-streamed wire shape -----------------------------------------------------------------


def test_non_stream_wire_shape(http: httpx.Client) -> None:
    r = _post(http, model=ECHO, messages=USER, tools=TOOLS)
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    assert r.headers.get("x-request-id")
    body = r.json()
    assert set(body) == {
        "id",
        "object",
        "created",
        "model",
        "choices",
        "usage",
        "system_fingerprint",
        "service_tier",
    }
    assert body["id"].startswith("chatcmpl-") and body["object"] == "chat.completion"
    assert isinstance(body["created"], int) and body["model"] == ECHO
    choice = body["choices"][0]
    assert set(choice) == {"index", "message", "finish_reason", "logprobs"}
    assert choice["logprobs"] is None and choice["finish_reason"] == "tool_calls"
    message = choice["message"]
    assert message["role"] == "assistant" and message["content"] is None
    assert message["refusal"] is None and message["annotations"] == []
    call = message["tool_calls"][0]
    assert set(call) == {"id", "type", "function"} and call["type"] == "function"
    assert json.loads(call["function"]["arguments"]) == {"city": "hello there"}
    usage = body["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert usage["prompt_tokens_details"] == {"cached_tokens": 0}
    assert usage["completion_tokens_details"] == {"reasoning_tokens": 0}


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("reason", ["length", "content_filter"])
def test_upstream_finish_reasons_and_usage_details(
    client: openai.OpenAI, fake: FakeOpenAIChat, reason: str, stream: bool
) -> None:
    usage = {
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "total_tokens": 15,
        "prompt_tokens_details": {"cached_tokens": 4},
        "completion_tokens_details": {"reasoning_tokens": 3},
    }
    fake.enqueue(Script(content="one two", finish_reason=reason, usage=usage))
    if not stream:
        completion = client.chat.completions.create(model=FAKE, messages=USER)
        assert completion.choices[0].finish_reason == reason
        got = completion.usage
    else:
        chunks = list(
            client.chat.completions.create(
                model=FAKE, messages=USER, stream=True, stream_options={"include_usage": True}
            )
        )
        assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == reason
        got = chunks[-1].usage
    assert got is not None and got.total_tokens == 15
    assert got.prompt_tokens_details and got.prompt_tokens_details.cached_tokens == 4
    assert got.completion_tokens_details and got.completion_tokens_details.reasoning_tokens == 3


def test_request_params_reach_the_upstream(client: openai.OpenAI, fake: FakeOpenAIChat) -> None:
    fake.enqueue(text("ok"))
    client.chat.completions.create(
        model=FAKE,
        messages=[
            {"role": "system", "content": "sys"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "look"},
                    {
                        "type": "image_url",
                        "image_url": {"url": "https://x.test/a.png", "detail": "low"},
                    },
                ],
            },
        ],
        temperature=0.2,
        top_p=0.5,
        presence_penalty=0.1,
        frequency_penalty=0.3,
        stop="END",
        user="u-1",
        max_tokens=50,
        tools=TOOLS,
        tool_choice="none",
        parallel_tool_calls=False,
    )
    sent = fake.bodies[-1]
    assert sent["messages"][1]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "https://x.test/a.png", "detail": "low"},
    }
    assert {
        k: sent.get(k) for k in ("temperature", "top_p", "presence_penalty", "frequency_penalty")
    } == {
        "temperature": 0.2,
        "top_p": 0.5,
        "presence_penalty": 0.1,
        "frequency_penalty": 0.3,
    }
    assert sent["stop"] == ["END"] and sent["user"] == "u-1" and sent["max_tokens"] == 50
    assert sent["tool_choice"] == "none" and sent["parallel_tool_calls"] is False


# -- refusals and errors in OpenAI's shape, with the SDK's exception classes -------------------


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"n": 2}, "n"),
        ({"seed": 7}, "seed"),
        ({"logit_bias": {"50256": -100}}, "logit_bias"),
        ({"modalities": ["text", "audio"], "audio": {"voice": "alloy", "format": "wav"}}, "audio"),
        ({"modalities": ["text", "audio"]}, "modalities"),
        ({"prediction": {"type": "content", "content": "x"}}, "prediction"),
        ({"web_search_options": {}}, "web_search_options"),
        ({"functions": [{"name": "f", "parameters": {"type": "object"}}]}, "functions"),
        ({"function_call": "auto"}, "function_call"),
        ({"messages": [{"role": "function", "name": "f", "content": "x"}]}, "messages[0].role"),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "input_audio",
                                "input_audio": {"data": "aGk=", "format": "wav"},
                            }
                        ],
                    }
                ]
            },
            "messages[0].content[0]",
        ),
    ],
)
def test_unsupported_params_are_a_400_naming_the_param(
    client: openai.OpenAI, extra: dict[str, Any], param: str
) -> None:
    kwargs: dict[str, Any] = {"model": ECHO, "messages": USER, **extra}
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(**kwargs)
    body = info.value.body
    assert isinstance(body, dict)
    assert body["param"] == param and body["code"] == "unsupported_parameter"
    assert body["type"] == "invalid_request_error"


def test_logprobs_reach_the_upstream_and_come_back_per_token(
    client: openai.OpenAI, fake: FakeOpenAIChat
) -> None:
    """``logprobs``/``top_logprobs`` go upstream as chat's own fields, through ``/v1/responses``;
    the tokens come back in ``choices[0].logprobs.content``, spelling the text; streamed, each
    content chunk carries its own (as OpenAI sends them)."""
    fake.enqueue(text("Hello there friend"))
    done = client.chat.completions.create(model=FAKE, messages=USER, logprobs=True, top_logprobs=2)
    sent = fake.bodies[-1]
    assert (sent["logprobs"], sent["top_logprobs"]) == (True, 2)
    logprobs = done.choices[0].logprobs
    assert logprobs is not None and logprobs.content is not None and logprobs.refusal is None
    assert "".join(t.token for t in logprobs.content) == done.choices[0].message.content
    assert all(
        len(t.top_logprobs) == 2 and t.top_logprobs[0].token == t.token for t in logprobs.content
    )
    assert logprobs.content[0].bytes == list(b"Hello") and logprobs.content[0].logprob < 0

    fake.enqueue(text("Hello there friend"))
    chunks = list(
        client.chat.completions.create(
            model=FAKE, messages=USER, logprobs=True, top_logprobs=2, stream=True
        )
    )
    streamed = [
        t
        for c in chunks
        if c.choices and c.choices[0].delta.content and c.choices[0].logprobs
        for t in (c.choices[0].logprobs.content or ())
    ]
    assert [t.model_dump() for t in streamed] == [t.model_dump() for t in logprobs.content]
    assert all(
        c.choices[0].logprobs is None
        for c in chunks
        if c.choices and not c.choices[0].delta.content
    )

    # the built-in model: every word certain; without logprobs: null, as before
    echo = client.chat.completions.create(model=ECHO, messages=USER, logprobs=True)
    tokens = echo.choices[0].logprobs.content  # type: ignore[union-attr]
    assert [(t.token, t.logprob, t.top_logprobs) for t in tokens or ()] == [
        ("hello ", 0.0, []),
        ("there", 0.0, []),
    ]
    assert client.chat.completions.create(model=ECHO, messages=USER).choices[0].logprobs is None


def test_stream_obfuscation_follows_the_request(client: openai.OpenAI) -> None:
    """``stream_options.include_obfuscation`` (default true, as on OpenAI): the SDK's
    ``chunk.obfuscation`` is set on every delta chunk, or on none."""
    padded = list(client.chat.completions.create(model=ECHO, messages=USER, stream=True))
    assert padded and all(c.obfuscation for c in padded if c.choices)
    plain = list(
        client.chat.completions.create(
            model=ECHO, messages=USER, stream=True, stream_options={"include_obfuscation": False}
        )
    )
    assert plain and all(c.obfuscation is None for c in plain)
    assert "".join(c.choices[0].delta.content or "" for c in plain if c.choices) == "hello there"


def test_top_logprobs_without_logprobs_is_a_400(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model=ECHO, messages=USER, top_logprobs=2)
    assert info.value.param == "top_logprobs" and info.value.code == "invalid_value"


def test_unknown_param_is_a_400(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model=ECHO, messages=USER, extra_body={"best_of": 2})
    assert info.value.code == "unknown_parameter" and info.value.param == "best_of"


def test_sdk_exception_classes(server: OrgateServer, client: openai.OpenAI) -> None:
    bad = openai.OpenAI(base_url=server.base_url, api_key="wrong", max_retries=0, timeout=20)
    with pytest.raises(openai.AuthenticationError):
        bad.chat.completions.create(model=ECHO, messages=USER)
    with pytest.raises(openai.NotFoundError) as missing:
        client.chat.completions.create(model="no-such-model", messages=USER)
    assert missing.value.code == "model_not_found"
    with pytest.raises(openai.RateLimitError) as limited:
        client.chat.completions.create(
            model=ECHO, messages=[{"role": "user", "content": "x orgate:rate-limit"}], stream=True
        )
    assert limited.value.response.headers.get("retry-after") == "1"
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(
            model=ECHO, messages=[{"role": "user", "content": "x orgate:fail"}]
        )
