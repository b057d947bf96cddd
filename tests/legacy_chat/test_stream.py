"""Responses event sequences → ``chat.completion.chunk`` lines (pure, no server).

Event sequences come from the engine's real ``ResponseBuilder`` (see
``recorded.py``) plus one hand-recorded sequence; every chunk is checked with
the official SDK's ``ChatCompletionChunk`` model and the stream grammar.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from openai.types.chat import ChatCompletionChunk
from tests.legacy_chat.recorded import run, run_failing

from orgate.engine.padding import PAD_TO
from orgate.legacy_chat.stream import DONE, ChunkTranslator, encode
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

USAGE = Usage(input_tokens=5, output_tokens=9, cached_tokens=1, reasoning_tokens=4)


def translate_all(events: list[dict[str, Any]], *, include_usage: bool = False) -> list[Any]:
    t = ChunkTranslator(include_usage=include_usage)
    out: list[Any] = []
    for event in events:
        out.extend(t.feed(event))
    out.extend(t.close())
    return out


def check_grammar(payloads: list[Any], *, include_usage: bool = False) -> list[dict[str, Any]]:
    """The chat stream grammar; returns the chunks (without [DONE])."""
    assert payloads[-1] == DONE
    assert payloads.count(DONE) == 1
    chunks = payloads[:-1]
    for c in chunks:
        assert isinstance(c, dict)
        ChatCompletionChunk.model_validate(c)
        assert c["object"] == "chat.completion.chunk"
        assert ("usage" in c) == include_usage
    # The role comes first, in OpenAI's shape for what follows (text, refusal or a tool call).
    first = chunks[0]["choices"][0]["delta"]
    assert first in (
        {"role": "assistant", "content": ""},
        {"role": "assistant", "content": None, "refusal": ""},
    ) or (first["role"] == "assistant" and first["content"] is None and "tool_calls" in first)
    assert sum(1 for c in chunks if "role" in (c["choices"] or [{}])[0].get("delta", {})) == 1
    finishes = [c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    assert len(finishes) == 1
    assert finishes[0]["choices"][0]["delta"] == {}
    assert len({(c["id"], c["created"], c["model"]) for c in chunks}) == 1
    if include_usage:
        assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] is not None
        assert chunks[-2] is finishes[0]
        assert all(c["usage"] is None for c in chunks[:-1])
    else:
        assert chunks[-1] is finishes[0]
    return chunks


def tool_calls_of(chunks: list[dict[str, Any]]) -> list[dict[str, str]]:
    calls: dict[int, dict[str, str]] = {}
    for c in chunks:
        for choice in c["choices"]:
            for tc in choice["delta"].get("tool_calls", ()):
                if tc["index"] not in calls:
                    # The first delta of a call carries id, type, name and arguments "".
                    assert tc["id"] and tc["type"] == "function" and tc["function"]["name"]
                    assert tc["function"]["arguments"] == ""
                    calls[tc["index"]] = {
                        "id": tc["id"],
                        "name": tc["function"]["name"],
                        "arguments": "",
                    }
                else:
                    assert set(tc) == {"index", "function"} and set(tc["function"]) == {"arguments"}
                    calls[tc["index"]]["arguments"] += tc["function"]["arguments"]
    assert sorted(calls) == list(range(len(calls)))
    return [calls[i] for i in sorted(calls)]


def text_of(chunks: list[dict[str, Any]], key: str = "content") -> str:
    return "".join(c["choices"][0]["delta"].get(key) or "" for c in chunks if c["choices"])


def test_text_stream() -> None:
    events = run([TextDelta("Hel"), TextDelta("lo"), Finish("stop", USAGE)])
    chunks = check_grammar(translate_all(events))
    assert text_of(chunks) == "Hello"
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    resp_id = events[0]["response"]["id"]
    assert chunks[0]["id"] == "chatcmpl-" + resp_id.removeprefix("resp_")
    assert chunks[0]["model"] == "gpt-test" and chunks[0]["created"] == 1_700_000_000
    assert chunks[0]["system_fingerprint"] is None


def test_usage_chunk_when_asked() -> None:
    events = run([TextDelta("x"), Finish("stop", USAGE)])
    chunks = check_grammar(translate_all(events, include_usage=True), include_usage=True)
    assert chunks[-1]["usage"] == {
        "prompt_tokens": 5,
        "completion_tokens": 9,
        "total_tokens": 14,
        "prompt_tokens_details": {"cached_tokens": 1},
        "completion_tokens_details": {"reasoning_tokens": 4},
    }


def test_tool_call_deltas_concatenate_to_valid_json() -> None:
    events = run(
        [
            ReasoningDelta("hmm"),
            TextDelta("Let me look."),
            ToolCallStart(0, "call_a", "get_weather"),
            ToolCallDelta(0, '{"ci'),
            ToolCallDelta(0, 'ty": "Par'),
            ToolCallDelta(0, 'is"}'),
            ToolCallStart(1, "call_b", "get_time"),
            ToolCallDelta(1, '{"tz":'),
            ToolCallDelta(1, ' "CET"}'),
            Finish("tool_calls", USAGE),
        ]
    )
    chunks = check_grammar(translate_all(events, include_usage=True), include_usage=True)
    calls = tool_calls_of(chunks)
    assert [(c["id"], c["name"]) for c in calls] == [
        ("call_a", "get_weather"),
        ("call_b", "get_time"),
    ]
    assert [json.loads(c["arguments"]) for c in calls] == [{"city": "Paris"}, {"tz": "CET"}]
    assert text_of(chunks) == "Let me look."
    finish = next(c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"])
    assert finish["choices"][0]["finish_reason"] == "tool_calls"


def test_obfuscation_pads_each_delta_chunk_when_asked() -> None:
    events = run(
        [
            TextDelta("Héllo"),
            RefusalDelta("no"),
            ToolCallStart(0, "call_a", "f"),
            ToolCallDelta(0, '{"a": 1}'),
            Finish("tool_calls"),
        ]
    )
    t = ChunkTranslator(obfuscation=True)
    chunks = check_grammar([p for e in events for p in t.feed(e)] + t.close())
    assert all("obfuscation" in c for c in chunks)
    for c in chunks:
        delta = c["choices"][0]["delta"]
        added = (
            delta.get("content")
            or delta.get("refusal")
            or "".join(
                call["function"].get("arguments") or "" for call in delta.get("tool_calls") or ()
            )
        )
        assert (len(added.encode()) + len(c["obfuscation"])) % PAD_TO == 0
    assert not any("obfuscation" in c for c in check_grammar(translate_all(events)))


def test_refusal_stream() -> None:
    chunks = check_grammar(
        translate_all(run([RefusalDelta("no "), RefusalDelta("way"), Finish("stop")]))
    )
    assert text_of(chunks, "refusal") == "no way"
    assert text_of(chunks) == ""


@pytest.mark.parametrize(
    ("reason", "chat"), [("length", "length"), ("content_filter", "content_filter")]
)
def test_incomplete_finish_reasons(reason: str, chat: str) -> None:
    chunks = check_grammar(translate_all(run([TextDelta("x"), Finish(reason)])))
    assert chunks[-1]["choices"][0]["finish_reason"] == chat


def test_failure_mid_stream_is_an_error_line_then_done() -> None:
    events = run_failing(
        [TextDelta("partial")],
        ApiError(502, "upstream died", type="server_error", code="upstream_error"),
    )
    payloads = translate_all(events, include_usage=True)
    assert payloads[-1] == DONE
    assert payloads[-2] == {
        "error": {
            "message": "upstream died",
            "type": "server_error",
            "param": None,
            "code": "upstream_error",
        }
    }
    assert sum(1 for p in payloads if isinstance(p, dict) and "error" in p) == 1
    assert not any(
        isinstance(p, dict) and p.get("choices") and p["choices"][0]["finish_reason"]
        for p in payloads
    )
    assert text_of([p for p in payloads[:-2]]) == "partial"


def test_failed_without_error_event_and_truncated_stream() -> None:
    failed = {
        "type": "response.failed",
        "sequence_number": 3,
        "response": {
            "id": "resp_x",
            "status": "failed",
            "error": {"code": "boom", "message": "it broke"},
        },
    }
    payloads = translate_all([failed])
    assert payloads[-2]["error"]["code"] == "boom" and payloads[-1] == DONE
    # A stream that stops without a terminal event still ends with an error and [DONE].
    events = run([TextDelta("a"), Finish("stop")])[:-3]
    payloads = translate_all(events)
    assert payloads[-2]["error"]["type"] == "server_error" and payloads[-1] == DONE


def test_raised_api_error_ends_the_stream() -> None:
    t = ChunkTranslator()
    t.feed(run([TextDelta("a"), Finish("stop")])[0])
    payloads = t.fail(ApiError(429, "slow", type="rate_limit_error", code="rate_limited"))
    assert payloads[0]["error"]["code"] == "rate_limited" and payloads[-1] == DONE
    assert t.close() == [] and t.done


def test_events_after_the_end_are_ignored() -> None:
    events = run([TextDelta("a"), Finish("stop")])
    t = ChunkTranslator()
    for e in events:
        t.feed(e)
    assert t.feed(events[-1]) == [] and t.close() == []


# A hand-recorded sequence (as /v1/responses streams it), including events the
# builder does not emit today: a function call whose arguments arrive only in
# output_item.done, and provider-specific slugged events.
RECORDED = [
    {
        "type": "response.created",
        "sequence_number": 0,
        "response": {
            "id": "resp_rec",
            "created_at": 42,
            "model": "m",
            "status": "in_progress",
            "output": [],
        },
    },
    {
        "type": "response.in_progress",
        "sequence_number": 1,
        "response": {
            "id": "resp_rec",
            "created_at": 42,
            "model": "m",
            "status": "in_progress",
            "output": [],
        },
    },
    {"type": "openai:web_search_call.searching", "sequence_number": 2},
    {
        "type": "response.output_item.added",
        "sequence_number": 3,
        "output_index": 0,
        "item": {
            "id": "fc_1",
            "type": "function_call",
            "status": "in_progress",
            "call_id": "call_1",
            "name": "f",
            "arguments": "",
        },
    },
    {
        "type": "response.function_call_arguments.delta",
        "sequence_number": 4,
        "item_id": "fc_1",
        "output_index": 0,
        "delta": '{"a":',
    },
    {
        "type": "response.function_call_arguments.done",
        "sequence_number": 5,
        "item_id": "fc_1",
        "output_index": 0,
        "arguments": '{"a": 1}',
    },
    {
        "type": "response.output_item.done",
        "sequence_number": 6,
        "output_index": 0,
        "item": {
            "id": "fc_1",
            "type": "function_call",
            "status": "completed",
            "call_id": "call_1",
            "name": "f",
            "arguments": '{"a": 1}',
        },
    },
    {
        "type": "response.output_item.done",
        "sequence_number": 7,
        "output_index": 1,
        "item": {
            "id": "fc_2",
            "type": "function_call",
            "status": "completed",
            "call_id": "call_2",
            "name": "g",
            "arguments": "{}",
        },
    },
    {
        "type": "response.completed",
        "sequence_number": 8,
        "response": {
            "id": "resp_rec",
            "created_at": 42,
            "model": "m",
            "status": "completed",
            "output": [],
            "usage": {
                "input_tokens": 1,
                "output_tokens": 2,
                "total_tokens": 3,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 0},
            },
        },
    },
]


def test_recorded_sequence() -> None:
    payloads = translate_all(RECORDED, include_usage=True)
    chunks = check_grammar(payloads, include_usage=True)
    assert chunks[0]["id"] == "chatcmpl-rec" and chunks[0]["created"] == 42
    calls = tool_calls_of(chunks)
    assert [(c["id"], json.loads(c["arguments"])) for c in calls] == [
        ("call_1", {"a": 1}),
        ("call_2", {}),
    ]
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-1]["usage"]["total_tokens"] == 3


def test_encode() -> None:
    assert encode(DONE) == b"data: [DONE]\n\n"
    assert encode({"a": 1}) == b'data: {"a":1}\n\n'


def test_events_that_add_nothing_send_nothing() -> None:
    t = ChunkTranslator()
    t.feed(
        {"type": "response.created", "response": {"id": "resp_q", "created_at": 3, "model": "m"}}
    )
    assert t.feed({"type": "response.output_text.delta", "output_index": 0, "delta": ""}) == []
    assert t.feed({"type": "response.refusal.delta", "output_index": 0, "delta": ""}) == []
    # Arguments of a call that never started, and an empty piece of a call that did.
    assert (
        t.feed({"type": "response.function_call_arguments.delta", "output_index": 5, "delta": "{"})
        == []
    )
    item = {"type": "function_call", "call_id": "c", "name": "f", "arguments": ""}
    assert len(t.feed({"type": "response.output_item.added", "output_index": 1, "item": item})) == 1
    assert (
        t.feed({"type": "response.function_call_arguments.delta", "output_index": 1, "delta": ""})
        == []
    )
    # Items other than calls, and events with no chat counterpart.
    message = {"type": "message", "role": "assistant", "content": []}
    assert t.feed({"type": "response.output_item.added", "output_index": 2, "item": message}) == []
    assert t.feed({"type": "response.output_item.done", "output_index": 2, "item": message}) == []
    assert t.feed({"type": "response.reasoning_summary_text.delta", "delta": "x"}) == []
    assert t.feed({"no": "type"}) == []
    assert not t.done
    # The role chunk was sent with the call: the finish chunk carries no second one.
    payloads = t.feed(
        {"type": "response.completed", "response": {"id": "resp_q", "status": "completed"}}
    )
    assert [c["choices"][0]["finish_reason"] for c in payloads[:-1]] == ["tool_calls"]
    assert payloads[-1] == DONE and t.done
    assert payloads[0]["id"] == "chatcmpl-q" and payloads[0]["created"] == 3


def test_queued_and_in_progress_adopt_the_response_too() -> None:
    t = ChunkTranslator()
    assert t.feed({"type": "response.queued", "response": {"id": "resp_a", "model": "m1"}}) == []
    assert t.feed({"type": "response.in_progress", "response": {"service_tier": "flex"}}) == []
    chunk = t.feed({"type": "response.output_text.delta", "output_index": 0, "delta": "hi"})[-1]
    assert (chunk["id"], chunk["model"], chunk["service_tier"]) == ("chatcmpl-a", "m1", "flex")


def test_an_error_event_then_the_end_of_the_stream_sends_one_error() -> None:
    t = ChunkTranslator()
    sent = t.feed({"type": "error", "error": {"type": "server_error", "message": "x"}})
    assert len(sent) == 1 and "error" in sent[0]
    assert t.close() == [DONE]
    assert t.fail(ApiError(500, "late", type="server_error")) == []
