"""Kept input items written back as response items by ``/v1/responses/compact``: each item
type in the response-item shape, its id kept or made, and an item type that cannot be kept."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter

from orgate.engine.compaction.service import as_output_item
from orgate.protocol import ItemParam
from orgate.protocol.errors import ApiError

ITEMS = TypeAdapter(list[ItemParam])


def _output(wire: dict) -> dict:
    return as_output_item(ITEMS.validate_python([wire])[0])


def _without_id(item: dict, prefix: str) -> dict:
    assert item["id"].startswith(prefix) and len(item["id"]) > len(prefix)
    return {k: v for k, v in item.items() if k != "id"}


def test_a_user_message_keeps_its_id_and_its_text_becomes_input_text():
    assert _output({"role": "user", "content": "hi", "id": "msg_1"}) == {
        "type": "message",
        "id": "msg_1",
        "status": "completed",
        "role": "user",
        "content": [{"type": "input_text", "text": "hi"}],
    }


def test_an_assistant_message_keeps_its_phase_and_gets_output_text_fields():
    item = _output(
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "yo"}],
            "phase": "commentary",
        }
    )
    assert _without_id(item, "msg_") == {
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "phase": "commentary",
        "content": [{"type": "output_text", "text": "yo", "annotations": [], "logprobs": []}],
    }


def test_a_message_without_phase_has_none():
    item = _output({"role": "assistant", "content": "plain"})
    assert "phase" not in item and item["content"] == [
        {"type": "output_text", "text": "plain", "annotations": [], "logprobs": []}
    ]


def test_a_function_call_and_its_output():
    call = _output({"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"})
    assert _without_id(call, "fc_") == {
        "type": "function_call",
        "call_id": "c1",
        "name": "f",
        "arguments": "{}",
        "status": "completed",
    }
    output = _output(
        {"type": "function_call_output", "call_id": "c1", "output": "42", "id": "fco_x"}
    )
    assert output == {
        "type": "function_call_output",
        "id": "fco_x",
        "call_id": "c1",
        "output": "42",
        "status": "completed",
    }


def test_a_function_call_output_of_parts_keeps_each_part():
    item = _output(
        {
            "type": "function_call_output",
            "call_id": "c1",
            "output": [{"type": "input_text", "text": "42"}],
        }
    )
    assert _without_id(item, "fco_") == {
        "type": "function_call_output",
        "call_id": "c1",
        "output": [{"type": "input_text", "text": "42"}],
        "status": "completed",
    }


def test_a_custom_tool_call_and_its_output():
    call = _output({"type": "custom_tool_call", "call_id": "c2", "name": "g", "input": "raw"})
    assert _without_id(call, "ctc_") == {
        "type": "custom_tool_call",
        "call_id": "c2",
        "name": "g",
        "input": "raw",
        "status": "completed",
    }
    output = _output({"type": "custom_tool_call_output", "call_id": "c2", "output": "done"})
    assert _without_id(output, "ctco_") == {
        "type": "custom_tool_call_output",
        "call_id": "c2",
        "output": "done",
    }


def test_reasoning_keeps_its_summary_and_encrypted_content_only_when_there_is_some():
    summary = [{"type": "summary_text", "text": "s"}]
    item = _output({"type": "reasoning", "summary": summary, "encrypted_content": "enc"})
    assert _without_id(item, "rs_") == {
        "type": "reasoning",
        "summary": summary,
        "encrypted_content": "enc",
    }
    assert _without_id(_output({"type": "reasoning", "summary": []}), "rs_") == {
        "type": "reasoning",
        "summary": [],
    }


def test_a_compaction_item_stays_one():
    item = _output({"type": "compaction", "encrypted_content": "abc", "id": "cmp_1"})
    assert item == {"type": "compaction", "id": "cmp_1", "encrypted_content": "abc"}


def test_an_item_reference_cannot_be_compacted():
    with pytest.raises(ApiError) as caught:
        _output({"type": "item_reference", "id": "msg_9"})
    assert caught.value.status == 400 and caught.value.param == "input"
    assert caught.value.message == "items of type 'item_reference' cannot be compacted"
