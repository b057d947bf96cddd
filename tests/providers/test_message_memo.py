"""The ``openai-chat`` mapping resumes a history it mapped on an earlier turn
(``providers/openai_chat/message_memo.py``): what it sends, and what it notes in the ledger,
is exactly what mapping every item again gives, whatever the items and wherever the history
ends — an open assistant message joined by later calls included."""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest

from orgate.engine.history_items import items_from_wire
from orgate.neutral import ModelRequest
from orgate.providers.openai_chat import mapping
from orgate.providers.openai_chat.mapping import ChatOptions, build_body
from orgate.providers.openai_chat.message_memo import MessageMemo

USER = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
ASSISTANT = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "output_text", "text": "hello", "annotations": []}],
}
DEVELOPER = {"type": "message", "role": "developer", "content": "be brief"}
REASONING = {"id": "rs_1", "type": "reasoning", "summary": []}


def call(n: int) -> dict[str, Any]:
    return {
        "type": "function_call",
        "call_id": f"c{n}",
        "name": "f",
        "arguments": "{}",
        "status": "completed",
    }


def output(n: int) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": f"c{n}", "output": f"out {n}"}


def mapped(items: list[Any], history: int, options: ChatOptions | None = None) -> Any:
    request = ModelRequest(model="m", input=list(items), history_length=history)
    body = build_body(request, options=options)
    return body["messages"], [(e.code, e.path) for e in request.ledger]


def fresh(items: list[Any], options: ChatOptions | None = None) -> Any:
    """The mapping of every item again (no history: nothing kept or resumed)."""
    return mapped(items, 0, options)


@pytest.fixture(autouse=True)
def memo(monkeypatch: pytest.MonkeyPatch) -> MessageMemo:
    own = MessageMemo()
    monkeypatch.setattr(mapping, "MEMO", own)
    return own


def test_a_turn_resumes_the_history_it_shares_with_the_last(memo: MessageMemo) -> None:
    history = items_from_wire([USER, ASSISTANT, USER, ASSISTANT])
    first = mapped([*history, *items_from_wire([USER])], len(history))
    assert first == fresh([*history, *items_from_wire([USER])])
    [kept] = memo._entries.values()
    assert kept.items == history  # the request's own input is not kept
    longer = [*history, *items_from_wire([USER, ASSISTANT])]
    assert mapped([*longer, *items_from_wire([USER])], len(longer)) == fresh(
        [*longer, *items_from_wire([USER])]
    )
    [kept] = memo._entries.values()  # the longer history replaced the shorter
    assert kept.items == longer


def test_an_open_assistant_message_is_joined_by_a_copy() -> None:
    history = items_from_wire([USER, ASSISTANT])
    before = mapped([*history, *items_from_wire([USER])], len(history))
    joined = [*history, *items_from_wire([call(1), call(2)])]
    assert mapped(joined, len(joined)) == fresh(joined)
    assert joined and mapped(joined, len(joined))[0][-1]["tool_calls"][1]["id"] == "c2"
    # the kept history was not changed by the calls that joined its last message
    assert mapped([*history, *items_from_wire([USER])], len(history)) == before
    # and a history kept with two calls resumes with two, not with what a later turn added
    more = [*joined, *items_from_wire([call(3)])]
    assert mapped(more, len(joined)) == fresh(more)
    assert mapped(joined[:3], len(joined)) == fresh(joined[:3])


def test_ledger_entries_of_the_history_are_noted_again() -> None:
    history = items_from_wire([DEVELOPER, USER, REASONING, ASSISTANT])
    mapped([*history, *items_from_wire([USER])], len(history))
    messages, notes = mapped([*history, *items_from_wire([USER])], len(history))
    assert notes == fresh([*history, *items_from_wire([USER])])[1]
    assert {code.value for code, _ in notes} >= {"developer_as_system", "reasoning_item_dropped"}


def test_other_options_or_other_objects_are_mapped_again(memo: MessageMemo) -> None:
    image = {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": "look"},
            {"type": "input_image", "image_url": "https://example.com/a.png"},
        ],
    }
    history = items_from_wire([USER, image, ASSISTANT])
    mapped(history, len(history))
    parts = ChatOptions(content_format="parts")
    assert mapped(history, len(history), parts) == fresh(history, parts)
    copies = items_from_wire([USER, image, ASSISTANT])  # equal items, other objects
    assert mapped(copies, len(copies)) == fresh(copies)


def test_any_history_of_any_items_maps_as_a_fresh_mapping() -> None:
    kinds = [USER, ASSISTANT, DEVELOPER, REASONING, "call", "output"]
    rng = random.Random(7)
    for _ in range(40):
        wire: list[dict[str, Any]] = []
        for n in range(rng.randrange(1, 14)):
            kind = rng.choice(kinds)
            wire.append(call(n) if kind == "call" else output(n) if kind == "output" else kind)
        items = items_from_wire(wire)
        turns = sorted(rng.sample(range(1, len(items) + 1), min(3, len(items))))
        for cut in turns:  # each turn's history a longer prefix of the same objects
            sent = [*items[:cut], *items_from_wire([USER])]
            assert mapped(sent, cut) == fresh(sent), (wire, cut)


def test_an_entry_counts_the_json_size_of_its_messages(memo: MessageMemo) -> None:
    history = items_from_wire([USER, ASSISTANT, call(1), call(2), output(1), output(2), USER])
    for cut in range(1, len(history) + 1):  # each turn resumes the last one's
        mapped([*history[:cut], *items_from_wire([USER])], cut)
        [kept] = memo._entries.values()
        whole = len(orjson.dumps(kept.messages))
        assert whole <= memo.size <= whole + 4 * len(kept.messages), cut
        assert memo.size == kept.size


def test_the_memo_is_bounded_by_the_size_of_its_messages(memo: MessageMemo) -> None:
    memo.max_bytes = 2_000
    histories = [items_from_wire([USER, ASSISTANT] * 3) for _ in range(20)]
    for history in histories:
        mapped(history, len(history))
        assert 0 < memo.size <= 2_000
    assert len(memo._entries) < 20  # the least recently used went
    big = {"type": "message", "role": "user", "content": "x" * 5_000}
    history = items_from_wire([big, ASSISTANT])
    size = memo.size
    assert mapped(history, len(history)) == fresh(history)
    assert memo.size == size  # larger than the whole bound: not kept
