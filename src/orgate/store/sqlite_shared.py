"""SQLite: the state every process serving one store shares besides responses and sessions.

The leases of durable background responses (``background_jobs``), the review queue
(``review_entries``) and what each process says of itself for the console's node list (the
``owners`` row's version, address and metrics snapshot). ``SqliteSharedState`` is a base of
``SqliteStore``: its writes run like every other write of the store (batched on the event
loop, or on the database thread), its reads on the database thread.
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from orgate.store.base import (
    REVIEW_COLUMNS,
    BackgroundJob,
    JobProgress,
    JobWrite,
    LeaseLost,
    NodeRecord,
    SessionTurn,
    StoredReview,
    owner_is_dead,
)
from orgate.store.codec import dumps, loads, rewrite_status
from orgate.store.sqlite_worker import Kind

T = TypeVar("T")

_JOB_COLUMNS = (
    "response_id, tenant, attempts, request, session_id, session_token, delivered_at, effects_at"
)


def dead_owners(rows: Sequence[tuple[Any, ...]], me: str) -> list[str]:
    """Owners of ``(owner_id, stopped_at)`` rows certainly gone: stopped, or a process of this
    host that no longer runs. A silent owner elsewhere is not: its leases expire instead."""
    return [
        owner
        for owner, stopped in rows
        if owner != me and (stopped is not None or owner_is_dead(owner) is True)
    ]


def review_of(row: Sequence[Any]) -> StoredReview:
    return StoredReview(*row)


class Row(Protocol):
    """A row as either backend returns it (a tuple, an ``asyncpg.Record``): read by index."""

    def __getitem__(self, index: int, /) -> Any: ...


def node_of(row: Row) -> NodeRecord:
    """A node row (``owners`` joined with its background count), on either backend."""
    metrics = bytes(row[6]) if row[6] is not None else None
    return NodeRecord(row[0], row[1], row[2], row[3], row[4], row[5], metrics, row[7], row[8])


def review_scope(
    status: str | None, tenant: str | None, mark: Callable[[int], str]
) -> tuple[str, list[Any]]:
    """The WHERE clause of a status and a tenant (None: any), with ``mark(n)`` placeholders."""
    clauses: list[str] = []
    args: list[Any] = []
    for column, value in (("status", status), ("tenant", tenant)):
        if value is not None:
            args.append(value)
            clauses.append(f"{column} = {mark(len(args))}")
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), args


class SqliteSharedState:
    """Background leases, the review queue and the node list, on SQLite (a base of
    ``SqliteStore``, which provides the plumbing below)."""

    owner_id: str
    query_count: int

    if TYPE_CHECKING:

        async def _write_op(self, fn: Callable[..., T], *args: Any) -> T: ...

        async def _run(self, kind: Kind, fn: Callable[..., T], *args: Any) -> T: ...

        def _execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor: ...

        def _execute_on(
            self, conn: sqlite3.Connection, sql: str, params: Sequence[Any] = ()
        ) -> sqlite3.Cursor: ...

    # ------------------------------------------------------------------ a save's lease

    def _job_check(self, conn: sqlite3.Connection, response_id: str, job: JobWrite | None) -> None:
        """Before a save writes anything: ``LeaseLost`` unless ``job``'s token holds the lease."""
        if job is None or job.action == "lease":
            return
        held = self._execute_on(
            conn,
            "SELECT 1 FROM background_jobs WHERE response_id = ? AND token = ?",
            (response_id, job.token),
        ).fetchone()
        if held is None:
            raise LeaseLost(response_id)

    def _job_write(
        self,
        conn: sqlite3.Connection,
        response_id: str,
        tenant: str,
        session_id: str | None,
        job: JobWrite | None,
    ) -> None:
        """After a save: the lease taken (``lease``) or the job ended (``finish``)."""
        if job is None or job.action == "hold":
            return
        if job.action == "finish":
            self._execute_on(
                conn, "DELETE FROM background_jobs WHERE response_id = ?", (response_id,)
            )
            return
        now = time.time()
        self._execute_on(
            conn,
            """INSERT INTO background_jobs (response_id, tenant, owner, token, lease_expires_at,
                request, session_id, session_token, created_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (response_id) DO NOTHING""",
            (
                response_id,
                tenant,
                self.owner_id,
                job.token,
                now + job.lease_seconds,
                dumps(job.request or {}),
                session_id,
                job.session_token,
                now,
            ),
        )

    # ------------------------------------------------------------------ background leases

    async def renew_background(self, *, lease_seconds: float) -> set[str]:
        rows = await self._write_op(self._renew_sync, time.time() + lease_seconds)
        return {row[0] for row in rows}

    def _renew_sync(self, conn: sqlite3.Connection, until: float) -> list[tuple[str]]:
        return self._execute_on(
            conn,
            "UPDATE background_jobs SET lease_expires_at = ? WHERE owner = ? RETURNING response_id",
            (until, self.owner_id),
        ).fetchall()

    async def claim_background(self, *, lease_seconds: float) -> BackgroundJob | None:
        return await self._run(Kind.WRITE, self._claim_job_sync, lease_seconds)

    def _claim_job_sync(self, lease_seconds: float) -> BackgroundJob | None:
        now = time.time()
        owners = self._execute("SELECT owner_id, stopped_at FROM owners").fetchall()
        dead = dead_owners(owners, self.owner_id)
        token = uuid.uuid4().hex
        marks = ", ".join("?" * len(dead))
        row = self._execute(
            f"""UPDATE background_jobs SET owner = ?, token = ?, lease_expires_at = ?,
                attempts = attempts + 1, events = NULL
            WHERE response_id = (SELECT response_id FROM background_jobs
                WHERE lease_expires_at <= ? OR owner IN ({marks})
                ORDER BY lease_expires_at LIMIT 1)
            RETURNING {_JOB_COLUMNS}""",
            (self.owner_id, token, now + lease_seconds, now, *dead),
        ).fetchone()
        if row is None:
            return None
        response_id, tenant, attempts, request, session_id, session_token, delivered, effects = row
        session = None
        if session_token is not None:
            held = self._execute(
                """UPDATE sessions SET lease_owner = ?, lease_expires_at = max(lease_expires_at, ?)
                WHERE tenant = ? AND session_id = ? AND lease_token = ?
                RETURNING latest_response_id, deployment, lease_expires_at""",
                (self.owner_id, now + 600.0, tenant, session_id, session_token),
            ).fetchone()
            if held is not None:
                session = SessionTurn(tenant, session_id, session_token, *held)
        return BackgroundJob(
            response_id,
            tenant,
            token,
            attempts,
            loads(request),
            session,
            session_token is not None and session is None,
            delivered is not None,
            effects is not None,
        )

    async def mark_background(
        self,
        response_id: str,
        what: Literal["delivered", "effects"],
        *,
        token: str | None = None,
        attempts: int | None = None,
    ) -> bool:
        column = "delivered_at" if what == "delivered" else "effects_at"
        return await self._write_op(
            self._update_job_sync,
            f"UPDATE background_jobs SET {column} = coalesce({column}, ?) WHERE response_id = ?"
            " AND ((? IS NOT NULL AND token = ?) OR (? IS NOT NULL AND attempts = ?))",
            (time.time(), response_id, token, token, attempts, attempts),
        )

    async def write_background_events(self, response_id: str, token: str, events: bytes) -> bool:
        return await self._write_op(
            self._update_job_sync,
            "UPDATE background_jobs SET events = ? WHERE response_id = ? AND token = ?",
            (events, response_id, token),
        )

    def _update_job_sync(self, conn: sqlite3.Connection, sql: str, params: tuple[Any, ...]) -> bool:
        return self._execute_on(conn, sql, params).rowcount > 0

    async def background_progress(self, response_id: str, tenant: str) -> JobProgress | None:
        return await self._run(Kind.READ, self._progress_sync, response_id, tenant)

    def _progress_sync(self, response_id: str, tenant: str) -> JobProgress | None:
        row = self._execute(
            """SELECT r.status, j.attempts, j.events, j.delivered_at,
                CASE WHEN j.response_id IS NULL THEN e.data END
            FROM responses AS r
            LEFT JOIN background_jobs AS j ON j.response_id = r.id
            LEFT JOIN response_events AS e ON e.response_id = r.id
            WHERE r.id = ? AND r.tenant = ? AND (r.expires_at IS NULL OR r.expires_at > ?)""",
            (response_id, tenant, time.time()),
        ).fetchone()
        if row is None:
            return None
        status, attempts, running, delivered, final = row
        events = running if attempts is not None else final
        return JobProgress(
            status, attempts, bytes(events) if events is not None else None, delivered is not None
        )

    async def end_background(
        self, job: BackgroundJob, status: str, error: dict[str, Any] | None
    ) -> bool:
        return await self._write_op(self._end_background_sync, job, status, error)

    def _end_background_sync(
        self,
        conn: sqlite3.Connection,
        job: BackgroundJob,
        status: str,
        error: dict[str, Any] | None,
    ) -> bool:
        held = self._execute_on(
            conn,
            """SELECT r.response FROM background_jobs AS j LEFT JOIN responses AS r
                ON r.id = j.response_id WHERE j.response_id = ? AND j.token = ?""",
            (job.response_id, job.token),
        ).fetchone()
        if held is None:
            return False
        if held[0] is not None:
            self._execute_on(
                conn,
                """UPDATE responses SET status = ?, response = ?, updated_at = ?, owner = ?
                WHERE id = ? AND status IN ('queued', 'in_progress')""",
                (
                    status,
                    rewrite_status(held[0], status, error),
                    time.time(),
                    self.owner_id,
                    job.response_id,
                ),
            )
        self._execute_on(
            conn, "DELETE FROM background_jobs WHERE response_id = ?", (job.response_id,)
        )
        if job.session is not None:
            self._execute_on(
                conn,
                """UPDATE sessions SET lease_token = NULL, lease_owner = NULL,
                    lease_expires_at = NULL
                    WHERE tenant = ? AND session_id = ? AND lease_token = ?""",
                (job.tenant, job.session.session_id, job.session.token),
            )
        return True

    # ------------------------------------------------------------------ the review queue

    async def add_reviews(self, entries: Sequence[StoredReview]) -> int:
        return await self._write_op(self._add_reviews_sync, list(entries))

    def _add_reviews_sync(self, conn: sqlite3.Connection, entries: list[StoredReview]) -> int:
        added = 0
        for entry in entries:
            added += self._execute_on(
                conn,
                f"INSERT INTO review_entries ({REVIEW_COLUMNS}) VALUES ({', '.join('?' * 16)})"
                " ON CONFLICT (id) DO NOTHING",
                (
                    entry.id,
                    entry.tenant,
                    entry.created_at,
                    entry.status,
                    entry.model,
                    entry.format_name,
                    entry.mode,
                    entry.stage,
                    entry.errors,
                    entry.schema,
                    entry.request,
                    entry.attempts,
                    entry.response_id,
                    entry.resolution,
                    entry.resolved_at,
                    entry.note,
                ),
            ).rowcount
        return added

    async def list_reviews(
        self, status: str | None, tenant: str | None, *, limit: int, offset: int
    ) -> list[StoredReview]:
        where, args = review_scope(status, tenant, lambda _: "?")
        sql = (
            f"SELECT {REVIEW_COLUMNS} FROM review_entries{where}"
            " ORDER BY created_at, id LIMIT ? OFFSET ?"
        )
        rows = await self._run(Kind.READ, self._rows_sync, sql, (*args, limit, offset))
        return [review_of(row) for row in rows]

    async def count_reviews(self, status: str | None, tenant: str | None) -> int:
        where, args = review_scope(status, tenant, lambda _: "?")
        rows = await self._run(
            Kind.READ, self._rows_sync, f"SELECT count(*) FROM review_entries{where}", tuple(args)
        )
        return int(rows[0][0])

    async def get_review(
        self, review_id: str | None, tenant: str | None, *, response_id: str | None = None
    ) -> StoredReview | None:
        column, key = ("id", review_id) if review_id is not None else ("response_id", response_id)
        sql = f"SELECT {REVIEW_COLUMNS} FROM review_entries WHERE {column} = ?"
        params: tuple[Any, ...] = (key,)
        if tenant is not None:
            sql, params = sql + " AND tenant = ?", (key, tenant)
        rows = await self._run(Kind.READ, self._rows_sync, sql + " LIMIT 1", params)
        return review_of(rows[0]) if rows else None

    def _rows_sync(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        return self._execute(sql, params).fetchall()

    async def finish_review(
        self,
        review_id: str,
        status: str,
        resolution: str | None,
        note: str | None,
        tenant: str | None,
    ) -> bool:
        return await self._write_op(
            self._update_job_sync,
            "UPDATE review_entries SET status = ?, resolution = ?, resolved_at = ?, note = ?"
            " WHERE id = ? AND status = 'pending' AND (? IS NULL OR tenant = ?)",
            (status, resolution, time.time(), note, review_id, tenant, tenant),
        )

    # ------------------------------------------------------------------ the nodes

    async def describe_node(self, *, version: str, address: str | None) -> None:
        await self._write_op(
            self._update_job_sync,
            "UPDATE owners SET version = ?, address = ? WHERE owner_id = ?",
            (version, address, self.owner_id),
        )

    async def write_metrics(self, snapshot: bytes) -> None:
        await self._write_op(
            self._update_job_sync,
            "UPDATE owners SET metrics = ?, metrics_at = ? WHERE owner_id = ?",
            (snapshot, time.time(), self.owner_id),
        )

    async def nodes(self) -> list[NodeRecord]:
        rows = await self._run(
            Kind.READ,
            self._rows_sync,
            """SELECT o.owner_id, o.started_at, o.heartbeat_at, o.stopped_at, o.version,
                o.address, o.metrics, o.metrics_at,
                (SELECT count(*) FROM background_jobs AS j WHERE j.owner = o.owner_id)
            FROM owners AS o ORDER BY o.started_at, o.owner_id""",
            (),
        )
        return [node_of(row) for row in rows]
