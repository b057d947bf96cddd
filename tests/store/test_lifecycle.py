"""Opening, schema versions, recovery, retention and durability of the store."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import asyncpg
import orjson
import pytest

from orgate.store import (
    ResponseStore,
    SchemaTooNew,
    StoreUnavailable,
    default_sqlite_path,
    open_store,
    schema,
    sqlite_path,
)
from orgate.store.base import INTERRUPTED_ERROR
from tests.store.helpers import PG_SKIP, PG_URL, OpenStore, assistant, response, user
from tests.support.ports import closed_port


async def _set_schema_version(url: str, version: int) -> None:
    if url.startswith("sqlite"):
        with sqlite3.connect(sqlite_path(url)) as conn:
            conn.execute("UPDATE schema_version SET version = ?", (version,))
        return
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("UPDATE schema_version SET version = $1", version)
    finally:
        await conn.close()


async def test_schema_created_then_reused(store_url: str, open_at: OpenStore) -> None:
    first = await open_at()
    await first.save(response("resp_1"), tenant="t", input_items=[user("x")])
    await first.close()
    second = await open_at()  # migration is a no-op the second time
    assert await second.get("resp_1", "t") is not None
    assert (await second.stats()).schema_version == _version(store_url)


def _version(store_url: str) -> int:
    return (
        schema.SQLITE_SCHEMA_VERSION
        if store_url.startswith("sqlite")
        else schema.POSTGRES_SCHEMA_VERSION
    )


async def test_schema_newer_than_code_is_refused(store_url: str, open_at: OpenStore) -> None:
    await (await open_at()).close()
    await _set_schema_version(store_url, 99)
    with pytest.raises(SchemaTooNew, match=r"schema version 99, newer than the version \d") as err:
        await open_store(store_url)
    assert "upgrade orgate" in str(err.value)
    assert "***" in str(err.value) or "orgate:orgate@" not in str(err.value)


async def test_unreachable_postgres_is_a_clear_error() -> None:
    with closed_port() as port:
        url = f"postgresql://orgate:s3cret@127.0.0.1:{port}/orgate"
        started = time.monotonic()
        with pytest.raises(
            StoreUnavailable,
            match=r"cannot connect to PostgreSQL at postgresql://orgate:\*\*\*@127\.0\.0\.1",
        ) as err:
            await open_store(url)
        assert "s3cret" not in str(err.value)
        # Refused at once (a connection refused is not waited on); generous, as the error comes in
        # milliseconds when idle, while a retry loop or a hang would run into it.
        assert time.monotonic() - started < 60


@pytest.mark.skipif(not PG_URL, reason=PG_SKIP)
async def test_postgres_wrong_password_is_a_clear_error() -> None:
    assert PG_URL is not None
    bad = PG_URL.replace("orgate:orgate@", "orgate:wrong@")
    with pytest.raises(StoreUnavailable, match="cannot connect to PostgreSQL"):
        await open_store(bad)


async def test_sqlite_unopenable_path_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(StoreUnavailable, match="cannot"):
        await open_store(f"sqlite://{blocker}/orgate.db")
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreUnavailable, match="cannot open SQLite store"):
        await open_store(f"sqlite://{garbage}")


def test_sqlite_urls_and_default_path(monkeypatch: pytest.MonkeyPatch) -> None:
    assert sqlite_path("sqlite:///var/lib/orgate.db") == "/var/lib/orgate.db"
    assert sqlite_path("sqlite://data/orgate.db") == "data/orgate.db"
    assert sqlite_path("sqlite://:memory:") == ":memory:"
    assert sqlite_path("/srv/o.db") == "/srv/o.db"
    monkeypatch.setenv("XDG_DATA_HOME", "/xdg")
    assert default_sqlite_path() == "/xdg/orgate/orgate.db"
    monkeypatch.delenv("XDG_DATA_HOME")
    assert default_sqlite_path().endswith(".local/share/orgate/orgate.db")


async def test_unknown_scheme_is_rejected() -> None:
    with pytest.raises(ValueError, match="unsupported store URL"):
        await open_store("mysql://x/y")


async def test_sqlite_file_created_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "dir" / "orgate.db"
    store = await open_store(f"sqlite://{path}", heartbeat_interval=0)
    await store.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


async def test_recover_interrupted_only_touches_dead_owners(open_at: OpenStore) -> None:
    dying = await open_at()
    survivor = await open_at()
    await dying.save(response("resp_dying", status="in_progress"), tenant="t", input_items=[])
    await dying.save(response("resp_done"), tenant="t", input_items=[])
    await survivor.save(response("resp_mine", status="queued"), tenant="t", input_items=[])
    # both owners are alive: nothing to recover, from either side
    assert await survivor.recover_interrupted() == []
    assert await dying.recover_interrupted() == []
    await dying.close()  # a stopped owner's work is recoverable at once
    assert await survivor.recover_interrupted() == ["resp_dying"]
    got = await survivor.get("resp_dying", "t")
    assert got is not None and got.status == "failed"
    assert got.response["status"] == "failed" and got.response["error"] == INTERRUPTED_ERROR
    mine = await survivor.get("resp_mine", "t")
    done = await survivor.get("resp_done", "t")
    assert mine is not None and mine.status == "queued"
    assert done is not None and done.status == "completed"
    assert await survivor.recover_interrupted() == []


async def test_recover_interrupted_after_missed_heartbeats(open_at: OpenStore) -> None:
    silent = await open_at()
    other = await open_at()
    await silent.save(response("resp_s", status="in_progress"), tenant="t", input_items=[])
    await asyncio.sleep(0.2)  # the silent owner's beat ages past 0.1 s: time passing is the case
    await other.heartbeat()
    assert await other.recover_interrupted(stale_after=60) == []
    assert await other.recover_interrupted(stale_after=0.1) == ["resp_s"]
    mine = await other.get("resp_s", "t")
    assert mine is not None and mine.status == "failed"


async def test_heartbeat_task_runs(open_at: OpenStore) -> None:
    beating = await open_at(heartbeat_interval=0.05)
    other = await open_at()
    await beating.save(response("resp_hb", status="in_progress"), tenant="t", input_items=[])
    await asyncio.sleep(1.5)  # many beats; without them the owner would look dead
    assert await other.recover_interrupted(stale_after=1.0) == []


async def test_prune_and_stats(store: ResponseStore) -> None:
    now = int(time.time())
    await store.save(
        response("resp_old", [assistant("msg_old", "o")], created_at=now - 10 * 86400),
        tenant="t",
        input_items=[user("old")],
        events=b"e",
        session_id="s-old",
    )
    await store.save(
        response("resp_new", [assistant("msg_new", "n")], created_at=now),
        tenant="t",
        input_items=[user("new")],
        session_id="s-new",
    )
    await store.save(
        response("resp_exp", created_at=now, status="in_progress"),
        tenant="u",
        input_items=[user("e")],
        expires_at=time.time() - 1,
    )
    stats = await store.stats()
    assert (stats.responses, stats.items, stats.events) == (3, 5, 1)
    assert stats.by_status == {"completed": 2, "in_progress": 1}
    assert stats.sessions == 2 and stats.schema_version == _version(store.backend)
    assert stats.oldest_created_at == now - 10 * 86400 and stats.newest_created_at == now

    assert await store.prune(older_than=7 * 86400) == 2  # the old one and the expired one
    assert await store.get("resp_old", "t") is None
    assert await store.get_item("msg_old", "t") is None
    assert await store.get("resp_new", "t") is not None
    stats = await store.stats()
    assert (stats.responses, stats.items, stats.events) == (1, 2, 0)
    assert await store.prune(older_than=7 * 86400) == 0


_CHILD = textwrap.dedent(
    """
    import asyncio, os, signal, sys
    from orgate.store import open_store

    async def main(url):
        store = await open_store(url)
        body = {"id": "resp_durable", "object": "response", "created_at": 1, "status": "completed",
                "model": "m", "output": [{"id": "msg_d", "type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": "kept", "annotations": []}]}]}
        await store.save(body, tenant="t", input_items=[{"role": "user", "content": "keep me"}],
                         events=b"data: [DONE]\\n\\n")
        await store.save({**body, "id": "resp_running", "status": "in_progress", "output": []},
                         tenant="t", input_items=[])
        os.kill(os.getpid(), signal.SIGKILL)

    asyncio.run(main(sys.argv[1]))
    """
)


async def test_saved_response_survives_sigkill(store_url: str, open_at: OpenStore) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, store_url], env=env, capture_output=True, timeout=60
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    store = await open_at()
    got = await store.get("resp_durable", "t")
    assert got is not None and got.status == "completed"
    assert got.response["output"][0]["content"][0]["text"] == "kept"
    assert await store.context("resp_durable", "t") == [
        {"role": "user", "content": "keep me"},
        got.response["output"][0],
    ]
    assert await store.events("resp_durable", "t") == b"data: [DONE]\n\n"
    # the killed process ran on this host and its pid is gone: recovered without waiting
    assert await store.recover_interrupted() == ["resp_running"]


async def test_concurrent_first_starts_migrate_once(open_at: OpenStore) -> None:
    stores = await asyncio.gather(*(open_at() for _ in range(4)))
    await stores[0].save(response("resp_1"), tenant="t", input_items=[])
    for store in stores:
        assert await store.get("resp_1", "t") is not None
        assert (await store.stats()).schema_version == _version(store.backend)


async def test_default_and_memory_sqlite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    store = await open_store(None, heartbeat_interval=0)
    try:
        await store.save(response("resp_d"), tenant="t", input_items=[user("x")])
    finally:
        await store.close()
    assert (tmp_path / "xdg" / "orgate" / "orgate.db").exists()
    memory = await open_store("sqlite://:memory:", heartbeat_interval=0)
    try:
        await memory.save(response("resp_m"), tenant="t", input_items=[user("x")])
        assert await memory.context("resp_m", "t") == [user("x")]
    finally:
        await memory.close()
    with pytest.raises(StoreUnavailable, match="closed"):
        await memory.get("resp_m", "t")


def test_each_backend_has_every_migration() -> None:
    assert sorted(schema.SQLITE_MIGRATIONS) == list(range(1, schema.SQLITE_SCHEMA_VERSION + 1))
    assert sorted(schema.POSTGRES_MIGRATIONS) == list(range(1, schema.POSTGRES_SCHEMA_VERSION + 1))


async def test_sqlite_version_1_file_is_migrated_with_its_items(tmp_path: Path) -> None:
    """A file written by schema version 1 (items in their own table) opens intact."""
    path = tmp_path / "v1.db"
    conn = sqlite3.connect(path, isolation_level=None)
    for statement in schema.SQLITE_MIGRATIONS[1]:
        conn.execute(statement)
    conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    conn.execute("INSERT INTO schema_version VALUES (1)")
    first = response("resp_1", [assistant("msg_out1", "one")])
    second = response("resp_2", [assistant("msg_out2", "two")])
    for body, chain, prev in (
        (first, '["resp_1"]', None),
        (second, '["resp_1","resp_2"]', "resp_1"),
    ):
        conn.execute(
            """INSERT INTO responses (id, tenant, status, model, created_at, updated_at,
                previous_response_id, chain, depth, history_len, own_items, response)
            VALUES (?, 't', 'completed', 'test-model', 1, 1, ?, ?, ?, ?, 2, ?)""",
            (
                body["id"],
                prev,
                chain,
                chain.count(","),
                2 * (chain.count(",") + 1),
                orjson.dumps(body),
            ),
        )
        rid = body["id"]
        conn.execute(
            "INSERT INTO items VALUES ('t', ?, 0, 'input', ?, ?)",
            (rid, f"msg_legacy_{rid}", orjson.dumps(user(f"q {rid}"))),
        )
        conn.execute(
            "INSERT INTO items VALUES ('t', ?, 1, 'output', ?, ?)",
            (rid, body["output"][0]["id"], orjson.dumps(body["output"][0])),
        )
    conn.close()
    store = await open_store(f"sqlite://{path}", heartbeat_interval=0)
    try:
        assert (await store.stats()).schema_version == schema.SQLITE_SCHEMA_VERSION
        assert await store.context("resp_2", "t") == [
            user("q resp_1"),
            first["output"][0],
            user("q resp_2"),
            second["output"][0],
        ]
        page = await store.input_items("resp_2", "t")
        assert page is not None and [i["id"] for i in page.data] == ["msg_legacy_resp_2"]
        assert await store.get_item("msg_legacy_resp_1", "t") == {
            "id": "msg_legacy_resp_1",
            **user("q resp_1"),
        }
        assert await store.get_item("msg_out2", "t") == second["output"][0]
        await store.save(
            response("resp_3"), tenant="t", input_items=[user("q3")], previous_response_id="resp_2"
        )
        assert len(await store.context("resp_3", "t") or []) == 5
        assert await store.delete("resp_1", "t") is True
        assert await store.get_item("msg_legacy_resp_1", "t") is None
        assert await store.context("resp_3", "t") is None  # its chain lost a link
    finally:
        await store.close()
