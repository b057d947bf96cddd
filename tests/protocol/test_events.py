"""Streaming event models: every one of the 24 dumps to a spec-valid event."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, TypeAdapter

from orgate import protocol
from orgate.protocol import (
    ErrorPayload,
    ErrorStreamingEvent,
    FunctionCall,
    Message,
    OutputTextContent,
    ResponseCompletedStreamingEvent,
    ResponseContentPartAddedStreamingEvent,
    ResponseContentPartDoneStreamingEvent,
    ResponseCreatedStreamingEvent,
    ResponseFailedStreamingEvent,
    ResponseFunctionCallArgumentsDeltaStreamingEvent,
    ResponseFunctionCallArgumentsDoneStreamingEvent,
    ResponseIncompleteStreamingEvent,
    ResponseInProgressStreamingEvent,
    ResponseOutputItemAddedStreamingEvent,
    ResponseOutputItemDoneStreamingEvent,
    ResponseOutputTextAnnotationAddedStreamingEvent,
    ResponseOutputTextDeltaStreamingEvent,
    ResponseOutputTextDoneStreamingEvent,
    ResponseQueuedStreamingEvent,
    ResponseReasoningDeltaStreamingEvent,
    ResponseReasoningDoneStreamingEvent,
    ResponseReasoningSummaryDeltaStreamingEvent,
    ResponseReasoningSummaryDoneStreamingEvent,
    ResponseReasoningSummaryPartAddedStreamingEvent,
    ResponseReasoningSummaryPartDoneStreamingEvent,
    ResponseRefusalDeltaStreamingEvent,
    ResponseRefusalDoneStreamingEvent,
    StreamingEvent,
    SummaryTextContent,
    UrlCitationBody,
)
from tests.support.samples import StreamBuilder, response
from tests.support.spec import event_schemas, validate_event

EVENTS = TypeAdapter(StreamingEvent)
RESP = response()
LOC = {"item_id": "msg_1", "output_index": 0}
TEXT = OutputTextContent(text="hi")
MSG = Message(id="msg_1", status="in_progress", role="assistant", content=[])


def all_events() -> list[BaseModel]:
    return [
        ResponseCreatedStreamingEvent(sequence_number=0, response=RESP),
        ResponseQueuedStreamingEvent(sequence_number=1, response=RESP),
        ResponseInProgressStreamingEvent(sequence_number=2, response=RESP),
        ResponseCompletedStreamingEvent(sequence_number=3, response=RESP),
        ResponseFailedStreamingEvent(sequence_number=4, response=RESP),
        ResponseIncompleteStreamingEvent(sequence_number=5, response=RESP),
        ResponseOutputItemAddedStreamingEvent(sequence_number=6, output_index=0, item=MSG),
        ResponseOutputItemDoneStreamingEvent(
            sequence_number=7,
            output_index=0,
            item=FunctionCall(id="fc", call_id="c", name="f", arguments="{}", status="completed"),
        ),
        ResponseReasoningSummaryPartAddedStreamingEvent(
            sequence_number=8, **LOC, summary_index=0, part=SummaryTextContent(text="")
        ),
        ResponseReasoningSummaryPartDoneStreamingEvent(
            sequence_number=9, **LOC, summary_index=0, part=SummaryTextContent(text="s")
        ),
        ResponseContentPartAddedStreamingEvent(
            sequence_number=10, **LOC, content_index=0, part=OutputTextContent(text="")
        ),
        ResponseContentPartDoneStreamingEvent(
            sequence_number=11, **LOC, content_index=0, part=TEXT
        ),
        ResponseOutputTextDeltaStreamingEvent(
            sequence_number=12, **LOC, content_index=0, delta="h"
        ),
        ResponseOutputTextDoneStreamingEvent(sequence_number=13, **LOC, content_index=0, text="hi"),
        ResponseRefusalDeltaStreamingEvent(sequence_number=14, **LOC, content_index=0, delta="n"),
        ResponseRefusalDoneStreamingEvent(sequence_number=15, **LOC, content_index=0, refusal="no"),
        ResponseReasoningDeltaStreamingEvent(sequence_number=16, **LOC, content_index=0, delta="t"),
        ResponseReasoningDoneStreamingEvent(sequence_number=17, **LOC, content_index=0, text="t"),
        ResponseReasoningSummaryDeltaStreamingEvent(
            sequence_number=18, **LOC, summary_index=0, delta="s"
        ),
        ResponseReasoningSummaryDoneStreamingEvent(
            sequence_number=19, **LOC, summary_index=0, text="s"
        ),
        ResponseOutputTextAnnotationAddedStreamingEvent(
            sequence_number=20,
            **LOC,
            content_index=0,
            annotation_index=0,
            annotation=UrlCitationBody(url="https://a", start_index=0, end_index=1, title="A"),
        ),
        ResponseFunctionCallArgumentsDeltaStreamingEvent(sequence_number=21, **LOC, delta="{"),
        ResponseFunctionCallArgumentsDoneStreamingEvent(sequence_number=22, **LOC, arguments="{}"),
        ErrorStreamingEvent(
            sequence_number=23,
            error=ErrorPayload(type="server_error", code=None, message="boom", param=None),
        ),
    ]


def test_all_24_event_schemas_have_a_model() -> None:
    assert len(event_schemas()) == 24
    assert {type(e).__name__ for e in all_events()} == set(event_schemas().values())
    for name in event_schemas().values():
        assert isinstance(getattr(protocol, name), type)


@pytest.mark.parametrize("event", all_events(), ids=lambda e: type(e).__name__)
def test_event_dump_is_spec_valid_and_round_trips(event: BaseModel) -> None:
    dumped = event.model_dump(mode="json")
    validate_event(dumped)
    assert event_schemas()[dumped["type"]] == type(event).__name__
    again = EVENTS.validate_python(dumped)
    assert type(again) is type(event) and again == event


def test_optional_event_fields_are_omitted() -> None:
    dumped = ResponseOutputTextDeltaStreamingEvent(
        sequence_number=1, **LOC, content_index=0, delta="x"
    ).model_dump(mode="json")
    assert "logprobs" not in dumped and "obfuscation" not in dumped


def test_builder_streams_parse_into_models_and_dump_back() -> None:
    events: list[dict[str, Any]] = (
        StreamBuilder()
        .reasoning("a", "b")
        .message("He", "llo")
        .function_call("f", "{", "}")
        .completed()
    )
    for raw in events:
        assert EVENTS.validate_python(raw).model_dump(mode="json") == raw
