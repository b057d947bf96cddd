"""``chain_tail`` and ``link_items``: a chain's path checked link by link and only the items asked
for, the same items and ids as ``context_items``, on both backends."""

from __future__ import annotations

import time

from orgate.store import ResponseStore
from tests.store.helpers import assistant, response, user


async def _chain(store: ResponseStore, n: int, tenant: str = "t") -> list[str]:
    ids, previous = [], None
    for turn in range(n):
        rid = f"resp_{turn:03d}"
        inputs = [user(f"question {turn}")]
        if turn % 2:
            inputs.append({"type": "function_call_output", "call_id": f"c{turn}", "output": "ok"})
        outputs = [assistant(f"msg_{turn:03d}", f"answer {turn}")]
        await store.save(
            response(rid, outputs), tenant=tenant, input_items=inputs, previous_response_id=previous
        )
        ids.append(rid)
        previous = rid
    return ids


async def test_tail_and_links_give_the_context_items(store: ResponseStore) -> None:
    ids = await _chain(store, 30)
    whole = await store.context_items(ids[-1], "t")
    assert whole is not None
    before = store.query_count
    tail = await store.chain_tail(ids[-1], "t")
    assert store.query_count - before == 1
    assert tail is not None and tail.path == tuple(ids) and tail.settled
    before = store.query_count
    links = await store.link_items(ids[:-1], "t")
    assert store.query_count - before == 1
    assert links is not None and len(links) == len(ids) - 1
    assert [pair for link in links for pair in link] + tail.items == whole
    assert await store.link_items([ids[7], ids[3]], "t") == [links[7], links[3]]  # order given


async def test_a_root_response_is_its_own_path(store: ResponseStore) -> None:
    await store.save(response("resp_root"), tenant="t", input_items=[user("hi")])
    tail = await store.chain_tail("resp_root", "t")
    assert tail is not None and tail.path == ("resp_root",)
    assert [item for _, item in tail.items] == [user("hi")]  # no output: none listed


async def test_a_deleted_link_breaks_the_tail_and_the_links(store: ResponseStore) -> None:
    ids = await _chain(store, 6)
    assert await store.delete(ids[2], "t")
    assert await store.chain_tail(ids[-1], "t") is None
    assert await store.chain_tail(ids[1], "t") is not None  # before the gap: intact
    assert await store.link_items(ids[:4], "t") is None
    assert await store.link_items([ids[0], ids[1], ids[3]], "t") is not None


async def test_another_tenant_sees_nothing(store: ResponseStore) -> None:
    ids = await _chain(store, 3, tenant="a")
    assert await store.chain_tail(ids[-1], "b") is None
    assert await store.link_items(ids, "b") is None
    # a chain of b's continuing from a's response is refused at save, so a path never mixes


async def test_an_expired_link_breaks_the_tail(store: ResponseStore) -> None:
    await store.save(
        response("resp_old", [assistant("msg_old", "old")]),
        tenant="t",
        input_items=[user("old")],
        expires_at=time.time() + 0.5,
    )
    await store.save(
        response("resp_new", [assistant("msg_new", "new")]),
        tenant="t",
        input_items=[user("new")],
        previous_response_id="resp_old",
    )
    assert await store.chain_tail("resp_new", "t") is not None
    await store.save(  # the ancestor's expiry passed: re-saved already expired, as time would
        response("resp_old", [assistant("msg_old", "old")]),
        tenant="t",
        input_items=[user("old")],
        expires_at=time.time() - 1,
    )
    assert await store.chain_tail("resp_new", "t") is None
    assert await store.link_items(["resp_old"], "t") is None


async def test_a_running_link_is_not_settled(store: ResponseStore) -> None:
    await store.save(
        response("resp_bg", status="in_progress"), tenant="t", input_items=[user("long job")]
    )
    await store.save(
        response("resp_next", [assistant("msg_n", "n")]),
        tenant="t",
        input_items=[user("meanwhile")],
        previous_response_id="resp_bg",
    )
    tail = await store.chain_tail("resp_next", "t")
    assert tail is not None and not tail.settled
    await store.save(
        response("resp_bg", [assistant("msg_bg", "done")]),
        tenant="t",
        input_items=[user("long job")],
    )
    tail = await store.chain_tail("resp_next", "t")
    assert tail is not None and tail.settled
