"""Spec conformance over HTTP: every body and streamed event validates against the official OpenAPI
document.

Each scenario runs through the built-in model and through ``openai-chat`` to the
fake upstream, non-streaming and streaming; streams are checked against the
event grammar (``check_sse``) and the stream's final response must equal the
non-streaming shape rules.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.fakes.openai_chat_upstream import FakeOpenAIChat, Script, text, tool_calls
from tests.support.spec import check_sse, validate

WEATHER_TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Get the current weather for a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
        "required": ["city", "unit"],
        "additionalProperties": False,
    },
}
IMAGE = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQ"
    "AAAABJRU5ErkJggg=="
)

SCENARIOS: dict[str, dict[str, Any]] = {
    "string_input": {"input": "Hello there"},
    "plain_text": {
        "input": [
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "Hello there"}],
            }
        ]
    },
    "untyped_message": {"input": [{"role": "user", "content": "Hello there"}]},
    "system_prompt": {
        "instructions": "Be brief.",
        "input": [
            {"role": "system", "content": "You are a test."},
            {"role": "developer", "content": "Answer."},
            {"role": "user", "content": "Hi"},
        ],
    },
    "multi_turn": {
        "input": [
            {"role": "user", "content": "Hi"},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Hello!"}],
            },
            {"role": "user", "content": "How are you?"},
        ]
    },
    "image_input": {
        "input": [
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "What is this?"},
                    {"type": "input_image", "image_url": IMAGE, "detail": "low"},
                ],
            }
        ]
    },
    "tool_call": {"input": "What is the weather in Paris?", "tools": [WEATHER_TOOL]},
    "tool_output_round_trip": {
        "input": [
            {"role": "user", "content": "What is the weather in Paris?"},
            {
                "type": "function_call",
                "call_id": "call_1",
                "name": "get_weather",
                "arguments": '{"city":"Paris","unit":"c"}',
                "status": "completed",
            },
            {"type": "function_call_output", "call_id": "call_1", "output": '{"temp": 21}'},
        ],
        "tools": [WEATHER_TOOL],
    },
    "truncation": {"input": " ".join(f"word{i}" for i in range(40)), "max_output_tokens": 16},
}


def upstream_reply(name: str, body: dict[str, Any]) -> Script:
    """What the fake upstream answers for each scenario (the real wire shapes)."""
    if name == "tool_call":
        return tool_calls(("get_weather", '{"city": "Paris", "unit": "c"}'), fragments=4)
    if name == "truncation":
        return text(" ".join(f"w{i}" for i in range(16)), finish_reason="length")
    if name == "tool_output_round_trip":
        return text("It is 21 degrees in Paris.")
    return text("Hello from upstream, friend.")


MODELS = ["orgate/echo", "fake-chat"]


def _post(http: httpx.Client, payload: dict[str, Any]) -> httpx.Response:
    return http.post("/v1/responses", json=payload)


def _check_final(name: str, response: dict[str, Any]) -> None:
    validate("ResponseResource", response)
    assert response["id"].startswith("resp_")
    for item in response["output"]:
        prefix = {"message": "msg_", "function_call": "fc_", "reasoning": "rs_"}[item["type"]]
        assert item["id"].startswith(prefix)
    if name == "tool_call":
        calls = [i for i in response["output"] if i["type"] == "function_call"]
        assert calls and calls[0]["name"] == "get_weather"
        args = json.loads(calls[0]["arguments"])
        assert set(args) == {"city", "unit"} and args["unit"] in ("c", "f")
        assert response["status"] == "completed"
    elif name == "truncation":
        assert response["status"] == "incomplete"
        assert response["incomplete_details"] == {"reason": "max_output_tokens"}
        assert response["output"][-1]["status"] == "incomplete"
    else:
        assert response["status"] == "completed", response
        assert response["output"][-1]["type"] == "message"
        assert (
            response["usage"]["total_tokens"]
            == response["usage"]["input_tokens"] + response["usage"]["output_tokens"]
        )


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_non_stream_body_validates(
    http: httpx.Client, fake: FakeOpenAIChat, model: str, name: str
) -> None:
    fake.handler = lambda body: upstream_reply(name, body)
    res = _post(http, {"model": model, **SCENARIOS[name]})
    assert res.status_code == 200, res.text
    assert res.headers["content-type"].startswith("application/json")
    _check_final(name, res.json())


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_stream_events_validate(
    http: httpx.Client, fake: FakeOpenAIChat, model: str, name: str
) -> None:
    fake.handler = lambda body: upstream_reply(name, body)
    res = _post(http, {"model": model, "stream": True, **SCENARIOS[name]})
    assert res.status_code == 200, res.text
    assert res.headers["content-type"].startswith("text/event-stream")
    events = check_sse(res.text)
    assert events[0]["type"] == "response.created" and events[1]["type"] == "response.in_progress"
    _check_final(name, events[-1]["response"])


def test_builtin_echoes_the_last_user_message(http: httpx.Client) -> None:
    res = _post(http, SCENARIOS["multi_turn"] | {"model": "orgate/echo"})
    assert res.json()["output"][0]["content"][0]["text"] == "How are you?"


def test_builtin_quotes_a_tool_output(http: httpx.Client) -> None:
    res = _post(http, SCENARIOS["tool_output_round_trip"] | {"model": "orgate/echo"})
    assert res.json()["output"][0]["content"][0]["text"] == 'get_weather returned: {"temp": 21}'


def test_openai_chat_mapping_reaches_upstream(http: httpx.Client, fake: FakeOpenAIChat) -> None:
    fake.handler = lambda body: text("ok")
    res = _post(
        http,
        SCENARIOS["tool_output_round_trip"]
        | {"model": "fake-chat", "instructions": "Be brief.", "temperature": 0.5},
    )
    assert res.status_code == 200, res.text
    body = fake.bodies[-1]
    assert body["model"] == "fake-model"
    assert body["temperature"] == 0.5
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user", "assistant", "tool"]
    assert body["messages"][2]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert body["messages"][3]["tool_call_id"] == "call_1"
    assert fake.requests[-1].headers.get("Authorization") == "Bearer upstream-secret"


def test_stream_final_matches_output_item_done(http: httpx.Client) -> None:
    res = _post(http, {"model": "orgate/echo", "stream": True, "input": "one two three four five"})
    events = check_sse(res.text)
    deltas = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert deltas == "one two three four five"
    assert [e["delta"] for e in events if e["type"] == "response.output_text.delta"] == [
        "one ",
        "two ",
        "three ",
        "four ",
        "five",
    ]
    done_items = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert events[-1]["response"]["output"] == done_items
    seq = [e["sequence_number"] for e in events]
    assert seq == list(range(len(seq)))
