"""The openai-chat provider over loopback HTTP against the fake OpenAI-compatible upstream."""

from __future__ import annotations

import urllib.request
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from tests.fakes.openai_chat_upstream import (
    FakeOpenAIChat,
    Raw,
    Script,
    cut,
    garbage,
    http_error,
    rate_limited,
    stall,
    text,
    tool_calls,
)
from tests.support.ports import closed_port

from orgate.neutral import (
    Deployment,
    Finish,
    ModelEvent,
    ModelRequest,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
)
from orgate.protocol import FunctionToolParam, UserMessageItemParam
from orgate.protocol.errors import ApiError
from orgate.providers.http import HttpPool
from orgate.providers.openai_chat import OpenAIChatProvider

SECRET = "sk-test-SECRET-do-not-leak"


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAIChat]:
    async with FakeOpenAIChat() as server:
        yield server


@pytest.fixture
async def pool() -> AsyncIterator[HttpPool]:
    p = HttpPool()
    yield p
    await p.aclose()


def provider(fake_or_url: FakeOpenAIChat | str, pool: HttpPool, **kw: Any) -> OpenAIChatProvider:
    base_url = fake_or_url if isinstance(fake_or_url, str) else fake_or_url.base_url
    settings: dict[str, Any] = {
        "name": "fast-model",
        "provider": "openai-chat",
        "upstream_model": "up-model",
        "base_url": base_url,
        "api_key": SECRET,
        "headers": {"X-Extra": "1"},
        "read_timeout": 5.0,
    }
    settings.update(kw)
    return OpenAIChatProvider(Deployment(**settings), pool)


def request(text_in: str = "hello there", **kw: Any) -> ModelRequest:
    return ModelRequest(model="up-model", input=[UserMessageItemParam(content=text_in)], **kw)


async def collect(p: OpenAIChatProvider, req: ModelRequest | None = None) -> list[ModelEvent]:
    return [e async for e in p.stream(req or request())]


def joined_text(events: list[ModelEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def args_by_name(events: list[ModelEvent]) -> dict[str, str]:
    names = {e.index: e.name for e in events if isinstance(e, ToolCallStart)}
    out = {n: "" for n in names.values()}
    for e in events:
        if isinstance(e, ToolCallDelta):
            out[names[e.index]] += e.arguments
    return out


async def test_text_stream(fake: FakeOpenAIChat, pool: HttpPool) -> None:
    fake.enqueue(text("The quick brown fox"))
    events = await collect(provider(fake, pool))
    assert [e for e in events if isinstance(e, TextDelta)] == [
        TextDelta("The"),
        TextDelta(" quick"),
        TextDelta(" brown"),
        TextDelta(" fox"),
    ]
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.reason == "stop"
    assert (
        finish.usage is not None
        and finish.usage.output_tokens == 4
        and finish.usage.input_tokens > 0
    )
    sent = fake.requests[-1]
    assert sent.path == "/v1/chat/completions"
    assert sent.body == {
        "model": "up-model",
        "messages": [{"role": "user", "content": "hello there"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    assert sent.headers["Authorization"] == f"Bearer {SECRET}"
    assert sent.headers["X-Extra"] == "1"
    assert sent.completed and not sent.disconnected


async def test_no_key_no_authorization_header(fake: FakeOpenAIChat, pool: HttpPool) -> None:
    await collect(provider(fake, pool, api_key=None))
    assert "Authorization" not in fake.requests[-1].headers


async def test_default_echo_and_reasoning(fake: FakeOpenAIChat, pool: HttpPool) -> None:
    assert joined_text(await collect(provider(fake, pool), request("ping"))) == "You said: ping"
    fake.enqueue(Script(content="42", reasoning="let me think"))
    events = await collect(provider(fake, pool))
    assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)) == "let me think"
    assert joined_text(events) == "42"


async def test_tool_call_split_across_chunks(fake: FakeOpenAIChat, pool: HttpPool) -> None:
    args = '{"city": "Paris", "unit": "celsius"}'
    fake.enqueue(tool_calls(("get_weather", args), fragments=5))
    tools = [FunctionToolParam(name="get_weather", parameters={"type": "object"})]
    events = await collect(provider(fake, pool), request(tools=tools, tool_choice="auto"))
    starts = [e for e in events if isinstance(e, ToolCallStart)]
    assert (
        len(starts) == 1
        and starts[0].name == "get_weather"
        and starts[0].call_id.startswith("call_")
    )
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert len(deltas) == 5 and "".join(d.arguments for d in deltas) == args
    assert events[-1] == Finish("tool_calls", events[-1].usage)  # type: ignore[union-attr]
    body = fake.requests[-1].body
    assert body["tools"][0]["function"]["name"] == "get_weather" and body["tool_choice"] == "auto"


@pytest.mark.parametrize("interleave", [False, True])
async def test_parallel_tool_calls(fake: FakeOpenAIChat, pool: HttpPool, interleave: bool) -> None:
    fake.enqueue(
        tool_calls(("a", '{"x": 1}'), ("b", '{"y": [2, 3]}'), ("c", "{}"), interleave=interleave)
    )
    events = await collect(provider(fake, pool))
    current = -1
    for e in events:
        if isinstance(e, ToolCallStart):
            assert e.index == current + 1
            current = e.index
        elif isinstance(e, ToolCallDelta):
            assert e.index == current
    assert args_by_name(events) == {"a": '{"x": 1}', "b": '{"y": [2, 3]}', "c": "{}"}
    assert isinstance(events[-1], Finish) and events[-1].reason == "tool_calls"


async def test_length_finish(fake: FakeOpenAIChat, pool: HttpPool) -> None:
    fake.enqueue(text("cut short", finish_reason="length"))
    events = await collect(provider(fake, pool), request(max_output_tokens=2))
    assert isinstance(events[-1], Finish) and events[-1].reason == "length"
    assert fake.requests[-1].body["max_tokens"] == 2


async def test_usage_chunk(fake: FakeOpenAIChat, pool: HttpPool) -> None:
    usage = {
        "prompt_tokens": 100,
        "completion_tokens": 20,
        "total_tokens": 120,
        "prompt_tokens_details": {"cached_tokens": 64},
        "completion_tokens_details": {"reasoning_tokens": 8},
    }
    fake.enqueue(text("hi", usage=usage))
    finish = (await collect(provider(fake, pool)))[-1]
    assert isinstance(finish, Finish) and finish.usage is not None
    assert (finish.usage.input_tokens, finish.usage.output_tokens) == (100, 20)
    assert (finish.usage.cached_tokens, finish.usage.reasoning_tokens) == (64, 8)


async def test_rate_limited_passes_retry_after(fake: FakeOpenAIChat, pool: HttpPool) -> None:
    fake.enqueue(rate_limited("7"))
    with pytest.raises(ApiError) as err:
        await collect(provider(fake, pool))
    e = err.value
    assert e.status == 429 and e.type == "rate_limit_error" and e.code == "rate_limit_exceeded"
    assert e.headers == {"Retry-After": "7"}
    assert "fast-model" in e.message and "Rate limit reached" in e.message


async def test_upstream_500(fake: FakeOpenAIChat, pool: HttpPool) -> None:
    fake.enqueue(http_error(500, "The server had an error"))
    with pytest.raises(ApiError) as err:
        await collect(provider(fake, pool))
    assert err.value.status == 502 and err.value.type == "server_error"
    assert err.value.code == "upstream_error" and "fast-model" in err.value.message


async def test_upstream_400_names_the_upstream(fake: FakeOpenAIChat, pool: HttpPool) -> None:
    fake.enqueue(http_error(400, "Invalid value for 'temperature'", type="invalid_request_error"))
    with pytest.raises(ApiError) as err:
        await collect(provider(fake, pool))
    e = err.value
    assert (
        e.status == 400 and e.type == "invalid_request_error" and e.code == "upstream_bad_request"
    )
    assert (
        e.message == "upstream 'fast-model' rejected the request: Invalid value for 'temperature'"
    )


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (401, "upstream_auth_failed"),
        (403, "upstream_auth_failed"),
        (404, "upstream_model_not_found"),
    ],
)
async def test_upstream_auth_and_not_found(
    fake: FakeOpenAIChat, pool: HttpPool, status: int, code: str
) -> None:
    fake.enqueue(http_error(status, f"Incorrect API key provided: {SECRET}"))
    with pytest.raises(ApiError) as err:
        await collect(provider(fake, pool))
    assert err.value.status == 502 and err.value.code == code
    if status != 404:
        assert SECRET not in err.value.message and "credentials" in err.value.message


async def test_read_timeout_mid_stream(fake: FakeOpenAIChat, pool: HttpPool) -> None:
    fake.enqueue(stall(10.0, after=2))
    p = provider(fake, pool, read_timeout=0.3)
    got: list[ModelEvent] = []
    with pytest.raises(ApiError) as err:
        async for e in p.stream(request()):
            got.append(e)
    assert err.value.status == 504 and err.value.code == "upstream_timeout"
    assert "fast-model" in err.value.message and "127.0.0.1" in err.value.message
    assert got == [TextDelta("one")]
    assert await fake.wait_disconnected()


async def test_timeout_before_headers(fake: FakeOpenAIChat, pool: HttpPool) -> None:
    fake.enqueue(Script(stall_before_headers=10.0))
    with pytest.raises(ApiError) as err:
        await collect(provider(fake, pool, read_timeout=0.3))
    assert err.value.status == 504 and err.value.code == "upstream_timeout"


async def test_total_timeout(fake: FakeOpenAIChat, pool: HttpPool) -> None:
    fake.enqueue(Script(content="a b c d e f g h", delay=0.1))
    with pytest.raises(ApiError) as err:
        await collect(provider(fake, pool, total_timeout=0.3))
    assert err.value.status == 504 and err.value.code == "upstream_timeout"


async def test_cut_mid_stream(fake: FakeOpenAIChat, pool: HttpPool) -> None:
    fake.enqueue(cut("one two three four", after=3))
    got: list[ModelEvent] = []
    with pytest.raises(ApiError) as err:
        async for e in provider(fake, pool).stream(request()):
            got.append(e)
    assert err.value.status == 502 and err.value.code == "upstream_stream_truncated"
    assert joined_text(got) == "one two"


async def test_stream_without_finish_and_done_is_truncated(
    fake: FakeOpenAIChat, pool: HttpPool
) -> None:
    fake.enqueue(Raw([b'data: {"choices":[{"index":0,"delta":{"content":"x"}}]}\n\n']))
    with pytest.raises(ApiError) as err:
        await collect(provider(fake, pool))
    assert err.value.code == "upstream_stream_truncated"


async def test_garbage(fake: FakeOpenAIChat, pool: HttpPool) -> None:
    fake.enqueue(garbage(after=2))
    with pytest.raises(ApiError) as err:
        await collect(provider(fake, pool))
    assert err.value.status == 502 and err.value.code == "upstream_invalid_response"


async def test_refused_connection(pool: HttpPool) -> None:
    with closed_port() as port:
        with pytest.raises(ApiError) as err:
            await collect(provider(f"http://127.0.0.1:{port}/v1", pool))
        e = err.value
        assert e.status == 502 and e.type == "server_error" and e.code == "upstream_unavailable"
        assert (
            "fast-model" in e.message
            and f"127.0.0.1:{port}" in e.message
            and SECRET not in e.message
        )


async def test_json_reply_to_a_stream_request(fake: FakeOpenAIChat, pool: HttpPool) -> None:
    completion = {
        "id": "x",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "whole"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1},
    }
    fake.enqueue(Raw([orjson.dumps(completion)], content_type="application/json"))
    events = await collect(provider(fake, pool))
    assert events[0] == TextDelta("whole") and isinstance(events[-1], Finish)


async def test_consumer_leaving_early_disconnects_upstream(
    fake: FakeOpenAIChat, pool: HttpPool
) -> None:
    fake.enqueue(Script(content=" ".join(["word"] * 50), delay=0.02))
    stream = provider(fake, pool).stream(request())
    first = await anext(stream)
    assert first == TextDelta("word")
    await stream.aclose()
    assert await fake.wait_disconnected()
    assert not fake.requests[-1].completed


async def test_connections_are_kept_alive(fake: FakeOpenAIChat, pool: HttpPool) -> None:
    p = provider(fake, pool)
    for _ in range(3):
        await collect(p)
    peers = {r.peer for r in fake.requests[-3:]}
    assert len(peers) == 1


async def test_fake_speaks_the_real_wire_format_to_the_openai_sdk(fake: FakeOpenAIChat) -> None:
    import openai

    client = openai.AsyncOpenAI(base_url=fake.base_url, api_key="k", max_retries=0)
    try:
        fake.enqueue(tool_calls(("a", '{"x": 1}'), ("b", "{}"), content="Calling."))
        completion = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}]
        )
        message = completion.choices[0].message
        assert message.content == "Calling." and completion.choices[0].finish_reason == "tool_calls"
        assert [c.function.name for c in message.tool_calls or []] == ["a", "b"]

        fake.enqueue(tool_calls(("a", '{"x": 1}'), ("b", "{}"), content="Calling."))
        async with client.beta.chat.completions.stream(
            model="m",
            messages=[{"role": "user", "content": "hi"}],
            stream_options={"include_usage": True},
        ) as stream:
            final = await stream.get_final_completion()
        calls = final.choices[0].message.tool_calls or []
        assert [(c.function.name, c.function.arguments) for c in calls] == [
            ("a", '{"x": 1}'),
            ("b", "{}"),
        ]
        assert final.usage is not None and final.usage.completion_tokens > 0

        fake.enqueue(rate_limited("3"))
        with pytest.raises(openai.RateLimitError) as err:
            await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "x"}]
            )
        assert err.value.response.headers["retry-after"] == "3"

        models = await client.models.list()
        assert [m.id for m in models.data] == ["fake-model"]
    finally:
        await client.close()


def test_fake_in_a_thread_for_sync_tests() -> None:
    with FakeOpenAIChat.start_in_thread(text("threaded reply")) as fake:
        body = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "x"}]})
        req = urllib.request.Request(
            fake.base_url + "/chat/completions",
            data=body,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=5) as resp:
            reply = orjson.loads(resp.read())
        assert reply["object"] == "chat.completion"
        assert reply["choices"][0]["message"]["content"] == "threaded reply"
        assert fake.bodies == [orjson.loads(body)]
