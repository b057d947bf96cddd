"""Final Responses ``response`` → ``chat.completion``."""

from __future__ import annotations

import json

from openai.types.chat import ChatCompletion
from tests.legacy_chat.recorded import run, run_failing

from orgate.legacy_chat import translate
from orgate.neutral import (
    Finish,
    ReasoningDelta,
    RefusalDelta,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)
from orgate.protocol.errors import ApiError

USAGE = Usage(input_tokens=11, output_tokens=7, cached_tokens=3, reasoning_tokens=2)


def completion(events: list) -> dict:
    final = events[-1]["response"]
    wire = translate.to_chat_completion(final).model_dump(mode="json")
    ChatCompletion.model_validate(wire)  # the official SDK's model accepts it
    return wire


def test_text_completion() -> None:
    wire = completion(run([TextDelta("Hel"), TextDelta("lo"), Finish("stop", USAGE)]))
    resp_id = wire["id"]
    assert resp_id.startswith("chatcmpl-")
    assert wire["object"] == "chat.completion"
    assert wire["created"] == 1_700_000_000
    assert wire["model"] == "gpt-test"
    assert wire["system_fingerprint"] is None
    assert wire["choices"] == [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "Hello",
                "refusal": None,
                "annotations": [],
            },
            "finish_reason": "stop",
            "logprobs": None,
        }
    ]
    assert wire["usage"] == {
        "prompt_tokens": 11,
        "completion_tokens": 7,
        "total_tokens": 18,
        "prompt_tokens_details": {"cached_tokens": 3},
        "completion_tokens_details": {"reasoning_tokens": 2},
    }


def test_id_is_derived_from_the_response_id() -> None:
    events = run([TextDelta("x"), Finish("stop")])
    resp_id = events[-1]["response"]["id"]
    assert translate.to_chat_completion(
        events[-1]["response"]
    ).id == "chatcmpl-" + resp_id.removeprefix("resp_")


def test_tool_calls_completion() -> None:
    wire = completion(
        run(
            [
                ReasoningDelta("thinking"),
                ToolCallStart(0, "call_a", "get_weather"),
                ToolCallDelta(0, '{"city":'),
                ToolCallDelta(0, '"Paris"}'),
                ToolCallStart(1, "call_b", "get_time"),
                ToolCallDelta(1, "{}"),
                Finish("tool_calls", USAGE),
            ]
        )
    )
    message = wire["choices"][0]["message"]
    assert message["content"] is None
    assert message["tool_calls"] == [
        {
            "id": "call_a",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
        },
        {"id": "call_b", "type": "function", "function": {"name": "get_time", "arguments": "{}"}},
    ]
    assert json.loads(message["tool_calls"][0]["function"]["arguments"]) == {"city": "Paris"}
    assert wire["choices"][0]["finish_reason"] == "tool_calls"


def test_text_then_tool_call() -> None:
    wire = completion(
        run(
            [
                TextDelta("Checking."),
                ToolCallStart(0, "c1", "f"),
                ToolCallDelta(0, "{}"),
                Finish("tool_calls"),
            ]
        )
    )
    message = wire["choices"][0]["message"]
    assert message["content"] == "Checking."
    assert [c["id"] for c in message["tool_calls"]] == ["c1"]


def test_refusal() -> None:
    wire = completion(run([RefusalDelta("I can't "), RefusalDelta("help."), Finish("stop")]))
    message = wire["choices"][0]["message"]
    assert message["content"] is None
    assert message["refusal"] == "I can't help."
    assert "tool_calls" not in message


def test_length_and_content_filter() -> None:
    wire = completion(run([TextDelta("trunc"), Finish("length")]))
    assert wire["choices"][0]["finish_reason"] == "length"
    assert wire["choices"][0]["message"]["content"] == "trunc"
    wire = completion(run([TextDelta("x"), Finish("content_filter")]))
    assert wire["choices"][0]["finish_reason"] == "content_filter"


def test_url_citations_become_chat_annotations() -> None:
    response = {
        "id": "resp_1",
        "created_at": 1,
        "model": "m",
        "status": "completed",
        "output": [
            {
                "type": "message",
                "role": "assistant",
                "content": [
                    {"type": "output_text", "text": "ab", "annotations": []},
                    {
                        "type": "output_text",
                        "text": "cd",
                        "annotations": [
                            {
                                "type": "url_citation",
                                "url": "https://x.test",
                                "title": "X",
                                "start_index": 0,
                                "end_index": 2,
                            }
                        ],
                    },
                ],
            }
        ],
        "usage": None,
    }
    wire = translate.to_chat_completion(response).model_dump(mode="json")
    assert wire["choices"][0]["message"]["content"] == "abcd"
    assert wire["choices"][0]["message"]["annotations"] == [
        {
            "type": "url_citation",
            "url_citation": {
                "start_index": 2,
                "end_index": 4,
                "title": "X",
                "url": "https://x.test",
            },
        }
    ]
    assert wire["usage"] is None


def test_failed_response_error_maps_to_api_error() -> None:
    events = run_failing(
        [TextDelta("x")], ApiError(429, "slow down", type="rate_limit_error", code="rate_limited")
    )
    error_event = next(e for e in events if e["type"] == "error")
    err = translate.error_from_payload(error_event["error"])
    assert (err.status, err.type, err.code, err.message) == (
        429,
        "rate_limit_error",
        "rate_limited",
        "slow down",
    )
    failed = events[-1]["response"]
    err = translate.error_from_payload(failed["error"])
    assert err.status == 500
    assert err.code == "rate_limited"
