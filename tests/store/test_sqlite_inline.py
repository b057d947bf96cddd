"""The SQLite store's inline writer: group commit on the event loop thread, and its fallbacks."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

from orgate.store import ResponseConflict, SqliteStore, UnknownResponse
from orgate.store.sqlite_worker import InlineWriter, _Checkpointer
from tests.store.helpers import assistant, response, user


async def open_sqlite(tmp_path: Path) -> SqliteStore:
    return await SqliteStore.open(str(tmp_path / "inline.db"), heartbeat_interval=0)


async def test_concurrent_saves_share_one_commit(tmp_path: Path) -> None:
    store = await open_sqlite(tmp_path)
    try:
        inline = store._inline
        assert inline is not None
        before = inline.commits
        await asyncio.gather(
            *(
                store.save(
                    response(f"resp_{n}", [assistant(f"msg_{n}", f"a{n}")]),
                    tenant="t",
                    input_items=[user(f"q{n}")],
                )
                for n in range(20)
            )
        )
        assert inline.commits == before + 1
        for n in range(20):
            got = await store.get(f"resp_{n}", "t")
            assert got is not None and got.status == "completed"
        # committed before save() returned: another connection sees every row
        other = sqlite3.connect(store.path)
        try:
            assert other.execute("SELECT count(*) FROM responses").fetchone()[0] == 20
        finally:
            other.close()
    finally:
        await store.close()


async def test_refused_save_fails_alone_in_its_batch(tmp_path: Path) -> None:
    store = await open_sqlite(tmp_path)
    try:
        await store.save(response("resp_taken"), tenant="a", input_items=[])
        results = await asyncio.gather(
            store.save(response("resp_ok1"), tenant="t", input_items=[user("1")]),
            store.save(response("resp_taken"), tenant="b", input_items=[]),
            store.save(
                response("resp_orphan"), tenant="t", input_items=[], previous_response_id="nope"
            ),
            store.save(
                response("resp_ok2"),
                tenant="t",
                input_items=[user("2")],
                previous_response_id="resp_ok1",  # saved earlier in the same batch
            ),
            return_exceptions=True,
        )
        assert results[0] is None and results[3] is None
        assert isinstance(results[1], ResponseConflict)
        assert isinstance(results[2], UnknownResponse)
        assert await store.get("resp_orphan", "t") is None
        taken = await store.get("resp_taken", "a")
        assert taken is not None and taken.tenant == "a"
        assert await store.context("resp_ok2", "t") == [user("1"), user("2")]
    finally:
        await store.close()


async def test_write_lock_held_elsewhere_goes_to_the_thread(tmp_path: Path) -> None:
    store = await open_sqlite(tmp_path)
    try:
        inline = store._inline
        assert inline is not None
        before = inline.commits
        other = sqlite3.connect(store.path, isolation_level=None, check_same_thread=False)
        other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        timer = threading.Timer(0.3, lambda: other.execute("COMMIT"))
        timer.start()
        try:
            # the loop is not blocked meanwhile, and the save waits for the lock
            await asyncio.wait_for(
                store.save(response("resp_late"), tenant="t", input_items=[user("x")]),
                timeout=10,
            )
        finally:
            timer.join()
            other.close()
        assert inline.commits == before  # it did not commit inline
        assert await store.get("resp_late", "t") is not None
    finally:
        await store.close()


async def test_failure_half_way_replays_each_job_alone(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "x.db", isolation_level=None, check_same_thread=False)
    conn.execute("CREATE TABLE t (v TEXT)")
    writer = InlineWriter(conn, asyncio.get_running_loop())

    def insert(c: sqlite3.Connection, value: str) -> str:
        c.execute("INSERT INTO t VALUES (?)", (value,))
        return value

    def insert_then_fail(c: sqlite3.Connection, value: str) -> None:
        c.execute("INSERT INTO t VALUES (?)", (value,))
        raise RuntimeError("boom")

    def refuse(c: sqlite3.Connection, value: str) -> None:
        raise ValueError(value)  # a clean error: nothing written

    futures = [
        writer.submit(insert, "a"),
        writer.submit(insert_then_fail, "b"),
        writer.submit(refuse, "c"),
        writer.submit(insert, "d"),
    ]
    results = await asyncio.gather(*futures, return_exceptions=True)
    assert results[0] == "a" and results[3] == "d"
    assert isinstance(results[1], RuntimeError) and isinstance(results[2], ValueError)
    assert sorted(v for (v,) in conn.execute("SELECT v FROM t")) == ["a", "d"]
    writer.close()


async def test_close_commits_queued_writes(tmp_path: Path) -> None:
    store = await open_sqlite(tmp_path)
    pending = asyncio.ensure_future(
        store.save(response("resp_last"), tenant="t", input_items=[user("bye")])
    )
    await asyncio.sleep(0)  # queued, not flushed yet
    await store.close()
    await pending
    again = await open_sqlite(tmp_path)
    try:
        assert await again.get("resp_last", "t") is not None
    finally:
        await again.close()


async def test_checkpointer_rewinds_the_wal_itself(tmp_path: Path) -> None:
    rounds = 3
    store = await SqliteStore.open(
        str(tmp_path / "ckpt.db"), heartbeat_interval=0, checkpoint_interval=3600
    )
    try:
        ckpt = sqlite3.connect(store.path, isolation_level=None)
        try:
            for r in range(rounds):
                await store.save(response(f"resp_{r}"), tenant="t", input_items=[user("q")])
                _Checkpointer.checkpoint(ckpt)
                # the checkpointer made the first write after the checkpoint (the WAL
                # rewind and its fsync): the WAL holds only its frame, not yet copied, so
                # the inline writer's next commit appends instead of rewinding
                other = sqlite3.connect(store.path, isolation_level=None)
                try:
                    _, log, _ = other.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                finally:
                    other.close()
                assert log == 1
        finally:
            ckpt.close()
        for r in range(rounds):
            assert await store.get(f"resp_{r}", "t") is not None
    finally:
        await store.close()
