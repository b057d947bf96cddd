"""Response-side models dump to exactly the spec shape.

The response object itself is the builder's dict (``protocol/response.py``): its shape is held
to the spec by tests/engine/test_response_shape.py."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from orgate.protocol import (
    CompactionBody,
    CompactResource,
    FunctionCall,
    FunctionCallOutput,
    FunctionToolChoice,
    InputFileContent,
    InputImageContent,
    InputTextContent,
    InputTokensDetails,
    InputVideoContent,
    ItemField,
    LogProb,
    Message,
    OutputTextContent,
    OutputTokensDetails,
    ReasoningBody,
    ReasoningTextContent,
    RefusalContent,
    SummaryTextContent,
    TextContent,
    TopLogProb,
    UrlCitationBody,
    Usage,
)
from tests.support.spec import validate


def usage() -> Usage:
    return Usage(
        input_tokens=10,
        output_tokens=5,
        total_tokens=15,
        input_tokens_details=InputTokensDetails(cached_tokens=0),
        output_tokens_details=OutputTokensDetails(reasoning_tokens=0),
    )


def items() -> list[Any]:
    return [
        ReasoningBody(
            id="rs_1",
            summary=[SummaryTextContent(text="plan")],
            content=[ReasoningTextContent(text="t")],
        ),
        Message(
            id="msg_1",
            status="completed",
            role="assistant",
            phase="final_answer",
            content=[
                OutputTextContent(
                    text="hello",
                    annotations=[
                        UrlCitationBody(url="https://a", start_index=0, end_index=5, title="A")
                    ],
                    logprobs=[
                        LogProb(
                            token="h",
                            logprob=-0.1,
                            bytes=[104],
                            top_logprobs=[TopLogProb(token="h", logprob=-0.1, bytes=[104])],
                        )
                    ],
                ),
                RefusalContent(refusal="no"),
            ],
        ),
        Message(
            id="msg_0",
            status="completed",
            role="user",
            content=[
                InputTextContent(text="hi"),
                InputImageContent(image_url=None, detail="auto"),
                InputFileContent(filename="a.pdf"),
                InputVideoContent(video_url="https://v"),
                TextContent(text="t"),
            ],
        ),
        FunctionCall(
            id="fc_1", call_id="call_1", name="f", arguments='{"a":1}', status="completed"
        ),
        FunctionCallOutput(id="fco_1", call_id="call_1", output="ok", status="completed"),
        FunctionCallOutput(
            id="fco_2", call_id="call_1", output=[InputTextContent(text="ok")], status="incomplete"
        ),
        CompactionBody(id="cmp_1", encrypted_content="gAAA"),
    ]


def test_optional_non_nullable_fields_are_omitted_not_null() -> None:
    msg = Message(id="m", status="in_progress", role="assistant", content=[]).model_dump(
        mode="json"
    )
    assert "phase" not in msg
    assert "logprobs" not in OutputTextContent(text="x").model_dump(mode="json")
    reasoning = ReasoningBody(id="r", summary=[]).model_dump(mode="json")
    assert "content" not in reasoning and "encrypted_content" not in reasoning
    assert FunctionToolChoice().model_dump(mode="json") == {"type": "function"}


@pytest.mark.parametrize("item", items(), ids=lambda i: type(i).__name__)
def test_each_output_item_is_spec_valid_and_round_trips(item: Any) -> None:
    dumped = item.model_dump(mode="json")
    validate("ItemField", dumped)
    again = TypeAdapter(ItemField).validate_python(dumped)
    assert again == item


def test_required_fields_are_required() -> None:
    with pytest.raises(ValidationError):
        FunctionCall.model_validate(
            {"type": "function_call", "id": "x", "call_id": "c", "name": "f", "arguments": "{}"}
        )


def test_compact_resource_is_spec_valid() -> None:
    res = CompactResource(
        id="cr_1",
        output=[CompactionBody(id="cmp_1", encrypted_content="x")],
        created_at=1,
        usage=usage(),
    )
    validate("CompactResource", res.model_dump(mode="json"))
