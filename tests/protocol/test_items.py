"""Input items (``ItemParam``): round-trips, untyped messages, rejections, error locations."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from orgate.protocol import (
    AssistantMessageItemParam,
    CompactionSummaryItemParam,
    DeveloperMessageItemParam,
    FunctionCallItemParam,
    FunctionCallOutputItemParam,
    ItemParam,
    ItemReferenceParam,
    ReasoningItemParam,
    SystemMessageItemParam,
    UserMessageItemParam,
    param_from_loc,
)
from tests.support.spec import errors as spec_errors
from tests.support.spec import validate

ITEMS: TypeAdapter[Any] = TypeAdapter(list[ItemParam])
ITEM: TypeAdapter[Any] = TypeAdapter(ItemParam)

VALID: list[tuple[dict[str, Any], type]] = [
    ({"type": "message", "role": "user", "content": "hi"}, UserMessageItemParam),
    (
        {
            "type": "message",
            "role": "user",
            "id": "msg_1",
            "content": [
                {"type": "input_text", "text": "look"},
                {"type": "input_image", "image_url": "https://x/y.png", "detail": "low"},
                {
                    "type": "input_file",
                    "filename": "a.pdf",
                    "file_data": "data:application/pdf;base64,AA==",
                },
                {"type": "input_file", "file_url": "https://x/a.pdf"},
            ],
        },
        UserMessageItemParam,
    ),
    (
        {
            "type": "message",
            "role": "system",
            "content": [{"type": "input_text", "text": "be brief"}],
        },
        SystemMessageItemParam,
    ),
    ({"type": "message", "role": "developer", "content": "rules"}, DeveloperMessageItemParam),
    (
        {
            "type": "message",
            "role": "assistant",
            "phase": "final_answer",
            "status": "completed",
            "content": [
                {
                    "type": "output_text",
                    "text": "see",
                    "annotations": [
                        {
                            "type": "url_citation",
                            "start_index": 0,
                            "end_index": 3,
                            "url": "https://a",
                            "title": "A",
                        }
                    ],
                },
                {"type": "refusal", "refusal": "no"},
            ],
        },
        AssistantMessageItemParam,
    ),
    (
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"city":"Paris"}',
            "status": "completed",
        },
        FunctionCallItemParam,
    ),
    (
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
        FunctionCallOutputItemParam,
    ),
    (
        {
            "type": "function_call_output",
            "call_id": "call_1",
            "output": [
                {"type": "input_text", "text": "see image"},
                {"type": "input_image", "image_url": "data:image/png;base64,AA=="},
                {"type": "input_video", "video_url": "https://x/v.mp4"},
            ],
        },
        FunctionCallOutputItemParam,
    ),
    (
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "thought"}],
            "encrypted_content": "gAAA",
        },
        ReasoningItemParam,
    ),
    ({"type": "compaction", "encrypted_content": "gAAA"}, CompactionSummaryItemParam),
    ({"type": "item_reference", "id": "msg_9"}, ItemReferenceParam),
]


@pytest.mark.parametrize(
    ("raw", "cls"), VALID, ids=[c.__name__ + str(i) for i, (_, c) in enumerate(VALID)]
)
def test_valid_items_round_trip_and_match_the_spec(raw: dict[str, Any], cls: type) -> None:
    validate("ItemParam", raw)
    item = ITEM.validate_python(raw)
    assert type(item) is cls
    dumped = item.model_dump(mode="json", exclude_none=True)
    assert dumped == raw
    # the default dump (nulls included) is spec-valid too
    validate("ItemParam", item.model_dump(mode="json"))
    assert ITEM.validate_json(ITEM.dump_json(item)) == item


@pytest.mark.parametrize(
    ("raw", "cls"),
    [
        ({"role": "user", "content": "hi"}, UserMessageItemParam),
        ({"role": "system", "content": "sys"}, SystemMessageItemParam),
        ({"role": "developer", "content": "dev"}, DeveloperMessageItemParam),
        ({"role": "assistant", "content": "ok"}, AssistantMessageItemParam),
        ({"id": "msg_1"}, ItemReferenceParam),
        ({"type": None, "id": "msg_1"}, ItemReferenceParam),
    ],
)
def test_messages_and_references_without_type(raw: dict[str, Any], cls: type) -> None:
    item = ITEM.validate_python(raw)
    assert type(item) is cls
    # the dump carries the type, so it is spec-valid
    validate("ItemParam", item.model_dump(mode="json", exclude_none=True))


def test_json_mode_matches_python_mode() -> None:
    raw = (
        b'[{"role":"user","content":"hi"},{"id":"x"},'
        b'{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}]'
    )
    got = ITEMS.validate_json(raw)
    assert [type(i) for i in got] == [
        UserMessageItemParam,
        ItemReferenceParam,
        FunctionCallItemParam,
    ]


def test_model_instances_are_accepted() -> None:
    items = ITEMS.validate_python(
        [UserMessageItemParam(content="a"), FunctionCallOutputItemParam(call_id="c", output="o")]
    )
    assert isinstance(items[1], FunctionCallOutputItemParam)


def test_extra_fields_on_items_are_kept() -> None:
    item = ITEM.validate_python({"role": "user", "content": "hi", "x_trace": 1})
    assert item.model_extra == {"x_trace": 1}


def _errors(raw: Any) -> list[tuple[str | None, str]]:
    with pytest.raises(ValidationError) as info:
        ITEMS.validate_python(raw)
    return [(param_from_loc(e["loc"]), e["type"]) for e in info.value.errors()]


@pytest.mark.parametrize(
    ("raw", "param", "err_type"),
    [
        # arguments must be a JSON string, not an object
        (
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": {"a": 1}},
            "[1].arguments",
            "string_type",
        ),
        ({"type": "bogus"}, "[1].type", "literal_error"),
        ({"type": "openai:web_search_call", "id": "ws_1"}, "[1].type", "literal_error"),
        ({"type": 7}, "[1].type", "literal_error"),
        ({}, "[1].type", "missing"),
        ({"role": "tool", "content": "x"}, "[1].role", "literal_error"),
        ({"type": "message", "role": "robot", "content": "x"}, "[1].role", "literal_error"),
        ({"type": "message", "content": "x"}, "[1].role", "missing"),
        ({"content": "x"}, "[1].role", "missing"),
        ({"role": "user"}, "[1].content", "missing"),
        ({"role": "user", "content": 5}, "[1].content", "string_or_array_type"),
        (
            {"role": "user", "content": [{"type": "output_text", "text": "x"}]},
            "[1].content[0].type",
            "literal_error",
        ),
        ({"role": "user", "content": [{"text": "x"}]}, "[1].content[0].type", "missing"),
        (
            {"role": "system", "content": [{"type": "input_image", "image_url": "u"}]},
            "[1].content[0].type",
            "literal_error",
        ),
        (
            {"role": "assistant", "content": [{"type": "input_text", "text": "x"}]},
            "[1].content[0].type",
            "literal_error",
        ),
        ({"role": "assistant", "content": "x", "phase": "draft"}, "[1].phase", "literal_error"),
        (
            {"type": "function_call", "call_id": "c", "name": "bad name", "arguments": "{}"},
            "[1].name",
            "string_pattern_mismatch",
        ),
        (
            {"type": "function_call", "call_id": "c", "name": "f" * 65, "arguments": "{}"},
            "[1].name",
            "string_too_long",
        ),
        (
            {"type": "function_call", "call_id": "", "name": "f", "arguments": "{}"},
            "[1].call_id",
            "string_too_short",
        ),
        (
            {"type": "function_call_output", "call_id": "c", "output": {"a": 1}},
            "[1].output",
            "string_or_array_type",
        ),
        (
            {"type": "function_call_output", "call_id": 5, "output": "x"},
            "[1].call_id",
            "string_type",
        ),
        (
            {
                "type": "reasoning",
                "summary": [],
                "content": [{"type": "reasoning_text", "text": "x"}],
            },
            "[1].content",
            "none_required",
        ),
        ({"type": "reasoning"}, "[1].summary", "missing"),
        ({"type": "item_reference"}, "[1].id", "missing"),
    ],
)
def test_rejections_are_located(raw: Any, param: str, err_type: str) -> None:
    errors = _errors([{"role": "user", "content": "ok"}, raw])
    assert (param, err_type) in errors, errors
    assert len(errors) == 1, errors
    # differential check: the spec rejects the same item
    assert spec_errors("ItemParam", raw)


def test_non_object_item_is_rejected_at_the_item() -> None:
    assert _errors(["hello"]) == [("[0]", "invalid_item")]


def test_literal_error_lists_the_accepted_types() -> None:
    with pytest.raises(ValidationError) as info:
        ITEM.validate_python({"type": "bogus"})
    msg = info.value.errors()[0]["msg"]
    assert "'function_call_output'" in msg and "'message'" in msg
