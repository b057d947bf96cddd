"""SQLite backend: the embedded default store.

Two connections. Writes (``save``, ``delete``, status, cancel and session turns)
run on the event loop's thread, batched: every write submitted during one loop
iteration shares one transaction, committed in the next iteration before the
callers resume (``InlineWriter``). Reads, maintenance and the writes that meet a
lock held elsewhere run on one dedicated thread that owns the other connection
(one hop per operation). WAL journal with ``synchronous=NORMAL``: a commit is in
the WAL file before ``save`` returns, so it survives the process being killed; only
an OS crash or power loss can lose the last transactions. Several processes may
share one file (writes are serialised by SQLite's lock, ``busy_timeout`` waits for
it on the database thread; the inline writer never waits). A failed write (a full disk)
fails alone and leaves both connections usable; a session lease whose release failed is
released later (``LeaseReleases``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from orgate.datadir import private_file
from orgate.store.base import (
    ACTIVE_STATUSES,
    INTERRUPTED_ERROR,
    OUTPUT_POSITIONS,
    ApprovalClaim,
    ChainTail,
    Conversation,
    ItemsPage,
    Order,
    ResponseConflict,
    ResponseFilter,
    ResponsesPage,
    ResponseStore,
    SaveArgs,
    SchemaTooNew,
    SessionBusy,
    SessionTurn,
    StoredResponse,
    StoreError,
    StoreStats,
    StoreUnavailable,
    TenantInUse,
    UnknownResponse,
    UnknownSession,
    check_order,
    claim_of,
    decode_cursor,
    derived_location,
    encode_cursor,
    filter_terms,
    is_derived,
    item_id_for,
    live_owners,
    new_owner_id,
    page_of,
    with_id,
)
from orgate.store.codec import SaveRows, dumps, encode_save, loads, rewrite_status
from orgate.store.schema import SQLITE_MIGRATIONS, SQLITE_SCHEMA_VERSION
from orgate.store.sqlite_shared import SqliteSharedState
from orgate.store.sqlite_worker import LOCKED, InlineWriter, Kind, SqliteWorker

log = logging.getLogger(__name__)
T = TypeVar("T")

_RESPONSE_COLUMNS = (
    "id, tenant, status, model, created_at, updated_at, previous_response_id, session_id, "
    "deployment, response, request, depth, history_len, owner, cancel_requested, expires_at"
)
_LIVE = "(expires_at IS NULL OR expires_at > ?)"
#: A response row's output items: ``outputs`` when saved apart, else the body's ``output``.
_OUTPUTS = "coalesce({0}outputs, json_extract(CAST({0}response AS TEXT), '$.output'))"
_ACTIVE_MARKS = ", ".join("?" * len(ACTIVE_STATUSES))


def _own_items(
    response_id: str, inputs: bytes | str, input_ids: bytes | str, outputs: bytes | str | None
) -> list[tuple[str, dict[str, Any]]]:
    """A response row's own items with their ids: its inputs, then its outputs (an output
    without an id has the one derived from its place, as the listings give it)."""
    items = list(zip(loads(input_ids), loads(inputs), strict=True))
    first_output = len(items)
    for k, item in enumerate(loads(outputs) if outputs is not None else ()):
        items.append((item_id_for(item, response_id, first_output + k), item))
    return items


#: One failed sign-in of a subject: its count goes up, or starts again after a quiet while.
_SIGNIN_FAILED = """INSERT INTO signin_throttle (subject, failures, updated_at, blocked_until)
    VALUES (?, 1, ?, 0) ON CONFLICT (subject) DO UPDATE SET
        failures = CASE WHEN signin_throttle.updated_at < ? THEN 1
            ELSE signin_throttle.failures + 1 END,
        updated_at = ?
    RETURNING failures"""

#: A finished response never goes back to queued / in_progress: a save of an earlier state that
#: arrives after the final one (a save that waited for the write lock, or whose caller was
#: cancelled mid-way) changes nothing. The parameter is the new status.
_NOT_BACKWARDS = "NOT (status NOT IN ('queued', 'in_progress') AND ? IN ('queued', 'in_progress'))"


def _derived_position(seq: int, input_count: int) -> int:
    """The position a derived id names for the item at ``seq`` (inputs first, then outputs)."""
    return seq if seq < input_count else OUTPUT_POSITIONS + seq - input_count


def _indexed(response_id: str, ids: Sequence[str], input_count: int) -> list[tuple[str, int]]:
    """(id, seq) of a response's items that ``item_ids`` holds (derived ids are not in it)."""
    return [
        (item_id, seq)
        for seq, item_id in enumerate(ids)
        if not is_derived(item_id, response_id, _derived_position(seq, input_count))
    ]


def _indexed_ids(
    response_id: str, input_ids: str | bytes, outputs: bytes | None, body: bytes
) -> list[str]:
    """The ids of a stored response's items that ``item_ids`` holds."""
    ids: list[str] = loads(input_ids)
    first_output = len(ids)
    output_items = loads(outputs) if outputs is not None else loads(body).get("output") or []
    ids += [item_id_for(item, response_id, first_output + k) for k, item in enumerate(output_items)]
    return [item_id for item_id, _ in _indexed(response_id, ids, first_output)]


_CONVERSATION_COLUMNS = (
    "session_id, tenant, coalesce(created_at, updated_at), updated_at, metadata,"
    " latest_response_id, hidden"
)


def _conversation(row: sqlite3.Row | tuple[Any, ...]) -> Conversation:
    return Conversation(
        id=row[0],
        tenant=row[1],
        created_at=row[2],
        updated_at=row[3],
        metadata=loads(row[4]) if row[4] is not None else {},
        latest_response_id=row[5],
        hidden=tuple(loads(row[6])) if row[6] else (),
    )


def _record(row: sqlite3.Row | tuple[Any, ...]) -> StoredResponse:
    return StoredResponse(
        id=row[0],
        tenant=row[1],
        status=row[2],
        model=row[3],
        created_at=row[4],
        updated_at=row[5],
        previous_response_id=row[6],
        session_id=row[7],
        deployment=row[8],
        response=loads(row[9]),
        request=loads(row[10]) if row[10] is not None else None,
        depth=row[11],
        history_len=row[12],
        owner=row[13],
        cancel_requested=bool(row[14]),
        expires_at=row[15],
    )


class SqliteStore(SqliteSharedState, ResponseStore):
    """The embedded store; create with ``await SqliteStore.open(path)``."""

    backend = "sqlite"

    def __init__(self, path: str, *, heartbeat_interval: float = 10.0) -> None:
        self.path = path
        self.owner_id = new_owner_id()
        self.query_count = 0
        self._heartbeat_interval = heartbeat_interval
        self._worker = SqliteWorker("orgate-sqlite")
        self._conn: sqlite3.Connection | None = None
        #: Writes on the event loop thread (None for ``:memory:``: one connection only).
        self._inline: InlineWriter | None = None
        self._heartbeat_task: asyncio.Task[None] | None = None
        self._closed = False
        #: Writes handed to the database thread that have not run there yet
        # (see ``_write_on_thread``).
        self._thread_writes = 0

    @classmethod
    async def open(
        cls, path: str, *, heartbeat_interval: float = 10.0, checkpoint_interval: float = 1.0
    ) -> SqliteStore:
        """Open (creating the file and its directory if needed) and migrate the schema."""
        store = cls(path, heartbeat_interval=heartbeat_interval)
        try:
            await store._run(Kind.RAW, store._open_sync)
        except BaseException:
            store._closed = True
            store._worker.stop()
            raise
        if path != ":memory:":
            store._worker.start_checkpointer(path, checkpoint_interval)
            try:
                store._inline = InlineWriter(
                    store._connect_inline(),
                    asyncio.get_running_loop(),
                    clean=(StoreError, ValueError),
                )
            except BaseException:
                await store.close()
                raise
        if heartbeat_interval > 0:
            store._heartbeat_task = asyncio.get_running_loop().create_task(
                store._heartbeat_loop(), name="orgate-store-heartbeat"
            )
        return store

    # ------------------------------------------------------------------ plumbing

    async def _run(self, kind: Kind, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn`` on the database thread (``READ``/``WRITE``: inside a batch transaction)."""
        if self._closed:
            raise StoreUnavailable("the store is closed")
        try:
            result: T = await self._worker.call(kind, fn, *args)
        except sqlite3.Error as exc:
            raise StoreError(f"SQLite store {self.path}: {exc}") from exc
        return result

    async def _write_op(self, fn: Callable[..., T], *args: Any) -> T:
        """Run the write ``fn(conn, *args)``: inline in this loop iteration's batch,
        else on the thread."""
        if self._closed:
            raise StoreUnavailable("the store is closed")
        inline = self._inline
        if (
            inline is not None
            and inline.conn is not None
            and not self._thread_writes
            and asyncio.get_running_loop() is inline.loop
        ):
            try:
                result: T = await inline.submit(fn, *args)
            except sqlite3.Error as exc:
                raise StoreError(f"SQLite store {self.path}: {exc}") from exc
            if result is not LOCKED:
                return result
        if (
            inline is None
        ):  # one connection (``:memory:``): every write runs on the thread, in order
            return await self._run(Kind.WRITE, self._on_thread, fn, args)
        return await self._write_on_thread(fn, args)

    async def _write_on_thread(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        """The write on the database thread, queued behind the ones already there.

        Until it has run, later writes queue behind it rather than run inline: an inline write
        taken as soon as the lock is free would overtake it (a response's failed save its own
        in_progress save, which then stored it in_progress for good). It runs even when its
        caller is cancelled meanwhile (a client that left), so it is counted until it ran.
        """
        self._thread_writes += 1
        job = asyncio.ensure_future(self._run(Kind.WRITE, self._on_thread, fn, args))
        job.add_done_callback(self._thread_write_done)
        return await asyncio.shield(job)

    def _thread_write_done(self, job: asyncio.Future[Any]) -> None:
        self._thread_writes -= 1
        if not job.cancelled():
            job.exception()  # retrieved: a cancelled caller no longer awaits it

    def _on_thread(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        assert self._conn is not None
        return fn(self._conn, *args)

    def _connect_inline(self) -> sqlite3.Connection:
        """The event loop thread's write connection (the schema exists by now)."""
        try:
            # Set-up waits for locks like any connection (another process may be
            # migrating the same file); only then is the connection made non-waiting.
            conn = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=30
            )
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"cannot open SQLite store {self.path}: {exc}") from exc
        try:
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = OFF")
            # Never checkpoint (fsync) on the event loop: the checkpointer thread does,
            # and the database thread's connection keeps the size safety net.
            conn.execute("PRAGMA wal_autocheckpoint = 0")
            conn.execute("PRAGMA journal_size_limit = 67108864")
            conn.execute(
                "SELECT 1 FROM schema_version"
            ).fetchall()  # schema read while waiting is allowed
            conn.execute(
                "PRAGMA busy_timeout = 0"
            )  # from now on a held lock hands over to the thread
        except sqlite3.Error as exc:
            conn.close()
            raise StoreUnavailable(f"cannot open SQLite store {self.path}: {exc}") from exc
        return conn

    def _execute_on(
        self, conn: sqlite3.Connection, sql: str, params: Sequence[Any] = ()
    ) -> sqlite3.Cursor:
        """One statement on ``conn``, counted in ``query_count``."""
        self.query_count += 1
        return conn.execute(sql, params)

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        """One counted statement on the database thread's connection."""
        assert self._conn is not None
        return self._execute_on(self._conn, sql, params)

    def _write(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` inside ``BEGIN IMMEDIATE`` … ``COMMIT`` (rolled back on error)."""
        self._execute("BEGIN IMMEDIATE")
        try:
            result = fn()
        except BaseException:
            self._execute("ROLLBACK")
            raise
        self._execute("COMMIT")
        return result

    def _set_wal(self) -> None:
        """Switch to WAL. Several processes opening a new file at once can make SQLite
        answer "database is locked" here without calling the busy handler: retry briefly."""
        deadline = time.monotonic() + 10.0
        while True:
            try:
                self._execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def _open_sync(self) -> None:
        if self.path != ":memory:":
            try:
                # owner-only: SQLite gives its -wal and -shm files the database file's mode
                private_file(self.path)
            except OSError as exc:
                raise StoreUnavailable(f"cannot create {self.path}: {exc.strerror or exc}") from exc
        try:
            conn = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=30.0
            )
            self._conn = self._worker.conn = conn
            self._execute("PRAGMA busy_timeout = 30000")
            self._set_wal()
            self._execute("PRAGMA synchronous = NORMAL")
            self._execute("PRAGMA foreign_keys = OFF")
            self._execute(
                "PRAGMA wal_autocheckpoint = 20000"
            )  # a safety net: checkpoints run aside
            self._execute("PRAGMA journal_size_limit = 67108864")
            self._migrate_sync()
            now = time.time()
            self._execute(
                "INSERT INTO owners (owner_id, started_at, heartbeat_at) VALUES (?, ?, ?)",
                (self.owner_id, now, now),
            )
        except BaseException as exc:
            if self._conn is not None:
                self._conn.close()
                self._conn = self._worker.conn = None
            if isinstance(exc, sqlite3.DatabaseError):
                raise StoreUnavailable(f"cannot open SQLite store {self.path}: {exc}") from exc
            raise

    def _migrate_sync(self) -> None:
        def migrate() -> None:
            self._execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            row = self._execute("SELECT max(version) FROM schema_version").fetchone()
            current = row[0] or 0
            if current > SQLITE_SCHEMA_VERSION:
                raise SchemaTooNew(current, SQLITE_SCHEMA_VERSION, f"sqlite://{self.path}")
            for version in range(current + 1, SQLITE_SCHEMA_VERSION + 1):
                for statement in SQLITE_MIGRATIONS[version]:
                    self._execute(statement)
                self._execute("DELETE FROM schema_version")
                self._execute("INSERT INTO schema_version (version) VALUES (?)", (version,))

        self._write(migrate)

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self._heartbeat_interval)
            try:
                await self.heartbeat()
            except Exception:  # the next beat retries; recovery tolerates a missed one
                log.warning("store heartbeat failed", exc_info=True)

    # ------------------------------------------------------------------ responses

    async def _save(self, response: dict[str, Any], args: SaveArgs) -> None:
        rows = encode_save(response, args)
        encoded = (
            dumps(rows.inputs),
            dumps(rows.input_ids),
            dumps(rows.outputs) if rows.custom_outputs else None,
            rows.indexed,
        )
        await self._write_op(self._save_sync, rows, encoded, args)

    def _save_sync(
        self,
        conn: sqlite3.Connection,
        rows: SaveRows,
        encoded: tuple[bytes, bytes, bytes | None, list[tuple[str, int]]],
        args: SaveArgs,
    ) -> None:
        # Refusals (UnknownResponse, ResponseConflict) are raised before anything is
        # written: the inline writer's batch transaction stays clean.
        n = rows.size
        inputs, input_ids, outputs, new_keys = encoded
        tenant, previous_response_id, session_id = (
            args.tenant,
            args.previous_response_id,
            args.session_id,
        )
        deployment, events, expires_at = args.deployment, args.events, args.expires_at
        self._job_check(conn, rows.id, args.job)
        chain: list[str] = []
        base_len = 0
        if previous_response_id is not None:
            parent = self._execute_on(
                conn,
                f"SELECT chain, history_len FROM responses WHERE id = ? AND tenant = ? AND {_LIVE}",
                (previous_response_id, tenant, rows.now),
            ).fetchone()
            if parent is not None:
                chain = loads(parent[0])
                base_len = parent[1]
            elif self._owned_items(conn, rows.id, tenant) is None:
                raise UnknownResponse(previous_response_id)
            # else: a save again of a response whose parent has gone since; its chain stays.
        chain.append(rows.id)
        inserted = self._execute_on(
            conn,
            f"""INSERT INTO responses (id, tenant, status, model, created_at, updated_at,
                previous_response_id, session_id, deployment, chain, depth,
                history_len, own_items, owner, expires_at, response, request,
                inputs, input_ids, outputs)
            VALUES ({", ".join("?" * 20)})
            ON CONFLICT (id) DO NOTHING""",
            (
                rows.id,
                tenant,
                rows.status,
                rows.model,
                rows.created_at,
                rows.now,
                previous_response_id,
                session_id,
                deployment,
                dumps(chain),
                len(chain) - 1,
                base_len + n,
                n,
                self.owner_id,
                expires_at,
                rows.body,
                rows.request,
                inputs,
                input_ids,
                outputs,
            ),
        ).rowcount
        if not inserted:  # saved before (background progress, a stream's in_progress row)
            old_keys = self._owned_items(conn, rows.id, tenant)
            if old_keys is None:
                raise ResponseConflict(f"response id {rows.id} belongs to another tenant")
            updated = self._execute_on(
                conn,
                f"""UPDATE responses SET status = ?, model = ?, updated_at = ?,
                    session_id = ?, deployment = ?, owner = ?, expires_at = ?,
                    response = ?, request = ?, inputs = ?, input_ids = ?, outputs = ?,
                    history_len = history_len - own_items + ?, own_items = ?
                WHERE id = ? AND {_NOT_BACKWARDS}""",
                (
                    rows.status,
                    rows.model,
                    rows.now,
                    session_id,
                    deployment,
                    self.owner_id,
                    expires_at,
                    rows.body,
                    rows.request,
                    inputs,
                    input_ids,
                    outputs,
                    n,
                    n,
                    rows.id,
                    rows.status,
                ),
            ).rowcount
            if not updated:
                # a late save of an earlier state of a finished response (see _NOT_BACKWARDS)
                return
            gone = set(old_keys).difference(item_id for item_id, _ in new_keys)
            if gone:
                self.query_count += 1
                conn.executemany(
                    "DELETE FROM item_ids WHERE tenant = ? AND item_id = ? AND response_id = ?",
                    [(tenant, item_id, rows.id) for item_id in gone],
                )
        if new_keys:
            self.query_count += 1
            conn.executemany(
                """INSERT INTO item_ids (tenant, item_id, response_id, seq) VALUES (?, ?, ?, ?)
                ON CONFLICT DO UPDATE SET seq = excluded.seq WHERE seq != excluded.seq""",
                [(tenant, item_id, rows.id, seq) for item_id, seq in new_keys],
            )
        if events is not None:
            self._execute_on(
                conn,
                """INSERT INTO response_events (response_id, tenant, data) VALUES (?, ?, ?)
                ON CONFLICT (response_id) DO UPDATE SET data = excluded.data""",
                (rows.id, tenant, events),
            )
        if session_id is not None:
            self._execute_on(
                conn,
                """INSERT INTO sessions (tenant, session_id, latest_response_id, deployment,
                    updated_at, created_at)
                VALUES (?, ?, ?, ?, ?, ?)
                ON CONFLICT (tenant, session_id) DO UPDATE SET
                    latest_response_id = excluded.latest_response_id,
                    deployment = coalesce(excluded.deployment, sessions.deployment),
                    updated_at = excluded.updated_at""",
                (tenant, session_id, rows.id, deployment, rows.now, rows.now),
            )
        self._job_write(conn, rows.id, tenant, session_id, args.job)

    def _owned_items(
        self, conn: sqlite3.Connection, response_id: str, tenant: str
    ) -> list[str] | None:
        """The indexed ids of a stored response's items, or None when it is not this tenant's
        (or absent)."""
        row = self._execute_on(
            conn,
            "SELECT input_ids, outputs, response FROM responses WHERE id = ? AND tenant = ?",
            (response_id, tenant),
        ).fetchone()
        return None if row is None else _indexed_ids(response_id, row[0], row[1], row[2])

    async def get(self, response_id: str, tenant: str) -> StoredResponse | None:
        return await self._run(Kind.READ, self._get_sync, response_id, tenant)

    def _get_sync(self, response_id: str, tenant: str) -> StoredResponse | None:
        row = self._execute(
            f"SELECT {_RESPONSE_COLUMNS} FROM responses WHERE id = ? AND tenant = ? AND {_LIVE}",
            (response_id, tenant, time.time()),
        ).fetchone()
        return _record(row) if row is not None else None

    async def delete(self, response_id: str, tenant: str) -> bool:
        return await self._write_op(self._delete_sync, response_id, tenant)

    def _delete_sync(self, conn: sqlite3.Connection, response_id: str, tenant: str) -> bool:
        keys = self._owned_items(conn, response_id, tenant)
        if keys is None:
            return False
        self._execute_on(conn, "DELETE FROM responses WHERE id = ?", (response_id,))
        self._forget_items(conn, [(tenant, item_id, response_id) for item_id in keys])
        self._execute_on(conn, "DELETE FROM response_events WHERE response_id = ?", (response_id,))
        self._execute_on(conn, "DELETE FROM background_jobs WHERE response_id = ?", (response_id,))
        return True

    def _forget_items(self, conn: sqlite3.Connection, keys: list[tuple[str, str, str]]) -> None:
        if keys:
            self.query_count += 1
            conn.executemany(
                "DELETE FROM item_ids WHERE tenant = ? AND item_id = ? AND response_id = ?", keys
            )

    async def context(self, response_id: str, tenant: str) -> list[dict[str, Any]] | None:
        return await self._run(Kind.READ, self._context_sync, response_id, tenant)

    def _context_sync(self, response_id: str, tenant: str) -> list[dict[str, Any]] | None:
        now = time.time()
        rows = self._execute(
            f"""SELECT x.tenant, x.expires_at, x.inputs, {_OUTPUTS.format("x.")}
            FROM responses AS r, json_each(r.chain) AS p
                LEFT JOIN responses AS x ON x.id = p.value
            WHERE r.id = ? AND r.tenant = ? AND (r.expires_at IS NULL OR r.expires_at > ?)
            ORDER BY p.key""",
            (response_id, tenant, now),
        ).fetchall()
        if not rows:
            return None
        history: list[dict[str, Any]] = []
        for owner, expires_at, inputs, outputs in rows:
            if owner != tenant or (expires_at is not None and expires_at <= now):
                return None  # a link of the chain was deleted or has expired
            history += loads(inputs)
            if outputs is not None:
                history += loads(outputs)
        return history

    async def context_items(
        self, response_id: str, tenant: str
    ) -> list[tuple[str, dict[str, Any]]] | None:
        return await self._run(Kind.READ, self._context_items_sync, response_id, tenant)

    def _context_items_sync(
        self, response_id: str, tenant: str
    ) -> list[tuple[str, dict[str, Any]]] | None:
        now = time.time()
        rows = self._execute(
            f"""SELECT x.id, x.tenant, x.expires_at, x.inputs, x.input_ids, {_OUTPUTS.format("x.")}
            FROM responses AS r, json_each(r.chain) AS p
                LEFT JOIN responses AS x ON x.id = p.value
            WHERE r.id = ? AND r.tenant = ? AND (r.expires_at IS NULL OR r.expires_at > ?)
            ORDER BY p.key""",
            (response_id, tenant, now),
        ).fetchall()
        if not rows:
            return None
        history: list[tuple[str, dict[str, Any]]] = []
        for owner_id, owner, expires_at, inputs, input_ids, outputs in rows:
            if owner != tenant or (expires_at is not None and expires_at <= now):
                return None  # a link of the chain was deleted or has expired
            history += _own_items(owner_id, inputs, input_ids, outputs)
        return history

    async def chain_tail(self, response_id: str, tenant: str) -> ChainTail | None:
        return await self._run(Kind.READ, self._chain_tail_sync, response_id, tenant)

    def _chain_tail_sync(self, response_id: str, tenant: str) -> ChainTail | None:
        now = time.time()
        row = self._execute(
            f"""SELECT r.chain, r.inputs, r.input_ids, {_OUTPUTS.format("r.")},
                json_array_length(r.chain), count(x.id), total(x.status IN ({_ACTIVE_MARKS}))
            FROM responses AS r, json_each(r.chain) AS p
                LEFT JOIN responses AS x ON x.id = p.value AND x.tenant = r.tenant
                    AND (x.expires_at IS NULL OR x.expires_at > ?)
            WHERE r.id = ? AND r.tenant = ? AND (r.expires_at IS NULL OR r.expires_at > ?)
            GROUP BY r.id""",
            (*ACTIVE_STATUSES, now, response_id, tenant, now),
        ).fetchone()
        if row is None or row[5] != row[4]:
            return None  # missing, or a link of its chain was deleted or has expired
        chain, inputs, input_ids, outputs, _, _, active = row
        return ChainTail(
            tuple(loads(chain)), _own_items(response_id, inputs, input_ids, outputs), not active
        )

    async def link_items(
        self, response_ids: Sequence[str], tenant: str
    ) -> list[list[tuple[str, dict[str, Any]]]] | None:
        return await self._run(Kind.READ, self._link_items_sync, list(response_ids), tenant)

    def _link_items_sync(
        self, response_ids: list[str], tenant: str
    ) -> list[list[tuple[str, dict[str, Any]]]] | None:
        rows = self._execute(
            f"""SELECT x.id, x.inputs, x.input_ids, {_OUTPUTS.format("x.")}
            FROM json_each(?) AS p LEFT JOIN responses AS x ON x.id = p.value
                AND x.tenant = ? AND (x.expires_at IS NULL OR x.expires_at > ?)
            ORDER BY p.key""",
            (dumps(response_ids).decode(), tenant, time.time()),
        ).fetchall()
        if any(row[0] is None for row in rows):
            return None
        return [_own_items(*row) for row in rows]

    async def input_items(
        self,
        response_id: str,
        tenant: str,
        *,
        limit: int = 20,
        order: Order = "desc",
        after: str | None = None,
    ) -> ItemsPage | None:
        check_order(order, limit)
        return await self._run(
            Kind.READ, self._input_items_sync, response_id, tenant, limit, order, after
        )

    def _input_items_sync(
        self, response_id: str, tenant: str, limit: int, order: Order, after: str | None
    ) -> ItemsPage | None:
        row = self._execute(
            f"SELECT inputs, input_ids FROM responses WHERE id = ? AND tenant = ? AND {_LIVE}",
            (response_id, tenant, time.time()),
        ).fetchone()
        if row is None:
            return None
        pairs = list(zip(loads(row[1]), loads(row[0]), strict=True))
        if after is not None:
            # The page after the first occurrence of ``after`` (none when it is not an input).
            position = next((i for i, (item_id, _) in enumerate(pairs) if item_id == after), None)
            pairs = (
                []
                if position is None
                else pairs[position + 1 :]
                if order == "asc"
                else pairs[:position]
            )
        if order == "desc":
            pairs.reverse()
        return page_of(pairs[: limit + 1], limit)

    async def get_item(self, item_id: str, tenant: str) -> dict[str, Any] | None:
        return await self._run(Kind.READ, self._get_item_sync, item_id, tenant)

    def _get_item_sync(self, item_id: str, tenant: str) -> dict[str, Any] | None:
        now = time.time()
        location = derived_location(item_id)
        if location is not None:  # a derived id: found through its response's row
            response_id, position = location
            output = position >= OUTPUT_POSITIONS
            row = self._execute(
                f"""SELECT {_OUTPUTS.format("") if output else "inputs"}
                FROM responses WHERE id = ? AND tenant = ? AND {_LIVE}""",
                (response_id, tenant, now),
            ).fetchone()
            if row is not None and row[0] is not None:
                items = loads(row[0])
                index = position - OUTPUT_POSITIONS if output else position
                if (
                    index < len(items)
                    and item_id_for(items[index], response_id, position) == item_id
                ):
                    return with_id(items[index], item_id)
        row = self._execute(
            f"""SELECT i.seq, json_array_length(r.input_ids), r.inputs, {_OUTPUTS.format("r.")}
            FROM item_ids AS i JOIN responses AS r ON r.id = i.response_id
            WHERE i.tenant = ? AND i.item_id = ? AND r.tenant = i.tenant
              AND (r.expires_at IS NULL OR r.expires_at > ?)
            ORDER BY i.response_id LIMIT 1""",
            (tenant, item_id, now),
        ).fetchone()
        if row is None:
            return None
        seq, input_count, inputs, outputs = row
        items = loads(inputs) if seq < input_count else loads(outputs or b"[]")
        position = seq if seq < input_count else seq - input_count
        if position >= len(items):
            return None
        return with_id(items[position], item_id)

    async def events(self, response_id: str, tenant: str) -> bytes | None:
        return await self._run(Kind.READ, self._events_sync, response_id, tenant)

    def _events_sync(self, response_id: str, tenant: str) -> bytes | None:
        row = self._execute(
            "SELECT data FROM response_events WHERE response_id = ? AND tenant = ?",
            (response_id, tenant),
        ).fetchone()
        return bytes(row[0]) if row is not None else None

    async def list_responses(
        self, where: ResponseFilter, *, limit: int = 50, cursor: str | None = None
    ) -> ResponsesPage:
        before = int(decode_cursor(cursor, 1)[0]) if cursor else None
        return await self._run(Kind.READ, self._list_sync, where, limit, before)

    def _list_sync(self, where: ResponseFilter, limit: int, before: int | None) -> ResponsesPage:
        # The rowid is the creation order (saves insert once, then update in place), so
        # walking it backwards lists newest first through the table's own b-tree.
        terms = filter_terms(where)
        clauses = [f"{column} = ?" for column, _ in terms] + [_LIVE]
        params: list[Any] = [value for _, value in terms] + [time.time()]
        if before is not None:
            clauses.append("rowid < ?")
            params.append(before)
        rows = self._execute(
            f"SELECT {_RESPONSE_COLUMNS}, rowid FROM responses WHERE {' AND '.join(clauses)}"
            " ORDER BY rowid DESC LIMIT ?",
            (*params, limit + 1),
        ).fetchall()
        more = len(rows) > limit
        rows = rows[:limit]
        return ResponsesPage(
            [_record(row) for row in rows], encode_cursor(rows[-1][16]) if more else None
        )

    # ------------------------------------------------------------------ background mode

    async def request_cancel(self, response_id: str, tenant: str) -> bool:
        return await self._write_op(self._request_cancel_sync, response_id, tenant)

    def _request_cancel_sync(self, conn: sqlite3.Connection, response_id: str, tenant: str) -> bool:
        cur = self._execute_on(
            conn,
            "UPDATE responses SET cancel_requested = 1 WHERE id = ? AND tenant = ?",
            (response_id, tenant),
        )
        return cur.rowcount > 0

    async def cancel_requested(self, response_id: str, tenant: str) -> bool:
        return await self._run(Kind.READ, self._cancel_requested_sync, response_id, tenant)

    def _cancel_requested_sync(self, response_id: str, tenant: str) -> bool:
        row = self._execute(
            "SELECT cancel_requested FROM responses WHERE id = ? AND tenant = ?",
            (response_id, tenant),
        ).fetchone()
        return bool(row and row[0])

    async def heartbeat(self) -> None:
        await self._run(Kind.WRITE, self._heartbeat_sync)

    def _heartbeat_sync(self) -> None:
        now = time.time()
        self._execute(
            """INSERT INTO owners (owner_id, started_at, heartbeat_at) VALUES (?, ?, ?)
            ON CONFLICT (owner_id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at""",
            (self.owner_id, now, now),
        )

    async def recover_interrupted(self, *, stale_after: float = 30.0) -> list[str]:
        return await self._run(Kind.WRITE, self._recover_sync, stale_after)

    def _recover_sync(self, stale_after: float) -> list[str]:
        now = time.time()
        owners = self._execute("SELECT owner_id, heartbeat_at, stopped_at FROM owners").fetchall()
        alive = live_owners(owners, self.owner_id, now, stale_after)
        marks = ", ".join("?" * len(ACTIVE_STATUSES))
        rows = self._execute(
            f"""SELECT id, owner, response FROM responses WHERE status IN ({marks})
            AND id NOT IN (SELECT response_id FROM background_jobs)""",
            ACTIVE_STATUSES,
        ).fetchall()
        failed: list[str] = []
        for response_id, owner, body in rows:
            if owner in alive:
                continue
            self._execute(
                "UPDATE responses SET status = 'failed', response = ?, updated_at = ? WHERE id = ?",
                (rewrite_status(body, "failed", INTERRUPTED_ERROR), now, response_id),
            )
            failed.append(response_id)
        dead = [owner for owner, _, _ in owners if owner not in alive]
        if dead:
            marks = ", ".join("?" * len(dead))
            self._execute(
                f"""UPDATE sessions SET lease_token = NULL, lease_owner = NULL,
                    lease_expires_at = NULL WHERE lease_owner IN ({marks})
                    AND lease_token NOT IN (SELECT session_token FROM background_jobs
                        WHERE session_token IS NOT NULL)""",
                dead,
            )
        return failed

    # ------------------------------------------------------------------ sessions

    async def begin_session_turn(
        self, tenant: str, session_id: str, *, lease_seconds: float = 600.0, create: bool = True
    ) -> SessionTurn:
        return await self._write_op(
            self._begin_turn_sync, tenant, session_id, lease_seconds, create
        )

    def _begin_turn_sync(
        self,
        conn: sqlite3.Connection,
        tenant: str,
        session_id: str,
        lease_seconds: float,
        create: bool,
    ) -> SessionTurn:
        now = time.time()
        token = uuid.uuid4().hex
        expires = now + lease_seconds
        if create:
            row = self._execute_on(
                conn,
                """INSERT INTO sessions (tenant, session_id, updated_at, created_at, lease_token,
                    lease_owner, lease_expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (tenant, session_id) DO UPDATE SET lease_token = excluded.lease_token,
                    lease_owner = excluded.lease_owner, lease_expires_at = excluded.lease_expires_at
                WHERE sessions.lease_token IS NULL OR sessions.lease_expires_at <= ?
                RETURNING latest_response_id, deployment, hidden""",
                (tenant, session_id, now, now, token, self.owner_id, expires, now),
            ).fetchone()
        else:
            row = self._execute_on(
                conn,
                """UPDATE sessions SET lease_token = ?, lease_owner = ?, lease_expires_at = ?
                WHERE tenant = ? AND session_id = ?
                    AND (lease_token IS NULL OR lease_expires_at <= ?)
                RETURNING latest_response_id, deployment, hidden""",
                (token, self.owner_id, expires, tenant, session_id, now),
            ).fetchone()
            if row is None and not self._session_exists(conn, tenant, session_id):
                raise UnknownSession(tenant, session_id)
        if row is None:
            raise SessionBusy(tenant, session_id)
        hidden = tuple(loads(row[2])) if row[2] else ()
        return SessionTurn(tenant, session_id, token, row[0], row[1], expires, hidden)

    def _session_exists(self, conn: sqlite3.Connection, tenant: str, session_id: str) -> bool:
        return (
            self._execute_on(
                conn,
                "SELECT 1 FROM sessions WHERE tenant = ? AND session_id = ?",
                (tenant, session_id),
            ).fetchone()
            is not None
        )

    # ------------------------------------------------------------------ conversations

    async def create_conversation(
        self, tenant: str, conversation_id: str, *, metadata: dict[str, str]
    ) -> Conversation:
        return await self._write_op(
            self._create_conversation_sync, tenant, conversation_id, dumps(metadata)
        )

    def _create_conversation_sync(
        self, conn: sqlite3.Connection, tenant: str, conversation_id: str, metadata: bytes
    ) -> Conversation:
        now = time.time()
        row = self._execute_on(
            conn,
            f"""INSERT INTO sessions (tenant, session_id, updated_at, created_at, metadata)
            VALUES (?, ?, ?, ?, ?) ON CONFLICT (tenant, session_id) DO NOTHING
            RETURNING {_CONVERSATION_COLUMNS}""",
            (tenant, conversation_id, now, now, metadata),
        ).fetchone()
        if row is None:
            raise StoreError(f"conversation {conversation_id!r} exists already")
        return _conversation(row)

    async def get_conversation(self, conversation_id: str, tenant: str) -> Conversation | None:
        return await self._run(Kind.READ, self._get_conversation_sync, conversation_id, tenant)

    def _get_conversation_sync(self, conversation_id: str, tenant: str) -> Conversation | None:
        row = self._execute(
            f"SELECT {_CONVERSATION_COLUMNS} FROM sessions WHERE tenant = ? AND session_id = ?",
            (tenant, conversation_id),
        ).fetchone()
        return _conversation(row) if row is not None else None

    async def update_conversation(
        self, conversation_id: str, tenant: str, *, metadata: dict[str, str]
    ) -> Conversation | None:
        return await self._write_op(
            self._update_conversation_sync, conversation_id, tenant, dumps(metadata)
        )

    def _update_conversation_sync(
        self, conn: sqlite3.Connection, conversation_id: str, tenant: str, metadata: bytes
    ) -> Conversation | None:
        row = self._execute_on(
            conn,
            f"""UPDATE sessions SET metadata = ? WHERE tenant = ? AND session_id = ?
            RETURNING {_CONVERSATION_COLUMNS}""",
            (metadata, tenant, conversation_id),
        ).fetchone()
        return _conversation(row) if row is not None else None

    async def delete_conversation(self, conversation_id: str, tenant: str) -> bool:
        return await self._write_op(self._delete_conversation_sync, conversation_id, tenant)

    def _delete_conversation_sync(
        self, conn: sqlite3.Connection, conversation_id: str, tenant: str
    ) -> bool:
        deleted = self._execute_on(
            conn,
            """DELETE FROM sessions WHERE tenant = ? AND session_id = ?
                AND (lease_token IS NULL OR lease_expires_at <= ?)""",
            (tenant, conversation_id, time.time()),
        ).rowcount
        if deleted:
            return True
        if self._session_exists(conn, tenant, conversation_id):
            raise SessionBusy(tenant, conversation_id)
        return False

    async def hide_item(self, conversation_id: str, tenant: str, item_id: str) -> bool:
        return await self._write_op(self._hide_item_sync, conversation_id, tenant, item_id)

    def _hide_item_sync(
        self, conn: sqlite3.Connection, conversation_id: str, tenant: str, item_id: str
    ) -> bool:
        return bool(
            self._execute_on(
                conn,
                """UPDATE sessions SET hidden = json_insert(coalesce(hidden, '[]'), '$[#]', ?)
                WHERE tenant = ? AND session_id = ?""",
                (item_id, tenant, conversation_id),
            ).rowcount
        )

    async def _end_turn(self, turn: SessionTurn) -> None:
        await self._write_op(self._end_turn_sync, turn)

    def _end_turn_sync(self, conn: sqlite3.Connection, turn: SessionTurn) -> None:
        self._execute_on(
            conn,
            """UPDATE sessions SET lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL
            WHERE tenant = ? AND session_id = ? AND lease_token = ?""",
            (turn.tenant, turn.session_id, turn.token),
        )

    # ------------------------------------------------------------------ MCP approvals

    async def claim_approval(
        self, tenant: str, approval_request_id: str, response_id: str
    ) -> ApprovalClaim | None:
        return await self._write_op(
            self._claim_sync, tenant, approval_request_id, response_id, time.time()
        )

    def _claim_sync(
        self,
        conn: sqlite3.Connection,
        tenant: str,
        approval_request_id: str,
        response_id: str,
        now: float,
    ) -> ApprovalClaim | None:
        key = (tenant, approval_request_id)
        if self._execute_on(
            conn,
            """INSERT INTO approvals (tenant, approval_request_id, response_id, claimed_at)
            VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING 1""",
            (*key, response_id, now),
        ).fetchone():
            return None
        row = self._execute_on(
            conn,
            """SELECT response_id, claimed_at, outcome FROM approvals
            WHERE tenant = ? AND approval_request_id = ?""",
            key,
        ).fetchone()
        assert row is not None, "the row the insert met, in the same transaction"
        return claim_of(approval_request_id, response_id, row)

    async def settle_approval(
        self, tenant: str, approval_request_id: str, response_id: str, outcome: dict[str, Any]
    ) -> None:
        await self._write_op(
            self._approval_update_sync,
            "UPDATE approvals SET outcome = ?, settled_at = ?"
            " WHERE tenant = ? AND approval_request_id = ? AND response_id = ?",
            (dumps(outcome).decode(), time.time(), tenant, approval_request_id, response_id),
        )

    async def release_approval(
        self, tenant: str, approval_request_id: str, response_id: str
    ) -> None:
        await self._write_op(
            self._approval_update_sync,
            "DELETE FROM approvals WHERE tenant = ? AND approval_request_id = ?"
            " AND response_id = ? AND outcome IS NULL",
            (tenant, approval_request_id, response_id),
        )

    def _approval_update_sync(
        self, conn: sqlite3.Connection, sql: str, params: tuple[Any, ...]
    ) -> None:
        self._execute_on(conn, sql, params)

    # ------------------------------------------------------------------ console

    async def revoke_console_session(self, session_id: str, expires_at: float) -> None:
        await self._write_op(self._revoke_sync, session_id, expires_at, time.time())

    def _revoke_sync(
        self, conn: sqlite3.Connection, session_id: str, expires_at: float, now: float
    ) -> None:
        self._execute_on(conn, "DELETE FROM console_revoked WHERE expires_at <= ?", (now,))
        self._execute_on(
            conn,
            "INSERT OR REPLACE INTO console_revoked (session_id, expires_at) VALUES (?, ?)",
            (session_id, expires_at),
        )

    async def console_session_revoked(self, session_id: str) -> bool:
        row = await self._run(
            Kind.READ,
            lambda: self._execute(
                "SELECT 1 FROM console_revoked WHERE session_id = ?", (session_id,)
            ).fetchone(),
        )
        return row is not None

    async def signin_failed(
        self, subjects: Sequence[str], *, now: float, forget_after: float
    ) -> list[int]:
        return await self._write_op(self._signin_failed_sync, list(subjects), now, forget_after)

    def _signin_failed_sync(
        self, conn: sqlite3.Connection, subjects: list[str], now: float, forget_after: float
    ) -> list[int]:
        stale = now - forget_after
        self._execute_on(
            conn,
            "DELETE FROM signin_throttle WHERE updated_at < ? AND blocked_until < ?",
            (stale, now),
        )
        return [
            self._execute_on(conn, _SIGNIN_FAILED, (subject, now, stale, now)).fetchone()[0]
            for subject in subjects
        ]

    async def signin_block(self, subject: str, until: float) -> None:
        await self._write_op(
            self._approval_update_sync,
            "UPDATE signin_throttle SET blocked_until = max(blocked_until, ?) WHERE subject = ?",
            (until, subject),
        )

    async def signin_blocked_until(self, subjects: Sequence[str]) -> float:
        marks = ", ".join("?" * len(subjects))
        row = await self._run(
            Kind.READ,
            lambda: self._execute(
                f"SELECT max(blocked_until) FROM signin_throttle WHERE subject IN ({marks})",
                list(subjects),
            ).fetchone(),
        )
        return float(row[0] or 0.0)

    # ------------------------------------------------------------------ retention

    async def prune(self, *, older_than: float) -> int:
        return await self._run(Kind.WRITE, self._prune_sync, older_than)

    def _prune_sync(self, older_than: float) -> int:
        now = time.time()
        cutoff = now - older_than
        # Rowids follow creation order (a response's row is inserted when it is first
        # saved, right after it is created), so the old ones sit at the start: find
        # the first row that is not old, then collect the old rows before it. A row
        # inserted out of order around the cutoff is left for the next prune.
        row = self._execute(
            "SELECT rowid FROM responses WHERE created_at >= ? ORDER BY rowid LIMIT 1", (cutoff,)
        ).fetchone()
        boundary = row[0] if row is not None else 1 << 62
        doomed = self._execute(
            """SELECT id, tenant, input_ids, outputs, response FROM responses
                WHERE rowid < ? AND created_at < ?
            UNION ALL
            SELECT id, tenant, input_ids, outputs, response FROM responses
                WHERE expires_at IS NOT NULL AND expires_at <= ?
                    AND NOT (rowid < ? AND created_at < ?)""",
            (boundary, cutoff, now, boundary, cutoff),
        ).fetchall()
        conn = self._conn
        assert conn is not None
        for start in range(0, len(doomed), 500):
            batch = doomed[start : start + 500]
            self.query_count += 1
            conn.executemany("DELETE FROM responses WHERE id = ?", [(row[0],) for row in batch])
            self._forget_items(
                conn,
                [
                    (tenant, item_id, response_id)
                    for response_id, tenant, input_ids, outputs, body in batch
                    for item_id in _indexed_ids(response_id, input_ids, outputs, body)
                ],
            )
            self.query_count += 2
            conn.executemany(
                "DELETE FROM response_events WHERE response_id = ?", [(row[0],) for row in batch]
            )
            conn.executemany(
                "DELETE FROM background_jobs WHERE response_id = ?", [(row[0],) for row in batch]
            )
        self._execute(
            """DELETE FROM sessions WHERE updated_at < ?
            AND (lease_token IS NULL OR lease_expires_at <= ?)""",
            (cutoff, now),
        )
        self._execute(
            "DELETE FROM owners WHERE owner_id != ? AND heartbeat_at < ?",
            (self.owner_id, min(cutoff, now - 86400)),
        )
        self._execute("DELETE FROM approvals WHERE claimed_at < ?", (cutoff,))
        return len(doomed)

    async def tenants(self) -> dict[str, int]:
        rows = await self._run(
            Kind.READ,
            lambda: self._execute(
                """SELECT tenant, sum(n) FROM (
                    SELECT tenant, count(*) AS n FROM responses GROUP BY tenant
                    UNION ALL SELECT tenant, 0 FROM sessions GROUP BY tenant
                ) GROUP BY tenant ORDER BY tenant"""
            ).fetchall(),
        )
        return {tenant: int(n) for tenant, n in rows}

    async def rename_tenant(self, old: str, new: str) -> int:
        return await self._run(Kind.WRITE, self._rename_tenant_sync, old, new)

    def _rename_tenant_sync(self, old: str, new: str) -> int:
        if self._execute(
            "SELECT 1 FROM responses WHERE tenant = ? UNION ALL SELECT 1 FROM sessions "
            "WHERE tenant = ? LIMIT 1",
            (new, new),
        ).fetchone():
            raise TenantInUse(
                f"tenant {new!r} already holds data: two tenants' data are never merged"
            )
        if self._execute(
            "SELECT 1 FROM responses WHERE tenant = ? AND status IN ('queued', "
            "'in_progress') LIMIT 1",
            (old,),
        ).fetchone():
            raise TenantInUse(
                f"tenant {old!r} has a response in progress: stop the servers that use "
                "this store first"
            )
        moved = self._execute(
            "UPDATE responses SET tenant = ? WHERE tenant = ?", (new, old)
        ).rowcount
        for table in ("item_ids", "response_events", "sessions", "approvals", "review_entries"):
            self._execute(f"UPDATE {table} SET tenant = ? WHERE tenant = ?", (new, old))
        return int(moved)

    async def count_prunable(self, *, older_than: float) -> int:
        return await self._run(Kind.READ, self._count_prunable_sync, older_than)

    def _count_prunable_sync(self, older_than: float) -> int:
        now = time.time()
        row = self._execute(
            "SELECT count(*) FROM responses WHERE created_at < ?"
            " OR (expires_at IS NOT NULL AND expires_at <= ?)",
            (now - older_than, now),
        ).fetchone()
        return int(row[0])

    async def stats(self) -> StoreStats:
        return await self._run(Kind.READ, self._stats_sync)

    def _stats_sync(self) -> StoreStats:
        by_status = dict(
            self._execute("SELECT status, count(*) FROM responses GROUP BY status").fetchall()
        )
        oldest, newest = self._execute(
            "SELECT min(created_at), max(created_at) FROM responses"
        ).fetchone()
        count = {
            table: self._execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in ("sessions", "response_events")
        }
        items = self._execute("SELECT coalesce(sum(own_items), 0) FROM responses").fetchone()[0]
        version = self._execute("SELECT max(version) FROM schema_version").fetchone()[0]
        size = 0
        if self.path != ":memory:":
            for suffix in ("", "-wal"):
                with contextlib.suppress(OSError):
                    size += Path(self.path + suffix).stat().st_size
        return StoreStats(
            backend="sqlite",
            location=self.path,
            schema_version=version,
            responses=sum(by_status.values()),
            by_status=by_status,
            items=items,
            sessions=count["sessions"],
            events=count["response_events"],
            oldest_created_at=oldest,
            newest_created_at=newest,
            extra={"file_bytes": size},
        )

    async def close(self) -> None:
        if self._closed:
            return
        if self._heartbeat_task is not None:
            self._heartbeat_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heartbeat_task
        await self.lease_releases.close()
        inline, self._inline = self._inline, None
        if inline is not None:
            self._close_inline(inline)
        try:
            await self._run(Kind.RAW, self._close_sync)
        finally:
            self._closed = True
            self._worker.stop()

    @staticmethod
    def _close_inline(inline: InlineWriter) -> None:
        """Commit the queued inline writes and close their connection (on their loop)."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is inline.loop or inline.loop.is_closed():
            inline.close()
        else:
            with contextlib.suppress(RuntimeError):  # that loop stopped meanwhile
                inline.loop.call_soon_threadsafe(inline.close)

    def _close_sync(self) -> None:
        if self._conn is None:
            return
        try:
            self._execute(
                "UPDATE owners SET stopped_at = ? WHERE owner_id = ?", (time.time(), self.owner_id)
            )
        finally:
            self._conn.close()
            self._conn = self._worker.conn = None
