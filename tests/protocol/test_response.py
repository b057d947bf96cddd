"""Response-side models dump to exactly the spec shape."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from orgate.protocol import (
    AllowedToolChoice,
    CompactionBody,
    CompactResource,
    Error,
    FunctionCall,
    FunctionCallOutput,
    FunctionTool,
    FunctionToolChoice,
    IncompleteDetails,
    InputFileContent,
    InputImageContent,
    InputTextContent,
    InputTokensDetails,
    InputVideoContent,
    ItemField,
    JsonObjectResponseFormat,
    JsonSchemaResponseFormat,
    LogProb,
    Message,
    OutputTextContent,
    OutputTokensDetails,
    Reasoning,
    ReasoningBody,
    ReasoningTextContent,
    RefusalContent,
    ResponseResource,
    SummaryTextContent,
    TextContent,
    TextField,
    TextResponseFormat,
    TopLogProb,
    UrlCitationBody,
    Usage,
)
from tests.support.samples import response
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


def full_response(**overrides: Any) -> ResponseResource:
    fields: dict[str, Any] = dict(
        id="resp_1",
        created_at=1,
        completed_at=2,
        status="completed",
        incomplete_details=None,
        model="m",
        previous_response_id=None,
        instructions="be brief",
        output=items(),
        error=None,
        tools=[
            FunctionTool(name="f", description=None, parameters={"type": "object"}, strict=True)
        ],
        tool_choice="auto",
        truncation="disabled",
        parallel_tool_calls=True,
        text=TextField(format=TextResponseFormat()),
        top_p=1.0,
        presence_penalty=0.0,
        frequency_penalty=0.0,
        top_logprobs=0,
        temperature=1.0,
        reasoning=Reasoning(effort="low", summary=None),
        usage=usage(),
        max_output_tokens=None,
        max_tool_calls=None,
        store=True,
        background=False,
        service_tier="default",
        metadata={},
        safety_identifier=None,
        prompt_cache_key=None,
    )
    fields.update(overrides)
    return ResponseResource(**fields)


def test_response_dump_is_spec_valid_with_nulls_present() -> None:
    dumped = full_response().model_dump(mode="json")
    validate("ResponseResource", dumped)
    for key in (
        "incomplete_details",
        "previous_response_id",
        "error",
        "max_output_tokens",
        "safety_identifier",
    ):
        assert key in dumped and dumped[key] is None
    assert set(dumped) == set(response())


@pytest.mark.parametrize(
    "overrides",
    [
        {"tool_choice": "none"},
        {"tool_choice": FunctionToolChoice(name="f")},
        {"tool_choice": FunctionToolChoice()},
        {"tool_choice": AllowedToolChoice(tools=[FunctionToolChoice(name="f")], mode="auto")},
        {"text": TextField(format=JsonObjectResponseFormat(), verbosity="low")},
        {
            "text": TextField(
                format=JsonSchemaResponseFormat(name="x", description=None, strict=True)
            )
        },
        {
            "status": "incomplete",
            "incomplete_details": IncompleteDetails(reason="max_output_tokens"),
        },
        {"status": "failed", "error": Error(code="server_error", message="boom"), "usage": None},
        {"reasoning": None, "instructions": None, "output": []},
    ],
)
def test_response_variants_are_spec_valid(overrides: dict[str, Any]) -> None:
    validate("ResponseResource", full_response(**overrides).model_dump(mode="json"))


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


def test_sample_response_parses_and_dumps_identically() -> None:
    raw = response()
    assert ResponseResource.model_validate(raw).model_dump(mode="json") == raw


def test_required_fields_are_required() -> None:
    with pytest.raises(ValidationError):
        ResponseResource.model_validate(
            {k: v for k, v in response().items() if k != "completed_at"}
        )
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
