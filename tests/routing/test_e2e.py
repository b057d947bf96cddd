"""Routing end to end: a real ``orgate serve`` in front of two fake OpenAI-compatible upstreams and
a fake Anthropic.

Model ``fb`` routes to upstream A then B (fallbacks, one retry with a short
backoff); ``solo`` is A alone with one concurrency slot; ``chat-a`` is A with
no routing (a flat model); ``claude`` is the Anthropic fake. Covers: fallback
on 500 / 429 (non-streaming and streaming, before the first byte), both
failing, the client's disconnect reaching the upstream, and a conversation
that moves from one provider to another through ``previous_response_id``.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.fakes.anthropic_upstream import FakeAnthropic
from tests.fakes.anthropic_upstream import Script as AnthropicScript
from tests.fakes.openai_chat_upstream import (
    FakeOpenAIChat,
    Script,
    http_error,
    rate_limited,
    text,
    tool_calls,
)
from tests.server_process import OrgateServer
from tests.support.spec import check_sse

SLOW_WORDS = " ".join(f"word{i}" for i in range(80))


def config(a: str, b: str, claude: str) -> str:
    return f"""
[[models]]
name = "fb"
aliases = ["fallback"]
api_key = "upstream-secret"
read_timeout = 3
[[models.deployments]]
name = "fb-a"
provider = "openai-chat"
base_url = "{a}"
upstream_model = "model-a"
max_concurrency = 8
[[models.deployments]]
name = "fb-b"
provider = "openai-chat"
base_url = "{b}"
upstream_model = "model-b"
[models.routing]
retries = 1
backoff_base = 0.05
backoff_max = 1
circuit_failures = 1000

[[models]]
name = "solo"
routing = {{ retries = 0, queue_timeout = 0.3, circuit_failures = 1000 }}
[[models.deployments]]
name = "solo-a"
provider = "openai-chat"
base_url = "{a}"
upstream_model = "model-solo"
max_concurrency = 1

[[models]]
name = "chat-a"
provider = "openai-chat"
base_url = "{a}"
upstream_model = "model-flat"
read_timeout = 3

[[models]]
name = "claude"
provider = "anthropic"
base_url = "{claude}"
api_key = "anthropic-secret"
upstream_model = "claude-fake-1"
read_timeout = 3
"""


@pytest.fixture(scope="module")
def upstreams() -> Iterator[tuple[FakeOpenAIChat, FakeOpenAIChat, FakeAnthropic]]:
    with (
        FakeOpenAIChat.start_in_thread() as a,
        FakeOpenAIChat.start_in_thread() as b,
        FakeAnthropic.start_in_thread() as c,
    ):
        yield a, b, c


@pytest.fixture(scope="module")
def gateway(
    upstreams: tuple[FakeOpenAIChat, FakeOpenAIChat, FakeAnthropic],
) -> Iterator[OrgateServer]:
    a, b, c = upstreams
    running = OrgateServer(config(a.base_url, b.base_url, c.base_url)).start(timeout=60)
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def fakes(
    upstreams: tuple[FakeOpenAIChat, FakeOpenAIChat, FakeAnthropic],
) -> Iterator[tuple[FakeOpenAIChat, FakeOpenAIChat, FakeAnthropic]]:
    for fake in upstreams:
        fake.reset()
    yield upstreams
    for fake in upstreams:
        fake.reset()


@pytest.fixture
def sdk(gateway: OrgateServer) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=gateway.base_url, api_key=gateway.api_key, max_retries=0, timeout=20
    )


@pytest.fixture
async def ahttp(gateway: OrgateServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        base_url=gateway.url, headers=gateway.headers(), timeout=20
    ) as client:
        yield client


def models_of(fake: FakeOpenAIChat) -> list[Any]:
    return [body["model"] for body in fake.bodies]


# --- fallbacks ----------------------------------------------------------------------------------


def test_a_500_falls_back_to_the_second_deployment(sdk: openai.OpenAI, fakes: Any) -> None:
    a, b, _ = fakes
    a.enqueue(http_error(500, "boom"))
    b.enqueue(text("answer from b"))
    response = sdk.responses.create(model="fb", input="hi")
    assert response.status == "completed" and response.output_text == "answer from b"
    assert response.model == "fb"
    assert models_of(a) == ["model-a"] and models_of(b) == ["model-b"]


def test_a_429_beyond_backoff_max_falls_back_at_once(sdk: openai.OpenAI, fakes: Any) -> None:
    a, b, _ = fakes
    a.enqueue(rate_limited("60"))
    b.enqueue(text("b again"))
    started = time.monotonic()
    response = sdk.responses.create(model="fallback", input="hi")
    assert response.output_text == "b again"
    # Less than the 60 s wait it was told: it did not wait (the call itself takes a fraction
    # of a second when idle, seconds on a loaded machine).
    assert time.monotonic() - started < 60
    assert len(a.bodies) == 1 and len(b.bodies) == 1


def test_both_failing_gives_the_client_the_error(sdk: openai.OpenAI, fakes: Any) -> None:
    a, b, _ = fakes
    a.enqueue(http_error(500, "a is down"), http_error(500, "a is down"))
    b.enqueue(http_error(503, "b is down"), http_error(503, "b is down"))
    with pytest.raises(openai.APIStatusError) as info:
        sdk.responses.create(model="fb", input="hi")
    assert info.value.status_code >= 500
    error = info.value.response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert "fb-a" in error["message"] or "fb-b" in error["message"]  # the last failure, named
    assert "upstream-secret" not in info.value.response.text
    assert len(a.bodies) == 2 and len(b.bodies) == 2  # one retry each (retries = 1)


def test_both_rate_limited_passes_the_429_and_its_retry_after_on(
    sdk: openai.OpenAI, fakes: Any
) -> None:
    a, b, _ = fakes
    a.enqueue(rate_limited("7"))
    b.enqueue(rate_limited("9"))
    with pytest.raises(openai.RateLimitError) as info:
        sdk.responses.create(model="fb", input="hi")
    assert info.value.response.headers.get("retry-after") == "9"


def test_a_retry_reaches_the_first_deployment_again_after_the_backoff(
    sdk: openai.OpenAI, fakes: Any
) -> None:
    a, b, _ = fakes
    a.enqueue(http_error(502), text("a on the second try"))
    b.enqueue(http_error(502), http_error(502))
    response = sdk.responses.create(model="fb", input="hi")
    assert response.output_text == "a on the second try"
    assert len(a.bodies) == 2 and len(b.bodies) in (1, 2)  # which retry comes first is jitter


def test_a_flat_model_is_not_retried(sdk: openai.OpenAI, fakes: Any) -> None:
    a, _, _ = fakes
    a.enqueue(http_error(500, "boom"))
    with pytest.raises(openai.APIStatusError):
        sdk.responses.create(model="chat-a", input="hi")
    assert len(a.bodies) == 1


async def test_streaming_falls_back_before_the_first_byte(
    ahttp: httpx.AsyncClient, fakes: Any
) -> None:
    a, b, _ = fakes
    a.enqueue(http_error(503, "overloaded"))
    b.enqueue(text("streamed from b"))
    response = await ahttp.post(
        "/v1/responses", json={"model": "fb", "input": "hi", "stream": True}
    )
    assert response.status_code == 200
    events = check_sse(response.text)
    assert events[-1]["type"] == "response.completed"
    assert (
        "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
        == "streamed from b"
    )
    assert len(a.bodies) == 1 and len(b.bodies) == 1


async def test_streaming_failure_after_the_first_byte_is_not_retried(
    ahttp: httpx.AsyncClient, fakes: Any
) -> None:
    a, b, _ = fakes
    a.enqueue(Script(content="one two three four", cut_after=3))
    response = await ahttp.post(
        "/v1/responses", json={"model": "fb", "input": "hi", "stream": True}
    )
    events = check_sse(response.text)
    assert [e["type"] for e in events[-2:]] == ["error", "response.failed"]
    assert len(a.bodies) == 1 and not b.bodies


# --- cancellation ---------------------------------------------------------------------------------


async def _disconnect_after(ahttp: httpx.AsyncClient, model: str, events: int = 4) -> None:
    seen = 0
    async with ahttp.stream(
        "POST", "/v1/responses", json={"model": model, "input": "hi", "stream": True}
    ) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                seen += 1
                if seen >= events:
                    break


@pytest.mark.parametrize("model", ["chat-a", "fb", "solo"])
async def test_a_client_disconnect_cancels_the_openai_chat_upstream(
    ahttp: httpx.AsyncClient, fakes: Any, model: str
) -> None:
    a, _, _ = fakes
    a.enqueue(Script(content=SLOW_WORDS, delay=0.2))  # 16 s of words
    await _disconnect_after(ahttp, model)
    assert await a.wait_disconnected(), "the upstream request outlived the client"
    assert not a.requests[-1].completed  # cut before its end, not closed once it had ended


async def test_a_client_disconnect_cancels_the_anthropic_upstream(
    ahttp: httpx.AsyncClient, fakes: Any
) -> None:
    _, _, claude = fakes
    claude.enqueue(AnthropicScript(text=SLOW_WORDS, delay=0.2))
    await _disconnect_after(ahttp, "claude")
    assert await claude.wait_disconnected(), "the upstream request outlived the client"
    assert not claude.requests[-1].completed


async def test_a_disconnect_frees_the_concurrency_slot(
    ahttp: httpx.AsyncClient, fakes: Any
) -> None:
    a, _, _ = fakes
    a.enqueue(Script(content=SLOW_WORDS, delay=0.2))
    await _disconnect_after(ahttp, "solo")
    assert await a.wait_disconnected()
    a.enqueue(text("the slot is free"))
    response = await ahttp.post("/v1/responses", json={"model": "solo", "input": "again"})
    assert response.status_code == 200, response.text
    assert response.json()["output"][0]["content"][0]["text"] == "the slot is free"


async def test_a_full_deployment_answers_429_after_the_queue_timeout(
    ahttp: httpx.AsyncClient, fakes: Any
) -> None:
    a, _, _ = fakes
    a.enqueue(Script(content=SLOW_WORDS, delay=0.1))  # 8 s of words
    async with ahttp.stream(
        "POST", "/v1/responses", json={"model": "solo", "input": "hi", "stream": True}
    ) as held:
        assert held.status_code == 200
        lines = held.aiter_lines()
        await anext(lines)
        started = time.monotonic()
        second = await ahttp.post("/v1/responses", json={"model": "solo", "input": "me too"})
        assert second.status_code == 429 and second.headers.get("retry-after") == "1"
        assert second.json()["error"]["code"] == "too_many_concurrent_requests"
        # It waited its queue timeout (0.3 s: real time from below only, as a loaded machine
        # waits longer, never shorter), and not for the held call to end.
        assert time.monotonic() - started >= 0.25
        assert not a.requests[-1].completed
    assert await a.wait_disconnected()


# --- cross-provider replay ------------------------------------------------------------------------


def test_a_conversation_moves_from_openai_chat_to_anthropic(sdk: openai.OpenAI, fakes: Any) -> None:
    a, _, claude = fakes
    tools = [
        {
            "type": "function",
            "name": "get_weather",
            "description": "Weather in a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        }
    ]
    a.enqueue(tool_calls(("get_weather", '{"city": "Paris"}')))
    first = sdk.responses.create(model="chat-a", input="Weather in Paris?", tools=tools)
    calls = [item for item in first.output if item.type == "function_call"]
    assert len(calls) == 1
    call = calls[0]
    claude.enqueue(AnthropicScript(text="It is sunny in Paris."))
    second = sdk.responses.create(
        model="claude",
        previous_response_id=first.id,
        input=[
            {"type": "function_call_output", "call_id": call.call_id, "output": '{"sky": "sunny"}'}
        ],
        tools=tools,
    )
    assert second.output_text == "It is sunny in Paris."
    messages = claude.bodies[-1]["messages"]
    uses = [
        (i, block)
        for i, m in enumerate(messages)
        if m["role"] == "assistant"
        for block in m["content"]
        if isinstance(block, dict) and block.get("type") == "tool_use"
    ]
    results = [
        (i, block)
        for i, m in enumerate(messages)
        if m["role"] == "user"
        for block in m["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]
    assert len(uses) == 1 and len(results) == 1
    (use_at, use), (result_at, result) = uses[0], results[0]
    assert (
        use["id"] == call.call_id
        and use["name"] == "get_weather"
        and use["input"] == {"city": "Paris"}
    )
    assert result["tool_use_id"] == call.call_id and result_at == use_at + 1
    assert messages[0]["role"] == "user"  # the first turn's question came along


# --- session affinity -----------------------------------------------------------------------------


async def test_a_session_sticks_to_the_deployment_that_served_its_last_turn(
    ahttp: httpx.AsyncClient, fakes: Any
) -> None:
    a, b, _ = fakes
    a.enqueue(http_error(500, "a hiccups"))
    b.enqueue(text("first from b"), text("second from b"))
    headers = {"X-Session-Id": f"affinity-{time.monotonic_ns()}"}
    first = await ahttp.post("/v1/responses", json={"model": "fb", "input": "one"}, headers=headers)
    assert first.status_code == 200, first.text
    # A is healthy again, but the session's previous turn was served by B:
    # B answers (prompt-cache locality).
    second = await ahttp.post(
        "/v1/responses", json={"model": "fb", "input": "two"}, headers=headers
    )
    assert second.status_code == 200, second.text
    assert second.json()["output"][0]["content"][0]["text"] == "second from b"
    assert len(a.bodies) == 1 and len(b.bodies) == 2
