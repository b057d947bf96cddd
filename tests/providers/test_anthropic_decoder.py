"""Pure decoder tests on recorded Anthropic Messages SSE byte streams,
split at awkward boundaries."""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest

from orgate.neutral import (
    Finish,
    ModelEvent,
    ReasoningDelta,
    ReasoningEncrypted,
    ReasoningStart,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)
from orgate.protocol.errors import ApiError
from orgate.providers.anthropic import StreamDecoder, decode_blocks, decode_message
from orgate.providers.sse import SseParser

# Recorded from the Messages API (ids shortened): thinking, text, then a tool use
# whose JSON arrives in input_json_delta pieces, with cache usage.
RECORDED = (
    b"event: message_start\n"
    b'data: {"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant",'
    b'"model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":'
    b'{"input_tokens":12,"cache_creation_input_tokens":100,"cache_read_input_tokens":2000,'
    b'"output_tokens":1}}}\n\n'
    b"event: ping\n"
    b'data: {"type": "ping"}\n\n'
    b"event: content_block_start\n"
    b'data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking",'
    b'"thinking":"","signature":""}}\n\n'
    b"event: content_block_delta\n"
    b'data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta",'
    b'"thinking":"The user wants the weather in P\xc3\xa4ris."}}\n\n'
    b"event: content_block_delta\n"
    b'data: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta",'
    b'"signature":"EqQBCgIYAhIM1gbcDa9GJwZA"}}\n\n'
    b"event: content_block_stop\n"
    b'data: {"type":"content_block_stop","index":0}\n\n'
    b"event: content_block_start\n"
    b'data: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}\n\n'
    b"event: content_block_delta\n"
    b"data: "
    b'{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Let '
    b'me "}}\n\n'
    b"event: content_block_delta\n"
    b"data: "
    b'{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"check '
    b'\xf0\x9f\x8c\xa6"}}\n\n'
    b"event: content_block_stop\n"
    b'data: {"type":"content_block_stop","index":1}\n\n'
    b"event: content_block_start\n"
    b'data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use",'
    b'"id":"toolu_01A","name":"get_weather","input":{}}}\n\n'
    b"event: content_block_delta\n"
    b"data: "
    b'{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta",'
    b'"partial_json":""}}\n\n'
    b"event: content_block_delta\n"
    b"data: "
    b'{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta",'
    b'"partial_json":"{\\"ci"}}\n\n'
    b"event: content_block_delta\n"
    b"data: "
    b'{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta",'
    b'"partial_json":"ty\\": '
    b'\\"Paris\\"}"}}\n\n'
    b"event: content_block_stop\n"
    b'data: {"type":"content_block_stop","index":2}\n\n'
    b"event: message_delta\n"
    b'data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},'
    b'"usage":{"output_tokens":89}}\n\n'
    b"event: message_stop\n"
    b'data: {"type":"message_stop"}\n\n'
)


def decode(chunks: list[bytes]) -> list[ModelEvent]:
    decoder = StreamDecoder("claude")
    events: list[ModelEvent] = []
    for chunk in chunks:
        events += decoder.feed(chunk)
    events += decoder.close()
    assert decoder.finished
    return events


def merged(events: list[ModelEvent]) -> list[Any]:
    """Adjacent deltas of one kind joined, so splits do not matter."""
    out: list[Any] = []
    for e in events:
        if out and type(e) is type(out[-1]) and isinstance(e, TextDelta | ReasoningDelta):
            out[-1] = type(e)(out[-1].text + e.text)
        elif out and isinstance(e, ToolCallDelta) and isinstance(out[-1], ToolCallDelta):
            out[-1] = ToolCallDelta(e.index, out[-1].arguments + e.arguments)
        else:
            out.append(e)
    return out


def expected() -> list[Any]:
    return [
        ReasoningStart(),
        ReasoningDelta("The user wants the weather in Päris.", "content"),
        ReasoningEncrypted("<envelope>"),
        TextDelta("Let me check 🌦"),
        ToolCallStart(0, "toolu_01A", "get_weather"),
        ToolCallDelta(0, '{"city": "Paris"}'),
        Finish("tool_calls", Usage(input_tokens=2112, output_tokens=89, cached_tokens=2000)),
    ]


def normalised(events: list[ModelEvent]) -> list[Any]:
    out = merged(events)
    for i, e in enumerate(out):
        if isinstance(e, ReasoningEncrypted):
            assert decode_blocks(e.data) == [
                {
                    "type": "thinking",
                    "thinking": "The user wants the weather in Päris.",
                    "signature": "EqQBCgIYAhIM1gbcDa9GJwZA",
                }
            ]
            out[i] = ReasoningEncrypted("<envelope>")
    return out


def test_whole_stream() -> None:
    events = decode([RECORDED])
    assert normalised(events) == expected()
    assert sum(isinstance(e, Finish) for e in events) == 1 and isinstance(events[-1], Finish)


def test_every_two_way_split() -> None:
    for cut in range(1, len(RECORDED)):
        assert normalised(decode([RECORDED[:cut], RECORDED[cut:]])) == expected(), cut


def test_byte_by_byte_and_random_splits() -> None:
    assert normalised(decode([RECORDED[i : i + 1] for i in range(len(RECORDED))])) == expected()
    rng = random.Random(7)
    for _ in range(50):
        cuts = sorted(rng.sample(range(1, len(RECORDED)), 12))
        pieces = [RECORDED[a:b] for a, b in zip([0, *cuts], [*cuts, len(RECORDED)], strict=True)]
        assert normalised(decode(pieces)) == expected()


def test_crlf_line_endings() -> None:
    crlf = RECORDED.replace(b"\n", b"\r\n")
    for cut in range(1, len(crlf), 7):
        assert normalised(decode([crlf[:cut], crlf[cut:]])) == expected()


def frames(*events: dict[str, Any]) -> bytes:
    return b"".join(
        b"event: " + e["type"].encode() + b"\ndata: " + orjson.dumps(e) + b"\n\n" for e in events
    )


START = {
    "type": "message_start",
    "message": {"usage": {"input_tokens": 5, "output_tokens": 1}},
}


def text_block(i: int, text: str) -> list[dict[str, Any]]:
    return [
        {"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": text}},
        {"type": "content_block_stop", "index": i},
    ]


def end(stop_reason: str | None, output: int = 3) -> list[dict[str, Any]]:
    return [
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason},
            "usage": {"output_tokens": output},
        },
        {"type": "message_stop"},
    ]


@pytest.mark.parametrize(
    ("stop_reason", "reason"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("tool_use", "tool_calls"),
        ("refusal", "content_filter"),
        ("model_context_window_exceeded", "length"),
        ("pause_turn", "stop"),
        ("something_new", "stop"),
    ],
)
def test_stop_reasons(stop_reason: str, reason: str) -> None:
    events = decode([frames(START, *text_block(0, "hi"), *end(stop_reason))])
    assert events[-1] == Finish(reason, Usage(input_tokens=5, output_tokens=3))  # type: ignore[arg-type]


def test_tool_use_without_deltas_gets_its_start_input() -> None:
    events = decode(
        [
            frames(
                START,
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "tool_use", "id": "t1", "name": "now", "input": {}},
                },
                {"type": "content_block_stop", "index": 0},
                *end("tool_use"),
            )
        ]
    )
    assert events[:2] == [ToolCallStart(0, "t1", "now"), ToolCallDelta(0, "{}")]


def test_two_tool_uses_get_neutral_indexes_in_order() -> None:
    def tool(i: int, tid: str, js: str) -> list[dict[str, Any]]:
        return [
            {
                "type": "content_block_start",
                "index": i,
                "content_block": {"type": "tool_use", "id": tid, "name": "f", "input": {}},
            },
            {
                "type": "content_block_delta",
                "index": i,
                "delta": {"type": "input_json_delta", "partial_json": js},
            },
            {"type": "content_block_stop", "index": i},
        ]

    events = decode(
        [
            frames(
                START,
                *text_block(0, "x"),
                *tool(1, "a", "{}"),
                *tool(2, "b", '{"n":1}'),
                *end("tool_use"),
            )
        ]
    )
    assert events[1:5] == [
        ToolCallStart(0, "a", "f"),
        ToolCallDelta(0, "{}"),
        ToolCallStart(1, "b", "f"),
        ToolCallDelta(1, '{"n":1}'),
    ]


def test_redacted_thinking_and_consecutive_thinking_blocks_share_one_envelope() -> None:
    events = decode(
        [
            frames(
                START,
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "redacted_thinking", "data": "R1"},
                },
                {"type": "content_block_stop", "index": 0},
                {
                    "type": "content_block_start",
                    "index": 1,
                    "content_block": {"type": "thinking", "thinking": "", "signature": ""},
                },
                {
                    "type": "content_block_delta",
                    "index": 1,
                    "delta": {"type": "thinking_delta", "thinking": "hmm"},
                },
                {
                    "type": "content_block_delta",
                    "index": 1,
                    "delta": {"type": "signature_delta", "signature": "S"},
                },
                {"type": "content_block_stop", "index": 1},
                *text_block(2, "ok"),
                *end("end_turn"),
            )
        ]
    )
    encrypted = [e for e in events if isinstance(e, ReasoningEncrypted)]
    assert decode_blocks(encrypted[0].data) == [{"type": "redacted_thinking", "data": "R1"}]
    assert decode_blocks(encrypted[-1].data) == [
        {"type": "redacted_thinking", "data": "R1"},
        {"type": "thinking", "thinking": "hmm", "signature": "S"},
    ]


def test_server_tool_blocks_are_skipped_and_counted() -> None:
    decoder = StreamDecoder("claude")
    events = decoder.feed(
        frames(
            START,
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {
                    "type": "server_tool_use",
                    "id": "srvtoolu_1",
                    "name": "web_search",
                    "input": {},
                },
            },
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": '{"q":1}'},
            },
            {"type": "content_block_stop", "index": 0},
            *text_block(1, "found"),
            *end("end_turn"),
        )
    )
    assert events[0] == TextDelta("found")
    assert decoder.skipped == {"server_tool_use": 1}


def test_message_delta_usage_with_input_fields_overrides_start() -> None:
    events = decode(
        [
            frames(
                START,
                *text_block(0, "x"),
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn"},
                    "usage": {"input_tokens": 9, "cache_read_input_tokens": 4, "output_tokens": 2},
                },
                {"type": "message_stop"},
            )
        ]
    )
    assert events[-1] == Finish("stop", Usage(input_tokens=13, output_tokens=2, cached_tokens=4))


def test_mid_stream_error_event_raises() -> None:
    decoder = StreamDecoder("claude")
    assert decoder.feed(frames(START, *text_block(0, "partial")[:2])) == [TextDelta("partial")]
    with pytest.raises(ApiError) as err:
        decoder.feed(
            frames(
                {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
            )
        )
    assert err.value.status == 503 and err.value.code == "upstream_overloaded"
    assert "claude" in err.value.message


def test_cut_stream_is_not_finished() -> None:
    decoder = StreamDecoder("claude")
    decoder.feed(frames(START, *text_block(0, "partial")))
    assert decoder.close() == []
    assert not decoder.finished


def test_invalid_json_raises() -> None:
    with pytest.raises(ApiError) as err:
        StreamDecoder("claude").feed(b"event: message_start\ndata: {nope\n\n")
    assert err.value.status == 502


def test_events_after_message_stop_are_ignored() -> None:
    decoder = StreamDecoder("claude")
    events = decoder.feed(
        frames(START, *text_block(0, "x"), *end("end_turn"), *text_block(1, "late"))
    )
    assert [type(e) for e in events] == [TextDelta, Finish]


def test_non_streaming_message() -> None:
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "hm", "signature": "S"},
            {"type": "text", "text": "Calling."},
            {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}},
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 3, "cache_read_input_tokens": 1, "output_tokens": 7},
    }
    events = decode_message(body, "claude")
    assert events[0] == ReasoningStart()
    events = events[1:]
    assert events[0] == ReasoningDelta("hm", "content")
    assert decode_blocks(events[1].data) == [
        {"type": "thinking", "thinking": "hm", "signature": "S"}
    ]  # type: ignore[union-attr]
    assert events[2:] == [
        TextDelta("Calling."),
        ToolCallStart(0, "toolu_1", "f"),
        ToolCallDelta(0, '{"a":1}'),
        Finish("tool_calls", Usage(input_tokens=4, output_tokens=7, cached_tokens=1)),
    ]


def test_sse_parser_comments_multiline_data_and_lone_cr() -> None:
    parser = SseParser()
    out = parser.feed(b": keep-alive\revent: x\rdata: a\rdata: b\r\r")
    out += parser.feed(b"data: tail")
    out += parser.close()
    assert [(e.event, e.data) for e in out] == [("x", "a\nb"), ("message", "tail")]


def test_error_in_the_same_chunk_as_output_is_raised_by_the_next_call() -> None:
    decoder = StreamDecoder("claude")
    error = {"type": "error", "error": {"type": "api_error", "message": "boom"}}
    events = decoder.feed(frames(START, *text_block(0, "partial")[:2], error))
    assert events == [TextDelta("partial")]
    assert decoder.failed
    with pytest.raises(ApiError) as err:
        decoder.close()
    assert err.value.status == 502 and "boom" in err.value.message


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ([], "upstream_invalid_response"),
        (
            {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}},
            "upstream_overloaded",
        ),
        ({"type": "message"}, "upstream_invalid_response"),
        ({"type": "status", "content": []}, "upstream_invalid_response"),
    ],
)
def test_a_json_reply_that_is_no_message_is_an_upstream_error(body: Any, code: str) -> None:
    with pytest.raises(ApiError) as err:
        decode_message(body, "claude")
    assert err.value.code == code and "'claude'" in str(err.value)


def test_decode_message_thinking_runs_redacted_blocks_and_skipped_blocks() -> None:
    body = {
        "type": "message",
        "content": [
            "not a block",
            {"type": "redacted_thinking", "data": "R1"},
            {"type": "thinking", "thinking": "unsigned"},
            {"type": "server_tool_use", "id": "srv_1", "name": "web_search"},
            {"type": "thinking", "thinking": "", "signature": "S"},
            {"type": "text", "text": ""},
            {"type": "redacted_thinking"},
            {"type": "tool_use", "id": "toolu_1", "name": "f", "input": ["not", "an", "object"]},
        ],
        "stop_reason": "end_turn",
    }
    events = decode_message(body, "claude")
    envelopes = [decode_blocks(e.data) if isinstance(e, ReasoningEncrypted) else e for e in events]
    first_run = [{"type": "redacted_thinking", "data": "R1"}]
    assert envelopes[:3] == [ReasoningStart(), first_run, ReasoningDelta("unsigned", "content")]
    # a skipped block does not end the run: the signed thinking block joins it
    assert envelopes[3] == [*first_run, {"type": "thinking", "thinking": "", "signature": "S"}]
    # an empty text block ends the run: the next thinking block opens a new reasoning item
    assert envelopes[4:6] == [ReasoningStart(), [{"type": "redacted_thinking", "data": ""}]]
    assert events[6:] == [
        ToolCallStart(0, "toolu_1", "f"),
        ToolCallDelta(0, "{}"),
        Finish("stop", Usage()),
    ]
