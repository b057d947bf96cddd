"""Black-box fidelity of the upstream providers: the real gateway in front of fakes that send, byte
for byte, what the real upstreams send.

- ``anthropic``: the Messages API stream (``ping``, ``thinking`` + ``signature_delta``,
  ``redacted_thinking``, ``input_json_delta`` split mid-token, empty tool input, every
  ``stop_reason``, a mid-stream ``error`` event, 529 / 429, cache usage) and the request mapping;
- ``openai-responses``: upstream ids and sequence numbers never leak, unknown events, failures,
  reasoning with ``encrypted_content``, a JSON reply;
- ``openai-chat``: what vLLM, Ollama, llama.cpp, LM Studio, Groq, OpenRouter and Gemini's
  compatible endpoint really send (``data:`` without space, CRLF, comments, usage-only chunks,
  repeated ids, object arguments, ``reasoning_content`` / ``reasoning``, no ``[DONE]``...).

Every streamed event and every body is validated against the OpenAPI document (and each stream
against the event grammar), then checked for meaning: text, usage, statuses, arguments.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
from tests.fakes._base import LoopbackFake, Raw
from tests.fakes.anthropic_upstream import rate_limited
from tests.fakes.openai_chat_upstream import Script
from tests.hardening.conftest import server_env
from tests.server_process import OrgateServer
from tests.support.spec import check_sse, validate
from tests.support.upstreams import provider_models, thinking_models

# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def server(fakes: dict[str, LoopbackFake]) -> Iterator[OrgateServer]:
    config = provider_models(fakes, api_key="k", read_timeout=10) + thinking_models(
        fakes, api_key="k", read_timeout=10
    )
    with OrgateServer(config, env=server_env()) as running:
        yield running


@pytest.fixture
def http(server: OrgateServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, headers=server.headers(), timeout=30) as client:
        yield client


# --------------------------------------------------------------------------- helpers


def jd(obj: Any) -> bytes:
    return orjson.dumps(obj)


def named(event: dict[str, Any]) -> bytes:
    """One SSE frame as Anthropic and OpenAI send it: ``event:`` line, compact JSON, blank line."""
    return b"event: " + str(event["type"]).encode() + b"\ndata: " + jd(event) + b"\n\n"


def chunked(data: bytes, size: int = 37) -> list[bytes]:
    """The bytes cut into network writes of ``size`` bytes (inside lines, tokens, characters)."""
    return [data[i : i + size] for i in range(0, len(data), size)]


def sse_raw(frames: list[bytes], size: int | None = None, delay: float = 0.0) -> Raw:
    data = b"".join(frames)
    return Raw(chunked(data, size) if size else [data], delay=delay)


def json_raw(body: dict[str, Any]) -> Raw:
    return Raw([jd(body)], content_type="application/json")


def stream(http: httpx.Client, body: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """POST a streaming request: the events (spec-validated, grammar-checked) and the final
    response."""
    res = http.post("/v1/responses", json={**body, "stream": True})
    assert res.status_code == 200, res.text[:800]
    assert res.headers["content-type"].startswith("text/event-stream")
    events = check_sse(res.text)
    final = events[-1]["response"]
    validate("ResponseResource", final)
    return events, final


def plain(http: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
    """POST a non-streaming request: the spec-validated body."""
    res = http.post("/v1/responses", json={**body, "stream": False})
    assert res.status_code == 200, res.text[:800]
    assert res.headers["content-type"].startswith("application/json")
    out = res.json()
    validate("ResponseResource", out)
    return out


def error_of(res: httpx.Response, status: int, code: str | None = None) -> dict[str, Any]:
    assert res.status_code == status, res.text[:800]
    body = res.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    validate("ErrorPayload", body["error"])
    if code is not None:
        assert body["error"]["code"] == code, body
    return body["error"]


def shape(response: dict[str, Any]) -> list[tuple[Any, ...]]:
    """What a response says, without ids: per item its type, status and meaning."""
    out: list[tuple[Any, ...]] = []
    for item in response["output"]:
        kind = item["type"]
        if kind == "message":
            parts = tuple(
                (p["type"], p.get("text") if p["type"] == "output_text" else p.get("refusal"))
                for p in item["content"]
            )
            out.append((kind, item.get("status"), parts))
        elif kind == "function_call":
            out.append((kind, item.get("status"), item["name"], orjson.loads(item["arguments"])))
        elif kind == "reasoning":
            content = "".join(p["text"] for p in item.get("content") or ())
            summary = "".join(p["text"] for p in item.get("summary") or ())
            out.append((kind, content, summary, bool(item.get("encrypted_content"))))
        else:
            out.append((kind,))
    return out


def both(
    http: httpx.Client, fake: LoopbackFake, reply: Raw, body: dict[str, Any]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The same upstream bytes for a streaming and a non-streaming client: they must agree."""
    fake.enqueue(reply)
    events, final = stream(http, body)
    fake.enqueue(Raw(list(reply.chunks), reply.status, reply.content_type, reply.delay))
    out = plain(http, body)
    assert shape(out) == shape(final)
    assert out["status"] == final["status"]
    assert out["usage"] == final["usage"]
    assert out["incomplete_details"] == final["incomplete_details"]
    return events, final


def replayable(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Output items as input (the spec takes no reasoning ``content`` on input)."""
    return [
        {k: v for k, v in i.items() if not (i["type"] == "reasoning" and k == "content")}
        for i in items
    ]


def texts(response: dict[str, Any]) -> str:
    return "".join(
        p.get("text", "")
        for item in response["output"]
        if item["type"] == "message"
        for p in item["content"]
        if p["type"] == "output_text"
    )


def calls(response: dict[str, Any]) -> list[tuple[str, str, Any]]:
    return [
        (i["call_id"], i["name"], orjson.loads(i["arguments"]))
        for i in response["output"]
        if i["type"] == "function_call"
    ]


# --------------------------------------------------------------------------- anthropic wire

MSG_ID = "msg_01XFDUDYJgAACzvnptvVoYEL"


def a_start(input_tokens: int = 25, cache_read: int = 0, cache_creation: int = 0) -> dict[str, Any]:
    return {
        "type": "message_start",
        "message": {
            "id": MSG_ID,
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {
                "input_tokens": input_tokens,
                "cache_creation_input_tokens": cache_creation,
                "cache_read_input_tokens": cache_read,
                "cache_creation": {
                    "ephemeral_5m_input_tokens": cache_creation,
                    "ephemeral_1h_input_tokens": 0,
                },
                "output_tokens": 1,
                "service_tier": "standard",
            },
        },
    }


PING = {"type": "ping"}


def a_block(
    index: int, block: dict[str, Any], deltas: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    return [
        {"type": "content_block_start", "index": index, "content_block": block},
        *({"type": "content_block_delta", "index": index, "delta": d} for d in deltas),
        {"type": "content_block_stop", "index": index},
    ]


def a_text(index: int, *pieces: str) -> list[dict[str, Any]]:
    return a_block(
        index, {"type": "text", "text": ""}, [{"type": "text_delta", "text": p} for p in pieces]
    )


def a_thinking(index: int, pieces: list[str], signature: str) -> list[dict[str, Any]]:
    return a_block(
        index,
        {"type": "thinking", "thinking": "", "signature": ""},
        [{"type": "thinking_delta", "thinking": p} for p in pieces]
        + [{"type": "signature_delta", "signature": signature}],
    )


def a_tool(index: int, tool_id: str, name: str, *fragments: str) -> list[dict[str, Any]]:
    return a_block(
        index,
        {"type": "tool_use", "id": tool_id, "name": name, "input": {}},
        [{"type": "input_json_delta", "partial_json": f} for f in ("", *fragments)],
    )


def a_end(stop_reason: str, output_tokens: int = 12, **usage: int) -> list[dict[str, Any]]:
    return [
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": output_tokens, **usage},
        },
        {"type": "message_stop"},
    ]


def a_stream(*events: dict[str, Any], size: int | None = 41) -> Raw:
    return sse_raw([named(e) for e in events], size)


# --------------------------------------------------------------------------- anthropic


def test_anthropic_thinking_text_ping_and_cache_usage(
    http: httpx.Client, fx: dict[str, LoopbackFake]
) -> None:
    sig = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds" * 3
    reply = a_stream(
        a_start(input_tokens=7, cache_read=100, cache_creation=20),
        PING,
        *a_thinking(0, ["Let me think", " about 2+2. ", "It is 4."], sig),
        PING,
        *a_text(1, "The answer", " is **4**", " — d\u00e9j\u00e0 vu \U0001f600."),
        *a_end("end_turn", 42),
    )
    events, final = both(
        http,
        fx["anth"],
        reply,
        {"model": "anth-think", "input": "2+2?", "reasoning": {"effort": "low"}},
    )
    assert final["status"] == "completed"
    assert texts(final) == "The answer is **4** — d\u00e9j\u00e0 vu \U0001f600."
    reasoning = [i for i in final["output"] if i["type"] == "reasoning"]
    assert len(reasoning) == 1
    assert "".join(p["text"] for p in reasoning[0]["content"]) == "Let me think about 2+2. It is 4."
    assert reasoning[0]["encrypted_content"].startswith("orgate.anthropic.v1:")
    assert final["usage"]["input_tokens"] == 127
    assert final["usage"]["input_tokens_details"]["cached_tokens"] == 100
    assert final["usage"]["output_tokens"] == 42
    assert final["usage"]["total_tokens"] == 169
    # the thinking round trip: the signed block goes back unchanged on the next turn
    body = fx["anth"].bodies[0]
    assert (
        body["thinking"]["type"] == "enabled"
        and body["max_tokens"] > body["thinking"]["budget_tokens"]
    )
    fx["anth"].enqueue(a_stream(a_start(), *a_text(0, "ok"), *a_end("end_turn")))
    res = http.post(
        "/v1/responses",
        json={
            "model": "anth-think",
            "input": [*replayable(final["output"]), {"role": "user", "content": "and 3+3?"}],
        },
    )
    assert res.status_code == 200, res.text
    sent = fx["anth"].bodies[-1]["messages"]
    assert sent[0]["role"] == "assistant"
    assert sent[0]["content"][0] == {
        "type": "thinking",
        "thinking": "Let me think about 2+2. It is 4.",
        "signature": sig,
    }
    assert sent[0]["content"][1] == {"type": "text", "text": texts(final)}
    assert sent[1] == {"role": "user", "content": [{"type": "text", "text": "and 3+3?"}]}


def test_anthropic_redacted_thinking_then_tools_split_mid_token(
    http: httpx.Client, fx: dict[str, LoopbackFake]
) -> None:
    args = '{"city": "S\\u00e3o Paulo", "days": 3, "units": ["c", "f"], "q": "a \\"quoted\\" word"}'
    cut = [
        args[:1],
        args[1:9],
        args[9:16],
        args[16:18],
        args[18:30],
        args[30:],
    ]  # inside \u00e3 and a key
    reply = a_stream(
        a_start(),
        PING,
        *a_block(0, {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT"}, []),
        *a_thinking(1, ["I should call the weather tool."], "sig-2"),
        *a_text(2, "Let me check."),
        *a_tool(3, "toolu_01A09q90qw90lq917835lq9", "get_weather", *cut),
        *a_tool(4, "toolu_01B", "get_time"),  # empty input: only partial_json ""
        *a_end("tool_use", 88),
        size=13,
    )
    tools = [
        {"type": "function", "name": "get_weather", "parameters": {"type": "object"}},
        {
            "type": "function",
            "name": "get_time",
            "parameters": {"type": "object", "properties": {}},
        },
    ]
    events, final = both(
        http, fx["anth"], reply, {"model": "anth", "input": "weather?", "tools": tools}
    )
    assert final["status"] == "completed"
    kinds = [i["type"] for i in final["output"]]
    assert kinds == ["reasoning", "message", "function_call", "function_call"]
    assert final["output"][0]["encrypted_content"].startswith("orgate.anthropic.v1:")
    assert calls(final) == [
        ("toolu_01A09q90qw90lq917835lq9", "get_weather", orjson.loads(args)),
        ("toolu_01B", "get_time", {}),
    ]
    deltas = "".join(
        e["delta"] for e in events if e["type"] == "response.function_call_arguments.delta"
    )
    assert orjson.loads(deltas[: len(args)]) == orjson.loads(args)
    # the tool results go back as one user turn, tool_result blocks first, ids kept
    fx["anth"].enqueue(a_stream(a_start(), *a_text(0, "Sunny."), *a_end("end_turn")))
    history = [
        *replayable(final["output"]),
        {
            "type": "function_call_output",
            "call_id": "toolu_01A09q90qw90lq917835lq9",
            "output": "25C",
        },
        {
            "type": "function_call_output",
            "call_id": "toolu_01B",
            "output": [{"type": "input_text", "text": "12:00"}],
        },
        {"role": "user", "content": "thanks"},
    ]
    res = http.post("/v1/responses", json={"model": "anth", "input": history, "tools": tools})
    assert res.status_code == 200, res.text
    messages = fx["anth"].bodies[-1]["messages"]
    assert [m["role"] for m in messages] == ["assistant", "user"]
    assistant = messages[0]["content"]
    assert [b["type"] for b in assistant] == [
        "redacted_thinking",
        "thinking",
        "text",
        "tool_use",
        "tool_use",
    ]
    assert assistant[3]["input"] == orjson.loads(args) and assistant[4]["input"] == {}
    user = messages[1]["content"]
    assert user[0] == {
        "type": "tool_result",
        "tool_use_id": "toolu_01A09q90qw90lq917835lq9",
        "content": "25C",
    }
    assert user[1]["tool_use_id"] == "toolu_01B"
    assert user[1]["content"] == [{"type": "text", "text": "12:00"}]
    assert user[2] == {"type": "text", "text": "thanks"}


@pytest.mark.parametrize(
    ("stop_reason", "status", "reason"),
    [
        ("end_turn", "completed", None),
        ("stop_sequence", "completed", None),
        ("pause_turn", "completed", None),
        ("max_tokens", "incomplete", "max_output_tokens"),
        ("model_context_window_exceeded", "incomplete", "max_output_tokens"),
        ("refusal", "incomplete", "content_filter"),
        ("some_future_reason", "completed", None),
    ],
)
def test_anthropic_stop_reasons(
    http: httpx.Client,
    fx: dict[str, LoopbackFake],
    stop_reason: str,
    status: str,
    reason: str | None,
) -> None:
    reply = a_stream(a_start(), PING, *a_text(0, "Partial", " answer"), *a_end(stop_reason))
    events, final = both(http, fx["anth"], reply, {"model": "anth", "input": "hi"})
    assert final["status"] == status
    assert final["incomplete_details"] == ({"reason": reason} if reason else None)
    assert texts(final) == "Partial answer"


def test_anthropic_max_tokens_inside_a_tool_call(
    http: httpx.Client, fx: dict[str, LoopbackFake]
) -> None:
    """Cut off by max_tokens in the middle of a tool's JSON: incomplete, never a completed call."""
    reply = a_stream(
        a_start(), *a_tool(0, "toolu_1", "f", '{"a": "long', " text"), *a_end("max_tokens")
    )
    tools = [{"type": "function", "name": "f", "parameters": {"type": "object"}}]
    events, final = stream_after(
        http, fx["anth"], reply, {"model": "anth", "input": "x", "tools": tools}
    )
    assert final["status"] in ("incomplete", "failed"), final
    for item in final["output"]:
        if item["type"] == "function_call":
            assert item["status"] != "completed", item


def stream_after(
    http: httpx.Client, fake: LoopbackFake, reply: Raw, body: dict[str, Any]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    fake.enqueue(reply)
    return stream(http, body)


def test_anthropic_overloaded_error_event_mid_stream(
    http: httpx.Client, fx: dict[str, LoopbackFake]
) -> None:
    frames = [
        a_start(),
        PING,
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "Hello"},
        },
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    ]
    events, final = stream_after(
        http, fx["anth"], a_stream(*frames), {"model": "anth", "input": "hi"}
    )
    assert [e["type"] for e in events[-2:]] == ["error", "response.failed"]
    assert final["status"] == "failed"
    assert final["error"]["code"] == "upstream_overloaded"
    deltas = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert deltas == "Hello"
    # not streamed: the client gets the error (nothing of the output can be trusted to be complete)
    fx["anth"].enqueue(a_stream(*frames))
    res = http.post("/v1/responses", json={"model": "anth", "input": "hi"})
    error_of(res, 503, "upstream_overloaded")


def test_anthropic_error_event_before_any_output_is_an_http_error(
    http: httpx.Client, fx: dict[str, LoopbackFake]
) -> None:
    frames = [
        a_start(),
        PING,
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    ]
    fx["anth"].enqueue(a_stream(*frames))
    error_of(
        http.post("/v1/responses", json={"model": "anth", "input": "hi", "stream": True}),
        503,
        "upstream_overloaded",
    )
    fx["anth"].enqueue(a_stream(*frames))
    error_of(
        http.post("/v1/responses", json={"model": "anth", "input": "hi"}),
        503,
        "upstream_overloaded",
    )


def _anth_error(status: int, kind: str, message: str) -> Raw:
    body = {
        "type": "error",
        "error": {"type": kind, "message": message},
        "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy",
    }
    return Raw([jd(body)], status=status, content_type="application/json")


def test_anthropic_529_and_429_with_retry_after(
    http: httpx.Client, fx: dict[str, LoopbackFake]
) -> None:
    fx["anth"].enqueue(_anth_error(529, "overloaded_error", "Overloaded"))
    error_of(
        http.post("/v1/responses", json={"model": "anth", "input": "hi", "stream": True}),
        503,
        "upstream_overloaded",
    )
    # a 429 with retry-after (a Script: the fake sends its headers)
    fx["anth"].enqueue(rate_limited("17"))
    res = http.post("/v1/responses", json={"model": "anth", "input": "hi"})
    error = error_of(res, 429, "rate_limit_exceeded")
    assert res.headers.get("retry-after") == "17"
    assert "k" not in error["message"].split()


def test_anthropic_request_mapping(http: httpx.Client, fx: dict[str, LoopbackFake]) -> None:
    png = base64.b64encode(b"\x89PNG\r\n\x1a\nfake").decode()
    tools = [
        {
            "type": "function",
            "name": "lookup",
            "description": "Look up",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
        {"type": "function", "name": "other", "parameters": {"type": "object", "properties": {}}},
    ]
    history = [
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": "first"},
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "second"},
                {"type": "input_image", "image_url": f"data:image/png;base64,{png}"},
                {"type": "input_image", "image_url": "https://example.com/cat.jpg"},
            ],
        },
        {"role": "developer", "content": "Use tools."},
        {
            "type": "function_call",
            "call_id": "toolu_9",
            "name": "lookup",
            "arguments": '{"q": "x"}',
        },
        {"type": "function_call_output", "call_id": "toolu_9", "output": "not found"},
    ]
    choices: list[tuple[Any, Any]] = [
        ("required", {"type": "any"}),
        ("none", {"type": "none"}),
        ("auto", {"type": "auto"}),
        ({"type": "function", "name": "other"}, {"type": "tool", "name": "other"}),
    ]
    for choice, expected in choices:
        if expected["type"] in ("any", "tool"):  # the model must call a tool
            answer = a_stream(a_start(), *a_tool(0, "toolu_2", "other", "{}"), *a_end("tool_use"))
        else:
            answer = a_stream(a_start(), *a_text(0, "ok"), *a_end("end_turn"))
        fx["anth"].enqueue(answer)
        res = http.post(
            "/v1/responses",
            json={
                "model": "anth",
                "instructions": "You are a bot.",
                "input": history,
                "tools": tools,
                "tool_choice": choice,
                "temperature": 0.5,
            },
        )
        assert res.status_code == 200, res.text
        validate("ResponseResource", res.json())
        body = fx["anth"].bodies[-1]
        assert body["tool_choice"] == expected
        assert body["system"] == "You are a bot.\n\nBe terse.\n\nUse tools."
        assert body["model"] == "claude-x" and body["stream"] is True
        assert isinstance(body["max_tokens"], int) and body["max_tokens"] > 0
        assert body["temperature"] == 0.5
        assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
        user = body["messages"][0]["content"]
        assert user[0] == {"type": "text", "text": "first"}
        assert user[1] == {"type": "text", "text": "second"}
        assert user[2] == {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": png},
        }
        assert user[3] == {
            "type": "image",
            "source": {"type": "url", "url": "https://example.com/cat.jpg"},
        }
        assert body["messages"][1]["content"] == [
            {"type": "tool_use", "id": "toolu_9", "name": "lookup", "input": {"q": "x"}}
        ]
        assert body["messages"][2]["content"] == [
            {"type": "tool_result", "tool_use_id": "toolu_9", "content": "not found"}
        ]
        assert body["tools"][0] == {
            "name": "lookup",
            "description": "Look up",
            "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}},
        }
        headers = {k.lower(): v for k, v in fx["anth"].requests[-1].headers.items()}
        assert headers["x-api-key"] == "k" and headers["anthropic-version"] == "2023-06-01"
    fx["anth"].enqueue(a_stream(a_start(), *a_text(0, "ok"), *a_end("end_turn")))
    res = http.post("/v1/responses", json={"model": "anth", "input": "hi", "max_output_tokens": 77})
    assert res.status_code == 200 and fx["anth"].bodies[-1]["max_tokens"] == 77


def test_anthropic_server_tool_blocks_are_skipped(
    http: httpx.Client, fx: dict[str, LoopbackFake]
) -> None:
    reply = a_stream(
        a_start(),
        *a_text(0, "Searching."),
        *a_block(
            1,
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}},
            [{"type": "input_json_delta", "partial_json": '{"query": "x"}'}],
        ),
        *a_block(
            2, {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []}, []
        ),
        *a_text(3, "Found it."),
        *a_end("end_turn"),
    )
    events, final = both(http, fx["anth"], reply, {"model": "anth", "input": "search"})
    assert final["status"] == "completed"
    assert [i["type"] for i in final["output"]] == ["message"] * len(final["output"])
    assert texts(final) in (
        "Searching.Found it.",
        "Searching.\n\nFound it.",
        "Searching. Found it.",
    )
    assert calls(final) == []


def test_anthropic_json_reply_with_thinking_and_tool_use(
    http: httpx.Client, fx: dict[str, LoopbackFake]
) -> None:
    message = {
        "id": MSG_ID,
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "sig"},
            {"type": "text", "text": "Calling."},
            {"type": "tool_use", "id": "toolu_7", "name": "f", "input": {"a": [1, 2]}},
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 10,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 5,
            "output_tokens": 20,
        },
    }
    tools = [{"type": "function", "name": "f", "parameters": {"type": "object"}}]
    events, final = both(
        http, fx["anth"], json_raw(message), {"model": "anth", "input": "x", "tools": tools}
    )
    assert [i["type"] for i in final["output"]] == ["reasoning", "message", "function_call"]
    assert calls(final) == [("toolu_7", "f", {"a": [1, 2]})]
    assert (
        final["usage"]["input_tokens"] == 15
        and final["usage"]["input_tokens_details"]["cached_tokens"] == 5
    )


# --------------------------------------------------------------------------- openai-responses wire

UP_RESP = "resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b"
UP_MSG = "msg_67ccd2bf17f0819081ff3bb2cf6508e60bb6a6b452d3795b"


def r_resp(status: str, output: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "id": UP_RESP,
        "object": "response",
        "created_at": 1741476542,
        "status": status,
        "background": False,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "max_output_tokens": None,
        "model": "gpt-4.1-2025-04-14",
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "store": True,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": None
        if status in ("in_progress", "failed")
        else {
            "input_tokens": 36,
            "input_tokens_details": {"cached_tokens": 4},
            "output_tokens": 87,
            "output_tokens_details": {"reasoning_tokens": 64},
            "total_tokens": 123,
        },
        "user": None,
        "metadata": {},
        **extra,
    }


#: What a Responses stream opens with: created, then in_progress, with no output yet.
R_OPENING = (
    {"type": "response.created", "response": r_resp("in_progress", [])},
    {"type": "response.in_progress", "response": r_resp("in_progress", [])},
)


def r_numbered(events: list[dict[str, Any]], start: int = 0) -> list[bytes]:
    return [named({**e, "sequence_number": start + n}) for n, e in enumerate(events)]


def r_text_events(oi: int, item_id: str, pieces: list[str]) -> list[dict[str, Any]]:
    text = "".join(pieces)
    part = {"type": "output_text", "annotations": [], "logprobs": [], "text": text}
    done_item = {
        "id": item_id,
        "type": "message",
        "status": "completed",
        "content": [part],
        "role": "assistant",
    }
    base = {"item_id": item_id, "output_index": oi, "content_index": 0}
    return [
        {
            "type": "response.output_item.added",
            "output_index": oi,
            "item": {**done_item, "status": "in_progress", "content": []},
        },
        {"type": "response.content_part.added", **base, "part": {**part, "text": ""}},
        *(
            {
                "type": "response.output_text.delta",
                **base,
                "delta": p,
                "logprobs": [],
                "obfuscation": "Zx8",
            }
            for p in pieces
        ),
        {"type": "response.output_text.done", **base, "text": text, "logprobs": []},
        {"type": "response.content_part.done", **base, "part": part},
        {"type": "response.output_item.done", "output_index": oi, "item": done_item},
    ]


def test_responses_upstream_ids_and_sequence_numbers_do_not_leak(
    http: httpx.Client, fx: dict[str, LoopbackFake]
) -> None:
    reasoning_item = {
        "id": "rs_67ccd2bf0ae48190b8f3b9c9b0b3",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "Thinking briefly."}],
        "encrypted_content": "gAAAAABoISQ24OyVRYbkYfukzmRQ==",
    }
    message = r_text_events(1, UP_MSG, ["Hello", " there", "! \u00e9\U0001f600"])
    final_msg = message[-1]["item"]
    events = [
        *R_OPENING,
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"id": reasoning_item["id"], "type": "reasoning", "summary": []},
        },
        {
            "type": "response.reasoning_summary_part.added",
            "item_id": reasoning_item["id"],
            "output_index": 0,
            "summary_index": 0,
            "part": {"type": "summary_text", "text": ""},
        },
        {
            "type": "response.reasoning_summary_text.delta",
            "item_id": reasoning_item["id"],
            "output_index": 0,
            "summary_index": 0,
            "delta": "Thinking",
            "obfuscation": "a",
        },
        {
            "type": "response.reasoning_summary_text.delta",
            "item_id": reasoning_item["id"],
            "output_index": 0,
            "summary_index": 0,
            "delta": " briefly.",
            "obfuscation": "a",
        },
        {
            "type": "response.reasoning_summary_text.done",
            "item_id": reasoning_item["id"],
            "output_index": 0,
            "summary_index": 0,
            "text": "Thinking briefly.",
        },
        {
            "type": "response.reasoning_summary_part.done",
            "item_id": reasoning_item["id"],
            "output_index": 0,
            "summary_index": 0,
            "part": {"type": "summary_text", "text": "Thinking briefly."},
        },
        {"type": "response.output_item.done", "output_index": 0, "item": reasoning_item},
        {"type": "keepalive"},
        *message[:3],
        {
            "type": "response.output_text.annotation.added",
            "item_id": UP_MSG,
            "output_index": 1,
            "content_index": 0,
            "annotation_index": 0,
            "annotation": {
                "type": "url_citation",
                "url": "https://x",
                "title": "x",
                "start_index": 0,
                "end_index": 1,
            },
        },
        {"type": "response.some_future_event", "output_index": 1, "whatever": {"nested": True}},
        *message[3:],
        {
            "type": "response.completed",
            "response": r_resp("completed", [reasoning_item, final_msg]),
        },
    ]
    reply = sse_raw(r_numbered(events, start=1000), size=53)
    out_events, final = both(
        http,
        fx["resp"],
        reply,
        {"model": "resp-think", "input": "hi", "reasoning": {"effort": "low", "summary": "auto"}},
    )
    raw = orjson.dumps(out_events).decode()
    assert UP_RESP not in raw and UP_MSG not in raw and "rs_67ccd2bf" not in raw
    assert [e["sequence_number"] for e in out_events] == list(
        range(out_events[0]["sequence_number"], out_events[0]["sequence_number"] + len(out_events))
    )
    assert out_events[0]["sequence_number"] < 1000
    assert all(e["type"] != "keepalive" and "future" not in e["type"] for e in out_events)
    assert texts(final) == "Hello there! \u00e9\U0001f600"
    reasoning = final["output"][0]
    assert reasoning["type"] == "reasoning"
    assert [p["text"] for p in reasoning["summary"]] == ["Thinking briefly."]
    assert reasoning["encrypted_content"] == "gAAAAABoISQ24OyVRYbkYfukzmRQ=="
    assert final["usage"] == {
        "input_tokens": 36,
        "input_tokens_details": {"cached_tokens": 4},
        "output_tokens": 87,
        "output_tokens_details": {"reasoning_tokens": 64},
        "total_tokens": 123,
    }
    assert final["model"] == "resp-think"
    sent = fx["resp"].bodies[0]
    assert sent["model"] == "gpt-x" and sent["stream"] is True
    assert "reasoning.encrypted_content" in (sent.get("include") or [])


def test_responses_function_call_stream(http: httpx.Client, fx: dict[str, LoopbackFake]) -> None:
    args = '{"location":"Paris, France","unit":"celsius"}'
    item = {
        "id": "fc_67ccf18f64008190a39b619f4c8455ef",
        "type": "function_call",
        "status": "completed",
        "arguments": args,
        "call_id": "call_unLAR8MvFNptuiZK6K6HCy5k",
        "name": "get_weather",
    }
    events = [
        *R_OPENING,
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**item, "status": "in_progress", "arguments": ""},
        },
        *(
            {
                "type": "response.function_call_arguments.delta",
                "item_id": item["id"],
                "output_index": 0,
                "delta": args[i : i + 5],
                "obfuscation": "q",
            }
            for i in range(0, len(args), 5)
        ),
        {
            "type": "response.function_call_arguments.done",
            "item_id": item["id"],
            "output_index": 0,
            "arguments": args,
        },
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": r_resp("completed", [item])},
    ]
    tools = [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]
    out_events, final = both(
        http,
        fx["resp"],
        sse_raw(r_numbered(events), size=29),
        {"model": "resp", "input": "w", "tools": tools},
    )
    assert calls(final) == [("call_unLAR8MvFNptuiZK6K6HCy5k", "get_weather", orjson.loads(args))]
    assert final["output"][0]["id"] != item["id"]


def test_responses_upstream_failed_and_error_events(
    http: httpx.Client, fx: dict[str, LoopbackFake]
) -> None:
    failed = r_resp(
        "failed", [], error={"code": "server_error", "message": "The model had an error."}
    )
    head = [
        *R_OPENING,
    ]
    text = r_text_events(0, UP_MSG, ["Partial"])[:3]
    # response.failed after some output
    fx["resp"].enqueue(
        sse_raw(r_numbered([*head, *text, {"type": "response.failed", "response": failed}]))
    )
    events, final = stream(http, {"model": "resp", "input": "x"})
    assert [e["type"] for e in events[-2:]] == ["error", "response.failed"]
    assert final["status"] == "failed" and "The model had an error." in final["error"]["message"]
    assert UP_RESP not in orjson.dumps(events).decode()
    # an error event (OpenAI's flat shape) before any output
    flat = {
        "type": "error",
        "code": "rate_limit_exceeded",
        "message": "Rate limit reached",
        "param": None,
    }
    fx["resp"].enqueue(sse_raw(r_numbered([*head, flat])))
    error_of(
        http.post("/v1/responses", json={"model": "resp", "input": "x", "stream": True}),
        429,
        "rate_limit_exceeded",
    )
    # the spec's nested shape, after output, not streamed
    nested = {
        "type": "error",
        "error": {"type": "server_error", "code": "server_error", "message": "boom", "param": None},
    }
    fx["resp"].enqueue(sse_raw(r_numbered([*head, *text, nested])))
    error_of(
        http.post("/v1/responses", json={"model": "resp", "input": "x"}), 502, "upstream_error"
    )
    # response.failed before any output, not streamed
    fx["resp"].enqueue(
        sse_raw(r_numbered([*head, {"type": "response.failed", "response": failed}]))
    )
    error = error_of(http.post("/v1/responses", json={"model": "resp", "input": "x"}), 502)
    assert "The model had an error." in error["message"]


def test_responses_incomplete_and_json_reply(
    http: httpx.Client, fx: dict[str, LoopbackFake]
) -> None:
    msg = {
        "id": UP_MSG,
        "type": "message",
        "status": "incomplete",
        "role": "assistant",
        "content": [{"type": "output_text", "annotations": [], "text": "Once upon a"}],
    }
    incomplete = r_resp("incomplete", [msg], incomplete_details={"reason": "max_output_tokens"})
    events, final = both(
        http, fx["resp"], json_raw(incomplete), {"model": "resp", "input": "story"}
    )
    assert final["status"] == "incomplete"
    assert final["incomplete_details"] == {"reason": "max_output_tokens"}
    assert texts(final) == "Once upon a"
    done = {
        **msg,
        "status": "completed",
        "content": [{"type": "output_text", "annotations": [], "text": "Hi!"}],
    }
    events, final = both(
        http, fx["resp"], json_raw(r_resp("completed", [done])), {"model": "resp", "input": "hi"}
    )
    assert final["status"] == "completed" and texts(final) == "Hi!"
    assert final["id"] != UP_RESP and final["output"][0]["id"] != UP_MSG


# --------------------------------------------------------------------------- openai-chat wire


def c_chunk(
    delta: dict[str, Any] | None = None,
    finish: str | None = None,
    *,
    usage: Any = "absent",
    choices: Any = "one",
    **extra: Any,
) -> dict[str, Any]:
    chunk: dict[str, Any] = {
        "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
        "object": "chat.completion.chunk",
        "created": 1741570283,
        "model": "m",
        "system_fingerprint": "fp_44709d6fcb",
    }
    if choices == "one":
        chunk["choices"] = [
            {
                "index": 0,
                "delta": delta if delta is not None else {},
                "logprobs": None,
                "finish_reason": finish,
            }
        ]
    else:
        chunk["choices"] = choices
    if usage != "absent":
        chunk["usage"] = usage
    chunk.update(extra)
    return chunk


def c_usage(
    prompt: int = 11, completion: int = 9, cached: int = 0, reasoning: int = 0
) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": reasoning,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def c_frames(
    chunks: list[dict[str, Any]], *, sep: bytes = b"data: ", eol: bytes = b"\n", done: bool = True
) -> list[bytes]:
    frames = [sep + jd(c) + eol + eol for c in chunks]
    if done:
        frames.append(sep + b"[DONE]" + eol + eol)
    return frames


def test_chat_no_space_after_data_crlf_and_comments(
    http: httpx.Client, fx: dict[str, LoopbackFake]
) -> None:
    chunks = [
        c_chunk({"role": "assistant", "content": ""}),
        c_chunk({"content": "Hel"}),
        c_chunk({"content": "lo \u00e9\U0001f600"}),
        c_chunk({}, "stop"),
        c_chunk(choices=[], usage=c_usage(5, 3)),
    ]
    frames = c_frames(chunks, sep=b"data:", eol=b"\r\n")
    frames.insert(0, b": OPENROUTER PROCESSING\r\n\r\n")
    frames.insert(3, b": ping - 2025-01-01 00:00:00.000000+00:00\r\n\r\n")
    events, final = both(
        http, fx["chat"], sse_raw(frames, size=7), {"model": "chat", "input": "hi"}
    )
    assert texts(final) == "Hello \u00e9\U0001f600"
    assert final["usage"]["input_tokens"] == 5 and final["usage"]["output_tokens"] == 3
    assert final["status"] == "completed"
    sent = fx["chat"].bodies[0]
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}


def test_chat_no_done_connection_closed_after_finish(
    http: httpx.Client, fx: dict[str, LoopbackFake]
) -> None:
    chunks = [
        c_chunk({"role": "assistant", "content": "Bye"}),
        c_chunk({}, "stop", usage=c_usage(2, 1)),
    ]
    events, final = both(
        http, fx["chat"], sse_raw(c_frames(chunks, done=False)), {"model": "chat", "input": "hi"}
    )
    assert texts(final) == "Bye" and final["status"] == "completed"
    assert final["usage"]["total_tokens"] == 3


@pytest.mark.parametrize(
    ("finish", "status"),
    [
        ("eos", "completed"),
        ("weird_new_value", "completed"),
        ("length", "incomplete"),
        ("content_filter", "incomplete"),
        (None, "completed"),
    ],
)
def test_chat_finish_reason_values(
    http: httpx.Client, fx: dict[str, LoopbackFake], finish: str | None, status: str
) -> None:
    chunks = [c_chunk({"role": "assistant", "content": "Some text"}), c_chunk({}, finish)]
    events, final = both(
        http, fx["chat"], sse_raw(c_frames(chunks)), {"model": "chat", "input": "hi"}
    )
    assert final["status"] == status
    assert texts(final) == "Some text"


def test_chat_tool_calls_repeating_id_and_type_in_every_chunk(
    http: httpx.Client, fx: dict[str, LoopbackFake]
) -> None:
    """LM Studio / some vLLM versions: every piece repeats index, id, type and the name."""
    args = '{"city": "Berlin", "n": 2}'
    pieces = [args[:3], args[3:11], args[11:20], args[20:]]
    chunks = [c_chunk({"role": "assistant", "content": None})]
    for piece in pieces:
        chunks.append(
            c_chunk(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_abc123",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": piece},
                        }
                    ]
                }
            )
        )
    args2 = '{"tz": "CET"}'
    for piece in (args2[:5], args2[5:]):
        chunks.append(
            c_chunk(
                {
                    "tool_calls": [
                        {
                            "index": 1,
                            "id": "call_def456",
                            "type": "function",
                            "function": {"name": "get_time", "arguments": piece},
                        }
                    ]
                }
            )
        )
    chunks.append(c_chunk({}, "tool_calls"))
    chunks.append(c_chunk(choices=[], usage=c_usage()))
    tools = [
        {"type": "function", "name": n, "parameters": {"type": "object"}}
        for n in ("get_weather", "get_time")
    ]
    events, final = both(
        http, fx["chat"], sse_raw(c_frames(chunks)), {"model": "chat", "input": "w", "tools": tools}
    )
    assert calls(final) == [
        ("call_abc123", "get_weather", {"city": "Berlin", "n": 2}),
        ("call_def456", "get_time", {"tz": "CET"}),
    ]
    assert [i["type"] for i in final["output"]] == ["function_call", "function_call"]


def test_chat_ollama_object_arguments_and_stop_finish(
    http: httpx.Client, fx: dict[str, LoopbackFake]
) -> None:
    """Ollama: the whole call in one chunk, arguments as a JSON object, ``finish_reason: stop``."""
    chunks = [
        {
            "id": "chatcmpl-94",
            "object": "chat.completion.chunk",
            "created": 1741570283,
            "model": "llama3.2",
            "system_fingerprint": "fp_ollama",
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "role": "assistant",
                        "content": "",
                        "tool_calls": [
                            {
                                "id": "call_j3x2nq1k",
                                "index": 0,
                                "type": "function",
                                "function": {
                                    "name": "get_weather",
                                    "arguments": {"city": "Toronto", "days": 2},
                                },
                            }
                        ],
                    },
                    "finish_reason": None,
                }
            ],
        },
        {
            "id": "chatcmpl-94",
            "object": "chat.completion.chunk",
            "created": 1741570283,
            "model": "llama3.2",
            "system_fingerprint": "fp_ollama",
            "choices": [
                {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": "stop"}
            ],
        },
        {
            "id": "chatcmpl-94",
            "object": "chat.completion.chunk",
            "created": 1741570283,
            "model": "llama3.2",
            "system_fingerprint": "fp_ollama",
            "choices": [],
            "usage": {"prompt_tokens": 150, "completion_tokens": 21, "total_tokens": 171},
        },
    ]
    tools = [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]
    events, final = both(
        http, fx["chat"], sse_raw(c_frames(chunks)), {"model": "chat", "input": "w", "tools": tools}
    )
    assert calls(final) == [("call_j3x2nq1k", "get_weather", {"city": "Toronto", "days": 2})]
    assert final["usage"]["input_tokens"] == 150 and final["usage"]["output_tokens"] == 21


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_chat_reasoning_deltas(http: httpx.Client, fx: dict[str, LoopbackFake], field: str) -> None:
    """vLLM / DeepSeek send ``reasoning_content``, OpenRouter and newer vLLM ``reasoning``."""
    chunks = [
        c_chunk({"role": "assistant", "content": None, field: ""}),
        c_chunk({field: "First,", "content": None}),
        c_chunk({field: " add.", "content": None}),
        c_chunk({"content": "4", field: None}),
        c_chunk({}, "stop"),
        c_chunk(
            choices=[],
            usage={
                "prompt_tokens": 8,
                "completion_tokens": 30,
                "total_tokens": 38,
                "completion_tokens_details": {"reasoning_tokens": 20},
                "prompt_cache_hit_tokens": 3,
                "prompt_cache_miss_tokens": 5,
            },
        ),
    ]
    events, final = both(
        http, fx["chat"], sse_raw(c_frames(chunks)), {"model": "chat", "input": "2+2"}
    )
    assert [i["type"] for i in final["output"]] == ["reasoning", "message"]
    reasoning = final["output"][0]
    assert (
        "".join(p["text"] for p in reasoning.get("content") or reasoning["summary"])
        == "First, add."
    )
    assert texts(final) == "4"
    assert final["usage"]["output_tokens_details"]["reasoning_tokens"] == 20
    assert final["usage"]["input_tokens_details"]["cached_tokens"] == 3


def test_chat_refusal_with_null_content(http: httpx.Client, fx: dict[str, LoopbackFake]) -> None:
    chunks = [
        c_chunk({"role": "assistant", "content": None, "refusal": ""}),
        c_chunk({"content": None, "refusal": "I'm sorry,"}),
        c_chunk({"content": None, "refusal": " I can't help."}),
        c_chunk({}, "stop"),
    ]
    events, final = both(
        http, fx["chat"], sse_raw(c_frames(chunks)), {"model": "chat", "input": "bad"}
    )
    [item] = final["output"]
    assert item["content"] == [{"type": "refusal", "refusal": "I'm sorry, I can't help."}]
    completion = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "refusal": "No.",
                    "annotations": [],
                },
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": c_usage(),
    }
    events, final = both(http, fx["chat"], json_raw(completion), {"model": "chat", "input": "bad"})
    assert final["output"][0]["content"] == [{"type": "refusal", "refusal": "No."}]


def test_chat_gemini_calls_without_index_finish_with_content(
    http: httpx.Client, fx: dict[str, LoopbackFake]
) -> None:
    """Gemini's compatible endpoint: no ``index`` on tool calls, parallel calls in one chunk,
    the finish_reason and usage on the same chunk as the content."""
    chunks = [
        {
            "choices": [{"delta": {"content": "Checking both.", "role": "assistant"}, "index": 0}],
            "created": 1741570283,
            "id": "Q2nRaPa",
            "model": "gemini-2.5-flash",
            "object": "chat.completion.chunk",
        },
        {
            "choices": [
                {
                    "delta": {
                        "role": "assistant",
                        "tool_calls": [
                            {
                                "function": {
                                    "arguments": '{"city":"Paris"}',
                                    "name": "get_weather",
                                },
                                "id": "function-call-1",
                                "type": "function",
                            },
                            {
                                "function": {"arguments": '{"city":"Rome"}', "name": "get_weather"},
                                "id": "function-call-2",
                                "type": "function",
                            },
                        ],
                    },
                    "finish_reason": "tool_calls",
                    "index": 0,
                }
            ],
            "created": 1741570283,
            "id": "Q2nRaPa",
            "model": "gemini-2.5-flash",
            "object": "chat.completion.chunk",
            "usage": {"completion_tokens": 14, "prompt_tokens": 40, "total_tokens": 54},
        },
    ]
    tools = [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]
    events, final = both(
        http, fx["chat"], sse_raw(c_frames(chunks)), {"model": "chat", "input": "w", "tools": tools}
    )
    assert texts(final) == "Checking both."
    assert calls(final) == [
        ("function-call-1", "get_weather", {"city": "Paris"}),
        ("function-call-2", "get_weather", {"city": "Rome"}),
    ]
    assert final["usage"]["total_tokens"] == 54


def test_chat_groq_usage_in_x_groq(http: httpx.Client, fx: dict[str, LoopbackFake]) -> None:
    """Groq puts the streamed usage in ``x_groq.usage`` of the last chunk."""
    chunks = [
        c_chunk(
            {"role": "assistant", "content": ""}, x_groq={"id": "req_01jbd6g2qdfw2adyrt2az8hz4w"}
        ),
        c_chunk({"content": "Fast."}),
        c_chunk(
            {},
            "stop",
            x_groq={
                "id": "req_01jbd6g2qdfw2adyrt2az8hz4w",
                "usage": {
                    "queue_time": 0.017,
                    "prompt_tokens": 18,
                    "prompt_time": 0.0009,
                    "completion_tokens": 2,
                    "completion_time": 0.004,
                    "total_tokens": 20,
                    "total_time": 0.005,
                },
            },
        ),
    ]
    events, final = both(
        http, fx["chat"], sse_raw(c_frames(chunks)), {"model": "chat", "input": "hi"}
    )
    assert texts(final) == "Fast."
    assert final["usage"]["input_tokens"] == 18 and final["usage"]["output_tokens"] == 2


def test_chat_llama_cpp_final_chunk_with_timings(
    http: httpx.Client, fx: dict[str, LoopbackFake]
) -> None:
    base = {
        "created": 1741570283,
        "id": "chatcmpl-x2Q",
        "model": "gpt-3.5-turbo",
        "system_fingerprint": "b5170-0bcb4ae3",
        "object": "chat.completion.chunk",
    }
    chunks = [
        {
            **base,
            "choices": [
                {"finish_reason": None, "index": 0, "delta": {"role": "assistant", "content": None}}
            ],
        },
        {**base, "choices": [{"finish_reason": None, "index": 0, "delta": {"content": "Hi"}}]},
        {
            **base,
            "choices": [{"finish_reason": "stop", "index": 0, "delta": {}}],
            "usage": {"completion_tokens": 2, "prompt_tokens": 9, "total_tokens": 11},
            "timings": {"prompt_n": 9, "prompt_ms": 20.1, "predicted_n": 2, "predicted_ms": 30.5},
        },
    ]
    events, final = both(
        http, fx["chat"], sse_raw(c_frames(chunks)), {"model": "chat", "input": "hi"}
    )
    assert texts(final) == "Hi" and final["usage"]["total_tokens"] == 11


def test_chat_openrouter_error_chunk_mid_stream(
    http: httpx.Client, fx: dict[str, LoopbackFake]
) -> None:
    chunks = [
        c_chunk({"role": "assistant", "content": "Start"}),
        {
            "id": "gen-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "provider": "X",
            "error": {"code": 502, "message": "Provider returned error"},
            "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}],
        },
    ]
    # The text arrives before the error (delay), or in the same network read as the error: the
    # client sees the same either way (in one read, the text was dropped and the answer was a 502).
    for reply in (Raw(c_frames(chunks), delay=0.2), Raw([b"".join(c_frames(chunks))])):
        fx["chat"].enqueue(reply)
        events, final = stream(http, {"model": "chat", "input": "hi"})
        assert [e["type"] for e in events[-2:]] == ["error", "response.failed"]
        deltas = [e["delta"] for e in events if e["type"] == "response.output_text.delta"]
        assert "".join(deltas) == "Start"
        assert final["status"] == "failed"
        assert "Provider returned error" in final["error"]["message"]


# --------------------------------------------------------------------------- bugs found by this
# audit


@pytest.mark.parametrize("shape_", ["no_arguments", "empty_string", "null"])
def test_chat_parameterless_tool_call_gets_empty_object(
    http: httpx.Client, fx: dict[str, LoopbackFake], shape_: str
) -> None:
    """vLLM's hermes parser (and others) stream a call of a tool without parameters with no
    arguments at all: it was "" (not JSON), so the tool guard asked the model again."""
    function: dict[str, Any] = {"name": "take_screenshot"}
    if shape_ == "empty_string":
        function["arguments"] = ""
    elif shape_ == "null":
        function["arguments"] = None
    head = {"index": 0, "id": "chatcmpl-tool-8f1c", "type": "function", "function": function}
    chunks = [
        c_chunk({"role": "assistant", "content": None, "tool_calls": [head]}),
        c_chunk({}, "tool_calls"),
        c_chunk(choices=[], usage=c_usage()),
    ]
    tools = [
        {
            "type": "function",
            "name": "take_screenshot",
            "parameters": {"type": "object", "properties": {}},
        }
    ]
    events, final = both(
        http,
        fx["chat"],
        sse_raw(c_frames(chunks)),
        {"model": "chat", "input": "shot", "tools": tools},
    )
    assert calls(final) == [("chatcmpl-tool-8f1c", "take_screenshot", {})]
    assert len(fx["chat"].bodies) == 2  # one upstream call per client request: no retry
    # a parameterless call followed by another call: both complete, in order
    second = {
        "index": 1,
        "id": "call_2",
        "type": "function",
        "function": {"name": "take_screenshot", "arguments": '{"x": 1}'},
    }
    chunks = [
        c_chunk({"role": "assistant", "content": None, "tool_calls": [head]}),
        c_chunk({"tool_calls": [second]}),
        c_chunk({}, "tool_calls"),
    ]
    events, final = both(
        http,
        fx["chat"],
        sse_raw(c_frames(chunks)),
        {"model": "chat", "input": "shot", "tools": tools},
    )
    assert calls(final) == [
        ("chatcmpl-tool-8f1c", "take_screenshot", {}),
        ("call_2", "take_screenshot", {"x": 1}),
    ]


def test_responses_parameterless_tool_call_gets_empty_object(
    http: httpx.Client, fx: dict[str, LoopbackFake]
) -> None:
    item = {
        "id": "fc_1",
        "type": "function_call",
        "status": "completed",
        "arguments": "",
        "call_id": "call_1",
        "name": "now",
    }
    events = [
        *R_OPENING,
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**item, "status": "in_progress"},
        },
        {
            "type": "response.function_call_arguments.done",
            "item_id": "fc_1",
            "output_index": 0,
            "arguments": "",
        },
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": r_resp("completed", [item])},
    ]
    tools = [
        {"type": "function", "name": "now", "parameters": {"type": "object", "properties": {}}}
    ]
    out_events, final = both(
        http,
        fx["resp"],
        sse_raw(r_numbered(events)),
        {"model": "resp", "input": "t", "tools": tools},
    )
    assert calls(final) == [("call_1", "now", {})]
    assert len(fx["resp"].bodies) == 2  # no retry
    out_events, final = both(
        http,
        fx["resp"],
        json_raw(r_resp("completed", [item])),
        {"model": "resp", "input": "t", "tools": tools},
    )
    assert calls(final) == [("call_1", "now", {})]


def test_responses_output_only_in_the_terminal_event(
    http: httpx.Client, fx: dict[str, LoopbackFake]
) -> None:
    """A server that streams no item events (a proxy's "fake streaming"): the output is in
    ``response.completed`` only; it was dropped (an empty completed response)."""
    msg = {
        "id": UP_MSG,
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "annotations": [], "text": "Only here."}],
    }
    args = '{"q": "x"}'
    call = {
        "id": "fc_1",
        "type": "function_call",
        "status": "completed",
        "arguments": args,
        "call_id": "call_9",
        "name": "f",
    }
    events = [
        *R_OPENING,
        {"type": "response.completed", "response": r_resp("completed", [msg, call])},
    ]
    tools = [{"type": "function", "name": "f", "parameters": {"type": "object"}}]
    out_events, final = both(
        http,
        fx["resp"],
        sse_raw(r_numbered(events)),
        {"model": "resp", "input": "x", "tools": tools},
    )
    assert texts(final) == "Only here."
    assert calls(final) == [("call_9", "f", {"q": "x"})]
    incomplete = r_resp(
        "incomplete",
        [{**msg, "status": "incomplete"}],
        incomplete_details={"reason": "max_output_tokens"},
    )
    events[-1] = {"type": "response.incomplete", "response": incomplete}
    out_events, final = both(
        http, fx["resp"], sse_raw(r_numbered(events)), {"model": "resp", "input": "x"}
    )
    assert final["status"] == "incomplete" and texts(final) == "Only here."


def test_responses_reasoning_summary_parts_stay_apart(
    http: httpx.Client, fx: dict[str, LoopbackFake]
) -> None:
    """OpenAI streams a reasoning summary as several parts ("**Title**\\n\\nBody" each): they
    were glued together ("...part.**Check.**"), breaking the Markdown."""
    parts = ["**Planning.**\n\nFirst I plan.", "**Checking.**\n\nThen I check."]
    rid = "rs_6820f383d7c08191846711c5df8233bc0ac5ba57aafcbac7"
    item = {
        "id": rid,
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": t} for t in parts],
        "encrypted_content": "gAAAAABo",
    }
    events: list[dict[str, Any]] = [
        *R_OPENING,
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"id": rid, "type": "reasoning", "summary": []},
        },
    ]
    for si, text in enumerate(parts):
        base = {"item_id": rid, "output_index": 0, "summary_index": si}
        events += [
            {
                "type": "response.reasoning_summary_part.added",
                **base,
                "part": {"type": "summary_text", "text": ""},
            },
            *(
                {
                    "type": "response.reasoning_summary_text.delta",
                    **base,
                    "delta": text[i : i + 6],
                    "obfuscation": "x",
                }
                for i in range(0, len(text), 6)
            ),
            {"type": "response.reasoning_summary_text.done", **base, "text": text},
            {
                "type": "response.reasoning_summary_part.done",
                **base,
                "part": {"type": "summary_text", "text": text},
            },
        ]
    message = r_text_events(1, UP_MSG, ["Done."])
    events += [
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        *message,
        {
            "type": "response.completed",
            "response": r_resp("completed", [item, message[-1]["item"]]),
        },
    ]
    body = {"model": "resp-think", "input": "x", "reasoning": {"effort": "low", "summary": "auto"}}
    out_events, final = both(http, fx["resp"], sse_raw(r_numbered(events)), body)
    summary = "".join(p["text"] for p in final["output"][0]["summary"])
    assert summary == "\n\n".join(parts)
    assert final["output"][0]["encrypted_content"] == "gAAAAABo"
    out_events, final = both(
        http, fx["resp"], json_raw(r_resp("completed", [item, message[-1]["item"]])), body
    )
    assert "".join(p["text"] for p in final["output"][0]["summary"]) == "\n\n".join(parts)


def test_chat_usage_chunk_ends_the_answer_without_done_or_eof(
    http: httpx.Client, fx: dict[str, LoopbackFake]
) -> None:
    """finish_reason, then the usage chunk (``choices: []``, always the last), then the server
    holds the connection open without ``[DONE]``: the complete answer waited for the read
    timeout and became a 504 ``upstream_timeout``."""
    chunks = [
        c_chunk({"role": "assistant", "content": "All"}),
        c_chunk({"content": " here."}),
        c_chunk({}, "stop"),
        c_chunk(choices=[], usage=c_usage(4, 2)),
    ]
    data = b"".join(c_frames(chunks, done=False))
    held = Raw([data, b": keep-alive\n\n"], delay=20)  # read_timeout is 10 s
    started = time.monotonic()
    events, final = both(http, fx["chat"], held, {"model": "chat", "input": "hi"})
    # Waiting for the read timeout would take 10 s a request, 20 s for the two (streamed and
    # not); without it they take a fraction of a second, so a loaded machine passes too.
    assert time.monotonic() - started < 20
    assert texts(final) == "All here." and final["status"] == "completed"
    assert final["usage"]["total_tokens"] == 6


def test_chat_finish_without_usage_or_done_on_a_held_connection(
    http: httpx.Client, fx: dict[str, LoopbackFake]
) -> None:
    """finish_reason, then nothing (no usage chunk, no ``[DONE]``) on a connection held open:
    the complete answer waited for the read timeout and became a 504 ``upstream_timeout``.
    Now the end of the stream is waited for two seconds at most."""
    chunks = [c_chunk({"role": "assistant", "content": "Done"}), c_chunk({"content": "."}, "stop")]
    held = Raw([b"".join(c_frames(chunks, done=False)), b": keep-alive\n\n"], delay=20)
    started = time.monotonic()
    events, final = both(http, fx["chat"], held, {"model": "chat", "input": "hi"})
    # Two requests (streamed and not), each ending once the trailer's 2 s timer fires: a fixed
    # wait a loaded machine does not lengthen much. Waiting for the 10 s read timeout instead
    # would take 20 s.
    assert time.monotonic() - started < 20
    assert texts(final) == "Done." and final["status"] == "completed"


def test_anthropic_unknown_events_and_deltas_are_tolerated(
    http: httpx.Client, fx: dict[str, LoopbackFake]
) -> None:
    """Citations deltas, a text block that starts with text, an event type from a newer API."""
    citation = {
        "type": "char_location",
        "cited_text": "The grass is green.",
        "document_index": 0,
        "document_title": "Doc",
        "start_char_index": 0,
        "end_char_index": 20,
    }
    reply = a_stream(
        a_start(),
        PING,
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "text", "text": "Per the doc, "},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "citations_delta", "citation": citation},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "the grass is green."},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "message_annotation", "data": {"x": 1}},
        *a_end("end_turn", 9),
    )
    events, final = both(http, fx["anth"], reply, {"model": "anth", "input": "color?"})
    assert texts(final) == "Per the doc, the grass is green."


def test_anthropic_thinking_and_parallel_tools_through_previous_response_id(
    http: httpx.Client, fx: dict[str, LoopbackFake]
) -> None:
    """Turn 2 rebuilt from the store: thinking block first and unchanged, both tool uses in one
    assistant turn, both results in one user turn, in order."""
    tools = [{"type": "function", "name": "f", "parameters": {"type": "object"}}]
    fx["anth"].enqueue(
        a_stream(
            a_start(),
            *a_thinking(0, ["Two lookups."], "sig-A"),
            *a_text(1, "Calling."),
            *a_tool(2, "toolu_1", "f", '{"a":', "1}"),
            *a_tool(3, "toolu_2", "f", '{"a":2}'),
            *a_end("tool_use"),
        )
    )
    events, first = stream(
        http, {"model": "anth-think", "input": "go", "tools": tools, "reasoning": {"effort": "low"}}
    )
    assert [c[0] for c in calls(first)] == ["toolu_1", "toolu_2"]
    fx["anth"].enqueue(a_stream(a_start(), *a_text(0, "Both done."), *a_end("end_turn")))
    outputs = [
        {"type": "function_call_output", "call_id": "toolu_1", "output": "one"},
        {"type": "function_call_output", "call_id": "toolu_2", "output": "two"},
    ]
    body = {
        "model": "anth-think",
        "previous_response_id": first["id"],
        "input": outputs,
        "tools": tools,
        "reasoning": {"effort": "low"},
    }
    events, second = stream(http, body)
    assert texts(second) == "Both done." and second["previous_response_id"] == first["id"]
    messages = fx["anth"].bodies[-1]["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[1]["content"] == [
        {"type": "thinking", "thinking": "Two lookups.", "signature": "sig-A"},
        {"type": "text", "text": "Calling."},
        {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}},
        {"type": "tool_use", "id": "toolu_2", "name": "f", "input": {"a": 2}},
    ]
    assert messages[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "one"},
        {"type": "tool_result", "tool_use_id": "toolu_2", "content": "two"},
    ]


def test_chat_other_server_shapes(http: httpx.Client, fx: dict[str, LoopbackFake]) -> None:
    """Azure's filter-results chunk (``choices: []`` first), Groq's ``tool_calls: []`` on every
    delta, Mistral's content as a list of parts, a ``delta: null`` finish chunk, vLLM's
    ``usage: null`` / null details."""
    chunks = [
        {
            "choices": [],
            "created": 0,
            "id": "",
            "model": "",
            "object": "",
            "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": {}}],
        },
        c_chunk({"role": "assistant", "content": "", "tool_calls": []}, usage=None),
        c_chunk({"content": [{"type": "text", "text": "Bon"}], "tool_calls": []}, usage=None),
        c_chunk({"content": "jour", "tool_calls": []}, usage=None),
        c_chunk(choices=[{"index": 0, "delta": None, "finish_reason": "stop"}], usage=None),
        c_chunk(
            choices=[],
            usage={
                "prompt_tokens": 3,
                "completion_tokens": 2,
                "total_tokens": 5,
                "prompt_tokens_details": None,
                "completion_tokens_details": None,
            },
        ),
    ]
    events, final = both(
        http, fx["chat"], sse_raw(c_frames(chunks)), {"model": "chat", "input": "hi"}
    )
    assert texts(final) == "Bonjour" and final["status"] == "completed"
    assert (
        final["usage"]["total_tokens"] == 5
        and final["usage"]["input_tokens_details"]["cached_tokens"] == 0
    )


def test_chat_connection_reset_after_finish_reason(
    http: httpx.Client, fx: dict[str, LoopbackFake]
) -> None:
    """The server aborts the connection right after the finish chunk (no usage, no [DONE])."""
    fx["chat"].enqueue(Script(content="one two", done=False, cut_after=4))
    events, final = stream(http, {"model": "chat", "input": "hi"})
    assert texts(final) == "one two" and final["status"] == "completed"
    fx["chat"].enqueue(Script(content="one two", done=False, cut_after=2))  # before the finish
    res = http.post("/v1/responses", json={"model": "chat", "input": "hi"})
    error_of(res, 502, "upstream_stream_truncated")


def test_responses_two_reasoning_items_in_a_row_stay_two_items(
    http: httpx.Client, fx: dict[str, LoopbackFake]
) -> None:
    """An answer with two reasoning items, each with its own ``encrypted_content``: they were
    merged into one item holding the second's encrypted content only (the first was lost)."""
    items = [
        {
            "id": f"rs_6820f383d7c0819184671{n}c5df8233bc0ac5ba57aafcbac7",
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": f"Step {n}."}],
            "encrypted_content": f"gAAAAABoENC{n}",
        }
        for n in (1, 2)
    ]
    events: list[dict[str, Any]] = [
        *R_OPENING,
    ]
    for oi, item in enumerate(items):
        base = {"item_id": item["id"], "output_index": oi, "summary_index": 0}
        text = item["summary"][0]["text"]
        events += [
            {
                "type": "response.output_item.added",
                "output_index": oi,
                "item": {"id": item["id"], "type": "reasoning", "summary": []},
            },
            {
                "type": "response.reasoning_summary_part.added",
                **base,
                "part": {"type": "summary_text", "text": ""},
            },
            {"type": "response.reasoning_summary_text.delta", **base, "delta": text},
            {"type": "response.reasoning_summary_text.done", **base, "text": text},
            {
                "type": "response.reasoning_summary_part.done",
                **base,
                "part": {"type": "summary_text", "text": text},
            },
            {"type": "response.output_item.done", "output_index": oi, "item": item},
        ]
    message = r_text_events(2, UP_MSG, ["Done."])
    events += [
        *message,
        {
            "type": "response.completed",
            "response": r_resp("completed", [*items, message[-1]["item"]]),
        },
    ]
    body = {"model": "resp-think", "input": "x", "reasoning": {"effort": "low", "summary": "auto"}}
    for reply in (
        sse_raw(r_numbered(events)),
        json_raw(r_resp("completed", [*items, message[-1]["item"]])),
    ):
        _, final = both(http, fx["resp"], reply, body)
        reasoning = [item for item in final["output"] if item["type"] == "reasoning"]
        assert [(r["summary"][0]["text"], r["encrypted_content"]) for r in reasoning] == [
            ("Step 1.", "gAAAAABoENC1"),
            ("Step 2.", "gAAAAABoENC2"),
        ]
        assert texts(final) == "Done."


def test_anthropic_interleaved_thinking_keeps_both_signed_runs(
    http: httpx.Client, fx: dict[str, LoopbackFake]
) -> None:
    """Interleaved thinking (thinking → tool_use → thinking → text): the second run of thinking
    continued the first reasoning item and its envelope replaced the first one's, so the first
    signed block was lost and could not go back to Anthropic on the next turn."""
    sig_a, sig_b = "EqQBCgIYAhIMsigA" * 4, "EqQBCgIYAhIMsigB" * 4
    reply = a_stream(
        a_start(),
        *a_thinking(0, ["I need the weather."], sig_a),
        *a_tool(1, "toolu_01A", "get_weather", '{"city": ', '"Paris"}'),
        *a_thinking(2, ["Then I answer."], sig_b),
        *a_text(3, "Checking the weather."),
        *a_end("tool_use"),
    )
    tools = [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]
    body = {
        "model": "anth-think",
        "input": "weather?",
        "tools": tools,
        "reasoning": {"effort": "low"},
    }
    _, final = both(http, fx["anth"], reply, body)
    reasoning = [i for i in final["output"] if i["type"] == "reasoning"]
    assert ["".join(p["text"] for p in r["content"]) for r in reasoning] == [
        "I need the weather.",
        "Then I answer.",
    ]
    assert calls(final) == [("toolu_01A", "get_weather", {"city": "Paris"})]
    # both signed runs go back to Anthropic with the tool result
    fx["anth"].enqueue(a_stream(a_start(), *a_text(0, "Sunny."), *a_end("end_turn")))
    output = {"type": "function_call_output", "call_id": "toolu_01A", "output": "sunny"}
    res = http.post(
        "/v1/responses",
        json={**body, "input": [*replayable(final["output"]), output]},
    )
    assert res.status_code == 200, res.text
    sent = fx["anth"].bodies[-1]["messages"]
    signatures = [
        block["signature"]
        for message in sent
        if message["role"] == "assistant"
        for block in message["content"]
        if block.get("type") == "thinking"
    ]
    assert signatures == [sig_a, sig_b]


def test_anthropic_tool_use_replayed_without_thinking_is_sent_without_it_and_said(
    http: httpx.Client, fx: dict[str, LoopbackFake]
) -> None:
    """A call replayed without its reasoning item: Anthropic (and the fake) refuse thinking
    there, so orgate leaves thinking off and says so in the warning header."""
    fx["anth"].enqueue(a_stream(a_start(), *a_text(0, "Sunny."), *a_end("end_turn")))
    res = http.post(
        "/v1/responses",
        json={
            "model": "anth-think",
            "reasoning": {"effort": "low"},
            "input": [
                {"role": "user", "content": "Weather in Paris?"},
                {
                    "type": "function_call",
                    "call_id": "toolu_9",
                    "name": "weather",
                    "arguments": "{}",
                },
                {"type": "function_call_output", "call_id": "toolu_9", "output": "sunny"},
            ],
        },
    )
    assert res.status_code == 200, res.text
    validate("ResponseResource", res.json())
    assert "thinking" not in fx["anth"].bodies[-1]
    assert "upstream: reasoning left off" in res.headers["x-orgate-gate-warnings"]
