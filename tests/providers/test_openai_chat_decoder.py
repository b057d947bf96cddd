"""Pure decoder tests on recorded Chat Completions byte streams, split at awkward boundaries."""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest

from orgate.neutral import (
    Finish,
    ModelEvent,
    ReasoningDelta,
    RefusalDelta,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)
from orgate.protocol.errors import ApiError
from orgate.providers.openai_chat import ChatStreamDecoder, decode_completion

BASE = {
    "id": "chatcmpl-abc",
    "object": "chat.completion.chunk",
    "created": 1764500000,
    "model": "gpt-4o-mini-2024-07-18",
    "system_fingerprint": "fp_1",
}


def chunk(
    delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any
) -> dict[str, Any]:
    choices = (
        []
        if delta is None
        else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
    )
    return {**BASE, "choices": choices, **extra}


def sse(*chunks: dict[str, Any], done: bool = True) -> bytes:
    out = b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks)
    return out + (b"data: [DONE]\n\n" if done else b"")


USAGE = {
    "prompt_tokens": 12,
    "completion_tokens": 7,
    "total_tokens": 19,
    "prompt_tokens_details": {"cached_tokens": 4, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 2, "audio_tokens": 0},
}

TEXT_STREAM = sse(
    chunk({"role": "assistant", "content": "", "refusal": None}, usage=None),
    chunk({"content": "Héllo"}, usage=None),
    chunk({"content": " wörld 日本"}, usage=None),
    chunk({"content": " 🎉"}, usage=None),
    chunk({}, "stop", usage=None),
    chunk(None, usage=USAGE),
)


def decode(data: bytes, cuts: list[int] | None = None) -> list[ModelEvent]:
    decoder = ChatStreamDecoder("test-dep")
    events: list[ModelEvent] = []
    prev = 0
    for cut in [*(cuts or []), len(data)]:
        events.extend(decoder.feed(data[prev:cut]))
        prev = cut
    events.extend(decoder.close())
    return events


def merged(events: list[ModelEvent]) -> list[Any]:
    """Concatenate consecutive deltas of the same kind (split points may change delta
    boundaries)."""
    out: list[Any] = []
    for e in events:
        if (
            out
            and type(e) is type(out[-1])
            and isinstance(e, TextDelta | RefusalDelta | ReasoningDelta)
        ):
            out[-1] = type(e)(out[-1].text + e.text)
        elif (
            out
            and isinstance(e, ToolCallDelta)
            and isinstance(out[-1], ToolCallDelta)
            and out[-1].index == e.index
        ):
            out[-1] = ToolCallDelta(e.index, out[-1].arguments + e.arguments)
        else:
            out.append(e)
    return out


def test_text_stream_in_one_chunk() -> None:
    events = decode(TEXT_STREAM)
    assert events == [
        TextDelta("Héllo"),
        TextDelta(" wörld 日本"),
        TextDelta(" 🎉"),
        Finish("stop", Usage(12, 7, 4, 2)),
    ]


def test_every_single_split_point_gives_the_same_events() -> None:
    expected = decode(TEXT_STREAM)
    for cut in range(1, len(TEXT_STREAM)):
        assert decode(TEXT_STREAM, [cut]) == expected, cut


def test_byte_by_byte_and_random_splits() -> None:
    expected = decode(TEXT_STREAM)
    assert decode(TEXT_STREAM, list(range(1, len(TEXT_STREAM)))) == expected
    rng = random.Random(7)
    for _ in range(200):
        cuts = sorted(rng.sample(range(1, len(TEXT_STREAM)), rng.randint(1, 12)))
        assert decode(TEXT_STREAM, cuts) == expected


def test_split_inside_a_multibyte_character() -> None:
    pos = TEXT_STREAM.index("日".encode()) + 1
    assert decode(TEXT_STREAM, [pos, pos + 1]) == decode(TEXT_STREAM)


def test_crlf_comments_and_other_fields_are_tolerated() -> None:
    data = (
        b": OPENROUTER PROCESSING\r\n\r\n"
        b"event: message\r\nid: 1\r\nretry: 100\r\n"
        b"data:" + orjson.dumps(chunk({"content": "hi"})) + b"\r\n\r\n"
        b"data: " + orjson.dumps(chunk({}, "stop")) + b"\r\n\r\n"
        b"data: [DONE]\r\n\r\n"
    )
    assert decode(data) == [TextDelta("hi"), Finish("stop")]


def test_multiline_data_event_and_events_without_blank_lines() -> None:
    body = orjson.dumps(chunk({"content": "a"}), option=orjson.OPT_INDENT_2)
    data = b"".join(b"data: " + line + b"\n" for line in body.split(b"\n")) + b"\n"
    data += b"data: " + orjson.dumps(chunk({"content": "b"})) + b"\n"
    data += b"data: " + orjson.dumps(chunk({}, "stop")) + b"\n\n"
    assert decode(data) == [TextDelta("a"), TextDelta("b"), Finish("stop")]


def test_nothing_after_done_is_read() -> None:
    decoder = ChatStreamDecoder()
    assert decoder.feed(sse(chunk({"content": "x"}), chunk({}, "stop")) + b"data: garbage\n\n") == [
        TextDelta("x")
    ]
    assert decoder.ended
    assert decoder.close() == [Finish("stop")]


def test_end_of_body_without_done_but_with_finish_reason_is_fine() -> None:
    data = sse(chunk({"content": "x"}), chunk({}, "length"), done=False)
    assert decode(data) == [TextDelta("x"), Finish("length")]


def test_last_line_without_newline_is_flushed() -> None:
    data = (
        b"data: "
        + orjson.dumps(chunk({"content": "x"}))
        + b"\n\ndata: "
        + orjson.dumps(chunk({}, "stop"))
    )
    assert decode(data) == [TextDelta("x"), Finish("stop")]


def test_truncated_stream_raises_502() -> None:
    data = sse(chunk({"content": "x"}), chunk({"content": "y"}), done=False)
    with pytest.raises(ApiError) as err:
        decode(data)
    assert err.value.status == 502
    assert err.value.type == "server_error"
    assert err.value.code == "upstream_stream_truncated"
    assert "test-dep" in err.value.message


def test_garbage_raises_invalid_response() -> None:
    decoder = ChatStreamDecoder("dep")
    with pytest.raises(ApiError) as err:
        decoder.feed(b"data: {not json\n\n")
    assert err.value.status == 502 and err.value.code == "upstream_invalid_response"
    with pytest.raises(ApiError) as err:
        ChatStreamDecoder().feed(b"data: [1, 2]\n\n")
    assert err.value.code == "upstream_invalid_response"


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (
            {"message": "Rate limit", "type": "rate_limit_exceeded", "code": None},
            429,
            "rate_limit_exceeded",
        ),
        ({"message": "bad", "type": "BadRequestError", "code": 400}, 400, "upstream_bad_request"),
        ({"message": "overloaded", "code": 502}, 502, "upstream_error"),
        ({"message": "boom", "type": "server_error"}, 502, "upstream_error"),
    ],
)
def test_error_object_in_stream(error: dict[str, Any], status: int, code: str) -> None:
    data = b"data: " + orjson.dumps({"error": error}) + b"\n\n"
    decoder = ChatStreamDecoder("dep")
    with pytest.raises(ApiError) as err:
        decoder.feed(data)
    assert err.value.status == status and err.value.code == code
    # After some output in the same read: the output first, then the error (the provider raises it).
    decoder = ChatStreamDecoder("dep")
    assert decoder.feed(sse(chunk({"content": "x"}), done=False) + data) == [TextDelta("x")]
    assert decoder.ended and decoder.error is not None
    assert decoder.error.status == status and decoder.error.code == code


def test_reasoning_refusal_and_content() -> None:
    data = sse(
        chunk({"role": "assistant", "reasoning_content": "think"}),
        chunk({"reasoning": " more"}),  # OpenRouter spelling
        chunk({"content": "ans", "reasoning_content": None}),
        chunk({"refusal": "no"}),
        chunk({}, "content_filter"),
    )
    assert decode(data) == [
        ReasoningDelta("think"),
        ReasoningDelta(" more"),
        TextDelta("ans"),
        RefusalDelta("no"),
        Finish("content_filter"),
    ]


def tc(
    index: int | None, id: str | None = None, name: str | None = None, args: str | None = None
) -> dict[str, Any]:
    piece: dict[str, Any] = {}
    if index is not None:
        piece["index"] = index
    if id is not None:
        piece["id"] = id
        piece["type"] = "function"
    function: dict[str, Any] = {}
    if name is not None:
        function["name"] = name
    if args is not None:
        function["arguments"] = args
    piece["function"] = function
    return piece


def calls(*pieces: dict[str, Any]) -> dict[str, Any]:
    return chunk({"tool_calls": list(pieces)})


def test_tool_call_split_across_chunks() -> None:
    data = sse(
        chunk({"role": "assistant", "content": None}),
        calls(tc(0, "call_1", "get_weather", "")),
        calls(tc(0, args='{"ci')),
        calls(tc(0, args='ty": "Par')),
        calls(tc(0, args='is"}')),
        chunk({}, "tool_calls"),
        chunk(None, usage=USAGE),
    )
    events = decode(data)
    assert events == [
        ToolCallStart(0, "call_1", "get_weather"),
        ToolCallDelta(0, '{"ci'),
        ToolCallDelta(0, 'ty": "Par'),
        ToolCallDelta(0, 'is"}'),
        Finish("tool_calls", Usage(12, 7, 4, 2)),
    ]
    for cut in range(1, len(data), 7):
        assert merged(decode(data, [cut])) == merged(events)


def assert_ordered(events: list[ModelEvent]) -> None:
    """The neutral contract: all deltas of call i before ToolCallStart of call i+1, indexes 0.."""
    current = -1
    for e in events:
        if isinstance(e, ToolCallStart):
            assert e.index == current + 1
            current = e.index
        elif isinstance(e, ToolCallDelta):
            assert e.index == current
    assert isinstance(events[-1], Finish)
    assert sum(isinstance(e, Finish) for e in events) == 1


def call_args(events: list[ModelEvent]) -> dict[str, str]:
    names = {e.index: e.name for e in events if isinstance(e, ToolCallStart)}
    args: dict[str, str] = {n: "" for n in names.values()}
    for e in events:
        if isinstance(e, ToolCallDelta):
            args[names[e.index]] += e.arguments
    return args


def test_parallel_sequential_calls_stream_live() -> None:
    decoder = ChatStreamDecoder()
    out = decoder.feed(sse(calls(tc(0, "c0", "a", "")), calls(tc(0, args='{"x":1}')), done=False))
    assert out == [ToolCallStart(0, "c0", "a"), ToolCallDelta(0, '{"x":1}')]
    out = decoder.feed(sse(calls(tc(1, "c1", "b", "")), calls(tc(1, args='{"y"')), done=False))
    assert out == [ToolCallStart(1, "c1", "b"), ToolCallDelta(1, '{"y"')]  # not held back
    out = decoder.feed(sse(calls(tc(1, args=":2}")), chunk({}, "tool_calls")))
    assert out == [ToolCallDelta(1, ":2}")]
    assert decoder.close() == [Finish("tool_calls")]


def test_interleaved_calls_are_buffered_and_flushed_in_order() -> None:
    data = sse(
        calls(tc(0, "c0", "a", ""), tc(1, "c1", "b", "")),
        calls(tc(0, args='{"x":')),
        calls(tc(1, args='{"y":')),
        calls(tc(0, args="1}")),
        calls(tc(1, args="2}")),
        chunk({}, "tool_calls"),
    )
    events = decode(data)
    assert_ordered(events)
    assert call_args(events) == {"a": '{"x":1}', "b": '{"y":2}'}
    assert [e for e in events if isinstance(e, ToolCallStart)] == [
        ToolCallStart(0, "c0", "a"),
        ToolCallStart(1, "c1", "b"),
    ]


def test_interleaved_three_calls_random_splits() -> None:
    data = sse(
        calls(tc(0, "c0", "a", "")),
        calls(tc(1, "c1", "b", "")),
        calls(tc(2, "c2", "c", '{"z"')),
        calls(tc(1, args='{"y"')),
        calls(tc(0, args='{"x"')),
        calls(tc(2, args=":3}")),
        calls(tc(0, args=":1}")),
        calls(tc(1, args=":2}")),
        chunk({}, "tool_calls"),
    )
    rng = random.Random(3)
    for _ in range(50):
        cuts = sorted(rng.sample(range(1, len(data)), 5))
        events = decode(data, cuts)
        assert_ordered(events)
        assert call_args(events) == {"a": '{"x":1}', "b": '{"y":2}', "c": '{"z":3}'}


def test_name_after_id_and_whole_call_in_one_chunk() -> None:
    data = sse(
        calls(tc(0, "c0", None, "")),
        calls(tc(0, None, "late_name", '{"a"')),
        calls(tc(0, args=":1}")),
        calls(tc(1, "c1", "whole", '{"b":2}')),
        calls(tc(2, "c2", "whole2", "{}")),
        chunk({}, "tool_calls"),
    )
    events = decode(data)
    assert events == [
        ToolCallStart(0, "c0", "late_name"),
        ToolCallDelta(0, '{"a"'),
        ToolCallDelta(0, ":1}"),
        ToolCallStart(1, "c1", "whole"),
        ToolCallDelta(1, '{"b":2}'),
        ToolCallStart(2, "c2", "whole2"),
        ToolCallDelta(2, "{}"),
        Finish("tool_calls"),
    ]


def test_calls_without_index_and_with_object_arguments() -> None:
    data = sse(
        calls(tc(None, "c0", "a", '{"x":1}')),
        calls({"id": "c1", "type": "function", "function": {"name": "b", "arguments": {"y": 2}}}),
        chunk({}, "stop"),  # Ollama says stop even after tool calls
    )
    events = decode(data)
    assert_ordered(events)
    assert call_args(events) == {"a": '{"x":1}', "b": '{"y":2}'}
    assert events[-1] == Finish("tool_calls")


def test_function_call_finish_reason_maps_to_tool_calls() -> None:
    data = sse(calls(tc(0, "c0", "a", "{}")), chunk({}, "function_call"))
    assert decode(data)[-1] == Finish("tool_calls")


def test_legacy_function_call_delta() -> None:
    data = sse(
        chunk({"role": "assistant", "function_call": {"name": "f", "arguments": ""}}),
        chunk({"function_call": {"arguments": '{"a":'}}),
        chunk({"function_call": {"arguments": "1}"}}),
        chunk({}, "function_call"),
    )
    assert decode(data) == [
        ToolCallStart(0, "", "f"),
        ToolCallDelta(0, '{"a":'),
        ToolCallDelta(0, "1}"),
        Finish("tool_calls"),
    ]


def test_call_without_a_name_is_invalid() -> None:
    data = sse(calls(tc(0, "c0", None, "{}")), chunk({}, "tool_calls"))
    with pytest.raises(ApiError) as err:
        decode(data)
    assert err.value.code == "upstream_invalid_response"


def test_usage_on_every_chunk_keeps_the_last() -> None:
    u1 = {"prompt_tokens": 5, "completion_tokens": 1}
    u2 = {"prompt_tokens": 5, "completion_tokens": 2, "prompt_cache_hit_tokens": 3}
    data = sse(chunk({"content": "a"}, usage=u1), chunk({}, "stop", usage=u2))
    assert decode(data)[-1] == Finish("stop", Usage(5, 2, 3, 0))


def test_non_stream_completion() -> None:
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": "Sure.",
                    "reasoning_content": "hmm",
                    "refusal": None,
                    "tool_calls": [
                        {
                            "id": "c0",
                            "type": "function",
                            "function": {"name": "a", "arguments": '{"x":1}'},
                        },
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "b", "arguments": "{}"},
                        },
                    ],
                },
                "logprobs": None,
                "finish_reason": "tool_calls",
            }
        ],
        "usage": USAGE,
    }
    assert decode_completion(body) == [
        ReasoningDelta("hmm"),
        TextDelta("Sure."),
        ToolCallStart(0, "c0", "a"),
        ToolCallDelta(0, '{"x":1}'),
        ToolCallStart(1, "c1", "b"),
        ToolCallDelta(1, "{}"),
        Finish("tool_calls", Usage(12, 7, 4, 2)),
    ]
    with pytest.raises(ApiError):
        decode_completion({"error": {"message": "nope", "code": 400}})


def _completion(message: dict[str, Any], finish: str | None, usage: Any = None) -> dict[str, Any]:
    body = {
        "id": "chatcmpl-2",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
    }
    if usage is not None:
        body["usage"] = usage
    return body


@pytest.mark.parametrize(
    ("message", "finish", "usage", "expected"),
    [
        (
            {"role": "assistant", "content": "Hi."},
            "stop",
            USAGE,
            [TextDelta("Hi."), Finish("stop", Usage(12, 7, 4, 2))],
        ),
        (
            {"role": "assistant", "content": "cut"},
            "length",
            None,
            [TextDelta("cut"), Finish("length", None)],
        ),
        ({"role": "assistant", "content": "x"}, None, None, [TextDelta("x"), Finish("stop", None)]),
        (
            {"role": "assistant", "content": "x"},
            "content_filter",
            None,
            [TextDelta("x"), Finish("content_filter", None)],
        ),
        ({"role": "assistant", "content": ""}, "stop", None, [Finish("stop", None)]),
        (
            {"role": "assistant", "content": None, "refusal": "No."},
            "stop",
            None,
            [RefusalDelta("No."), Finish("stop", None)],
        ),
        (
            {"role": "assistant", "reasoning": "think", "content": "a", "refusal": "b"},
            "stop",
            None,
            [ReasoningDelta("think"), TextDelta("a"), RefusalDelta("b"), Finish("stop", None)],
        ),
        (
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "Bon"}, {"type": "text", "text": "jour"}],
            },
            "stop",
            None,
            [TextDelta("Bonjour"), Finish("stop", None)],
        ),
        (
            {"role": "assistant", "content": "ok", "tool_calls": []},
            "stop",
            None,
            [TextDelta("ok"), Finish("stop", None)],
        ),
        (
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c9", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
            "stop",
            None,
            [ToolCallStart(0, "c9", "f"), ToolCallDelta(0, "{}"), Finish("tool_calls", None)],
        ),
    ],
)
def test_non_stream_completion_matches_the_stream(
    message: dict[str, Any], finish: str | None, usage: Any, expected: list[ModelEvent]
) -> None:
    """A non-streamed answer decodes to what the same answer streamed as one chunk decodes to."""
    assert decode_completion(_completion(message, finish, usage)) == expected
    delta = {k: v for k, v in message.items() if k != "tool_calls"}
    if message.get("tool_calls"):
        delta["tool_calls"] = [{"index": i, **c} for i, c in enumerate(message["tool_calls"])]
    streamed = decode(sse(chunk(delta, finish or "stop", usage=usage)))
    assert merged(streamed) == merged(expected)


def test_non_stream_completion_error_finish() -> None:
    with pytest.raises(ApiError) as caught:
        decode_completion(_completion({"role": "assistant", "content": "x"}, "error"), "up-1")
    assert caught.value.status == 502
    assert caught.value.code == "upstream_error"
    assert "up-1" in caught.value.message


# --------------------------------------------------------------------------- logprobs


def _lp(token: str, logprob: float, top: tuple[tuple[str, float], ...] = ()) -> dict[str, Any]:
    return {
        "token": token,
        "logprob": logprob,
        "bytes": list(token.encode()),
        "top_logprobs": [{"token": t, "logprob": v, "bytes": list(t.encode())} for t, v in top],
    }


def _with_logprobs(delta: dict[str, Any], entries: list[dict[str, Any]] | None) -> dict[str, Any]:
    out = chunk(delta)
    out["choices"][0]["logprobs"] = (
        None if entries is None else {"content": entries, "refusal": None}
    )
    return out


def test_streamed_logprobs_go_with_their_text_when_asked_for() -> None:
    hello, world = _lp("Hello", -0.1, (("Hello", -0.1), ("Hi", -2.5))), _lp(" wörld", -0.25)
    data = sse(
        _with_logprobs({"role": "assistant", "content": ""}, []),
        _with_logprobs({"content": "Hello"}, [hello]),
        _with_logprobs(
            {"content": ""}, [_lp("\u00e9", -3.0)]
        ),  # a token that is part of a character
        _with_logprobs({"content": " wörld"}, [world]),
        chunk({}, "stop"),
    )
    decoder = ChatStreamDecoder("test-dep", logprobs=True)
    events = decoder.feed(data) + decoder.close()
    assert events == [
        TextDelta("Hello", [hello]),
        TextDelta("", [_lp("\u00e9", -3.0)]),
        TextDelta(" wörld", [world]),
        Finish("stop"),
    ]
    # not asked for: the fast path, text only (what the upstream sends unasked is not looked at)
    assert decode(data) == [TextDelta("Hello"), TextDelta(" wörld"), Finish("stop")]


def test_non_stream_logprobs_and_what_servers_leave_out() -> None:
    completion = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Hi there"},
                "logprobs": {
                    "content": [
                        {
                            "token": "Hi",
                            "logprob": -0.5,
                            "bytes": None,
                        },  # llama.cpp / vLLM spellings
                        {
                            "token": " there",
                            "logprob": -1,
                            "top_logprobs": [{"token": " there", "logprob": -1}],
                        },
                        {"token": "?", "bytes": [63]},  # no logprob: nothing to show
                        "garbage",
                    ],
                    "refusal": None,
                },
                "finish_reason": "stop",
            }
        ],
    }
    events = decode_completion(completion)
    assert events == [
        TextDelta(
            "Hi there",
            [
                {"token": "Hi", "logprob": -0.5, "bytes": [72, 105], "top_logprobs": []},
                {
                    "token": " there",
                    "logprob": -1,
                    "bytes": list(b" there"),
                    "top_logprobs": [{"token": " there", "logprob": -1, "bytes": list(b" there")}],
                },
            ],
        ),
        Finish("stop"),
    ]
    completion["choices"][0]["logprobs"] = None
    assert decode_completion(completion)[0] == TextDelta("Hi there")


# Compatible servers' loose spellings: values of a type the spec does not allow are normalised
# before they reach a response (a float token count was echoed as `12.0` where the spec wants an
# integer, an integer call id as a number, a list finish_reason was a 500).


@pytest.mark.parametrize("body", [[], None, "ok", 12])
def test_a_completion_body_that_is_not_an_object_is_a_502(body: Any) -> None:
    with pytest.raises(ApiError) as err:
        decode_completion(body, "test-dep")
    assert (err.value.status, err.value.code) == (502, "upstream_invalid_response")


def test_usage_counts_as_floats_or_garbage_and_usage_not_an_object() -> None:
    usage = {
        "prompt_tokens": 12.0,
        "completion_tokens": "7",
        "prompt_tokens_details": {"cached_tokens": 4.5},
        "completion_tokens_details": [],
    }
    finish = decode(sse(chunk({"content": "a"}), chunk({}, "stop", usage=usage)))[-1]
    assert finish == Finish("stop", Usage(12, 0, 0, 0)) and type(finish.usage.input_tokens) is int  # type: ignore[attr-defined]
    assert decode(sse(chunk({"content": "a"}), chunk({}, "stop", usage=[1, 2])))[-1] == Finish(
        "stop", None
    )
    body = {
        "choices": [{"message": {"content": "a"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3.0, "completion_tokens": 2},
    }
    assert decode_completion(body)[-1] == Finish("stop", Usage(3, 2, 0, 0))
    assert decode_completion({**body, "usage": "n/a"})[-1] == Finish("stop", None)


def test_non_string_finish_reason_call_id_and_name() -> None:
    assert decode(sse(chunk({"content": "a"}, 1)))[-1] == Finish("stop", None)
    assert decode_completion({"choices": [{"message": {"content": "a"}, "finish_reason": 7}]})[
        -1
    ] == Finish("stop", None)
    events = decode(
        sse(
            calls(
                {
                    "index": 0,
                    "id": 42,
                    "type": "function",
                    "function": {"name": 5, "arguments": "{}"},
                }
            ),
            chunk({}, "tool_calls"),
        )
    )
    start = next(e for e in events if isinstance(e, ToolCallStart))
    assert (start.call_id, start.name) == ("42", "5")
    assert events[-1] == Finish("tool_calls", None)
