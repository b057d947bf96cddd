"""The one SSE splitter (providers/sse.py): the WHATWG line ends wherever a chunk splits them,
comments, multi-line data, and the line bound; and the openai-chat decoder on top of it."""

from __future__ import annotations

import orjson
import pytest

from orgate.neutral import Finish, TextDelta
from orgate.providers.openai_chat import ChatStreamDecoder
from orgate.providers.sse import LineTooLong, SseLines, SseParser

# every line end, a comment, an id field, a two-line data event and an unterminated last line
STREAM = b": ping\r\nevent: a\rdata: one\ndata: two\r\n\r\nid: 7\ndata: three\r\rdata: tail"
EVENTS = [("a", "one\ntwo"), ("message", "three"), ("message", "tail")]
LINES = [
    b": ping",
    b"event: a",
    b"data: one",
    b"data: two",
    b"",
    b"id: 7",
    b"data: three",
    b"",
    b"data: tail",
]


def parse(pieces: list[bytes]) -> list[tuple[str, str]]:
    parser = SseParser()
    events = [event for piece in pieces for event in parser.feed(piece)] + parser.close()
    return [(event.event, event.data) for event in events]


def split(pieces: list[bytes]) -> list[bytes]:
    splitter = SseLines()
    return [line for piece in pieces for line in splitter.feed(piece)] + splitter.close()


def test_every_line_end_whole_and_cut_at_every_byte() -> None:
    assert split([STREAM]) == LINES and parse([STREAM]) == EVENTS
    for cut in range(1, len(STREAM)):
        pieces = [STREAM[:cut], STREAM[cut:]]
        assert split(pieces) == LINES, cut
        assert parse(pieces) == EVENTS, cut
    assert parse([STREAM[i : i + 1] for i in range(len(STREAM))]) == EVENTS


def test_a_crlf_pair_cut_between_its_bytes_ends_one_line() -> None:
    # a second line end there would be a blank line: "one" would leave alone, before "two"
    assert parse([b"data: one\r", b"\ndata: two\n\n"]) == [("message", "one\ntwo")]
    assert split([b"a\r", b"\n", b"\nb\n"]) == [b"a", b"", b"b"]


def test_a_line_longer_than_the_bound_is_refused_in_one_chunk_or_in_pieces() -> None:
    with pytest.raises(LineTooLong):
        SseLines(max_line=8).feed(b"data: 123456789\n")
    splitter = SseLines(max_line=8)
    splitter.feed(b"data:")
    with pytest.raises(LineTooLong):
        splitter.feed(b" 1234")
    assert SseLines(max_line=8).feed(b"data: 12\n") == [b"data: 12"]


def test_openai_chat_reads_lines_ended_by_a_lone_cr() -> None:
    body = (
        b"".join(
            b"data: " + orjson.dumps(chunk) + b"\r\r"
            for chunk in (
                {"choices": [{"index": 0, "delta": {"content": "hi"}}]},
                {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            )
        )
        + b"data: [DONE]\r\r"
    )
    for cut in range(1, len(body)):
        decoder = ChatStreamDecoder("m")
        events = decoder.feed(body[:cut]) + decoder.feed(body[cut:]) + decoder.close()
        assert events == [TextDelta("hi"), Finish("stop")], cut
