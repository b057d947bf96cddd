"""Routing under injected upstream faults, as a client sees it (regressions of an audit), in
process: real providers over the loopback fakes in ``tests/fakes`` behind a ``Router``:

- a failure that may be retried at once (``Retry-After: 0``, an HTTP date in
  the past) still moves on to the next deployment first (docs/routing.md:
  "next deployment at once; this one again after its Retry-After");
- an upstream 501, and a 4xx that no row of the provider tables names
  (405, 409, 410…), go to the client: not retried, not fallen back
  (docs/routing.md: "4xx other than 429 (the request is wrong), 501");
- an upstream that echoes the deployment's API key in an error message does
  not get it to the client ("Messages name the deployment, never the API key").
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest

from orgate.engine.router import Route, RoutePolicy, Router, Target, retryable
from orgate.neutral import Deployment, ModelEvent, ModelRequest, Provider, TextDelta
from orgate.protocol import UserMessageItemParam
from orgate.protocol.errors import ApiError
from orgate.providers.anthropic import AnthropicProvider
from orgate.providers.http import HttpPool
from orgate.providers.openai_chat import OpenAIChatProvider
from orgate.providers.openai_responses import OpenAIResponsesProvider
from tests.fakes import anthropic_upstream as anthropic_fake
from tests.fakes import responses_upstream as responses_fake
from tests.fakes.anthropic_upstream import FakeAnthropic
from tests.fakes.openai_chat_upstream import FakeOpenAIChat, http_error, rate_limited, text
from tests.fakes.responses_upstream import FakeResponses
from tests.routing.doubles import (
    ManualClock,
    answer,
    drain,
    fail,
    make_router,
    rate_limit,
    request,
    texts,
    upstream,
)

KEY = "sk-upstream-SECRET-0123456789"


@pytest.fixture
async def pool() -> AsyncIterator[HttpPool]:
    p = HttpPool()
    yield p
    await p.aclose()


@pytest.fixture
async def chats() -> AsyncIterator[tuple[FakeOpenAIChat, FakeOpenAIChat]]:
    async with FakeOpenAIChat() as a, FakeOpenAIChat() as b:
        yield a, b


def chat_deployment(name: str, base_url: str) -> Deployment:
    return Deployment(
        name=name,
        provider="openai-chat",
        upstream_model=f"model-{name}",
        base_url=base_url,
        api_key=KEY,
        read_timeout=5.0,
    )


def routed(
    pool: HttpPool, *fakes: FakeOpenAIChat, policy: RoutePolicy
) -> tuple[Router, Deployment]:
    """Route "m" over real ``openai-chat`` providers, one per fake (named a, b, ...)."""
    deployments = [
        chat_deployment(chr(ord("a") + i), fake.base_url) for i, fake in enumerate(fakes)
    ]
    providers: dict[str, Provider] = {d.name: OpenAIChatProvider(d, pool) for d in deployments}
    route = Route("m", tuple(Target(d) for d in deployments), policy)
    router = Router({"m": route}, lambda d: providers[d.name])
    front = Deployment(
        name="m", provider="openai-chat", upstream_model="front", base_url="http://front"
    )
    return router, front


def user(text_in: str = "hi") -> ModelRequest:
    return ModelRequest(model="front", input=[UserMessageItemParam(content=text_in)])


def text_of(events: list[ModelEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


# --- a failure moves on to the next deployment first, even when it could be retried at once -------


@pytest.mark.parametrize("retry_after", ["0", "past-date"])
async def test_a_429_that_may_be_retried_at_once_still_falls_back_first(retry_after: str) -> None:
    if retry_after == "past-date":
        retry_after = format_datetime(datetime.now(UTC) - timedelta(seconds=60), usegmt=True)
    clock = ManualClock()
    a = upstream("a", fail(rate_limit(retry_after)), answer("a again"))
    b = upstream("b", answer("b answers"))
    router, front = make_router(a, b, policy=RoutePolicy(retries=2), clock=clock)
    assert texts(await drain(router(front).stream(request()))) == "b answers"
    assert len(a.calls) == 1 and len(b.calls) == 1


async def test_retry_after_zero_from_a_real_upstream_falls_back(
    pool: HttpPool, chats: tuple[FakeOpenAIChat, FakeOpenAIChat]
) -> None:
    a, b = chats
    a.enqueue(rate_limited("0"), text("from a"))
    b.enqueue(text("from b"))
    router, front = routed(
        pool, a, b, policy=RoutePolicy(retries=2, backoff_base=0.01, backoff_max=1)
    )
    assert text_of(await drain(router(front).stream(user()))) == "from b"
    assert [body["model"] for body in a.bodies] == ["model-a"]


async def test_retries_still_come_after_every_deployment_failed(
    pool: HttpPool, chats: tuple[FakeOpenAIChat, FakeOpenAIChat]
) -> None:
    a, b = chats
    a.enqueue(rate_limited("0"), text("a again"))
    b.enqueue(http_error(500), http_error(500))
    router, front = routed(
        pool, a, b, policy=RoutePolicy(retries=1, backoff_base=0.5, backoff_max=1)
    )
    assert text_of(await drain(router(front).stream(user()))) == "a again"
    assert len(a.bodies) == 2 and len(b.bodies) == 1


# --- 501 and other 4xx go to the client -----------------------------------------------------------


@pytest.mark.parametrize("status", [501, 405, 409, 410, 415])
async def test_an_upstream_501_or_other_4xx_is_neither_retried_nor_fallen_back(
    status: int, pool: HttpPool, chats: tuple[FakeOpenAIChat, FakeOpenAIChat]
) -> None:
    a, b = chats
    a.enqueue(http_error(status, "not like this"))
    router, front = routed(
        pool, a, b, policy=RoutePolicy(retries=2, backoff_base=0.01, backoff_max=1)
    )
    with pytest.raises(ApiError) as info:
        await drain(router(front).stream(user()))
    error = info.value
    assert not retryable(error)
    assert len(a.bodies) == 1 and b.bodies == []
    if status == 501:
        assert (error.status, error.type) == (501, "server_error")
    else:
        assert (error.status, error.type, error.code) == (
            400,
            "invalid_request_error",
            "upstream_bad_request",
        )
    assert "not like this" in error.message and "'a'" in error.message


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504])
async def test_the_retryable_statuses_still_fall_back(
    status: int, pool: HttpPool, chats: tuple[FakeOpenAIChat, FakeOpenAIChat]
) -> None:
    a, b = chats
    a.enqueue(http_error(status))
    b.enqueue(text("from b"))
    router, front = routed(pool, a, b, policy=RoutePolicy(retries=0))
    assert text_of(await drain(router(front).stream(user()))) == "from b"


async def test_an_anthropic_501_goes_to_the_client(pool: HttpPool) -> None:
    async with FakeAnthropic(
        anthropic_fake.Script(status=501, error={"type": "api_error", "message": "nope"})
    ) as fake:
        deployment = Deployment(
            name="c",
            provider="anthropic",
            upstream_model="claude",
            base_url=fake.base_url,
            api_key=KEY,
        )
        with pytest.raises(ApiError) as info:
            await drain(AnthropicProvider(deployment, pool).stream(user()))
    assert info.value.status == 501 and not retryable(info.value)


# --- the API key never reaches the client ---------------------------------------------------------


@pytest.mark.parametrize("status", [400, 500, 503, 429, 422, 501])
async def test_an_echoed_api_key_is_redacted_from_openai_chat_errors(
    status: int, pool: HttpPool, chats: tuple[FakeOpenAIChat, FakeOpenAIChat]
) -> None:
    a, _ = chats
    a.enqueue(http_error(status, f"Invalid header Authorization: Bearer {KEY}"))
    with pytest.raises(ApiError) as info:
        await drain(OpenAIChatProvider(chat_deployment("a", a.base_url), pool).stream(user()))
    assert KEY not in info.value.message and KEY not in str(info.value)
    assert "[redacted]" in info.value.message


async def test_an_echoed_api_key_is_redacted_from_sse_provider_errors(pool: HttpPool) -> None:
    async with (
        FakeAnthropic(
            anthropic_fake.Script(
                status=400, error={"type": "invalid_request_error", "message": f"bad key {KEY}"}
            )
        ) as claude,
        FakeResponses(responses_fake.http_error(500, f"key {KEY} is odd")) as responses,
    ):
        providers: list[Any] = [
            AnthropicProvider(
                Deployment(
                    name="c",
                    provider="anthropic",
                    upstream_model="claude",
                    base_url=claude.base_url,
                    api_key=KEY,
                ),
                pool,
            ),
            OpenAIResponsesProvider(
                Deployment(
                    name="r",
                    provider="openai-responses",
                    upstream_model="gpt",
                    base_url=responses.base_url,
                    api_key=KEY,
                ),
                pool,
            ),
        ]
        for provider in providers:
            with pytest.raises(ApiError) as info:
                await drain(provider.stream(user()))
            assert KEY not in info.value.message and "[redacted]" in info.value.message
