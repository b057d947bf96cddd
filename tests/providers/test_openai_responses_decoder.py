"""Pure decoder tests on recorded Responses API SSE byte streams, split at awkward boundaries."""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest

from orgate.neutral import (
    ExtensionItem,
    Finish,
    ModelEvent,
    ReasoningDelta,
    ReasoningEncrypted,
    ReasoningStart,
    RefusalDelta,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)
from orgate.protocol.errors import ApiError
from orgate.providers.openai_responses import StreamDecoder, decode_response

# The shape of an OpenAI stream (ids shortened, the response objects trimmed):
# reasoning with a summary and encrypted content, a hosted web search, text, a
# function call.
_EVENTS: list[dict[str, Any]] = [
    {
        "type": "response.created",
        "response": {"id": "resp_1", "status": "in_progress", "output": []},
    },
    {
        "type": "response.in_progress",
        "response": {"id": "resp_1", "status": "in_progress", "output": []},
    },
    {
        "type": "response.output_item.added",
        "output_index": 0,
        "item": {"id": "rs_1", "type": "reasoning", "summary": []},
    },
    {
        "type": "response.reasoning_summary_part.added",
        "item_id": "rs_1",
        "output_index": 0,
        "summary_index": 0,
        "part": {"type": "summary_text", "text": ""},
    },
    {
        "type": "response.reasoning_summary_text.delta",
        "item_id": "rs_1",
        "output_index": 0,
        "summary_index": 0,
        "delta": "Need the ",
        "obfuscation": "a",
    },
    {
        "type": "response.reasoning_summary_text.delta",
        "item_id": "rs_1",
        "output_index": 0,
        "summary_index": 0,
        "delta": "weather in Zürich.",
        "obfuscation": "b",
    },
    {
        "type": "response.reasoning_summary_text.done",
        "item_id": "rs_1",
        "output_index": 0,
        "summary_index": 0,
        "text": "Need the weather in Zürich.",
    },
    {
        "type": "response.output_item.done",
        "output_index": 0,
        "item": {
            "id": "rs_1",
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "Need the weather in Zürich."}],
            "encrypted_content": "gAAAAABo-ENC",
        },
    },
    {
        "type": "response.output_item.added",
        "output_index": 1,
        "item": {"id": "ws_1", "type": "web_search_call", "status": "in_progress"},
    },
    {"type": "response.web_search_call.searching", "output_index": 1, "item_id": "ws_1"},
    {
        "type": "response.output_item.done",
        "output_index": 1,
        "item": {
            "id": "ws_1",
            "type": "web_search_call",
            "status": "completed",
            "action": {"type": "search", "query": "zurich weather"},
        },
    },
    {
        "type": "response.output_item.added",
        "output_index": 2,
        "item": {
            "id": "msg_1",
            "type": "message",
            "status": "in_progress",
            "content": [],
            "role": "assistant",
        },
    },
    {
        "type": "response.content_part.added",
        "item_id": "msg_1",
        "output_index": 2,
        "content_index": 0,
        "part": {"type": "output_text", "annotations": [], "text": ""},
    },
    {
        "type": "response.output_text.delta",
        "item_id": "msg_1",
        "output_index": 2,
        "content_index": 0,
        "delta": "Checking ",
        "logprobs": [],
    },
    {
        "type": "response.output_text.delta",
        "item_id": "msg_1",
        "output_index": 2,
        "content_index": 0,
        "delta": "now ⛅",
        "logprobs": [],
    },
    {
        "type": "response.output_text.done",
        "item_id": "msg_1",
        "output_index": 2,
        "content_index": 0,
        "text": "Checking now ⛅",
        "logprobs": [],
    },
    {
        "type": "response.output_item.done",
        "output_index": 2,
        "item": {
            "id": "msg_1",
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "annotations": [], "text": "Checking now ⛅"}],
        },
    },
    {
        "type": "response.output_item.added",
        "output_index": 3,
        "item": {
            "id": "fc_1",
            "type": "function_call",
            "status": "in_progress",
            "arguments": "",
            "call_id": "call_A",
            "name": "get_weather",
        },
    },
    {
        "type": "response.function_call_arguments.delta",
        "item_id": "fc_1",
        "output_index": 3,
        "delta": '{"city":',
    },
    {
        "type": "response.function_call_arguments.delta",
        "item_id": "fc_1",
        "output_index": 3,
        "delta": ' "Zürich"}',
    },
    {
        "type": "response.function_call_arguments.done",
        "item_id": "fc_1",
        "output_index": 3,
        "arguments": '{"city": "Zürich"}',
    },
    {
        "type": "response.output_item.done",
        "output_index": 3,
        "item": {
            "id": "fc_1",
            "type": "function_call",
            "status": "completed",
            "arguments": '{"city": "Zürich"}',
            "call_id": "call_A",
            "name": "get_weather",
        },
    },
    {
        "type": "response.completed",
        "response": {
            "id": "resp_1",
            "status": "completed",
            "output": [],
            "usage": {
                "input_tokens": 300,
                "input_tokens_details": {"cached_tokens": 256},
                "output_tokens": 120,
                "output_tokens_details": {"reasoning_tokens": 64},
                "total_tokens": 420,
            },
        },
    },
]


def frames(*events: dict[str, Any], done: bool = False) -> bytes:
    out = b""
    for n, e in enumerate(events):
        out += (
            b"event: "
            + e["type"].encode()
            + b"\ndata: "
            + orjson.dumps({**e, "sequence_number": n})
            + b"\n\n"
        )
    return out + (b"data: [DONE]\n\n" if done else b"")


RECORDED = frames(*_EVENTS)

ORIGIN = "openai-responses https://api.openai.com/v1"
WEB_SEARCH = {
    "id": "ws_1",
    "type": "web_search_call",
    "status": "completed",
    "action": {"type": "search", "query": "zurich weather"},
}

EXPECTED: list[Any] = [
    ReasoningStart(),
    ReasoningDelta("Need the weather in Zürich.", "summary"),
    ReasoningEncrypted("gAAAAABo-ENC"),
    ExtensionItem(WEB_SEARCH, ORIGIN),
    TextDelta("Checking now ⛅"),
    ToolCallStart(0, "call_A", "get_weather"),
    ToolCallDelta(0, '{"city": "Zürich"}'),
    Finish(
        "tool_calls",
        Usage(input_tokens=300, output_tokens=120, cached_tokens=256, reasoning_tokens=64),
    ),
]


def decode(chunks: list[bytes]) -> tuple[list[ModelEvent], StreamDecoder]:
    decoder = StreamDecoder("gpt", ORIGIN)
    events: list[ModelEvent] = []
    for chunk in chunks:
        events += decoder.feed(chunk)
    events += decoder.close()
    return events, decoder


def merged(events: list[ModelEvent]) -> list[Any]:
    out: list[Any] = []
    for e in events:
        if out and type(e) is type(out[-1]) and isinstance(e, TextDelta | RefusalDelta):
            out[-1] = type(e)(out[-1].text + e.text)
        elif (
            out
            and isinstance(e, ReasoningDelta)
            and isinstance(out[-1], ReasoningDelta)
            and e.part == out[-1].part
        ):
            out[-1] = ReasoningDelta(out[-1].text + e.text, e.part)
        elif (
            out
            and isinstance(e, ToolCallDelta)
            and isinstance(out[-1], ToolCallDelta)
            and e.index == out[-1].index
        ):
            out[-1] = ToolCallDelta(e.index, out[-1].arguments + e.arguments)
        else:
            out.append(e)
    return out


def test_whole_stream() -> None:
    events, decoder = decode([RECORDED])
    assert merged(events) == EXPECTED
    assert decoder.finished
    assert decoder.skipped == {}


def test_every_two_way_split() -> None:
    for cut in range(1, len(RECORDED), 3):
        assert merged(decode([RECORDED[:cut], RECORDED[cut:]])[0]) == EXPECTED, cut


def test_random_splits_and_done_marker() -> None:
    data = frames(*_EVENTS, done=True).replace(b"\n", b"\r\n")
    rng = random.Random(11)
    for _ in range(30):
        cuts = sorted(rng.sample(range(1, len(data)), 20))
        pieces = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
        assert merged(decode(pieces)[0]) == EXPECTED


def call_events(
    oi: int, call_id: str, args: list[str], *, with_deltas: bool = True
) -> dict[str, list[dict[str, Any]]]:
    item = {
        "id": f"fc_{oi}",
        "type": "function_call",
        "call_id": call_id,
        "name": "f",
        "arguments": "",
    }
    full = "".join(args)
    return {
        "added": [
            {
                "type": "response.output_item.added",
                "output_index": oi,
                "item": {**item, "status": "in_progress"},
            }
        ],
        "deltas": [
            {
                "type": "response.function_call_arguments.delta",
                "output_index": oi,
                "item_id": item["id"],
                "delta": a,
            }
            for a in args
        ]
        if with_deltas
        else [],
        "done": [
            {
                "type": "response.function_call_arguments.done",
                "output_index": oi,
                "item_id": item["id"],
                "arguments": full,
            },
            {
                "type": "response.output_item.done",
                "output_index": oi,
                "item": {**item, "arguments": full, "status": "completed"},
            },
        ],
    }


COMPLETED = {"type": "response.completed", "response": {"status": "completed", "usage": None}}


def test_interleaved_calls_come_out_one_after_another() -> None:
    a = call_events(0, "A", ['{"x":', "1}"])
    b = call_events(1, "B", ['{"y":', "2}"])
    events, _ = decode(
        [
            frames(
                *a["added"],
                *b["added"],
                a["deltas"][0],
                b["deltas"][0],
                a["deltas"][1],
                b["deltas"][1],
                *b["done"],
                *a["done"],
                COMPLETED,
            )
        ]
    )
    assert merged(events) == [
        ToolCallStart(0, "A", "f"),
        ToolCallDelta(0, '{"x":1}'),
        ToolCallStart(1, "B", "f"),
        ToolCallDelta(1, '{"y":2}'),
        Finish("tool_calls", None),
    ]


def test_an_extension_item_done_inside_an_open_call_follows_that_call() -> None:
    a = call_events(0, "A", ['{"x":', "1}"])
    item = {"id": "fs_1", "type": "file_search_call", "status": "completed", "queries": ["q"]}
    events, _ = decode(
        [
            frames(
                *a["added"],
                a["deltas"][0],
                {"type": "response.output_item.done", "output_index": 1, "item": item},
                a["deltas"][1],
                *a["done"],
                COMPLETED,
            )
        ]
    )
    assert merged(events) == [
        ToolCallStart(0, "A", "f"),
        ToolCallDelta(0, '{"x":1}'),
        ExtensionItem(item, ORIGIN),
        Finish("tool_calls", None),
    ]


def test_namespaced_items_are_passed_on_whole_and_spec_types_without_an_event_are_skipped() -> None:
    namespaced = {
        "id": "x_1",
        "type": "openai:web_search_preview_call",
        "status": "completed",
        "extra": None,
    }
    stray = {"id": "fco_1", "type": "function_call_output", "call_id": "c", "output": "o"}
    events, decoder = decode(
        [
            frames(
                {
                    "type": "response.output_item.added",
                    "output_index": 0,
                    "item": {**namespaced, "status": "in_progress"},
                },
                {"type": "response.output_item.done", "output_index": 0, "item": namespaced},
                {
                    "type": "response.output_item.done",
                    "output_index": 0,
                    "item": namespaced,
                },  # repeated: once
                {"type": "response.output_item.done", "output_index": 1, "item": stray},
                COMPLETED,
            )
        ]
    )
    assert events == [ExtensionItem(namespaced, ORIGIN), Finish("stop", None)]
    assert decoder.skipped == {"function_call_output": 1}


def test_arguments_only_in_done_events_are_passed_on() -> None:
    a = call_events(0, "A", ['{"x":1}'], with_deltas=False)
    events, _ = decode([frames(*a["added"], *a["done"], COMPLETED)])
    assert events[:2] == [ToolCallStart(0, "A", "f"), ToolCallDelta(0, '{"x":1}')]


def test_items_only_in_done_events() -> None:
    message = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "hi"}, {"type": "refusal", "refusal": "no"}],
    }
    reasoning = {
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "s"}],
        "content": [{"type": "reasoning_text", "text": "raw"}],
    }
    call = {"type": "function_call", "call_id": "C", "name": "g", "arguments": "{}"}
    events, _ = decode(
        [
            frames(
                {"type": "response.output_item.done", "output_index": 0, "item": reasoning},
                {"type": "response.output_item.done", "output_index": 1, "item": message},
                {"type": "response.output_item.done", "output_index": 2, "item": call},
                COMPLETED,
            )
        ]
    )
    assert events == [
        ReasoningStart(),
        ReasoningDelta("s", "summary"),
        ReasoningDelta("raw", "content"),
        TextDelta("hi"),
        RefusalDelta("no"),
        ToolCallStart(0, "C", "g"),
        ToolCallDelta(0, "{}"),
        Finish("tool_calls", None),
    ]


def test_reasoning_text_and_refusal_deltas() -> None:
    events, _ = decode(
        [
            frames(
                {"type": "response.reasoning_text.delta", "output_index": 0, "delta": "think"},
                {"type": "response.reasoning.delta", "output_index": 0, "delta": "ing"},
                {"type": "response.refusal.delta", "output_index": 1, "delta": "I can't"},
                COMPLETED,
            )
        ]
    )
    assert events == [
        ReasoningDelta("think", "content"),
        ReasoningDelta("ing", "content"),
        RefusalDelta("I can't"),
        Finish("stop", None),
    ]


@pytest.mark.parametrize(
    ("reason", "finish"),
    [("max_output_tokens", "length"), ("content_filter", "content_filter"), (None, "length")],
)
def test_incomplete(reason: str | None, finish: str) -> None:
    response = {
        "status": "incomplete",
        "incomplete_details": {"reason": reason} if reason else None,
        "usage": {"input_tokens": 1, "output_tokens": 2},
    }
    events, _ = decode(
        [
            frames(
                {"type": "response.output_text.delta", "output_index": 0, "delta": "x"},
                {"type": "response.incomplete", "response": response},
            )
        ]
    )
    assert events[-1] == Finish(finish, Usage(1, 2))  # type: ignore[arg-type]


def test_failed_raises_model_error_with_upstream_message() -> None:
    response = {
        "status": "failed",
        "error": {"code": "server_error", "message": "The model crashed."},
    }
    with pytest.raises(ApiError) as err:
        decode([frames({"type": "response.failed", "response": response})])
    assert (err.value.status, err.value.type, err.value.code) == (
        502,
        "model_error",
        "server_error",
    )
    assert "The model crashed." in err.value.message and "'gpt'" in err.value.message


@pytest.mark.parametrize(
    ("event", "status"),
    [
        (
            {"type": "error", "code": "rate_limit_exceeded", "message": "slow down", "param": None},
            429,
        ),
        (
            {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "code": None,
                    "message": "bad",
                    "param": "x",
                },
            },
            400,
        ),
        ({"type": "error", "code": "server_error", "message": "oops", "param": None}, 502),
    ],
)
def test_error_events(event: dict[str, Any], status: int) -> None:
    with pytest.raises(ApiError) as err:
        decode([frames(event)])
    assert err.value.status == status


def test_cut_stream_is_not_finished() -> None:
    events, decoder = decode([frames(*_EVENTS[:14])])
    assert not decoder.finished
    assert not any(isinstance(e, Finish) for e in events)


def test_invalid_json_raises() -> None:
    with pytest.raises(ApiError):
        StreamDecoder("gpt").feed(b"data: {oops\n\n")


def test_non_streaming_response() -> None:
    body = {
        "object": "response",
        "status": "completed",
        "output": [
            {"type": "reasoning", "id": "rs", "summary": [], "encrypted_content": "ENC"},
            {
                "type": "message",
                "id": "m",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "hello"}],
            },
            {"type": "web_search_call", "id": "ws", "status": "completed"},
            {
                "type": "message",
                "id": "m2",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "after"}],
            },
        ],
        "usage": {
            "input_tokens": 5,
            "output_tokens": 6,
            "input_tokens_details": {"cached_tokens": 1},
            "output_tokens_details": {"reasoning_tokens": 2},
        },
    }
    assert decode_response(body, "gpt", ORIGIN) == [
        ReasoningStart(),
        ReasoningEncrypted("ENC"),
        TextDelta("hello"),
        ExtensionItem({"type": "web_search_call", "id": "ws", "status": "completed"}, ORIGIN),
        TextDelta("after"),
        Finish("stop", Usage(5, 6, 1, 2)),
    ]
    # counts as a compatible server may spell them: integers in the response (neutral.token_count)
    loose = {
        **body,
        "usage": {"input_tokens": 5.0, "output_tokens": "6", "input_tokens_details": None},
    }
    finish = decode_response(loose, "gpt", ORIGIN)[-1]
    assert finish == Finish("stop", Usage(5, 0, 0, 0)) and type(finish.usage.input_tokens) is int  # type: ignore[attr-defined]
    with pytest.raises(ApiError):
        decode_response({**body, "status": "failed", "error": {"code": "x", "message": "m"}}, "gpt")


def test_logprobs_ride_on_the_text_deltas_streamed_or_not() -> None:
    token = {
        "token": "hi",
        "logprob": -0.25,
        "bytes": [104, 105],
        "top_logprobs": [{"token": "hi", "logprob": -0.25, "bytes": [104, 105]}],
    }
    bare = {"token": "!", "logprob": -1}  # what a compatible server may leave out is filled in
    filled = {"token": "!", "logprob": -1, "bytes": [33], "top_logprobs": []}
    base = {"item_id": "m", "output_index": 0, "content_index": 0}
    streamed, _ = decode(
        [
            frames(
                {"type": "response.output_text.delta", **base, "delta": "hi", "logprobs": [token]},
                {"type": "response.output_text.delta", **base, "delta": "!", "logprobs": [bare]},
                {"type": "response.output_text.delta", **base, "delta": " ok", "logprobs": []},
                COMPLETED,
            )
        ]
    )
    assert streamed[:3] == [TextDelta("hi", [token]), TextDelta("!", [filled]), TextDelta(" ok")]
    message = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "hi!", "logprobs": [token, bare]}],
    }
    done_only, _ = decode(
        [
            frames(
                {"type": "response.output_item.done", "output_index": 0, "item": message}, COMPLETED
            )
        ]
    )
    assert done_only[0] == TextDelta("hi!", [token, filled])
