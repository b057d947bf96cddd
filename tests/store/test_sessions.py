"""Session pointers and the turn lease, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio

import pytest

from orgate.store import ResponseStore, SessionBusy
from tests.store.helpers import OpenStore, response, session_pointer, user


async def test_the_session_pointer_follows_saves(store: ResponseStore) -> None:
    assert await session_pointer(store, "t", "s1") == (None, None)
    await store.save(
        response("resp_1"), tenant="t", input_items=[user("a")], session_id="s1", deployment="d1"
    )
    assert await session_pointer(store, "t", "s1") == ("resp_1", "d1")
    # a save without a deployment keeps the session's affinity
    await store.save(
        response("resp_2"),
        tenant="t",
        input_items=[user("b")],
        previous_response_id="resp_1",
        session_id="s1",
    )
    turn = await store.begin_session_turn("t", "s1")
    assert (turn.latest_response_id, turn.deployment) == ("resp_2", "d1")
    with pytest.raises(SessionBusy):  # the session is busy while its turn is held
        await store.begin_session_turn("t", "s1")
    await store.end_session_turn(turn)


async def test_claim_is_exclusive_until_released(store: ResponseStore) -> None:
    turn = await store.begin_session_turn("t", "s")
    with pytest.raises(SessionBusy) as caught:
        await store.begin_session_turn("t", "s")
    assert caught.value.session_id == "s"
    await store.begin_session_turn("t", "other")  # other sessions are independent
    await store.end_session_turn(turn)
    again = await store.begin_session_turn("t", "s")
    assert again.token != turn.token
    with pytest.raises(SessionBusy):
        await store.begin_session_turn("t", "s")
    await store.end_session_turn(again)
    await store.end_session_turn(await store.begin_session_turn("t", "s"))


async def test_concurrent_claims_one_winner(open_at: OpenStore) -> None:
    stores = [await open_at() for _ in range(4)]  # four "processes" on one database

    async def claim(n: int) -> str:
        try:
            await stores[n % 4].begin_session_turn("t", "hot")
        except SessionBusy:
            return "busy"
        return "won"

    results = await asyncio.gather(*(claim(n) for n in range(40)))
    assert results.count("won") == 1 and results.count("busy") == 39


async def test_expired_lease_can_be_taken_over(store: ResponseStore) -> None:
    stale = await store.begin_session_turn("t", "s", lease_seconds=0.05)
    await asyncio.sleep(0.1)  # the lease expires: time passing is the case
    fresh = await store.begin_session_turn("t", "s")
    # the crashed holder's late release must not free the new holder's lease
    await store.end_session_turn(stale)
    with pytest.raises(SessionBusy):
        await store.begin_session_turn("t", "s")
    await store.end_session_turn(fresh)


async def test_dead_owner_leases_are_released_by_recovery(open_at: OpenStore) -> None:
    first = await open_at()
    await first.begin_session_turn("t", "s")
    second = await open_at()
    with pytest.raises(SessionBusy):
        await second.begin_session_turn("t", "s")
    await first.close()
    await second.recover_interrupted()
    turn = await second.begin_session_turn("t", "s")
    await second.end_session_turn(turn)
