"""``read_history`` over a real SQLite store: the same items as reading the whole chain, only the
responses after the deepest one held decoded, running chains not kept, the bound honoured."""

from __future__ import annotations

from pathlib import Path

from orgate.engine.history_cache import HistoryCache, read_history
from orgate.engine.history_items import items_from_wire
from orgate.store import ResponseStore, open_store
from tests.store.helpers import assistant, response, user


async def _chain(
    store: ResponseStore, name: str, turns: int, status: str = "completed"
) -> list[str]:
    ids: list[str] = []
    for n in range(turns):
        rid = f"resp_{name}{n:03d}"
        await store.save(
            response(rid, [assistant(f"msg_{name}{n:03d}", f"answer {n}")], status=status),
            tenant="t",
            input_items=[user(f"{name} {n}")],
            previous_response_id=ids[-1] if ids else None,
        )
        ids.append(rid)
    return ids


async def test_turn_by_turn_reads_the_same_items_and_decodes_one_response(tmp_path: Path) -> None:
    store = await open_store(f"sqlite://{tmp_path}/orgate.db", heartbeat_interval=0)
    try:
        ids = await _chain(store, "a", 8)
        cache = HistoryCache(1 << 20)
        for n, rid in enumerate(ids):
            before = store.query_count
            history = await read_history(store, cache, rid, "t")
            assert store.query_count - before == 1  # the tail alone: its parent was held
            assert history is not None
            assert list(history.items) == items_from_wire(await store.context(rid, "t") or [])
            assert cache.decoded == n + 1 and len(cache) == 1  # the successor replaces it
        assert cache.whole == 1 and cache.reused == len(ids) - 1
        assert await read_history(store, cache, ids[-1], "other") is None
    finally:
        await store.close()


async def test_a_running_chain_is_not_kept(tmp_path: Path) -> None:
    store = await open_store(f"sqlite://{tmp_path}/orgate.db", heartbeat_interval=0)
    try:
        ids = await _chain(store, "r", 2, status="in_progress")
        cache = HistoryCache(1 << 20)
        assert await read_history(store, cache, ids[-1], "t") is not None
        assert len(cache) == 0
    finally:
        await store.close()


async def test_the_least_recently_used_go_past_the_bound(tmp_path: Path) -> None:
    store = await open_store(f"sqlite://{tmp_path}/orgate.db", heartbeat_interval=0)
    try:
        chains = [await _chain(store, name, 3) for name in "xyz"]
        one = await read_history(store, HistoryCache(1 << 20), chains[0][-1], "t")
        assert one is not None
        cache = HistoryCache(one.size * 2)  # room for two of the three
        for ids in chains:
            await read_history(store, cache, ids[-1], "t")
        assert len(cache) == 2 and cache.size <= cache.max_bytes and cache.evicted == 1
        assert cache.get("t", chains[0][-1]) is None  # the oldest went
        tiny = HistoryCache(one.size - 1)  # a history bigger than the bound is not kept
        assert await read_history(store, tiny, chains[0][-1], "t") is not None
        assert len(tiny) == 0 and tiny.size == 0
    finally:
        await store.close()
