"""Derived item ids: which ids the store finds through their response's row,
and which need an index row."""

from __future__ import annotations

from orgate.store.base import (
    OUTPUT_POSITIONS,
    SaveArgs,
    derived_item_id,
    derived_location,
    is_derived,
)

RESPONSE = "resp_0193a2b4c5d6e7f8a9b0c1d2e3f4a5b6c7d8e9f0a1b2c3d4"


def test_a_derived_id_is_derived_at_its_own_place_only() -> None:
    for prefix in ("msg", "item", "fc", "rs"):
        for position in (0, 7, OUTPUT_POSITIONS, OUTPUT_POSITIONS + 3):
            item_id = derived_item_id(prefix, RESPONSE, position)
            assert is_derived(item_id, RESPONSE, position)
            assert derived_location(item_id) == (RESPONSE, position)
            assert not is_derived(item_id, RESPONSE, position + 1)
            assert not is_derived(item_id, RESPONSE[:-1] + "0", position)


def test_ids_that_only_read_like_a_place_are_not_derived() -> None:
    canonical = derived_item_id("msg", RESPONSE, 10)
    upper = (
        canonical[:-6] + canonical[-6:].upper()
    )  # "00000A": read as position 10, not written that way
    assert derived_location(upper) == (RESPONSE, 10)
    assert not is_derived(upper, RESPONSE, 10)  # so it gets an index row
    assert not is_derived(
        "call_" + canonical.partition("_")[2], RESPONSE, 10
    )  # not a derived prefix
    assert not is_derived("msg_00000a", "resp_", 10)  # no response suffix
    assert not is_derived(
        derived_item_id("msg", "chatcmpl_x", 1), "chatcmpl_x", 1
    )  # not a response id
    assert not is_derived(canonical, RESPONSE, 0x1000000 + 10)  # beyond six hex digits


def test_a_save_indexes_exactly_the_ids_not_derived_from_their_place() -> None:
    """``encode_save`` finds the ids to index in the pass that names the items; the rule is
    the one reads use (``sqlite._indexed``): every id that ``is_derived`` does not place."""
    from orgate.store.codec import encode_save
    from orgate.store.sqlite import _indexed

    upper = derived_item_id("msg", RESPONSE, 1)[:-6] + "00000A"
    inputs = [
        {"type": "message", "role": "user", "content": "no id: derived, not indexed"},
        {"type": "message", "role": "user", "content": "an id of its own", "id": "msg_client"},
        {"type": "function_call_output", "call_id": "c", "output": "x"},  # item_…, derived
        {
            "type": "message",
            "role": "user",
            "content": "a derived id at its place",
            "id": derived_item_id("msg", RESPONSE, 3),
        },
        {
            "type": "message",
            "role": "user",
            "content": "a derived id elsewhere",
            "id": derived_item_id("msg", RESPONSE, 9),
        },
        {
            "type": "message",
            "role": "user",
            "content": "reads as 10, written otherwise",
            "id": upper,
        },
    ]
    outputs = [
        {"type": "message", "id": derived_item_id("msg", RESPONSE, OUTPUT_POSITIONS)},
        {"type": "function_call", "id": "fc_own"},
        {"type": "message"},  # no id: derived from its seq, which is not an output's place
    ]
    for response_id in (RESPONSE, "r1", "resp_"):
        for custom in (None, outputs):
            response = {"id": response_id, "status": "completed", "output": outputs}
            rows = encode_save(response, SaveArgs("t", inputs, output_items=custom))
            expected = _indexed(
                response_id, [*rows.input_ids, *rows.output_ids], len(rows.input_ids)
            )
            assert rows.indexed == expected
    rows = encode_save(
        {"id": RESPONSE, "status": "completed", "output": outputs}, SaveArgs("t", inputs)
    )
    assert [item_id for item_id, _ in rows.indexed] == [
        "msg_client",
        inputs[4]["id"],
        upper,
        "fc_own",
        rows.output_ids[2],
    ]
