"""Every provider against upstream replies at the edge of the wire: redirects and 200s that are
not an answer (loopback fakes; a real ``orgate serve`` replays them in tests/hostile)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import orjson
import pytest
from tests.fakes._base import LoopbackFake, Raw
from tests.fakes.anthropic_upstream import FakeAnthropic
from tests.fakes.openai_chat_upstream import FakeOpenAIChat
from tests.fakes.redirects import with_redirects
from tests.fakes.responses_upstream import FakeResponses

from orgate.neutral import Deployment, ModelEvent, ModelRequest, TextDelta
from orgate.protocol import UserMessageItemParam
from orgate.protocol.errors import ApiError
from orgate.providers.anthropic import AnthropicProvider
from orgate.providers.http import MAX_REDIRECTS, HttpPool
from orgate.providers.openai_chat.provider import OpenAIChatProvider
from orgate.providers.openai_responses.provider import OpenAIResponsesProvider

SECRET = "sk-upstream-SECRET-0123456789"
HEADER_SECRET = "hdr-SECRET-9876543210"


@dataclass(frozen=True)
class Kind:
    provider: str
    fake: type[LoopbackFake]
    cls: Any
    suffix: str  # what follows the fake's origin in its base URL

    def __str__(self) -> str:
        return self.provider


KINDS = [
    Kind("openai-chat", FakeOpenAIChat, OpenAIChatProvider, "/v1"),
    Kind("openai-responses", FakeResponses, OpenAIResponsesProvider, "/v1"),
    Kind("anthropic", FakeAnthropic, AnthropicProvider, ""),
]


@pytest.fixture
async def pool() -> AsyncIterator[HttpPool]:
    pool = HttpPool()
    yield pool
    await pool.aclose()


def make(kind: Kind, base_url: str, pool: HttpPool, **kw: Any) -> Any:
    deployment = Deployment(
        name="m",
        provider=kind.provider,
        upstream_model="x",
        base_url=base_url,
        api_key=SECRET,
        headers={"X-Tenant-Token": HEADER_SECRET},
        **kw,
    )
    return kind.cls(deployment, pool)


async def run(provider: Any) -> list[ModelEvent]:
    request = ModelRequest(model="x", input=[UserMessageItemParam(content="hello")])
    return [event async for event in provider.stream(request)]


def text_of(events: list[ModelEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


# --- redirects --------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS, ids=str)
@pytest.mark.parametrize("redirects", ["none", "same-origin"])
async def test_a_redirect_to_another_origin_is_never_followed(
    kind: Kind, redirects: str, pool: HttpPool
) -> None:
    async with kind.fake() as elsewhere, with_redirects(kind.fake)() as upstream:
        upstream.redirect_to = f"http://127.0.0.1:{elsewhere.port}{kind.suffix}/elsewhere"
        provider = make(kind, upstream.old_url + kind.suffix, pool, redirects=redirects)
        with pytest.raises(ApiError) as caught:
            await run(provider)
    error = caught.value
    assert (error.status, error.code) == (502, "upstream_redirect")
    assert f"127.0.0.1:{elsewhere.port}" in error.message and "another origin" in error.message
    assert "/elsewhere" not in error.message  # the origin only: a path may hold a token
    assert elsewhere.requests == []  # the prompt, the key and the headers stayed home
    assert len(upstream.requests) == 1


@pytest.mark.parametrize("kind", KINDS, ids=str)
async def test_no_redirect_is_followed_by_default(kind: Kind, pool: HttpPool) -> None:
    async with with_redirects(kind.fake)() as upstream:
        provider = make(kind, upstream.old_url + kind.suffix, pool)
        with pytest.raises(ApiError) as caught:
            await run(provider)
    assert (caught.value.status, caught.value.code) == (502, "upstream_redirect")
    assert "not followed" in caught.value.message and "HTTP 307" in caught.value.message
    assert len(upstream.requests) == 1


@pytest.mark.parametrize("kind", KINDS, ids=str)
@pytest.mark.parametrize("status", [307, 308])
async def test_same_origin_follows_a_method_keeping_redirect(
    kind: Kind, status: int, pool: HttpPool
) -> None:
    async with with_redirects(kind.fake)() as upstream:
        upstream.redirect_status = status
        provider = make(kind, upstream.old_url + kind.suffix, pool, redirects="same-origin")
        events = await run(provider)
    assert text_of(events) == "You said: hello"
    first, second = upstream.requests
    assert first.path.startswith("/old/") and not second.path.startswith("/old/")
    assert second.body == first.body  # the same POST, body and all


@pytest.mark.parametrize("kind", KINDS, ids=str)
@pytest.mark.parametrize("status", [301, 302, 303])
async def test_same_origin_refuses_a_redirect_that_would_turn_the_post_into_a_get(
    kind: Kind, status: int, pool: HttpPool
) -> None:
    async with with_redirects(kind.fake)() as upstream:
        upstream.redirect_status = status
        provider = make(kind, upstream.old_url + kind.suffix, pool, redirects="same-origin")
        with pytest.raises(ApiError) as caught:
            await run(provider)
    assert (caught.value.status, caught.value.code) == (502, "upstream_redirect")
    assert "307 and 308" in caught.value.message
    assert len(upstream.requests) == 1


async def test_a_redirect_loop_ends(pool: HttpPool) -> None:
    kind = KINDS[0]
    async with with_redirects(kind.fake)() as upstream:
        upstream.redirect_to = f"{upstream.old_url}/v1/chat/completions"  # to itself
        provider = make(kind, upstream.old_url + kind.suffix, pool, redirects="same-origin")
        with pytest.raises(ApiError) as caught:
            await run(provider)
    assert (caught.value.status, caught.value.code) == (502, "upstream_redirect")
    assert len(upstream.requests) == MAX_REDIRECTS + 1


# --- a 200 that is not an answer ---------------------------------------------------------------

JUNK = {
    "json object": Raw([b'{"hello": "world"}'], content_type="application/json"),
    "empty json object": Raw([b"{}"], content_type="application/json"),
    "another provider's json": Raw(
        [b'{"id": "x", "choices": []}'], content_type="application/json"
    ),
    "sse of junk events": Raw([b'data: {"foo": 1}\n\n', b'data: {"bar": 2}\n\n']),
    "sse of junk then [DONE]": Raw([b'data: {"foo": 1}\n\ndata: [DONE]\n\n']),
    "plain text": Raw([b"all good"], content_type="text/plain"),
    "empty body": Raw([b""]),
}
BARE_TERMINAL = {
    "openai-responses": Raw([b'data: {"type": "response.completed"}\n\n']),
    "anthropic": Raw([b'event: message_stop\ndata: {"type": "message_stop"}\n\n']),
}


@pytest.mark.parametrize("kind", KINDS, ids=str)
@pytest.mark.parametrize("name", list(JUNK))
async def test_a_200_that_is_not_the_wire_format_is_a_502(
    kind: Kind, name: str, pool: HttpPool
) -> None:
    async with kind.fake(JUNK[name]) as upstream:
        provider = make(kind, upstream.base_url, pool)
        with pytest.raises(ApiError) as caught:
            await run(provider)
    assert (caught.value.status, caught.value.code) == (502, "upstream_invalid_response")


@pytest.mark.parametrize("provider", list(BARE_TERMINAL))
async def test_a_bare_terminal_event_is_not_an_empty_answer(provider: str, pool: HttpPool) -> None:
    kind = next(k for k in KINDS if k.provider == provider)
    async with kind.fake(BARE_TERMINAL[provider]) as upstream:
        with pytest.raises(ApiError) as caught:
            await run(make(kind, upstream.base_url, pool))
    assert (caught.value.status, caught.value.code) == (502, "upstream_invalid_response")


# --- an upstream that echoes what it was sent ----------------------------------------------------


def echoed_error(kind: Kind) -> Raw:
    message = f"invalid token {HEADER_SECRET} with key {SECRET}"
    if kind.provider == "anthropic":
        body = {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    else:
        body = {
            "error": {
                "message": message,
                "type": "invalid_request_error",
                "param": None,
                "code": None,
            }
        }
    return Raw([orjson.dumps(body)], status=400, content_type="application/json")


@pytest.mark.parametrize("kind", KINDS, ids=str)
async def test_an_echoed_key_or_header_value_is_cut_from_the_message(
    kind: Kind, pool: HttpPool
) -> None:
    async with kind.fake(echoed_error(kind)) as upstream:
        with pytest.raises(ApiError) as caught:
            await run(make(kind, upstream.base_url, pool))
    message = caught.value.message
    assert caught.value.status == 400 and "invalid token" in message
    assert SECRET not in message and HEADER_SECRET not in message
    assert message.count("[redacted]") == 2
