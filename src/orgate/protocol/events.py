"""The 24 streaming events of ``text/event-stream`` (and WebSocket) responses.

``StreamingEvent`` is their union, discriminated on ``type``. Each event model dumps
(``model_dump(mode="json")``) to exactly the spec's event object.
"""

from __future__ import annotations

from typing import Annotated, Literal, TypeAlias

from pydantic import Field

from orgate.protocol._base import WireModel, omittable
from orgate.protocol.content import Annotation, ContentPart, LogProb
from orgate.protocol.items import ItemField
from orgate.protocol.response import ResponseResource

# --------------------------------------------------------------------------- lifecycle


class ResponseCreatedStreamingEvent(WireModel):
    type: Literal["response.created"] = "response.created"
    sequence_number: int
    response: ResponseResource


class ResponseQueuedStreamingEvent(WireModel):
    type: Literal["response.queued"] = "response.queued"
    sequence_number: int
    response: ResponseResource


class ResponseInProgressStreamingEvent(WireModel):
    type: Literal["response.in_progress"] = "response.in_progress"
    sequence_number: int
    response: ResponseResource


class ResponseCompletedStreamingEvent(WireModel):
    type: Literal["response.completed"] = "response.completed"
    sequence_number: int
    response: ResponseResource


class ResponseFailedStreamingEvent(WireModel):
    type: Literal["response.failed"] = "response.failed"
    sequence_number: int
    response: ResponseResource


class ResponseIncompleteStreamingEvent(WireModel):
    type: Literal["response.incomplete"] = "response.incomplete"
    sequence_number: int
    response: ResponseResource


# --------------------------------------------------------------------------- items and parts


class ResponseOutputItemAddedStreamingEvent(WireModel):
    type: Literal["response.output_item.added"] = "response.output_item.added"
    sequence_number: int
    output_index: int
    item: ItemField | None


class ResponseOutputItemDoneStreamingEvent(WireModel):
    type: Literal["response.output_item.done"] = "response.output_item.done"
    sequence_number: int
    output_index: int
    item: ItemField | None


class ResponseReasoningSummaryPartAddedStreamingEvent(WireModel):
    type: Literal["response.reasoning_summary_part.added"] = "response.reasoning_summary_part.added"
    sequence_number: int
    item_id: str
    output_index: int
    summary_index: int
    part: ContentPart


class ResponseReasoningSummaryPartDoneStreamingEvent(WireModel):
    type: Literal["response.reasoning_summary_part.done"] = "response.reasoning_summary_part.done"
    sequence_number: int
    item_id: str
    output_index: int
    summary_index: int
    part: ContentPart


class ResponseContentPartAddedStreamingEvent(WireModel):
    type: Literal["response.content_part.added"] = "response.content_part.added"
    sequence_number: int
    item_id: str
    output_index: int
    content_index: int
    part: ContentPart


class ResponseContentPartDoneStreamingEvent(WireModel):
    type: Literal["response.content_part.done"] = "response.content_part.done"
    sequence_number: int
    item_id: str
    output_index: int
    content_index: int
    part: ContentPart


# --------------------------------------------------------------------------- deltas and dones


class ResponseOutputTextDeltaStreamingEvent(WireModel):
    type: Literal["response.output_text.delta"] = "response.output_text.delta"
    sequence_number: int
    item_id: str
    output_index: int
    content_index: int
    delta: str
    logprobs: list[LogProb] | None = omittable()
    obfuscation: str | None = omittable()


class ResponseOutputTextDoneStreamingEvent(WireModel):
    type: Literal["response.output_text.done"] = "response.output_text.done"
    sequence_number: int
    item_id: str
    output_index: int
    content_index: int
    text: str
    logprobs: list[LogProb] | None = omittable()


class ResponseRefusalDeltaStreamingEvent(WireModel):
    type: Literal["response.refusal.delta"] = "response.refusal.delta"
    sequence_number: int
    item_id: str
    output_index: int
    content_index: int
    delta: str


class ResponseRefusalDoneStreamingEvent(WireModel):
    type: Literal["response.refusal.done"] = "response.refusal.done"
    sequence_number: int
    item_id: str
    output_index: int
    content_index: int
    refusal: str


class ResponseReasoningDeltaStreamingEvent(WireModel):
    type: Literal["response.reasoning.delta"] = "response.reasoning.delta"
    sequence_number: int
    item_id: str
    output_index: int
    content_index: int
    delta: str
    obfuscation: str | None = omittable()


class ResponseReasoningDoneStreamingEvent(WireModel):
    type: Literal["response.reasoning.done"] = "response.reasoning.done"
    sequence_number: int
    item_id: str
    output_index: int
    content_index: int
    text: str


class ResponseReasoningSummaryDeltaStreamingEvent(WireModel):
    type: Literal["response.reasoning_summary_text.delta"] = "response.reasoning_summary_text.delta"
    sequence_number: int
    item_id: str
    output_index: int
    summary_index: int
    delta: str
    obfuscation: str | None = omittable()


class ResponseReasoningSummaryDoneStreamingEvent(WireModel):
    type: Literal["response.reasoning_summary_text.done"] = "response.reasoning_summary_text.done"
    sequence_number: int
    item_id: str
    output_index: int
    summary_index: int
    text: str


class ResponseOutputTextAnnotationAddedStreamingEvent(WireModel):
    type: Literal["response.output_text.annotation.added"] = "response.output_text.annotation.added"
    sequence_number: int
    item_id: str
    output_index: int
    content_index: int
    annotation_index: int
    annotation: Annotation | None


class ResponseFunctionCallArgumentsDeltaStreamingEvent(WireModel):
    type: Literal["response.function_call_arguments.delta"] = (
        "response.function_call_arguments.delta"
    )
    sequence_number: int
    item_id: str
    output_index: int
    delta: str
    obfuscation: str | None = omittable()


class ResponseFunctionCallArgumentsDoneStreamingEvent(WireModel):
    type: Literal["response.function_call_arguments.done"] = "response.function_call_arguments.done"
    sequence_number: int
    item_id: str
    output_index: int
    arguments: str


# --------------------------------------------------------------------------- errors


class ErrorPayload(WireModel):
    type: str
    code: str | None
    message: str
    param: str | None
    headers: dict[str, str] | None = omittable()


class ErrorStreamingEvent(WireModel):
    type: Literal["error"] = "error"
    sequence_number: int
    error: ErrorPayload


StreamingEvent: TypeAlias = Annotated[
    ResponseCreatedStreamingEvent
    | ResponseQueuedStreamingEvent
    | ResponseInProgressStreamingEvent
    | ResponseCompletedStreamingEvent
    | ResponseFailedStreamingEvent
    | ResponseIncompleteStreamingEvent
    | ResponseOutputItemAddedStreamingEvent
    | ResponseOutputItemDoneStreamingEvent
    | ResponseReasoningSummaryPartAddedStreamingEvent
    | ResponseReasoningSummaryPartDoneStreamingEvent
    | ResponseContentPartAddedStreamingEvent
    | ResponseContentPartDoneStreamingEvent
    | ResponseOutputTextDeltaStreamingEvent
    | ResponseOutputTextDoneStreamingEvent
    | ResponseRefusalDeltaStreamingEvent
    | ResponseRefusalDoneStreamingEvent
    | ResponseReasoningDeltaStreamingEvent
    | ResponseReasoningDoneStreamingEvent
    | ResponseReasoningSummaryDeltaStreamingEvent
    | ResponseReasoningSummaryDoneStreamingEvent
    | ResponseOutputTextAnnotationAddedStreamingEvent
    | ResponseFunctionCallArgumentsDeltaStreamingEvent
    | ResponseFunctionCallArgumentsDoneStreamingEvent
    | ErrorStreamingEvent,
    Field(discriminator="type"),
]
"""Any event of a response stream, discriminated on ``type``."""

TERMINAL_EVENT_TYPES = frozenset({"response.completed", "response.incomplete", "response.failed"})
