"""``ResponseBuilder`` in process: neutral model events in, the spec's streaming events out.

Expectations come from the Open Responses spec (event types and fields, the item
lifecycle ``output_item.added`` → content events → ``output_item.done``, one terminal
event, ``sequence_number`` from 0 upward) and from the builder's documented contract:
``drain`` numbers the events emitted since the last drain, emitted events never change,
``final`` is the terminal event's ``response``, ``snapshot`` is a new dict each time.
Every stream is also run through the spec's own grammar checker (``check_events``).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orgate.engine.builder import ResponseBuilder
from orgate.neutral import (
    CompactionItem,
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
from tests.engine.helpers import base, run
from tests.support.samples import response as sample_response
from tests.support.spec import check_events, validate

Event = dict[str, Any]
START = ["response.created", "response.in_progress"]


def _types(events: list[Event]) -> list[str]:
    return [e["type"] for e in events]


def _stream(*events: ModelEvent) -> tuple[ResponseBuilder, list[Event]]:
    """A builder fed ``events`` from its start, and all it emitted (checked against the spec)."""
    builder = run(*events)
    drained = builder.drain()
    check_events(drained)
    return builder, drained


def _message_events(item_events: list[str]) -> list[str]:
    return ["response.output_item.added", *item_events, "response.output_item.done"]


# --- the response lifecycle -----------------------------------------------------------------------


def test_start_emits_created_then_in_progress_numbered_from_zero() -> None:
    builder = ResponseBuilder(base(), response_id="resp_fixed", created_at=1_700_000_123)
    builder.start()
    events = builder.drain()
    assert _types(events) == START
    assert [e["sequence_number"] for e in events] == [0, 1]
    for event in events:
        response = event["response"]
        validate("ResponseResource", response)
        assert response["id"] == "resp_fixed" and response["created_at"] == 1_700_000_123
        assert response["status"] == "in_progress" and response["output"] == []
        assert (
            response["completed_at"] is None
            and response["usage"] is None
            and response["error"] is None
        )


def test_a_builder_makes_its_own_response_id_and_creation_time() -> None:
    first, second = ResponseBuilder(base()), ResponseBuilder(base())
    assert first.id.startswith("resp_") and second.id.startswith("resp_") and first.id != second.id
    assert isinstance(first.created_at, int) and first.created_at > 1_700_000_000


def test_a_background_response_is_queued_then_runs() -> None:
    builder = ResponseBuilder(base())
    builder.start(queued=True)
    builder.in_progress()
    builder.feed(TextDelta("hi"))
    builder.feed(Finish("stop"))
    events = builder.drain()
    check_events(events)
    assert _types(events)[:3] == ["response.created", "response.queued", "response.in_progress"]
    assert [e["response"]["status"] for e in events[:3]] == ["queued", "queued", "in_progress"]


def test_text_message_lifecycle_in_spec_order() -> None:
    builder, events = _stream(
        TextDelta("Hel"), TextDelta("lo"), TextDelta(""), TextDelta(" world"), Finish("stop")
    )
    assert _types(events) == [
        *START,
        *_message_events(
            [
                "response.content_part.added",
                "response.output_text.delta",
                "response.output_text.delta",
                "response.output_text.delta",  # an empty text piece has no delta
                "response.output_text.done",
                "response.content_part.done",
            ]
        ),
        "response.completed",
    ]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    added, part_added = events[2], events[3]
    assert added["output_index"] == 0
    assert added["item"] == {
        "id": added["item"]["id"],
        "type": "message",
        "status": "in_progress",
        "role": "assistant",
        "content": [],
    }
    assert (
        part_added["content_index"] == 0
        and part_added["part"]["type"] == "output_text"
        and part_added["part"]["text"] == ""
    )
    item_id = added["item"]["id"]
    for event in events[3:-2]:
        assert (event["item_id"], event["output_index"], event["content_index"]) == (item_id, 0, 0)
    assert [e["delta"] for e in events if e["type"] == "response.output_text.delta"] == [
        "Hel",
        "lo",
        " world",
    ]
    assert events[-4]["text"] == "Hello world"
    done = events[-2]["item"]
    assert done["status"] == "completed" and done["id"] == item_id
    assert done["content"] == [
        {"type": "output_text", "text": "Hello world", "annotations": [], "logprobs": []}
    ]
    final = events[-1]["response"]
    validate("ResponseResource", final)
    assert final["status"] == "completed" and final["output"] == [done]
    assert final["incomplete_details"] is None and final["error"] is None
    assert isinstance(final["completed_at"], int) and final["completed_at"] >= final["created_at"]


def test_one_message_holds_several_content_parts() -> None:
    _, events = _stream(
        TextDelta("a"), RefusalDelta("no"), RefusalDelta("pe"), TextDelta("b"), Finish("stop")
    )
    assert _types(events).count("response.output_item.added") == 1  # one message, three parts
    parts = [
        (e["type"], e["content_index"])
        for e in events
        if e["type"].startswith("response.content_part.")
    ]
    assert parts == [
        ("response.content_part.added", 0),
        ("response.content_part.done", 0),
        ("response.content_part.added", 1),
        ("response.content_part.done", 1),
        ("response.content_part.added", 2),
        ("response.content_part.done", 2),
    ]
    refusal_deltas = [
        (e["delta"], e["content_index"]) for e in events if e["type"] == "response.refusal.delta"
    ]
    assert refusal_deltas == [("no", 1), ("pe", 1)]
    assert [e["refusal"] for e in events if e["type"] == "response.refusal.done"] == ["nope"]
    content = events[-1]["response"]["output"][0]["content"]
    assert content == [
        {"type": "output_text", "text": "a", "annotations": [], "logprobs": []},
        {"type": "refusal", "refusal": "nope"},
        {"type": "output_text", "text": "b", "annotations": [], "logprobs": []},
    ]


def test_a_refusal_alone_is_a_message_with_a_refusal_part() -> None:
    _, events = _stream(RefusalDelta(""), RefusalDelta("I can't."), Finish("stop"))
    assert _types(events) == [
        *START,
        *_message_events(
            [
                "response.content_part.added",
                "response.refusal.delta",
                "response.refusal.done",
                "response.content_part.done",
            ]
        ),
        "response.completed",
    ]
    assert events[3]["part"] == {"type": "refusal", "refusal": ""}
    assert events[-1]["response"]["output"][0]["content"] == [
        {"type": "refusal", "refusal": "I can't."}
    ]


# --- function calls -------------------------------------------------------------------------------


def test_function_call_with_argument_deltas() -> None:
    _, events = _stream(
        ToolCallStart(0, "call_abc", "get_weather"),
        ToolCallDelta(0, '{"city":'),
        ToolCallDelta(0, ""),
        ToolCallDelta(0, ' "Paris"}'),
        Finish("tool_calls"),
    )
    assert _types(events) == [
        *START,
        *_message_events(
            [
                "response.function_call_arguments.delta",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.done",
            ]
        ),
        "response.completed",  # a call is a complete answer: tool_calls ends as completed
    ]
    added = events[2]["item"]
    assert added == {
        "id": added["id"],
        "type": "function_call",
        "status": "in_progress",
        "call_id": "call_abc",
        "name": "get_weather",
        "arguments": "",
    }
    assert [e["delta"] for e in events[3:5]] == ['{"city":', ' "Paris"}']
    assert events[5]["arguments"] == '{"city": "Paris"}' and events[5]["name"] == "get_weather"
    done = events[6]["item"]
    assert done == {**added, "status": "completed", "arguments": '{"city": "Paris"}'}
    assert events[-1]["response"]["output"] == [done]


def test_text_then_calls_are_separate_items_one_after_another() -> None:
    _, events = _stream(
        TextDelta("Let me check."),
        ToolCallStart(0, "call_1", "a"),
        ToolCallDelta(0, "{}"),
        ToolCallStart(1, "call_2", "b"),
        ToolCallDelta(1, '{"x": 1}'),
        Finish("tool_calls"),
    )
    added = [e for e in events if e["type"] == "response.output_item.added"]
    done = [e for e in events if e["type"] == "response.output_item.done"]
    assert [(e["output_index"], e["item"]["type"]) for e in added] == [
        (0, "message"),
        (1, "function_call"),
        (2, "function_call"),
    ]
    assert [e["output_index"] for e in done] == [0, 1, 2]
    # never interleaved: each item is done before the next one is added
    kinds = [
        e["type"]
        for e in events
        if e["type"] in ("response.output_item.added", "response.output_item.done")
    ]
    assert kinds == ["response.output_item.added", "response.output_item.done"] * 3
    ids = [e["item"]["id"] for e in added]
    assert len(set(ids)) == 3
    output = events[-1]["response"]["output"]
    assert [(i["call_id"], i["name"], i["arguments"]) for i in output[1:]] == [
        ("call_1", "a", "{}"),
        ("call_2", "b", '{"x": 1}'),
    ]


def test_a_call_without_an_upstream_call_id_gets_one() -> None:
    _, events = _stream(ToolCallStart(0, "", "f"), ToolCallStart(1, "", "g"), Finish("tool_calls"))
    call_ids = [i["call_id"] for i in events[-1]["response"]["output"]]
    assert all(c.startswith("call_") and len(c) > len("call_") for c in call_ids)
    assert call_ids[0] != call_ids[1]
    assert [i["arguments"] for i in events[-1]["response"]["output"]] == ["", ""]


def test_arguments_for_a_call_that_is_not_open_are_an_upstream_error() -> None:
    builder = run(ToolCallStart(0, "call_1", "f"), ToolCallDelta(0, "{"))
    with pytest.raises(ApiError) as caught:
        builder.feed(ToolCallDelta(1, "}"))
    assert (caught.value.status, caught.value.code) == (502, "upstream_invalid_response")
    text_first = run(TextDelta("hi"))
    with pytest.raises(ApiError):
        text_first.feed(ToolCallDelta(0, "{}"))


# --- reasoning ------------------------------------------------------------------------------------


def test_reasoning_summary_and_content_parts() -> None:
    _, events = _stream(
        ReasoningDelta("Think", "summary"),
        ReasoningDelta("ing.", "summary"),
        ReasoningDelta("step 1", "content"),
        ReasoningDelta("More.", "summary"),
        TextDelta("Answer"),
        Finish("stop"),
    )
    reasoning = [e for e in events[2:] if e.get("output_index") == 0]
    assert _types(reasoning) == [
        "response.output_item.added",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
        "response.content_part.added",
        "response.reasoning.delta",
        "response.reasoning.done",
        "response.content_part.done",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
        "response.output_item.done",
    ]
    assert reasoning[0]["item"] == {
        "id": reasoning[0]["item"]["id"],
        "type": "reasoning",
        "summary": [],
    }
    summary_indexes = [e["summary_index"] for e in reasoning if "summary_index" in e]
    assert summary_indexes == [0, 0, 0, 0, 0, 1, 1, 1, 1]
    assert reasoning[4]["text"] == "Thinking." and reasoning[8]["text"] == "step 1"
    assert (
        reasoning[6]["part"] == {"type": "reasoning_text", "text": ""}
        and reasoning[6]["content_index"] == 0
    )
    item = reasoning[-1]["item"]
    assert item["summary"] == [
        {"type": "summary_text", "text": "Thinking."},
        {"type": "summary_text", "text": "More."},
    ]
    assert item["content"] == [{"type": "reasoning_text", "text": "step 1"}]
    output = events[-1]["response"]["output"]
    assert [i["type"] for i in output] == ["reasoning", "message"] and output[0] == item


def test_reasoning_start_opens_a_new_reasoning_item() -> None:
    builder, events = _stream(
        ReasoningDelta("one", "summary"),
        ReasoningStart(),
        ReasoningDelta("two", "summary"),
        ReasoningEncrypted("SEALED"),
        Finish("stop"),
    )
    output = events[-1]["response"]["output"]
    assert [i["type"] for i in output] == ["reasoning", "reasoning"]
    assert [i["summary"][0]["text"] for i in output] == ["one", "two"]
    assert "encrypted_content" not in output[0] and output[1]["encrypted_content"] == "SEALED"
    assert "content" not in output[0]  # no reasoning text: no content list
    assert builder.history_differs  # encrypted reasoning goes back only to its origin


def test_encrypted_reasoning_alone_is_an_item_with_an_empty_summary() -> None:
    _, events = _stream(ReasoningEncrypted("SIG"), TextDelta("ok"), Finish("stop"))
    first = events[-1]["response"]["output"][0]
    assert first == {
        "id": first["id"],
        "type": "reasoning",
        "summary": [],
        "encrypted_content": "SIG",
    }


# --- how an answer ends ---------------------------------------------------------------------------


def test_usage_is_reported_with_its_details() -> None:
    _, events = _stream(
        TextDelta("x"),
        Finish("stop", Usage(input_tokens=7, output_tokens=5, cached_tokens=3, reasoning_tokens=2)),
    )
    assert events[-1]["response"]["usage"] == {
        "input_tokens": 7,
        "input_tokens_details": {"cached_tokens": 3},
        "output_tokens": 5,
        "output_tokens_details": {"reasoning_tokens": 2},
        "total_tokens": 12,
    }
    _, bare = _stream(TextDelta("x"), Finish("stop"))
    assert (
        bare[-1]["response"]["usage"]["total_tokens"] == 0
    )  # no usage from the upstream: zeros, not null


@pytest.mark.parametrize(
    ("reason", "status", "details"),
    [
        ("stop", "completed", None),
        ("tool_calls", "completed", None),
        ("length", "incomplete", {"reason": "max_output_tokens"}),
        ("content_filter", "incomplete", {"reason": "content_filter"}),
    ],
)
def test_finish_reasons(reason: str, status: str, details: dict[str, str] | None) -> None:
    builder, events = _stream(TextDelta("partial"), Finish(reason, Usage(1, 1)))  # type: ignore[arg-type]
    terminal = events[-1]
    assert terminal["type"] == f"response.{status}"
    response = terminal["response"]
    validate("ResponseResource", response)
    assert response["status"] == status and response["incomplete_details"] == details
    item_status = "completed" if status == "completed" else "incomplete"
    assert response["output"][0]["status"] == item_status  # the open item ends as the response does
    assert (response["completed_at"] is None) == (status == "incomplete")
    assert builder.status == status and builder.finished


def test_an_incomplete_call_keeps_its_truncated_arguments() -> None:
    _, events = _stream(
        ToolCallStart(0, "call_1", "f"), ToolCallDelta(0, '{"a": '), Finish("length")
    )
    call = events[-1]["response"]["output"][0]
    assert (call["status"], call["arguments"]) == ("incomplete", '{"a": ')
    assert events[-1]["type"] == "response.incomplete"


def test_fail_closes_the_open_item_then_error_then_failed() -> None:
    builder = run(TextDelta("done part"), ToolCallStart(0, "call_1", "f"), ToolCallDelta(0, '{"x"'))
    builder.fail(
        ApiError(502, "upstream went away", type="server_error", code="upstream_error", param=None)
    )
    events = builder.drain()
    check_events(events)
    tail = _types(events)[-4:]
    assert tail == [
        "response.function_call_arguments.done",
        "response.output_item.done",
        "error",
        "response.failed",
    ]
    assert (
        events[-3]["item"]["status"] == "incomplete" and events[-3]["item"]["arguments"] == '{"x"'
    )
    assert events[-2]["error"] == {
        "type": "server_error",
        "code": "upstream_error",
        "message": "upstream went away",
        "param": None,
    }
    response = events[-1]["response"]
    validate("ResponseResource", response)
    assert response["status"] == "failed"
    assert response["error"] == {"code": "upstream_error", "message": "upstream went away"}
    assert [i["status"] for i in response["output"]] == ["completed", "incomplete"]
    assert builder.final is response


def test_fail_without_a_code_names_the_error_type_and_is_final() -> None:
    builder = run()
    builder.fail(ApiError(500, "boom", type="server_error"))
    builder.fail(
        ApiError(500, "again", type="server_error")
    )  # once ended, later failures change nothing
    events = builder.drain()
    check_events(events)
    assert _types(events) == [*START, "error", "response.failed"]
    assert events[-1]["response"]["error"] == {"code": "server_error", "message": "boom"}
    assert events[-1]["response"]["output"] == []


def test_a_finished_response_does_not_fail_afterwards() -> None:
    builder = run(TextDelta("x"), Finish("stop"))
    builder.fail(ApiError(500, "late", type="server_error"))
    events = builder.drain()
    assert events[-1]["type"] == "response.completed" and "error" not in _types(events)


def test_events_after_the_finish_are_an_upstream_error() -> None:
    builder = run(TextDelta("x"), Finish("stop"))
    for late in (TextDelta("more"), Finish("stop")):
        with pytest.raises(ApiError) as caught:
            builder.feed(late)
        assert (caught.value.status, caught.value.code) == (502, "upstream_invalid_response")


def test_an_unknown_event_is_refused() -> None:
    builder = run()
    with pytest.raises(TypeError):
        builder.feed("not an event")  # type: ignore[arg-type]


def test_cancel_closes_the_open_item_without_a_terminal_event() -> None:
    builder = run(TextDelta("half"))
    builder.cancel()
    events = builder.drain()
    assert _types(events)[-1] == "response.output_item.done"
    assert events[-1]["item"]["status"] == "incomplete"
    assert not any(
        t in ("response.completed", "response.incomplete", "response.failed")
        for t in _types(events)
    )
    snapshot = builder.snapshot()
    assert snapshot["status"] == "cancelled" and builder.finished
    assert snapshot["output"] == [events[-1]["item"]]
    builder.fail(ApiError(500, "late", type="server_error"))
    builder.cancel()
    assert builder.drain() == [] and builder.snapshot()["status"] == "cancelled"


# --- snapshots, drains, the final response --------------------------------------------------------


def test_snapshot_while_streaming_holds_the_done_items_only() -> None:
    builder = run(TextDelta("first"), ToolCallStart(0, "call_1", "f"), ToolCallDelta(0, "{"))
    snapshot = builder.snapshot()
    validate("ResponseResource", snapshot)
    assert (
        snapshot["status"] == "in_progress"
        and snapshot["usage"] is None
        and snapshot["completed_at"] is None
    )
    assert [i["type"] for i in snapshot["output"]] == ["message"]  # the open call is not output yet
    assert snapshot is not builder.snapshot() and snapshot == builder.snapshot()
    snapshot["output"].append({"tampered": True})
    snapshot["status"] = "tampered"
    assert builder.snapshot()["status"] == "in_progress" and len(builder.snapshot()["output"]) == 1


def test_snapshot_keeps_the_base_fields_and_their_order() -> None:
    skeleton = sample_response(model="m-1", metadata={"k": "v"}, previous_response_id="resp_prev")
    builder = ResponseBuilder(skeleton)  # placeholders for the builder's own fields fix their order
    builder.start()
    builder.feed(TextDelta("x"))
    builder.feed(Finish("stop"))
    final = builder.final
    assert final is not None
    assert list(final) == list(skeleton)
    assert (final["model"], final["metadata"], final["previous_response_id"]) == (
        "m-1",
        {"k": "v"},
        "resp_prev",
    )
    assert final["id"] == builder.id != "resp_test"


def test_emitted_events_never_change() -> None:
    builder = run()
    created = builder.drain()[0]
    before = repr(created)
    for event in (
        TextDelta("a"),
        ToolCallStart(0, "c", "f"),
        ToolCallDelta(0, "{}"),
        Finish("tool_calls"),
    ):
        builder.feed(event)
    builder.drain()
    assert repr(created) == before and created["response"]["output"] == []


def test_drain_numbers_only_the_new_events_and_continues_the_sequence() -> None:
    builder = ResponseBuilder(base())
    assert builder.drain() == []
    builder.start()
    first = builder.drain()
    builder.feed(TextDelta("a"))
    second = builder.drain()
    assert builder.drain() == []  # nothing new since
    builder.feed(TextDelta("b"))
    builder.feed(Finish("stop"))
    third = builder.drain()
    numbers = [e["sequence_number"] for e in (*first, *second, *third)]
    assert numbers == list(range(len(numbers)))
    assert _types(second) == [
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
    ]
    check_events([*first, *second, *third])


def test_the_final_response_is_the_terminal_events_response() -> None:
    builder = run(
        ReasoningDelta("r", "summary"),
        TextDelta("t"),
        ToolCallStart(0, "c", "f"),
        Finish("tool_calls", Usage(2, 3)),
    )
    events = builder.drain()
    assert builder.final is events[-1]["response"]
    assert builder.final == builder.snapshot()
    assert builder.output == builder.final["output"]


def test_unlink_previous_clears_previous_response_id_from_later_snapshots() -> None:
    builder = ResponseBuilder(sample_response(previous_response_id="resp_gone"))
    builder.start()
    created = builder.drain()[0]
    builder.unlink_previous()
    builder.feed(Finish("stop"))
    final = builder.drain()[-1]["response"]
    assert created["response"]["previous_response_id"] == "resp_gone"  # emitted: unchanged
    assert final["previous_response_id"] is None and builder.final is final


# --- extension items ------------------------------------------------------------------------------


def test_an_extension_item_between_text_closes_the_message() -> None:
    builder, events = _stream(
        TextDelta("before"),
        ExtensionItem(
            {"id": "ws_1", "type": "web_search_call", "status": "completed"},
            "openai-responses https://x",
        ),
        TextDelta("after"),
        Finish("stop"),
    )
    output = events[-1]["response"]["output"]
    assert [i["content"][0]["text"] for i in output] == [
        "before",
        "after",
    ]  # two messages: not one interleaved
    assert [e["output_index"] for e in events if e["type"] == "response.output_item.added"] == [
        0,
        1,
    ]
    full = builder.output_items()
    assert (
        [i["type"] for i in full][0] == "message"
        and full[2]["type"] == "message"
        and full[1] not in output
    )
    assert builder.history_differs


# --- any stream of model events -------------------------------------------------------------------

_PIECE = st.text(max_size=6)
_ITEM = st.one_of(
    st.lists(_PIECE, min_size=1, max_size=3).map(lambda ps: [TextDelta(p) for p in ps]),
    st.lists(_PIECE, min_size=1, max_size=3).map(lambda ps: [RefusalDelta(p) for p in ps]),
    st.lists(
        st.tuples(_PIECE, st.sampled_from(["content", "summary"])), min_size=1, max_size=3
    ).map(
        lambda ps: [ReasoningDelta(t, p) for t, p in ps]  # type: ignore[arg-type]
    ),
    st.just([ReasoningStart()]),
    st.just([ReasoningEncrypted("ENC")]),
    st.lists(_PIECE, max_size=3).map(
        lambda ps: [ToolCallStart(-1, "", "tool"), *(ToolCallDelta(-1, p) for p in ps)]
    ),
)
_ENDING = st.one_of(
    st.sampled_from(["stop", "length", "tool_calls", "content_filter"]), st.just("fail")
)


def _numbered(items: list[list[ModelEvent]]) -> list[ModelEvent]:
    """The items' events with tool calls numbered 0, 1, … in order (the neutral contract)."""
    out: list[ModelEvent] = []
    calls = -1
    for item in items:
        for event in item:
            if isinstance(event, ToolCallStart):
                calls += 1
                event = ToolCallStart(calls, event.call_id, event.name)
            elif isinstance(event, ToolCallDelta):
                event = ToolCallDelta(calls, event.arguments)
            out.append(event)
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    items=st.lists(_ITEM, max_size=6),
    ending=_ENDING,
    drain_every=st.integers(min_value=1, max_value=5),
)
def test_any_event_stream_follows_the_spec_grammar(
    items: list[list[ModelEvent]], ending: str, drain_every: int
) -> None:
    builder = ResponseBuilder(base())
    builder.start()
    events: list[Event] = builder.drain()
    for n, event in enumerate(_numbered(items)):
        builder.feed(event)
        if n % drain_every == 0:
            snapshot = builder.snapshot()
            assert snapshot["status"] == "in_progress" and snapshot["output"] == builder.output
            events += builder.drain()
    if ending == "fail":
        builder.fail(ApiError(500, "boom", type="server_error"))
    else:
        builder.feed(Finish(ending, Usage(1, 2)))  # type: ignore[arg-type]
    events += builder.drain()
    check_events(events)  # spec schemas, numbering, item lifecycle, never interleaved
    assert builder.final is events[-1]["response"]
    validate("ResponseResource", builder.final)
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert builder.final["output"] == done


# --- OpenAI's custom tool calls (not in the spec: OpenAI's event names and item shape) ------------


def test_a_custom_tool_call_streams_its_free_form_input() -> None:
    builder = run(
        TextDelta("Patching."),
        ToolCallStart(0, "call_p", "apply_patch", custom=True),
        ToolCallDelta(0, "*** Begin Patch\n"),
        ToolCallDelta(0, "*** End Patch"),
        Finish("tool_calls"),
    )
    events = builder.drain()
    call_events = [e for e in events if e.get("output_index") == 1]
    assert _types(call_events) == [
        "response.output_item.added",
        "response.custom_tool_call_input.delta",
        "response.custom_tool_call_input.delta",
        "response.custom_tool_call_input.done",
        "response.output_item.done",
    ]
    added = call_events[0]["item"]
    assert added == {
        "id": added["id"],
        "type": "custom_tool_call",
        "status": "in_progress",
        "call_id": "call_p",
        "name": "apply_patch",
        "input": "",
    }
    assert added["id"].startswith("ctc_")
    assert all(e["item_id"] == added["id"] for e in call_events[1:4])
    assert [e["delta"] for e in call_events[1:3]] == ["*** Begin Patch\n", "*** End Patch"]
    assert call_events[3]["input"] == "*** Begin Patch\n*** End Patch"
    done = call_events[4]["item"]
    assert done == {**added, "status": "completed", "input": "*** Begin Patch\n*** End Patch"}
    assert not any(e["type"].startswith("response.function_call_arguments") for e in events)
    assert (
        events[-1]["type"] == "response.completed" and events[-1]["response"]["output"][1] == done
    )
    assert [e["sequence_number"] for e in events] == list(range(len(events)))


def test_a_compaction_made_on_create_is_the_first_output_item() -> None:
    builder = run(CompactionItem("ogc1_sealed"), TextDelta("hi"), Finish("stop"))
    events = builder.drain()
    types = _types(events)
    assert types[:5] == [
        *START,
        "response.output_item.added",
        "response.compaction.compacting",
        "response.output_item.done",
    ]
    added, compacting, done = events[2:5]
    assert added["item"] == {**done["item"], "encrypted_content": ""}
    assert compacting == {
        "type": "response.compaction.compacting",
        "item_id": done["item"]["id"],
        "output_index": 0,
        "sequence_number": 3,
    }
    assert (
        done["item"]["type"] == "compaction" and done["item"]["encrypted_content"] == "ogc1_sealed"
    )
    assert builder.final is not None
    assert [item["type"] for item in builder.final["output"]] == ["compaction", "message"]
    assert builder.final["output"][1]["id"] != done["item"]["id"]
    check_events([e for e in events if e["type"] != "response.compaction.compacting"])
