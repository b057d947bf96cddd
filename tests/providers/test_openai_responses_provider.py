"""The openai-responses provider over loopback HTTP against the fake Responses upstream."""

from __future__ import annotations

import urllib.request
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from tests.fakes.responses_upstream import (
    FakeResponses,
    Raw,
    Script,
    cut,
    function_calls,
    http_error,
    rate_limited,
    reasoning,
    stall,
    text,
    web_search_call,
)
from tests.support.ports import closed_port

from orgate.neutral import (
    Capabilities,
    Deployment,
    ExtensionItem,
    Finish,
    ModelEvent,
    ModelRequest,
    OpaqueItem,
    ReasoningDelta,
    ReasoningEncrypted,
    RefusalDelta,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)
from orgate.protocol import FunctionToolParam, ReasoningItemParam, UserMessageItemParam
from orgate.protocol.errors import ApiError
from orgate.providers.http import HttpPool
from orgate.providers.openai_responses import OpenAIResponsesProvider, responses_url

SECRET = "sk-test-SECRET-key"


@pytest.fixture
async def pool() -> AsyncIterator[HttpPool]:
    pool = HttpPool()
    yield pool
    await pool.aclose()


def provider(fake: FakeResponses, pool: HttpPool, **kw: Any) -> OpenAIResponsesProvider:
    deployment = Deployment(
        name="gpt",
        provider="openai-responses",
        upstream_model="gpt-5-mini",
        base_url=fake.base_url,
        api_key=SECRET,
        **kw,
    )
    return OpenAIResponsesProvider(deployment, pool)


def req(*items: Any, **kw: Any) -> ModelRequest:
    return ModelRequest(
        model="gpt-5-mini", input=list(items) or [UserMessageItemParam(content="hello")], **kw
    )


async def collect(p: OpenAIResponsesProvider, request: ModelRequest) -> list[ModelEvent]:
    return [e async for e in p.stream(request)]


def joined(events: list[ModelEvent], kind: type[Any]) -> str:
    return "".join(e.text for e in events if isinstance(e, kind))


def test_responses_url() -> None:
    assert responses_url("https://api.openai.com/v1") == "https://api.openai.com/v1/responses"
    assert responses_url("http://x.test/v1/responses/") == "http://x.test/v1/responses"


async def test_text_headers_and_body(pool: HttpPool) -> None:
    async with FakeResponses(text("Hello there, friend")) as fake:
        p = provider(fake, pool, headers={"OpenAI-Organization": "org-1"})
        events = await collect(p, req(instructions="Be kind."))
        assert joined(events, TextDelta) == "Hello there, friend"
        assert isinstance(events[-1], Finish) and events[-1].reason == "stop"
        record = fake.requests[0]
        assert record.path == "/v1/responses"
        assert record.headers["Authorization"] == f"Bearer {SECRET}"
        assert record.headers["OpenAI-Organization"] == "org-1"
        assert record.body["store"] is False and record.body["stream"] is True
        assert record.body["instructions"] == "Be kind."
        assert record.body["input"] == [{"type": "message", "role": "user", "content": "hello"}]
        assert record.completed


async def test_function_calls_including_interleaved(pool: HttpPool) -> None:
    calls = (("get_weather", '{"city": "Paris", "days": [1, 2]}'), ("get_time", "{}"))
    async with FakeResponses(
        function_calls(*calls, fragments=4), function_calls(*calls, interleave=True)
    ) as fake:
        p = provider(fake, pool)
        for _ in range(2):
            events = await collect(
                p,
                req(
                    tools=[
                        FunctionToolParam(name="get_weather"),
                        FunctionToolParam(name="get_time"),
                    ]
                ),
            )
            kinds = [(type(e).__name__, getattr(e, "index", None)) for e in events]
            # call 0 complete before call 1 starts
            assert kinds.index(("ToolCallStart", 1)) > max(
                i for i, k in enumerate(kinds) if k == ("ToolCallDelta", 0)
            )
            starts = [e for e in events if isinstance(e, ToolCallStart)]
            assert [(s.index, s.name) for s in starts] == [(0, "get_weather"), (1, "get_time")]
            assert all(s.call_id.startswith("call_") for s in starts)
            for i, (_name, args) in enumerate(calls):
                got = "".join(
                    e.arguments for e in events if isinstance(e, ToolCallDelta) and e.index == i
                )
                assert got == args
            assert isinstance(events[-1], Finish) and events[-1].reason == "tool_calls"


async def test_reasoning_summary_encrypted_and_usage(pool: HttpPool) -> None:
    script = reasoning(
        "Think about Paris.",
        "Paris.",
        encrypted="gAAAAABreal",
        cached_tokens=128,
        reasoning_tokens=40,
        input_tokens=200,
        output_tokens=60,
    )
    async with FakeResponses(script, text("again")) as fake:
        p = provider(fake, pool, capabilities=Capabilities(reasoning=True))
        events = await collect(p, req(reasoning_effort="medium", reasoning_summary="auto"))
        assert joined(events, ReasoningDelta) == "Think about Paris."
        assert [e for e in events if isinstance(e, ReasoningEncrypted)] == [
            ReasoningEncrypted("gAAAAABreal")
        ]
        assert events[-1] == Finish(
            "stop",
            Usage(input_tokens=200, output_tokens=60, cached_tokens=128, reasoning_tokens=40),
        )
        body = fake.bodies[0]
        assert body["reasoning"] == {"effort": "medium", "summary": "auto"}
        assert body["include"] == ["reasoning.encrypted_content"]
        # replay: the reasoning item goes back as wire JSON, without orgate's id
        replay = ReasoningItemParam(
            id="rs_orgate",
            summary=[{"type": "summary_text", "text": "Think about Paris."}],
            encrypted_content="gAAAAABreal",
        )
        await collect(p, req(UserMessageItemParam(content="q"), replay))
        assert fake.bodies[1]["input"][1] == {
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "Think about Paris."}],
            "encrypted_content": "gAAAAABreal",
        }


async def test_refusal(pool: HttpPool) -> None:
    async with FakeResponses(Script(text=None, refusal="I can't help with that.")) as fake:
        events = await collect(provider(fake, pool), req())
        assert joined(events, RefusalDelta) == "I can't help with that."


@pytest.mark.parametrize("streaming", [True, False])
async def test_hosted_tool_items_come_whole_with_the_origin_and_go_back_only_there(
    pool: HttpPool, streaming: bool
) -> None:
    search = web_search_call("zurich")
    namespaced = {"id": "x_1", "type": "openai:web_search_preview_call", "status": "completed"}
    first: Any = text("Found it.", extra_items=[search, namespaced])
    if not streaming:  # an upstream that answers with one JSON response despite stream: true
        shaper = FakeResponses()
        body = shaper.response({}, first, shaper.output_items(first))
        first = Raw([orjson.dumps(body)], content_type="application/json")
    async with FakeResponses(first, text("ok")) as fake:
        p = provider(fake, pool)
        events = await collect(p, req())
        assert p.origin == f"openai-responses http://127.0.0.1:{fake.port}/v1"
        extensions = [e for e in events if isinstance(e, ExtensionItem)]
        assert extensions == [ExtensionItem(search, p.origin), ExtensionItem(namespaced, p.origin)]
        assert events.index(extensions[-1]) < next(
            i for i, e in enumerate(events) if isinstance(e, TextDelta)
        )
        assert joined(events, TextDelta) == "Found it."
        assert isinstance(events[-1], Finish) and events[-1].reason == "stop"

        mine = OpaqueItem(id="ext_1", origin=p.origin, item=search)
        theirs = OpaqueItem(
            id="ext_2", origin="openai-responses http://elsewhere/v1", item=namespaced
        )
        await collect(
            p,
            req(
                UserMessageItemParam(content="hi"),
                mine,
                theirs,
                UserMessageItemParam(content="more"),
            ),
        )
        assert fake.bodies[-1]["input"] == [
            {"type": "message", "role": "user", "content": "hi"},
            search,
            {"type": "message", "role": "user", "content": "more"},
        ]


async def test_incomplete_is_length(pool: HttpPool) -> None:
    async with FakeResponses(text("cut short", outcome="incomplete")) as fake:
        events = await collect(provider(fake, pool), req(max_output_tokens=16))
        assert isinstance(events[-1], Finish) and events[-1].reason == "length"
        assert fake.bodies[0]["max_output_tokens"] == 16


async def test_failed_is_a_model_error(pool: HttpPool) -> None:
    script = text("x", outcome="failed", failure={"code": "server_error", "message": "It broke."})
    async with FakeResponses(script) as fake:
        with pytest.raises(ApiError) as err:
            await collect(provider(fake, pool), req())
        assert (err.value.status, err.value.type) == (502, "model_error")
        assert "It broke." in err.value.message


async def test_done_marker_and_json_reply(pool: HttpPool) -> None:
    body = {
        "object": "response",
        "status": "completed",
        "output": [
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "j"}],
            }
        ],
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    raw = Raw([orjson.dumps(body)], content_type="application/json")
    async with FakeResponses(text("with done", done=True), raw) as fake:
        p = provider(fake, pool)
        assert joined(await collect(p, req()), TextDelta) == "with done"
        assert await collect(p, req()) == [TextDelta("j"), Finish("stop", Usage(1, 1))]


async def test_rate_limit_passes_retry_after(pool: HttpPool) -> None:
    async with FakeResponses(rate_limited("21")) as fake:
        with pytest.raises(ApiError) as err:
            await collect(provider(fake, pool), req())
        assert err.value.status == 429 and err.value.headers == {"Retry-After": "21"}


@pytest.mark.parametrize(
    ("status", "expected", "code"),
    [
        (400, 400, "upstream_bad_request"),
        (401, 502, "upstream_auth_failed"),
        (404, 502, "upstream_model_not_found"),
        (500, 502, "upstream_error"),
        (503, 502, "upstream_error"),
    ],
)
async def test_http_errors(pool: HttpPool, status: int, expected: int, code: str) -> None:
    async with FakeResponses(http_error(status, f"nope {SECRET}")) as fake:
        with pytest.raises(ApiError) as err:
            await collect(provider(fake, pool), req())
        assert (err.value.status, err.value.code) == (expected, code)
        if status == 401:
            assert SECRET not in err.value.message


async def test_mid_stream_error_event(pool: HttpPool) -> None:
    async with FakeResponses(text("one two three", error_after=6)) as fake:
        seen: list[ModelEvent] = []
        with pytest.raises(ApiError) as err:
            async for event in provider(fake, pool).stream(req()):
                seen.append(event)
        assert err.value.status == 429
        assert not any(isinstance(e, Finish) for e in seen)


async def test_cut_stream_is_truncated(pool: HttpPool) -> None:
    async with FakeResponses(cut(after=6)) as fake:
        with pytest.raises(ApiError) as err:
            await collect(provider(fake, pool), req())
        assert (err.value.status, err.value.code) == (502, "upstream_stream_truncated")


async def test_stall_hits_the_read_timeout(pool: HttpPool) -> None:
    async with FakeResponses(stall(5.0, after=5)) as fake:
        with pytest.raises(ApiError) as err:
            await collect(provider(fake, pool, read_timeout=0.3), req())
        assert (err.value.status, err.value.code) == (504, "upstream_timeout")
        assert await fake.wait_disconnected()


async def test_refused_connection(pool: HttpPool) -> None:
    with closed_port() as port:
        deployment = Deployment(
            name="gpt",
            provider="openai-responses",
            upstream_model="m",
            base_url=f"http://127.0.0.1:{port}/v1",
        )
        with pytest.raises(ApiError) as err:
            await collect(OpenAIResponsesProvider(deployment, pool), req())
        assert (err.value.status, err.value.code) == (502, "upstream_unavailable")


async def test_consumer_going_away_closes_the_upstream_request(pool: HttpPool) -> None:
    async with FakeResponses(Script(text=" ".join(["word"] * 200), delay=0.02)) as fake:
        stream = provider(fake, pool).stream(req())
        async for event in stream:
            if isinstance(event, TextDelta):
                break
        await stream.aclose()  # type: ignore[attr-defined]
        assert await fake.wait_disconnected()


def test_fake_runs_in_a_thread_for_sync_tests() -> None:
    with FakeResponses.start_in_thread(text("threaded")) as fake:
        request = urllib.request.Request(
            fake.base_url + "/responses",
            data=orjson.dumps({"model": "m", "input": "hi"}),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=5) as resp:
            body = orjson.loads(resp.read())
        assert body["output"][0]["content"][0]["text"] == "threaded"
        assert fake.bodies == [{"model": "m", "input": "hi"}]
