"""The pure compaction functions: policy, sealing, tamper detection, expansion,
context-window decision."""

from __future__ import annotations

import base64
import os

import pytest
from pydantic import TypeAdapter

from orgate.engine.compaction import core as compaction
from orgate.protocol import CompactionSummaryItemParam, DeveloperMessageItemParam, ItemParam
from orgate.protocol.errors import ApiError

ITEMS = TypeAdapter(list[ItemParam])
KEY = os.urandom(32)


def conversation() -> list:
    return ITEMS.validate_python(
        [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "first question"},
            {"role": "assistant", "content": "first answer", "phase": "final_answer"},
            {"role": "user", "content": "second question"},
            {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "42"},
            {"role": "assistant", "content": "second answer"},
            {"role": "user", "content": "third question"},
            {"role": "assistant", "content": "third answer"},
        ]
    )


def test_partition_keeps_the_last_turns_and_the_instructions() -> None:
    items = conversation()
    older, kept = compaction.partition(items, 2)
    assert [getattr(i, "content", None) for i in older] == ["first question", "first answer"]
    assert (
        kept[0].role == "system"
        and kept[1].content == "second question"
        and kept[-1].content == "third answer"
    )
    assert len(older) + len(kept) == len(items)
    assert compaction.partition(items, 5) == ([], items)  # not more turns than kept: nothing older
    older_all, kept_all = compaction.partition(items, 0)
    assert [i.role for i in kept_all] == ["system"] and len(older_all) == len(items) - 1


def test_seal_and_open_round_trip() -> None:
    payload = compaction.make_payload("the summary", covered=2, model="m")
    token = compaction.seal(payload, KEY, context="tenant-a")
    assert token.startswith(compaction.TOKEN_PREFIX) and "the summary" not in token
    assert compaction.open_sealed(token, KEY, context="tenant-a") == payload
    assert compaction.seal(payload, KEY, context="tenant-a") != token  # random nonce


def flip(token: str, position: int) -> str:
    """The token with one bit of its decoded bytes flipped."""
    body = token[len(compaction.TOKEN_PREFIX) :]
    raw = bytearray(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    raw[position] ^= 0x01
    return compaction.TOKEN_PREFIX + base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()


@pytest.mark.parametrize("position", [0, 11, 12, 20, -17, -1])
def test_a_flipped_byte_is_invalid_compaction(position: int) -> None:
    token = compaction.seal(compaction.make_payload("s", covered=1), KEY)
    with pytest.raises(ApiError) as raised:
        compaction.open_sealed(flip(token, position), KEY)
    assert raised.value.status == 400 and raised.value.code == "invalid_compaction"


def test_another_key_tenant_or_garbage_is_invalid_compaction() -> None:
    token = compaction.seal(compaction.make_payload("s", covered=1), KEY, context="a")
    for bad_token, key, context in [
        (token, os.urandom(32), "a"),
        (token, KEY, "b"),
        ("gAAAAB-foreign", KEY, "a"),
        ("ogc1_!!", KEY, "a"),
        ("ogc1_abc", KEY, "a"),
    ]:
        with pytest.raises(ApiError) as raised:
            compaction.open_sealed(bad_token, key, context=context)
        assert raised.value.code == "invalid_compaction"


def test_expand_replaces_compaction_items_in_place() -> None:
    token = compaction.seal(compaction.make_payload("they talked about cats", covered=3), KEY)
    empty = compaction.seal(compaction.make_payload(None, covered=0), KEY)
    items = ITEMS.validate_python(
        [
            {"role": "user", "content": "kept"},
            {"type": "compaction", "encrypted_content": token},
            {"type": "compaction", "encrypted_content": empty},
            {"role": "user", "content": "new"},
        ]
    )
    out = compaction.expand(items, KEY)
    assert len(out) == 3
    assert isinstance(out[1], DeveloperMessageItemParam)
    assert out[1].content.startswith(compaction.SUMMARY_HEADER) and out[1].content.endswith(
        "they talked about cats"
    )
    assert not any(isinstance(i, CompactionSummaryItemParam) for i in out)
    broken = ITEMS.validate_python([{"type": "compaction", "encrypted_content": token[:-2] + "xx"}])
    with pytest.raises(ApiError) as raised:
        compaction.expand(broken, KEY)
    assert raised.value.param == "input[0].encrypted_content"


def test_compact_carries_the_summary_only_when_something_is_older() -> None:
    items = conversation()
    result = compaction.compact(items, "sum", keep_turns=2)
    assert result.payload["summary"] == "sum" and result.payload["covered"] == 2
    assert result.kept == compaction.partition(items, 2)[1]
    assert compaction.compact(items, "sum", keep_turns=9).payload["summary"] is None


def test_transcript_names_roles_calls_and_outputs() -> None:
    text = compaction.transcript(conversation())
    assert "user: first question" in text and "assistant (final_answer): first answer" in text
    assert "assistant called lookup({})" in text and "tool result [call_id c1]: 42" in text


def test_fit_context_disabled_fails_instead_of_dropping() -> None:
    items = conversation()
    estimate = compaction.estimate_tokens(items)
    assert compaction.fit_context(items, context_window=None, truncation="disabled").items == items
    assert (
        compaction.fit_context(items, context_window=estimate, truncation="disabled").dropped == []
    )
    with pytest.raises(ApiError) as raised:
        compaction.fit_context(items, context_window=estimate - 1, truncation="disabled")
    assert raised.value.status == 400 and raised.value.code == "context_length_exceeded"


def test_fit_context_auto_drops_the_oldest_turns() -> None:
    items = conversation()
    window = compaction.estimate_tokens(compaction.partition(items, 1)[1]) + 1
    fit = compaction.fit_context(items, context_window=window, truncation="auto")
    assert [getattr(i, "content", None) for i in fit.items] == [
        "be brief",
        "third question",
        "third answer",
    ]
    assert len(fit.dropped) == len(items) - 3 and fit.estimated_tokens <= window
    with pytest.raises(ApiError) as raised:
        compaction.fit_context(items, context_window=3, truncation="auto")
    assert raised.value.code == "context_length_exceeded"


def _whole(summary: str, kept: list[dict], **seal: str) -> CompactionSummaryItemParam:
    payload = compaction.whole_payload(summary, kept, covered=4, model="m")
    token = compaction.seal(payload, KEY, **seal)
    return CompactionSummaryItemParam(type="compaction", encrypted_content=token)


def _texts(items: list) -> list[str]:
    return [item.content for item in items]


def test_a_compaction_made_on_create_stands_for_everything_before_it() -> None:
    kept = [{"type": "message", "role": "user", "content": "kept question"}]
    whole = _whole("the older turns", kept)
    history = [
        *ITEMS.validate_python([{"role": "user", "content": "old question"}]),
        whole,
        *ITEMS.validate_python([{"role": "assistant", "content": "answer after it"}]),
    ]
    new = ITEMS.validate_python([{"role": "user", "content": "new question"}])
    # expand leaves it sealed (it applies to the stored history too)
    assert compaction.expand([whole, *new], KEY)[0] is whole
    view_history, view_input = compaction.model_view(history, new, KEY, read=ITEMS.validate_python)
    assert _texts(view_history)[1:] == ["kept question", "answer after it"]
    assert _texts(view_history)[0] == f"{compaction.SUMMARY_HEADER}\n\nthe older turns"
    assert view_input == new
    # sent as input (a stateless client): the history and what precedes it in the input go
    old = ITEMS.validate_python([{"role": "user", "content": "older input"}])
    view_history, view_input = compaction.model_view(
        history[:1], [*old, whole, *new], KEY, read=ITEMS.validate_python
    )
    assert view_history == [] and _texts(view_input)[1:] == ["kept question", "new question"]
    # none, or only a compaction of /v1/responses/compact (already expanded): unchanged
    assert compaction.model_view(history[:1], new, KEY, read=ITEMS.validate_python) == (
        history[:1],
        new,
    )


def test_a_foreign_whole_compaction_is_invalid_compaction() -> None:
    foreign = _whole("x", [], context="tenant-b")
    with pytest.raises(ApiError) as raised:
        compaction.model_view([], [foreign], KEY, context="tenant-a", read=ITEMS.validate_python)
    assert (raised.value.code, raised.value.param) == (
        "invalid_compaction",
        "input[0].encrypted_content",
    )
    with pytest.raises(ApiError) as raised:
        compaction.model_view([foreign], [], KEY, context="tenant-a", read=ITEMS.validate_python)
    assert raised.value.param == "previous_response_id"
