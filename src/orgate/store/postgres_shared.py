"""PostgreSQL: the state every node serving one store shares besides responses and sessions.

The leases of durable background responses (``background_jobs``: a claim is one
``UPDATE … WHERE response_id = (SELECT … FOR UPDATE SKIP LOCKED)``, so two nodes never take
the same one), the review queue (``review_entries``) and what each node says of itself for
the console's node list (the ``owners`` row's version, address and metrics snapshot).
``PostgresSharedState`` is a base of ``PostgresStore``, which provides the plumbing.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypeVar

import asyncpg
import asyncpg.pool

from orgate.store.base import (
    REVIEW_COLUMNS,
    BackgroundJob,
    JobProgress,
    JobWrite,
    LeaseLost,
    NodeRecord,
    SessionTurn,
    StoredReview,
)
from orgate.store.codec import dumps, loads, rewrite_status
from orgate.store.sqlite_shared import dead_owners, node_of, review_of, review_scope

T = TypeVar("T")
#: What the pool lends: the connection every query of the store runs on.
Conn: TypeAlias = "asyncpg.pool.PoolConnectionProxy[asyncpg.Record]"

_CLAIM = """
UPDATE background_jobs AS j SET owner = $1, token = $2, lease_expires_at = $3,
    attempts = j.attempts + 1, events = NULL
WHERE j.response_id = (
    SELECT response_id FROM background_jobs
    WHERE lease_expires_at <= $4 OR owner = ANY($5::text[])
    ORDER BY lease_expires_at LIMIT 1 FOR UPDATE SKIP LOCKED
)
RETURNING j.response_id, j.tenant, j.attempts, j.request, j.session_id, j.session_token,
    j.delivered_at, j.effects_at
"""

_PROGRESS = """
SELECT r.status, j.attempts, j.events, j.delivered_at,
    CASE WHEN j.response_id IS NULL THEN e.data END AS final
FROM responses AS r
LEFT JOIN background_jobs AS j ON j.response_id = r.id
LEFT JOIN response_events AS e ON e.response_id = r.id
WHERE r.id = $1 AND r.tenant = $2 AND (r.expires_at IS NULL OR r.expires_at > $3)
"""


def _dollars(n: int) -> str:
    return f"${n}"


class PostgresSharedState:
    """Background leases, the review queue and the node list, on PostgreSQL (a base of
    ``PostgresStore``, which provides the plumbing below)."""

    owner_id: str
    query_count: int

    if TYPE_CHECKING:

        async def _fetchrow(
            self, sql: str, *args: Any, idempotent: bool = True
        ) -> asyncpg.Record | None: ...

        async def _fetch(self, sql: str, *args: Any) -> list[asyncpg.Record]: ...

        async def _execute(self, sql: str, *args: Any) -> str: ...

        async def _in_tx(self, fn: Callable[[Conn], Awaitable[T]]) -> T: ...

    # ------------------------------------------------------------------ a save's lease

    async def _job_check(self, conn: Conn, response_id: str, job: JobWrite | None) -> None:
        """Before a save (in its transaction): ``LeaseLost`` unless ``job``'s token holds the
        lease, which stays locked until the save commits (a claim waits for it)."""
        if job is None or job.action == "lease":
            return
        self.query_count += 1
        held = await conn.fetchrow(
            "SELECT 1 FROM background_jobs WHERE response_id = $1 AND token = $2 FOR UPDATE",
            response_id,
            job.token,
        )
        if held is None:
            raise LeaseLost(response_id)

    async def _job_write(
        self,
        conn: Conn,
        response_id: str,
        tenant: str,
        session_id: str | None,
        job: JobWrite | None,
    ) -> None:
        """After a save (in its transaction): the lease taken, or the job ended."""
        if job is None or job.action == "hold":
            return
        self.query_count += 1
        if job.action == "finish":
            await conn.execute("DELETE FROM background_jobs WHERE response_id = $1", response_id)
            return
        now = time.time()
        await conn.execute(
            """INSERT INTO background_jobs (response_id, tenant, owner, token, lease_expires_at,
                request, session_id, session_token, created_at)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (response_id) DO NOTHING""",
            response_id,
            tenant,
            self.owner_id,
            job.token,
            now + job.lease_seconds,
            dumps(job.request or {}),
            session_id,
            job.session_token,
            now,
        )

    # ------------------------------------------------------------------ background leases

    async def renew_background(self, *, lease_seconds: float) -> set[str]:
        rows = await self._fetch(
            """UPDATE background_jobs SET lease_expires_at = $2 WHERE owner = $1
            RETURNING response_id""",
            self.owner_id,
            time.time() + lease_seconds,
        )
        return {row[0] for row in rows}

    async def claim_background(self, *, lease_seconds: float) -> BackgroundJob | None:
        now = time.time()
        token = uuid.uuid4().hex

        async def claim(conn: Conn) -> BackgroundJob | None:
            self.query_count += 2
            owners = await conn.fetch("SELECT owner_id, stopped_at FROM owners")
            dead = dead_owners([tuple(row) for row in owners], self.owner_id)
            row = await conn.fetchrow(_CLAIM, self.owner_id, token, now + lease_seconds, now, dead)
            if row is None:
                return None
            session = None
            if row["session_token"] is not None:
                self.query_count += 1
                held = await conn.fetchrow(
                    """UPDATE sessions SET lease_owner = $1,
                        lease_expires_at = GREATEST(lease_expires_at, $2)
                    WHERE tenant = $3 AND session_id = $4 AND lease_token = $5
                    RETURNING latest_response_id, deployment, lease_expires_at""",
                    self.owner_id,
                    now + 600.0,
                    row["tenant"],
                    row["session_id"],
                    row["session_token"],
                )
                if held is not None:
                    session = SessionTurn(
                        row["tenant"], row["session_id"], row["session_token"], *held
                    )
            return BackgroundJob(
                row["response_id"],
                row["tenant"],
                token,
                row["attempts"],
                loads(row["request"]),
                session,
                row["session_token"] is not None and session is None,
                row["delivered_at"] is not None,
                row["effects_at"] is not None,
            )

        return await self._in_tx(claim)

    async def mark_background(
        self,
        response_id: str,
        what: Literal["delivered", "effects"],
        *,
        token: str | None = None,
        attempts: int | None = None,
    ) -> bool:
        column = "delivered_at" if what == "delivered" else "effects_at"
        done = await self._execute(
            f"""UPDATE background_jobs SET {column} = coalesce({column}, $2)
            WHERE response_id = $1 AND (($3::text IS NOT NULL AND token = $3)
                OR ($4::integer IS NOT NULL AND attempts = $4))""",
            response_id,
            time.time(),
            token,
            attempts,
        )
        return done != "UPDATE 0"

    async def write_background_events(self, response_id: str, token: str, events: bytes) -> bool:
        done = await self._execute(
            "UPDATE background_jobs SET events = $3 WHERE response_id = $1 AND token = $2",
            response_id,
            token,
            events,
        )
        return done != "UPDATE 0"

    async def background_progress(self, response_id: str, tenant: str) -> JobProgress | None:
        row = await self._fetchrow(_PROGRESS, response_id, tenant, time.time())
        if row is None:
            return None
        attempts = row["attempts"]
        events = row["events"] if attempts is not None else row["final"]
        return JobProgress(
            row["status"],
            attempts,
            bytes(events) if events is not None else None,
            row["delivered_at"] is not None,
        )

    async def end_background(
        self, job: BackgroundJob, status: str, error: dict[str, Any] | None
    ) -> bool:
        async def end(conn: Conn) -> bool:
            self.query_count += 1
            held = await conn.fetchrow(
                """SELECT r.response FROM background_jobs AS j LEFT JOIN responses AS r
                    ON r.id = j.response_id WHERE j.response_id = $1 AND j.token = $2
                FOR UPDATE OF j""",
                job.response_id,
                job.token,
            )
            if held is None:
                return False
            self.query_count += 2
            if held[0] is not None:
                self.query_count += 1
                await conn.execute(
                    """UPDATE responses SET status = $2, response = $3, updated_at = $4, owner = $5
                    WHERE id = $1 AND status IN ('queued', 'in_progress')""",
                    job.response_id,
                    status,
                    rewrite_status(held[0], status, error),
                    time.time(),
                    self.owner_id,
                )
            await conn.execute(
                "DELETE FROM background_jobs WHERE response_id = $1", job.response_id
            )
            if job.session is not None:
                await conn.execute(
                    """UPDATE sessions SET lease_token = NULL, lease_owner = NULL,
                        lease_expires_at = NULL
                    WHERE tenant = $1 AND session_id = $2 AND lease_token = $3""",
                    job.tenant,
                    job.session.session_id,
                    job.session.token,
                )
            return True

        return await self._in_tx(end)

    # ------------------------------------------------------------------ the review queue

    async def add_reviews(self, entries: Sequence[StoredReview]) -> int:
        if not entries:
            return 0
        columns = list(zip(*(dataclasses.astuple(entry) for entry in entries), strict=True))
        row = await self._fetchrow(
            f"""WITH added AS (
                INSERT INTO review_entries ({REVIEW_COLUMNS})
                SELECT * FROM unnest($1::text[], $2::text[], $3::float8[], $4::text[],
                    $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[],
                    $11::text[], $12::text[], $13::text[], $14::text[], $15::float8[], $16::text[])
                ON CONFLICT (id) DO NOTHING RETURNING 1
            ) SELECT count(*)::integer FROM added""",
            *(list(column) for column in columns),
        )
        return int(row[0]) if row is not None else 0

    async def list_reviews(
        self, status: str | None, tenant: str | None, *, limit: int, offset: int
    ) -> list[StoredReview]:
        where, args = review_scope(status, tenant, _dollars)
        n = len(args)
        rows = await self._fetch(
            f"SELECT {REVIEW_COLUMNS} FROM review_entries{where}"
            f" ORDER BY created_at, id LIMIT ${n + 1} OFFSET ${n + 2}",
            *args,
            limit,
            offset,
        )
        return [review_of(tuple(row)) for row in rows]

    async def count_reviews(self, status: str | None, tenant: str | None) -> int:
        where, args = review_scope(status, tenant, _dollars)
        row = await self._fetchrow(f"SELECT count(*) FROM review_entries{where}", *args)
        return int(row[0]) if row is not None else 0

    async def get_review(
        self, review_id: str | None, tenant: str | None, *, response_id: str | None = None
    ) -> StoredReview | None:
        column, key = ("id", review_id) if review_id is not None else ("response_id", response_id)
        row = await self._fetchrow(
            f"""SELECT {REVIEW_COLUMNS} FROM review_entries WHERE {column} = $1
            AND ($2::text IS NULL OR tenant = $2) LIMIT 1""",
            key,
            tenant,
        )
        return review_of(tuple(row)) if row is not None else None

    async def finish_review(
        self,
        review_id: str,
        status: str,
        resolution: str | None,
        note: str | None,
        tenant: str | None,
    ) -> bool:
        done = await self._execute(
            """UPDATE review_entries SET status = $2, resolution = $3, resolved_at = $4,
                note = $5
            WHERE id = $1 AND status = 'pending' AND ($6::text IS NULL OR tenant = $6)""",
            review_id,
            status,
            resolution,
            time.time(),
            note,
            tenant,
        )
        return done != "UPDATE 0"

    # ------------------------------------------------------------------ the nodes

    async def describe_node(self, *, version: str, address: str | None) -> None:
        await self._execute(
            "UPDATE owners SET version = $2, address = $3 WHERE owner_id = $1",
            self.owner_id,
            version,
            address,
        )

    async def write_metrics(self, snapshot: bytes) -> None:
        await self._execute(
            "UPDATE owners SET metrics = $2, metrics_at = $3 WHERE owner_id = $1",
            self.owner_id,
            snapshot,
            time.time(),
        )

    async def nodes(self) -> list[NodeRecord]:
        rows = await self._fetch(
            """SELECT o.owner_id, o.started_at, o.heartbeat_at, o.stopped_at, o.version,
                o.address, o.metrics, o.metrics_at,
                (SELECT count(*) FROM background_jobs AS j WHERE j.owner = o.owner_id)::integer
            FROM owners AS o ORDER BY o.started_at, o.owner_id"""
        )
        return [node_of(row) for row in rows]
