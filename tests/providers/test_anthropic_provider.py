"""The anthropic provider over loopback HTTP against the fake Anthropic upstream."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from tests.fakes.anthropic_upstream import (
    FakeAnthropic,
    Raw,
    Script,
    bad_request,
    cut,
    http_error,
    overloaded,
    overloaded_mid_stream,
    rate_limited,
    server_error,
    stall,
    text,
    thinking,
    tool_use,
)
from tests.support.ports import closed_port

from orgate.neutral import (
    Capabilities,
    Deployment,
    Finish,
    ModelEvent,
    ModelRequest,
    ReasoningDelta,
    ReasoningEncrypted,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)
from orgate.protocol import (
    FunctionCallItemParam,
    FunctionCallOutputItemParam,
    FunctionToolParam,
    ReasoningItemParam,
    UserMessageItemParam,
)
from orgate.protocol.errors import ApiError
from orgate.providers.anthropic import ANTHROPIC_VERSION, AnthropicProvider, messages_url
from orgate.providers.http import HttpPool

SECRET = "sk-ant-test-SECRET-key"


@pytest.fixture
async def pool() -> AsyncIterator[HttpPool]:
    pool = HttpPool()
    yield pool
    await pool.aclose()


def provider(fake: FakeAnthropic, pool: HttpPool, **kw: Any) -> AnthropicProvider:
    deployment = Deployment(
        name="claude",
        provider="anthropic",
        upstream_model="claude-sonnet-4-5",
        base_url=fake.base_url,
        api_key=SECRET,
        **kw,
    )
    return AnthropicProvider(deployment, pool)


def req(*items: Any, **kw: Any) -> ModelRequest:
    return ModelRequest(model="claude-sonnet-4-5", input=list(items) or [user("hello")], **kw)


def user(content: Any) -> UserMessageItemParam:
    return UserMessageItemParam(content=content)


async def collect(p: AnthropicProvider, request: ModelRequest) -> list[ModelEvent]:
    return [e async for e in p.stream(request)]


def joined(events: list[ModelEvent], kind: type[Any]) -> str:
    return "".join(e.text for e in events if isinstance(e, kind))


def test_messages_url() -> None:
    assert messages_url("https://api.anthropic.com") == "https://api.anthropic.com/v1/messages"
    assert messages_url("https://x.test/v1/") == "https://x.test/v1/messages"
    assert messages_url("https://x.test/v1/messages") == "https://x.test/v1/messages"


async def test_text_headers_and_body(pool: HttpPool) -> None:
    async with FakeAnthropic(text("Hello there, friend")) as fake:
        p = provider(fake, pool, headers={"anthropic-beta": "prompt-caching-2024-07-31"})
        events = await collect(p, req(instructions="Be kind."))
        assert joined(events, TextDelta) == "Hello there, friend"
        assert isinstance(events[-1], Finish) and events[-1].reason == "stop"
        record = fake.requests[0]
        assert record.path == "/v1/messages"
        assert record.headers["x-api-key"] == SECRET
        assert record.headers["anthropic-version"] == ANTHROPIC_VERSION
        assert record.headers["anthropic-beta"] == "prompt-caching-2024-07-31"
        assert record.body["system"] == "Be kind."
        assert record.body["stream"] is True
        assert record.body["max_tokens"] == 4096
        assert record.completed and not record.disconnected


async def test_prompt_cache_option_puts_breakpoints_in_the_body(pool: HttpPool) -> None:
    """``anthropic = { prompt_cache = true }`` reaches the provider as the deployment's options."""
    async with FakeAnthropic(text("ok"), text("ok")) as fake:
        for options in ({"prompt_cache": True}, {}):
            events = await collect(
                provider(fake, pool, options=options), req(instructions="Be kind.")
            )
            assert joined(events, TextDelta) == "ok"
        cached, plain = fake.bodies
        assert cached["system"] == [
            {"type": "text", "text": "Be kind.", "cache_control": {"type": "ephemeral"}}
        ]
        assert cached["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
        assert plain["system"] == "Be kind." and "cache_control" not in str(plain)


async def test_max_tokens_default_from_capabilities(pool: HttpPool) -> None:
    async with FakeAnthropic(text("x")) as fake:
        p = provider(fake, pool, capabilities=Capabilities(max_output_tokens=8192))
        await collect(p, req())
        assert fake.bodies[0]["max_tokens"] == 8192


async def test_tool_calls_with_json_split_across_events(pool: HttpPool) -> None:
    args = '{"city": "Paris", "units": "metric", "days": [1, 2, 3]}'
    async with FakeAnthropic(
        tool_use(("get_weather", args), ("get_time", ""), fragments=7)
    ) as fake:
        tools = [FunctionToolParam(name="get_weather"), FunctionToolParam(name="get_time")]
        events = await collect(provider(fake, pool), req(tools=tools, tool_choice="required"))
        starts = [e for e in events if isinstance(e, ToolCallStart)]
        assert [(s.index, s.name) for s in starts] == [(0, "get_weather"), (1, "get_time")]
        assert all(s.call_id.startswith("toolu_") for s in starts)
        deltas = [e for e in events if isinstance(e, ToolCallDelta)]
        assert len([d for d in deltas if d.index == 0]) == 7
        assert "".join(d.arguments for d in deltas if d.index == 0) == args
        assert "".join(d.arguments for d in deltas if d.index == 1) == "{}"
        assert events[-1] == Finish("tool_calls", events[-1].usage)  # type: ignore[union-attr]
        assert fake.bodies[0]["tool_choice"] == {"type": "any"}


async def test_thinking_round_trips_with_its_signature(pool: HttpPool) -> None:
    script = thinking("First, recall the capital.", "Paris.", signature="SIG-123")
    async with FakeAnthropic(script, text("ok")) as fake:
        p = provider(fake, pool)
        events = await collect(p, req(reasoning_effort="low"))
        assert joined(events, ReasoningDelta) == "First, recall the capital."
        assert all(e.part == "content" for e in events if isinstance(e, ReasoningDelta))
        encrypted = [e for e in events if isinstance(e, ReasoningEncrypted)]
        assert len(encrypted) == 1
        assert fake.bodies[0]["thinking"] == {"type": "enabled", "budget_tokens": 2048}
        # the next turn replays the reasoning item; the thinking block goes back unchanged
        replay = [
            user("capital?"),
            ReasoningItemParam(summary=[], encrypted_content=encrypted[0].data),
            FunctionCallItemParam(call_id="toolu_1", name="lookup", arguments="{}"),
            FunctionCallOutputItemParam(call_id="toolu_1", output="Paris"),
        ]
        await collect(p, req(*replay, reasoning_effort="low"))
        assistant = fake.bodies[1]["messages"][1]
        assert assistant["role"] == "assistant"
        assert assistant["content"][0] == {
            "type": "thinking",
            "thinking": "First, recall the capital.",
            "signature": "SIG-123",
        }
        assert fake.bodies[1]["messages"][2]["content"][0]["type"] == "tool_result"


async def test_a_tool_use_replayed_without_its_thinking_is_sent_without_thinking(
    pool: HttpPool,
) -> None:
    """Anthropic refuses thinking when the continued assistant turn has a tool_use but no
    thinking block (the fake enforces it): the request goes without thinking, and says so."""
    replay = [
        user("capital?"),
        FunctionCallItemParam(call_id="toolu_1", name="lookup", arguments="{}"),
        FunctionCallOutputItemParam(call_id="toolu_1", output="Paris"),
    ]
    async with FakeAnthropic(text("Paris.")) as fake:
        request = req(*replay, reasoning_effort="low")
        events = await collect(provider(fake, pool), request)
        assert joined(events, TextDelta) == "Paris."
        assert "thinking" not in fake.bodies[0]
        assert [e.detail for e in request.ledger if e.code == "reasoning_left_off"][0].startswith(
            "reasoning left off"
        )


async def test_the_fake_refuses_thinking_after_an_unthought_tool_use() -> None:
    """The rule the mapping works around, as the fake (like Anthropic) enforces it."""
    body = {
        "model": "m",
        "max_tokens": 4096,
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "messages": [
            {"role": "user", "content": "capital?"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t", "content": "Paris"}],
            },
        ],
    }
    async with FakeAnthropic(text("never")) as fake:
        raw = urllib.request.Request(
            fake.base_url + "/v1/messages",
            data=orjson.dumps(body),
            headers={"x-api-key": "k", "content-type": "application/json"},
        )
        with pytest.raises(urllib.error.HTTPError) as info:  # the fake runs on this loop
            await asyncio.to_thread(urllib.request.urlopen, raw, timeout=60)
        assert info.value.code == 400
        assert "Expected `thinking` or `redacted_thinking`" in info.value.read().decode()


async def test_max_tokens_stop_is_length(pool: HttpPool) -> None:
    async with FakeAnthropic(text("cut short", stop_reason="max_tokens")) as fake:
        events = await collect(provider(fake, pool), req(max_output_tokens=2))
        assert isinstance(events[-1], Finish) and events[-1].reason == "length"
        assert fake.bodies[0]["max_tokens"] == 2


async def test_usage_with_cache_tokens(pool: HttpPool) -> None:
    script = text(
        "hi",
        input_tokens=10,
        cache_read_input_tokens=1000,
        cache_creation_input_tokens=50,
        output_tokens=7,
    )
    async with FakeAnthropic(script) as fake:
        events = await collect(provider(fake, pool), req())
        assert events[-1] == Finish(
            "stop", Usage(input_tokens=1060, output_tokens=7, cached_tokens=1000)
        )


async def test_json_reply_to_a_stream_request_is_decoded(pool: HttpPool) -> None:
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": "plain json"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 2},
    }
    async with FakeAnthropic(Raw([orjson.dumps(body)], content_type="application/json")) as fake:
        events = await collect(provider(fake, pool), req())
        assert events == [TextDelta("plain json"), Finish("stop", Usage(1, 2))]


async def test_rate_limit_passes_retry_after(pool: HttpPool) -> None:
    async with FakeAnthropic(rate_limited("13")) as fake:
        with pytest.raises(ApiError) as err:
            await collect(provider(fake, pool), req())
        assert err.value.status == 429
        assert err.value.type == "rate_limit_error"
        assert err.value.headers == {"Retry-After": "13"}


async def test_overloaded_529_is_503(pool: HttpPool) -> None:
    async with FakeAnthropic(overloaded()) as fake:
        with pytest.raises(ApiError) as err:
            await collect(provider(fake, pool), req())
        assert (err.value.status, err.value.type, err.value.code) == (
            503,
            "server_error",
            "upstream_overloaded",
        )


async def test_bad_request_is_400_with_the_upstream_message(pool: HttpPool) -> None:
    async with FakeAnthropic(bad_request("messages.0: roles must alternate")) as fake:
        with pytest.raises(ApiError) as err:
            await collect(provider(fake, pool), req())
        assert (err.value.status, err.value.code) == (400, "upstream_bad_request")
        assert "roles must alternate" in err.value.message


@pytest.mark.parametrize("status", [500, 502, 503])
async def test_server_errors_are_502_naming_the_deployment(pool: HttpPool, status: int) -> None:
    async with FakeAnthropic(server_error(status)) as fake:
        with pytest.raises(ApiError) as err:
            await collect(provider(fake, pool), req())
        assert (err.value.status, err.value.type) == (502, "server_error")
        assert "'claude'" in err.value.message


async def test_auth_error_is_502_and_never_leaks_the_key(pool: HttpPool) -> None:
    leaky = http_error(401, f"invalid x-api-key {SECRET}", type="authentication_error")
    async with FakeAnthropic(leaky) as fake:
        with pytest.raises(ApiError) as err:
            await collect(provider(fake, pool), req())
        assert (err.value.status, err.value.code) == (502, "upstream_auth_failed")
        assert SECRET not in err.value.message and SECRET not in repr(err.value)


async def test_mid_stream_overloaded_event_raises_after_partial_output(pool: HttpPool) -> None:
    async with FakeAnthropic(overloaded_mid_stream("one two three", after=4)) as fake:
        seen: list[ModelEvent] = []
        with pytest.raises(ApiError) as err:
            async for event in provider(fake, pool).stream(req()):
                seen.append(event)
        assert err.value.status == 503 and err.value.code == "upstream_overloaded"
        assert seen and not any(isinstance(e, Finish) for e in seen)


async def test_cut_stream_is_truncated(pool: HttpPool) -> None:
    async with FakeAnthropic(cut("one two three four", after=5)) as fake:
        with pytest.raises(ApiError) as err:
            await collect(provider(fake, pool), req())
        assert err.value.status == 502
        assert err.value.code == "upstream_stream_truncated"


async def test_stall_hits_the_read_timeout(pool: HttpPool) -> None:
    async with FakeAnthropic(stall(5.0, after=3)) as fake:
        with pytest.raises(ApiError) as err:
            await collect(provider(fake, pool, read_timeout=0.3), req())
        assert (err.value.status, err.value.code) == (504, "upstream_timeout")
        assert await fake.wait_disconnected()


async def test_refused_connection(pool: HttpPool) -> None:
    with closed_port() as port:
        deployment = Deployment(
            name="claude",
            provider="anthropic",
            upstream_model="m",
            base_url=f"http://127.0.0.1:{port}",
            api_key=SECRET,
        )
        with pytest.raises(ApiError) as err:
            await collect(AnthropicProvider(deployment, pool), req())
        assert (err.value.status, err.value.code) == (502, "upstream_unavailable")


async def test_consumer_going_away_closes_the_upstream_request(pool: HttpPool) -> None:
    script = Script(text=" ".join(["word"] * 200), delay=0.02)
    async with FakeAnthropic(script) as fake:
        stream = provider(fake, pool).stream(req())
        async for event in stream:
            if isinstance(event, TextDelta):
                break
        await stream.aclose()  # type: ignore[attr-defined]
        assert await fake.wait_disconnected()


def test_fake_runs_in_a_thread_for_sync_tests() -> None:
    with FakeAnthropic.start_in_thread(text("threaded")) as fake:
        request = urllib.request.Request(
            fake.base_url + "/v1/messages",
            data=orjson.dumps({"model": "m", "max_tokens": 5, "messages": []}),
            headers={"Content-Type": "application/json", "x-api-key": "k"},
        )
        with urllib.request.urlopen(request, timeout=5) as resp:
            body = orjson.loads(resp.read())
        assert body["content"] == [{"type": "text", "text": "threaded"}]
        assert body["stop_reason"] == "end_turn"
