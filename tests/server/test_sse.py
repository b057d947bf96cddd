"""SSE framing (``orgate.server.sse``) and resuming a stored stream (``stored.events_after``),
in process.

The spec's SSE rules: each event is an ``event: <type>`` line and a ``data: <json>`` line
whose JSON ``type`` is the event name, frames end with a blank line, there are no ``id:``
lines, and the stream ends with ``data: [DONE]``. ``[endpoints.responses] event_names =
"openai"`` renames the two reasoning events OpenAI names otherwise. ``?starting_after=N``
replays only the events whose ``sequence_number`` is greater than ``N``, ``[DONE]`` kept.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import orjson

from orgate.neutral import Finish, ReasoningDelta, TextDelta
from orgate.server.sse import DONE, OPENAI_EVENT_NAMES, frame, openai_event, openai_frame, then_done
from orgate.server.stored import events_after
from tests.engine.helpers import run
from tests.support.spec import check_sse, event_schemas, parse_sse


def _events() -> list[dict]:
    """A whole stream from the builder: reasoning, text, completed."""
    return run(
        ReasoningDelta("why", "content"), TextDelta('Hé: "quoted"\nline'), Finish("stop")
    ).drain()


def test_a_frame_is_an_event_line_a_data_line_and_a_blank_line() -> None:
    event = {"type": "response.output_text.delta", "sequence_number": 3, "delta": "a\nb"}
    raw = frame(event)
    assert raw.startswith(b"event: response.output_text.delta\ndata: ") and raw.endswith(b"\n\n")
    assert raw.count(b"\n") == 3  # the JSON is on one line, whatever the text holds
    assert orjson.loads(raw.split(b"\ndata: ", 1)[1]) == event


def test_a_whole_stream_framed_follows_the_spec() -> None:
    events = _events()
    body = b"".join(frame(e) for e in events) + DONE
    assert (
        check_sse(body) == events
    )  # names match types, no id lines, [DONE] last, the grammar holds


def test_an_event_type_outside_the_known_list_is_framed_too() -> None:
    raw = frame({"type": "response.mcp_call.in_progress", "item_id": "mcp_1"})
    assert parse_sse(raw) == [
        (
            "response.mcp_call.in_progress",
            '{"type":"response.mcp_call.in_progress","item_id":"mcp_1"}',
        )
    ]


def test_openai_names_rename_only_the_reasoning_text_events() -> None:
    assert set(OPENAI_EVENT_NAMES) <= set(event_schemas())  # renames of spec events only
    events = _events()
    renamed = [openai_event(e) for e in events]
    changed = [
        (a["type"], b["type"])
        for a, b in zip(events, renamed, strict=True)
        if a["type"] != b["type"]
    ]
    assert changed == [
        ("response.reasoning.delta", "response.reasoning_text.delta"),
        ("response.reasoning.done", "response.reasoning_text.done"),
    ]
    for before, after in zip(events, renamed, strict=True):
        assert {**after, "type": before["type"]} == before  # nothing else changes
    assert all(
        e["type"] in event_schemas() for e in events
    )  # the originals are untouched (copies renamed)
    framed = parse_sse(b"".join(openai_frame(e) for e in events))
    assert [name for name, _ in framed] == [e["type"] for e in renamed]
    assert [orjson.loads(data)["type"] for _, data in framed] == [e["type"] for e in renamed]


async def test_then_done_ends_a_stream_of_frames_with_done() -> None:
    async def frames() -> AsyncIterator[bytes]:
        yield b"event: a\ndata: {}\n\n"
        yield b"event: b\ndata: {}\n\n"

    out = [chunk async for chunk in then_done(frames())]
    assert out[-1] == DONE == b"data: [DONE]\n\n" and len(out) == 3


# --- resuming after an event ----------------------------------------------------------------------


def _stored() -> tuple[list[dict], bytes]:
    events = _events()
    return events, b"".join(frame(e) for e in events)


def test_starting_after_keeps_the_later_events_only() -> None:
    events, stored = _stored()
    for after in (-1, 0, 3, len(events) - 2):
        kept = parse_sse(events_after(stored, after))
        assert [orjson.loads(data)["sequence_number"] for _, data in kept] == list(
            range(after + 1, len(events))
        )
    assert events_after(stored, len(events) - 1) == b""
    assert events_after(stored, 10**9) == b""


def test_starting_after_keeps_done_and_frames_it_cannot_read() -> None:
    _, stored = _stored()
    chunk = stored + b": a comment\n\n" + b"event: x\ndata: not json\n\n" + DONE
    kept = events_after(chunk, 10**9)
    assert kept == b": a comment\n\n" + b"event: x\ndata: not json\n\n" + DONE


def test_a_resumed_stream_is_byte_for_byte_the_tail_of_the_stored_one() -> None:
    events, stored = _stored()
    after = 4
    tail = b"".join(frame(e) for e in events[after + 1 :])
    assert events_after(stored, after) == tail
    # frames split across chunks of a live stream: each chunk is filtered on its own
    chunks = [frame(e) for e in events]
    assert b"".join(events_after(c, after) for c in chunks) == tail
