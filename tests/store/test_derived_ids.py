"""Derived item ids: which ids the store finds through their response's row, and which need an index row."""

from __future__ import annotations

from orgate.store.base import OUTPUT_POSITIONS, derived_item_id, derived_location, is_derived

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
    upper = canonical[:-6] + canonical[-6:].upper()  # "00000A": read as position 10, not written that way
    assert derived_location(upper) == (RESPONSE, 10)
    assert not is_derived(upper, RESPONSE, 10)  # so it gets an index row
    assert not is_derived("call_" + canonical.partition("_")[2], RESPONSE, 10)  # not a derived prefix
    assert not is_derived("msg_00000a", "resp_", 10)  # no response suffix
    assert not is_derived(derived_item_id("msg", "chatcmpl_x", 1), "chatcmpl_x", 1)  # not a response id
    assert not is_derived(canonical, RESPONSE, 0x1000000 + 10)  # beyond six hex digits
