"""The SSE/grammar checker itself: good streams pass, each kind of breakage fails."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.samples import StreamBuilder
from tests.support.spec import (
    check_events,
    check_sse,
    encode_sse,
    parse_sse,
    validate,
    validate_event,
)

Events = list[dict[str, Any]]


def good() -> Events:
    return (
        StreamBuilder()
        .reasoning("thin", "king")
        .message("Hel", "lo")
        .function_call("f", '{"a"', ":1}")
        .completed()
    )


def test_good_streams_pass() -> None:
    events = check_sse(encode_sse(good()))
    assert [e["type"] for e in events][:2] == ["response.created", "response.in_progress"]
    assert check_sse(encode_sse(StreamBuilder().completed()))[-1]["type"] == "response.completed"
    check_sse(encode_sse(StreamBuilder().message("x", status="incomplete").incomplete()).encode())
    check_sse(encode_sse(StreamBuilder().message("partial").failed()))


def test_crlf_comments_and_multiline_data_are_parsed() -> None:
    raw = ': keep-alive\r\nevent: a\r\ndata: {"x":\r\ndata: 1}\r\n\r\ndata: [DONE]\r\n\r\n'
    assert parse_sse(raw) == [("a", '{"x":\n1}'), (None, "[DONE]")]


def test_queued_then_in_progress_is_accepted() -> None:
    events = good()
    events[1] = {**events[1], "type": "response.queued"}
    check_events(events)


def fails(raw: str | Events, match: str) -> None:
    with pytest.raises(AssertionError, match=match):
        if isinstance(raw, str):
            check_sse(raw)
        else:
            check_events(raw)


def test_missing_done() -> None:
    fails(encode_sse(good(), done=False), r"\[DONE\]")


def test_id_line() -> None:
    raw = encode_sse(good()).replace(
        "event: response.created\n", "id: 1\nevent: response.created\n", 1
    )
    fails(raw, "id:")


def test_event_name_mismatch() -> None:
    raw = encode_sse(good()).replace(
        "event: response.in_progress\n", "event: response.created\n", 1
    )
    fails(raw, "does not match")


def test_missing_event_line() -> None:
    raw = encode_sse(good()).replace("event: response.in_progress\n", "", 1)
    fails(raw, "does not match")


def test_data_not_json() -> None:
    fails("event: x\ndata: nope\n\ndata: [DONE]\n\n", "not JSON")


def mutate(fn: Callable[[Events], None]) -> Events:
    events = copy.deepcopy(good())
    fn(events)
    return events


def _find(events: Events, type_: str, nth: int = 0) -> int:
    return [i for i, e in enumerate(events) if e["type"] == type_][nth]


def _drop(type_: str) -> Callable[[Events], None]:
    return lambda ev: ev.pop(_find(ev, type_))


def _renumber(ev: Events) -> None:
    for i, e in enumerate(ev):
        e["sequence_number"] = i


def _swap_seq(ev: Events) -> None:
    ev[3]["sequence_number"], ev[4]["sequence_number"] = (
        ev[4]["sequence_number"],
        ev[3]["sequence_number"],
    )


def _delta_mismatch(ev: Events) -> None:
    ev[_find(ev, "response.output_text.delta")]["delta"] = "Jel"


def _args_mismatch(ev: Events) -> None:
    ev[_find(ev, "response.function_call_arguments.delta")]["delta"] = "["


def _summary_mismatch(ev: Events) -> None:
    ev[_find(ev, "response.reasoning_summary_text.delta")]["delta"] = "x"


def _final_output_differs(ev: Events) -> None:
    ev[-1]["response"]["output"][1]["content"][0]["text"] = "other"


def _item_done_text_differs(ev: Events) -> None:
    ev[_find(ev, "response.output_item.done", 1)]["item"]["content"][0]["text"] = "other"


def _added_completed(ev: Events) -> None:
    ev[_find(ev, "response.output_item.added", 1)]["item"]["status"] = "completed"


def _second_terminal(ev: Events) -> None:
    ev.insert(-1, {**copy.deepcopy(ev[-1]), "type": "response.incomplete"})
    ev[-2]["response"]["status"] = "incomplete"
    _renumber(ev)


def _event_after_item_done(ev: Events) -> None:
    i = _find(ev, "response.output_item.done", 1)
    ev.insert(i + 1, {**ev[i - 2], "type": "response.output_text.delta", "delta": "late"})
    ev[i + 1].pop("text", None)
    _renumber(ev)


def _overlap(ev: Events) -> None:
    i = _find(ev, "response.output_item.added", 2)
    j = _find(ev, "response.output_item.done", 1)
    ev.insert(j, ev.pop(i))
    _renumber(ev)


def _error_not_followed_by_failed(ev: Events) -> None:
    ev.insert(
        -1,
        {
            "type": "error",
            "sequence_number": 0,
            "error": {"type": "server_error", "code": None, "message": "x", "param": None},
        },
    )
    _renumber(ev)


def _incomplete_not_last(ev: Events) -> None:
    ev[_find(ev, "response.output_item.done", 1)]["item"]["status"] = "incomplete"
    ev[-1]["response"]["output"][1]["status"] = "incomplete"


def _status_mismatch(ev: Events) -> None:
    ev[-1]["response"]["status"] = "incomplete"


def _wrong_index(ev: Events) -> None:
    ev[_find(ev, "response.output_text.delta")]["output_index"] = 0


def _wrong_item_id(ev: Events) -> None:
    ev[_find(ev, "response.output_text.delta")]["item_id"] = "msg_other"


def _invalid_event(ev: Events) -> None:
    del ev[_find(ev, "response.output_text.delta")]["delta"]


BREAKAGES: dict[str, tuple[Callable[[Events], None], str]] = {
    "decreasing sequence_number": (_swap_seq, "sequence_number"),
    "text delta mismatch": (_delta_mismatch, "concatenated deltas"),
    "arguments delta mismatch": (_args_mismatch, "concatenated deltas"),
    "summary delta mismatch": (_summary_mismatch, "concatenated deltas"),
    "first event not created": (lambda ev: (ev.pop(0), _renumber(ev)), "response.created"),
    "no in_progress": (lambda ev: (ev.pop(1), _renumber(ev)), "in_progress"),
    "no terminal event": (lambda ev: ev.pop(), "terminal"),
    "two terminal events": (_second_terminal, "terminal"),
    "terminal status mismatch": (_status_mismatch, "status"),
    "final output differs": (_final_output_differs, "output"),
    "item done text differs": (_item_done_text_differs, "differs"),
    "added item not in_progress": (_added_completed, "in_progress"),
    "missing content_part.added": (_drop("response.content_part.added"), "not open"),
    "missing output_text.done": (
        _drop("response.output_text.done"),
        "before its response.output_text.done",
    ),
    "missing content_part.done": (_drop("response.content_part.done"), "still open"),
    "missing arguments.done": (
        _drop("response.function_call_arguments.done"),
        "before arguments done",
    ),
    "missing output_item.added": (
        _drop("response.output_item.added"),
        "no output item is open|index",
    ),
    "event after item done": (_event_after_item_done, "no output item is open"),
    "overlapping items": (_overlap, "still open"),
    "error not followed by failed": (_error_not_followed_by_failed, "response.failed"),
    "incomplete item in completed response": (_incomplete_not_last, "incomplete"),
    "wrong output_index": (_wrong_index, "output_index"),
    "wrong item_id": (_wrong_item_id, "item_id"),
    "event invalid against its schema": (
        _invalid_event,
        "not a valid ResponseOutputTextDeltaStreamingEvent",
    ),
}


@pytest.mark.parametrize("name", list(BREAKAGES))
def test_broken_streams_fail(name: str) -> None:
    fn, match = BREAKAGES[name]
    fails(encode_sse(mutate(fn)), match)


def test_item_after_incomplete_item_fails() -> None:
    b = StreamBuilder().message("x", status="incomplete").message("y")
    fails(b.incomplete(), "follow an incomplete item")


def test_validate_reports_readable_paths() -> None:
    with pytest.raises(AssertionError, match=r"\$\.output\[0\]"):
        validate("ResponseResource", {**good()[-1]["response"], "output": [{"type": "message"}]})
    with pytest.raises(AssertionError, match="unknown streaming event type"):
        validate_event({"type": "response.nope", "sequence_number": 1})
    with pytest.raises(KeyError):
        validate("NoSuchSchema", {})


@settings(max_examples=50, deadline=None)
@given(
    text=st.lists(st.text(max_size=8), max_size=6),
    args=st.lists(st.text(alphabet='{}":,ab1 ', max_size=5), max_size=5),
)
def test_any_delta_split_passes(text: list[str], args: list[str]) -> None:
    events = StreamBuilder().message(*text).function_call("f", *args).completed()
    parsed = check_sse(encode_sse(events))
    assert parsed[-1]["response"]["output"][0]["content"][0]["text"] == "".join(text)
    assert json.dumps(parsed) == json.dumps(events)


def test_missing_summary_text_done_fails() -> None:
    fails(mutate(_drop("response.reasoning_summary_text.done")), "before its text done")


def test_refusal_part_is_checked() -> None:
    events = StreamBuilder().completed()
    resp_done = events.pop()
    loc = {"item_id": "msg_0", "output_index": 0, "content_index": 0}
    part = {"type": "refusal", "refusal": "no"}
    item = {
        "type": "message",
        "id": "msg_0",
        "role": "assistant",
        "status": "completed",
        "content": [part],
    }
    events += [
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**item, "status": "in_progress", "content": []},
        },
        {"type": "response.content_part.added", **loc, "part": {"type": "refusal", "refusal": ""}},
        {"type": "response.refusal.delta", **loc, "delta": "no"},
        {"type": "response.refusal.done", **loc, "refusal": "no"},
        {"type": "response.content_part.done", **loc, "part": part},
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        resp_done,
    ]
    resp_done["response"]["output"] = [item]
    _renumber(events)
    check_events(events)
    events[4]["delta"] = "yes"
    fails(events, "concatenated deltas")
