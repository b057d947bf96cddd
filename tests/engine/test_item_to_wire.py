"""``item_to_wire``: the stored form of an input item is its ``model_dump``
(unset fields left out)."""

from __future__ import annotations

import pytest

from orgate.engine.history_items import item_to_wire
from orgate.engine.request_body import normalize_input, parse_body
from orgate.protocol.items import UserMessageItemParam


@pytest.mark.parametrize(
    "raw",
    [
        {"type": "message", "role": "user", "content": "plain"},
        {"role": "user", "content": "without a type"},
        {"type": "message", "role": "user", "content": "with an id", "id": "msg_1"},
        {"type": "message", "role": "user", "content": "with a status", "status": "completed"},
        {"type": "message", "role": "user", "content": "with an extension field", "x_tag": 1},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "parts"}]},
        {"type": "message", "role": "system", "content": "system"},
    ],
)
def test_stored_form_is_the_model_dump(raw: dict) -> None:
    (item,) = normalize_input(parse_body({"model": "m", "input": [raw]}))
    assert item_to_wire(item) == item.model_dump(mode="json", exclude_none=True, by_alias=True)


def test_a_string_input_is_stored_as_one_user_message() -> None:
    (item,) = normalize_input(parse_body({"model": "m", "input": "hello"}))
    assert type(item) is UserMessageItemParam
    wire = item_to_wire(item)
    assert wire == item.model_dump(mode="json", exclude_none=True, by_alias=True)
    assert list(wire.items()) == [("type", "message"), ("role", "user"), ("content", "hello")]
