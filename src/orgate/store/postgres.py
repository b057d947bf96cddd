"""PostgreSQL backend (asyncpg, one connection pool) for several orgate processes.

Hot paths are one statement each, so one network round trip: ``save`` is a single
statement of data-modifying CTEs (response upsert, item upserts, events, session
pointer), ``context`` a single query over the stored ancestor path. Pooled
connections are not reset on release (orgate keeps no session state on them), which
saves a round trip per operation. Times are Unix seconds (``double precision``).

Every asyncpg error is translated (``_call``): a dead connection (killed backend, restarted
or stopped server) raises ``StoreUnavailable``, after one retry on a fresh connection for
the operations that are idempotent (all but ``delete``, retried only when the statement
never left); the pool's other connections are expired at once, so a restart costs no
tail of failures. A session lease whose release failed is released later (``LeaseReleases``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import asyncpg
import orjson

from orgate.store.base import (
    ACTIVE_STATUSES,
    INTERRUPTED_ERROR,
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
    encode_cursor,
    filter_terms,
    live_owners,
    new_owner_id,
    page_of,
    with_id,
)
from orgate.store.codec import SaveRows, dumps, encode_save, loads, rewrite_status
from orgate.store.postgres_shared import Conn, PostgresSharedState
from orgate.store.redaction import redact
from orgate.store.schema import (
    POSTGRES_MIGRATION_LOCK,
    POSTGRES_MIGRATIONS,
    POSTGRES_SCHEMA_VERSION,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

#: What asyncpg raises when the connection, rather than the statement, failed: the server is
#: unreachable, shutting down or restarting, killed our backend (``pg_terminate_backend``), or
#: the socket died; ``InternalClientError`` is a pooled connection whose backend already sent
#: its FATAL goodbye (the statement was refused before it was sent).
_CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    TimeoutError,
    asyncpg.InterfaceError,
    asyncpg.exceptions.InternalClientError,
    asyncpg.PostgresConnectionError,
    asyncpg.exceptions.OperatorInterventionError,
    asyncpg.exceptions.InsufficientResourcesError,
)
#: What failing to connect raises.
_CONNECT_ERRORS: tuple[type[BaseException], ...] = (*_CONNECTION_ERRORS, asyncpg.PostgresError)


def _is_connection_error(exc: BaseException) -> bool:
    # 57014 (a statement timeout or cancel) is an "operator intervention" that leaves the connection
    # fine.
    return not isinstance(exc, asyncpg.exceptions.QueryCanceledError)


def _never_sent(exc: BaseException) -> bool:
    """True when asyncpg refused to send the statement (the connection was already dead)."""
    if isinstance(exc, asyncpg.exceptions.InternalClientError):
        return True
    return isinstance(exc, asyncpg.InterfaceError) and "closed" in str(exc)


def _describe(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


_RESPONSE_COLUMNS = (
    "id, tenant, status, model, created_at, updated_at, previous_response_id, session_id, "
    "deployment, response, request, depth, history_len, owner, cancel_requested, expires_at"
)

_CLAIM = """
INSERT INTO sessions AS s (tenant, session_id, updated_at, created_at, lease_token, lease_owner,
    lease_expires_at) VALUES ($1, $2, $3, $3, $4, $5, $6)
ON CONFLICT (tenant, session_id) DO UPDATE SET lease_token = EXCLUDED.lease_token,
    lease_owner = EXCLUDED.lease_owner, lease_expires_at = EXCLUDED.lease_expires_at
WHERE s.lease_token IS NULL OR s.lease_expires_at <= $3 OR s.lease_token = $4
RETURNING latest_response_id, deployment, hidden
"""

#: The claim of a session that must exist already (a conversation).
_CLAIM_EXISTING = """
UPDATE sessions AS s SET lease_token = $4, lease_owner = $5, lease_expires_at = $6
WHERE s.tenant = $1 AND s.session_id = $2
    AND (s.lease_token IS NULL OR s.lease_expires_at <= $3 OR s.lease_token = $4)
RETURNING latest_response_id, deployment, hidden
"""

_SAVE = """
WITH parent AS (
    SELECT chain, history_len FROM responses
    WHERE $7::text IS NOT NULL AND id = $7 AND tenant = $2
      AND (expires_at IS NULL OR expires_at > $6)
), existing AS (
    SELECT tenant, status FROM responses WHERE id = $1
), up AS (
    INSERT INTO responses AS r (id, tenant, status, model, created_at, updated_at,
        previous_response_id, session_id, deployment, chain, depth, history_len, own_items,
        owner, expires_at, response, request)
    SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9,
        coalesce((SELECT chain FROM parent), '{}'::text[]) || $1::text,
        coalesce(cardinality((SELECT chain FROM parent)), 0),
        coalesce((SELECT history_len FROM parent), 0) + $14,
        $14, $10, $11, $12, $13
    WHERE $7::text IS NULL OR EXISTS (SELECT 1 FROM parent) OR EXISTS (SELECT 1 FROM existing)
    ON CONFLICT (id) DO UPDATE SET
        status = EXCLUDED.status, model = EXCLUDED.model, updated_at = EXCLUDED.updated_at,
        session_id = EXCLUDED.session_id, deployment = EXCLUDED.deployment,
        owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at,
        response = EXCLUDED.response, request = EXCLUDED.request,
        history_len = r.history_len - r.own_items + EXCLUDED.own_items,
        own_items = EXCLUDED.own_items
    WHERE r.tenant = EXCLUDED.tenant
      -- a finished response never goes back to queued / in_progress
      -- (a late save of an earlier state)
      AND NOT (r.status NOT IN ('queued', 'in_progress')
               AND EXCLUDED.status IN ('queued', 'in_progress'))
    RETURNING 1
), its AS (
    INSERT INTO items AS i (tenant, response_id, seq, kind, item_id, data)
    SELECT $2, $1, t.seq, t.kind, t.item_id, t.data
    FROM unnest($15::integer[], $16::text[], $17::text[], $18::bytea[])
        AS t(seq, kind, item_id, data)
    WHERE EXISTS (SELECT 1 FROM up)
    ON CONFLICT (response_id, seq) DO UPDATE SET
        kind = EXCLUDED.kind, item_id = EXCLUDED.item_id, data = EXCLUDED.data
    WHERE i.data IS DISTINCT FROM EXCLUDED.data
), trimmed AS (
    DELETE FROM items
    WHERE response_id = $1 AND seq >= $14 AND EXISTS (SELECT 1 FROM existing)
      AND EXISTS (SELECT 1 FROM up)
), ev AS (
    INSERT INTO response_events (response_id, tenant, data)
    SELECT $1, $2, $19 WHERE $19::bytea IS NOT NULL AND EXISTS (SELECT 1 FROM up)
    ON CONFLICT (response_id) DO UPDATE SET data = EXCLUDED.data
), sess AS (
    INSERT INTO sessions AS s (tenant, session_id, latest_response_id, deployment, updated_at,
        created_at)
    SELECT $2, $8, $1, $9, $6, $6 WHERE $8::text IS NOT NULL AND EXISTS (SELECT 1 FROM up)
    ON CONFLICT (tenant, session_id) DO UPDATE SET
        latest_response_id = EXCLUDED.latest_response_id,
        deployment = coalesce(EXCLUDED.deployment, s.deployment),
        updated_at = EXCLUDED.updated_at
)
SELECT (SELECT count(*) FROM up)::integer AS saved, (SELECT tenant FROM existing) AS owner_tenant,
    (SELECT status FROM existing) AS stored_status
"""

_CONTEXT = """
WITH anc AS (
    SELECT a.rid, a.ord
    FROM responses AS r, unnest(r.chain) WITH ORDINALITY AS a(rid, ord)
    WHERE r.id = $1 AND r.tenant = $2 AND (r.expires_at IS NULL OR r.expires_at > $3)
)
SELECT
    (SELECT count(*) FROM anc)::integer AS n_chain,
    (SELECT count(*) FROM anc JOIN responses AS x ON x.id = anc.rid
        WHERE x.tenant = $2 AND (x.expires_at IS NULL OR x.expires_at > $3))::integer AS n_live,
    (SELECT array_agg(i.data ORDER BY anc.ord, i.seq) FROM anc
        JOIN items AS i ON i.response_id = anc.rid AND i.tenant = $2) AS items
"""

_CONTEXT_ITEMS = """
WITH anc AS (
    SELECT a.rid, a.ord
    FROM responses AS r, unnest(r.chain) WITH ORDINALITY AS a(rid, ord)
    WHERE r.id = $1 AND r.tenant = $2 AND (r.expires_at IS NULL OR r.expires_at > $3)
), its AS (
    SELECT anc.ord, i.seq, i.item_id, i.data FROM anc
        JOIN items AS i ON i.response_id = anc.rid AND i.tenant = $2
)
SELECT
    (SELECT count(*) FROM anc)::integer AS n_chain,
    (SELECT count(*) FROM anc JOIN responses AS x ON x.id = anc.rid
        WHERE x.tenant = $2 AND (x.expires_at IS NULL OR x.expires_at > $3))::integer AS n_live,
    (SELECT array_agg(item_id ORDER BY ord, seq) FROM its) AS ids,
    (SELECT array_agg(data ORDER BY ord, seq) FROM its) AS items
"""

#: A chain's path, whether every response of it is live and how many are still running, and
#: its last response's own items: every link is probed by its primary key, no item of the
#: others is read.
_CHAIN_TAIL = """
SELECT r.chain, c.n_live, c.n_active, it.ids, it.items
FROM responses AS r,
LATERAL (SELECT
        count(*) FILTER (WHERE x.tenant = $2
            AND (x.expires_at IS NULL OR x.expires_at > $3))::integer AS n_live,
        count(*) FILTER (WHERE x.status = ANY($4::text[]))::integer AS n_active
    FROM responses AS x WHERE x.id = ANY(r.chain)) AS c,
LATERAL (SELECT array_agg(i.item_id ORDER BY i.seq) AS ids,
        array_agg(i.data ORDER BY i.seq) AS items
    FROM items AS i WHERE i.response_id = r.id AND i.tenant = $2) AS it
WHERE r.id = $1 AND r.tenant = $2 AND (r.expires_at IS NULL OR r.expires_at > $3)
"""

#: The own items of each of the given responses, in the order given (``found`` false for one
#: that is missing, expired or another tenant's).
_LINK_ITEMS = """
SELECT x.id IS NOT NULL AS found, it.ids, it.items
FROM unnest($1::text[]) WITH ORDINALITY AS a(rid, ord)
LEFT JOIN responses AS x ON x.id = a.rid AND x.tenant = $2
    AND (x.expires_at IS NULL OR x.expires_at > $3)
LEFT JOIN LATERAL (SELECT array_agg(i.item_id ORDER BY i.seq) AS ids,
        array_agg(i.data ORDER BY i.seq) AS items
    FROM items AS i WHERE i.response_id = x.id AND i.tenant = $2) AS it ON true
ORDER BY a.ord
"""

_CONVERSATION_COLUMNS = (
    "session_id, tenant, coalesce(created_at, updated_at) AS created_at, updated_at, metadata,"
    " latest_response_id, hidden"
)

_PRUNE = """
WITH doomed AS (
    DELETE FROM responses
    WHERE created_at < $1 OR (expires_at IS NOT NULL AND expires_at <= $2)
    RETURNING id
), di AS (
    DELETE FROM items WHERE response_id IN (SELECT id FROM doomed)
), de AS (
    DELETE FROM response_events WHERE response_id IN (SELECT id FROM doomed)
), dj AS (
    DELETE FROM background_jobs WHERE response_id IN (SELECT id FROM doomed)
), ds AS (
    DELETE FROM sessions WHERE updated_at < $1 AND (lease_token IS NULL OR lease_expires_at <= $2)
), dw AS (
    DELETE FROM owners WHERE owner_id <> $3 AND heartbeat_at < $4
), da AS (
    DELETE FROM approvals WHERE claimed_at < $1
)
SELECT count(*)::integer FROM doomed
"""


def _split_options(url: str) -> tuple[str, int]:
    """Take orgate's own ``pool_size`` option out of the URL's query string."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    pool_size = 10
    rest = []
    for key, value in query:
        if key == "pool_size":
            pool_size = int(value)
        else:
            rest.append((key, value))
    return urlunsplit(parts._replace(query=urlencode(rest))), pool_size


def _conversation(row: asyncpg.Record) -> Conversation:
    return Conversation(
        id=row["session_id"],
        tenant=row["tenant"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        metadata=loads(row["metadata"]) if row["metadata"] is not None else {},
        latest_response_id=row["latest_response_id"],
        hidden=tuple(row["hidden"] or ()),
    )


def _record(row: asyncpg.Record) -> StoredResponse:
    return StoredResponse(
        id=row["id"],
        tenant=row["tenant"],
        status=row["status"],
        model=row["model"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        previous_response_id=row["previous_response_id"],
        session_id=row["session_id"],
        deployment=row["deployment"],
        response=loads(row["response"]),
        request=loads(row["request"]) if row["request"] is not None else None,
        depth=row["depth"],
        history_len=row["history_len"],
        owner=row["owner"],
        cancel_requested=row["cancel_requested"],
        expires_at=row["expires_at"],
    )


async def _no_reset(conn: asyncpg.Connection) -> None:
    """Pool ``reset`` hook: nothing to undo (orgate sets no session state)."""


def _saved(row: asyncpg.Record, rows: SaveRows, args: SaveArgs) -> bool:
    """What ``_SAVE`` answered: True when it saved, False for a late save of an earlier state of
    a finished response (it stays finished); else the refusal raised."""
    if row["saved"]:
        return True
    tenant = args.tenant
    if (
        row["owner_tenant"] == tenant
        and row["stored_status"] not in ACTIVE_STATUSES
        and rows.status in ACTIVE_STATUSES
    ):
        return False
    if row["owner_tenant"] is not None:
        raise ResponseConflict(f"response id {rows.id} belongs to another tenant")
    if args.previous_response_id is not None:
        raise UnknownResponse(args.previous_response_id)
    raise StoreError(f"response {rows.id} was not saved")


class PostgresStore(PostgresSharedState, ResponseStore):
    """The shared store; create with ``await PostgresStore.open(url)``."""

    backend = "postgresql"

    def __init__(self, url: str, pool: asyncpg.Pool, *, heartbeat_interval: float) -> None:
        self.url = url
        self.owner_id = new_owner_id()
        self.query_count = 0
        self._pool = pool
        self._heartbeat_interval = heartbeat_interval
        self._heartbeat_task: asyncio.Task[None] | None = None
        self._closed = False

    @classmethod
    async def open(
        cls, url: str, *, heartbeat_interval: float = 10.0, connect_timeout: float = 10.0
    ) -> PostgresStore:
        """Connect a pool, create or migrate the schema, register this process as an owner."""
        dsn, pool_size = _split_options(url)
        try:
            pool = await asyncpg.create_pool(
                dsn,
                min_size=1,
                max_size=pool_size,
                reset=_no_reset,
                timeout=connect_timeout,
                command_timeout=60,
            )
        except _CONNECT_ERRORS as exc:
            raise StoreUnavailable(
                f"cannot connect to PostgreSQL at {redact(url)}: {exc or type(exc).__name__}"
            ) from exc
        store = cls(redact(url), pool, heartbeat_interval=heartbeat_interval)
        try:
            await store._migrate()
            await store.heartbeat()
        except BaseException:
            await pool.close()
            raise
        if heartbeat_interval > 0:
            store._heartbeat_task = asyncio.get_running_loop().create_task(
                store._heartbeat_loop(), name="orgate-store-heartbeat"
            )
        return store

    # ------------------------------------------------------------------ plumbing

    async def _call(self, fn: Callable[[Conn], Awaitable[T]], *, idempotent: bool = True) -> T:
        """Run ``fn(conn)`` on a pooled connection, translating asyncpg's errors into the store's.

        A connection that fails under the statement (its backend was killed, the server
        restarted) is closed, the pool's other connections are expired (they died too, most
        likely), and an ``idempotent`` operation is retried once on a fresh connection; a
        non-idempotent one only when the statement certainly never left. Connection-level
        failures raise ``StoreUnavailable``; other database errors ``StoreError``.
        """
        if self._closed:
            raise StoreUnavailable("the store is closed")
        for attempt in (1, 2):
            acquired = False
            try:
                async with self._pool.acquire() as conn:
                    acquired = True
                    try:
                        return await fn(conn)
                    except _CONNECTION_ERRORS as exc:
                        if _is_connection_error(exc):
                            with contextlib.suppress(
                                Exception
                            ):  # already detached when it closed itself
                                conn.terminate()  # never handed out again
                        raise
            except StoreError:
                raise
            except _CONNECTION_ERRORS as exc:
                if not _is_connection_error(exc):
                    raise StoreError(f"PostgreSQL at {self.url}: {exc}") from exc
                if acquired:
                    await self._pool.expire_connections()
                    # Not after a timeout: a server that did not answer in time would not now.
                    if (
                        attempt == 1
                        and not isinstance(exc, TimeoutError)
                        and (idempotent or _never_sent(exc))
                    ):
                        log.info(
                            "PostgreSQL connection lost (%s); retrying on a fresh connection",
                            _describe(exc),
                        )
                        continue
                raise StoreUnavailable(f"PostgreSQL at {self.url}: {_describe(exc)}") from exc
            except asyncpg.PostgresError as exc:
                raise StoreError(f"PostgreSQL at {self.url}: {exc}") from exc
        raise AssertionError("unreachable")  # pragma: no cover

    async def _fetchrow(
        self, sql: str, *args: Any, idempotent: bool = True
    ) -> asyncpg.Record | None:
        async def run(conn: Conn) -> asyncpg.Record | None:
            self.query_count += 1
            return await conn.fetchrow(sql, *args)

        return await self._call(run, idempotent=idempotent)

    async def _fetch(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        async def run(conn: Conn) -> list[asyncpg.Record]:
            self.query_count += 1
            return await conn.fetch(sql, *args)

        return await self._call(run)

    async def _execute(self, sql: str, *args: Any) -> str:
        async def run(conn: Conn) -> str:
            self.query_count += 1
            return await conn.execute(sql, *args)

        return await self._call(run)

    async def _in_tx(self, fn: Callable[[Conn], Awaitable[T]]) -> T:
        """``_call`` inside one transaction (retried whole, like any idempotent operation)."""

        async def run(conn: Conn) -> T:
            async with conn.transaction():
                self.query_count += 2  # BEGIN, COMMIT
                return await fn(conn)

        return await self._call(run)

    async def _migrate(self) -> None:
        async def migrate(conn: Conn) -> None:
            self.query_count += 3
            await conn.execute("SELECT pg_advisory_xact_lock($1)", POSTGRES_MIGRATION_LOCK)
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_version (version integer NOT NULL)"
            )
            current = await conn.fetchval("SELECT max(version) FROM schema_version") or 0
            if current > POSTGRES_SCHEMA_VERSION:
                raise SchemaTooNew(current, POSTGRES_SCHEMA_VERSION, self.url)
            for version in range(current + 1, POSTGRES_SCHEMA_VERSION + 1):
                for statement in POSTGRES_MIGRATIONS[version]:
                    await conn.execute(statement)
                await conn.execute("DELETE FROM schema_version")
                await conn.execute("INSERT INTO schema_version (version) VALUES ($1)", version)

        await self._in_tx(migrate)

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
        if args.job is None:
            row = await self._fetchrow(_SAVE, *self._save_params(rows, args))
            assert row is not None
            _saved(row, rows, args)
            return
        job = args.job

        async def save(conn: Conn) -> None:
            await self._job_check(conn, rows.id, job)
            self.query_count += 1
            row = await conn.fetchrow(_SAVE, *self._save_params(rows, args))
            assert row is not None
            if _saved(row, rows, args):
                await self._job_write(conn, rows.id, args.tenant, args.session_id, job)

        await self._in_tx(save)

    def _save_params(self, rows: SaveRows, args: SaveArgs) -> list[Any]:
        return [
            rows.id,
            args.tenant,
            rows.status,
            rows.model,
            rows.created_at,
            rows.now,
            args.previous_response_id,
            args.session_id,
            args.deployment,
            self.owner_id,
            args.expires_at,
            rows.body,
            rows.request,
            rows.size,
            *rows.item_columns(),
            args.events,
        ]

    async def get(self, response_id: str, tenant: str) -> StoredResponse | None:
        row = await self._fetchrow(
            f"""SELECT {_RESPONSE_COLUMNS} FROM responses WHERE id = $1 AND tenant = $2
            AND (expires_at IS NULL OR expires_at > $3)""",
            response_id,
            tenant,
            time.time(),
        )
        return _record(row) if row is not None else None

    async def delete(self, response_id: str, tenant: str) -> bool:
        row = await self._fetchrow(
            """WITH gone AS (DELETE FROM responses WHERE id = $1 AND tenant = $2 RETURNING id),
            di AS (DELETE FROM items WHERE response_id IN (SELECT id FROM gone)),
            de AS (DELETE FROM response_events WHERE response_id IN (SELECT id FROM gone)),
            dj AS (DELETE FROM background_jobs WHERE response_id IN (SELECT id FROM gone))
            SELECT count(*)::integer AS n FROM gone""",
            response_id,
            tenant,
            # a replay would answer "not found" for what the first attempt deleted
            idempotent=False,
        )
        return bool(row and row["n"])

    async def context(self, response_id: str, tenant: str) -> list[dict[str, Any]] | None:
        row = await self._fetchrow(_CONTEXT, response_id, tenant, time.time())
        if row is None or row["n_chain"] == 0 or row["n_chain"] != row["n_live"]:
            return None
        return [loads(data) for data in row["items"] or ()]

    async def context_items(
        self, response_id: str, tenant: str
    ) -> list[tuple[str, dict[str, Any]]] | None:
        row = await self._fetchrow(_CONTEXT_ITEMS, response_id, tenant, time.time())
        if row is None or row["n_chain"] == 0 or row["n_chain"] != row["n_live"]:
            return None
        return _pairs(row["ids"], row["items"])

    async def chain_tail(self, response_id: str, tenant: str) -> ChainTail | None:
        row = await self._fetchrow(
            _CHAIN_TAIL, response_id, tenant, time.time(), list(ACTIVE_STATUSES)
        )
        if row is None or row["n_live"] != len(row["chain"]):
            return None  # missing, or a link of its chain was deleted or has expired
        return ChainTail(
            tuple(row["chain"]), _pairs(row["ids"], row["items"]), row["n_active"] == 0
        )

    async def link_items(
        self, response_ids: Sequence[str], tenant: str
    ) -> list[list[tuple[str, dict[str, Any]]]] | None:
        rows = await self._fetch(_LINK_ITEMS, list(response_ids), tenant, time.time())
        if not all(row["found"] for row in rows):
            return None
        return [_pairs(row["ids"], row["items"]) for row in rows]

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
        if await self.get(response_id, tenant) is None:
            return None
        direction, cmp = ("ASC", ">") if order == "asc" else ("DESC", "<")
        cursor = ""
        args: list[Any] = [response_id, tenant, limit + 1]
        if after is not None:
            cursor = f"""AND seq {cmp} (SELECT seq FROM items WHERE response_id = $1
                AND tenant = $2 AND kind = 'input' AND item_id = $4 ORDER BY seq LIMIT 1)"""
            args.append(after)
        rows = await self._fetch(
            f"""SELECT item_id, data FROM items WHERE response_id = $1 AND tenant = $2
                AND kind = 'input' {cursor} ORDER BY seq {direction} LIMIT $3""",
            *args,
        )
        return page_of([(r["item_id"], loads(r["data"])) for r in rows], limit)

    async def get_item(self, item_id: str, tenant: str) -> dict[str, Any] | None:
        row = await self._fetchrow(
            """SELECT i.data FROM items AS i JOIN responses AS r ON r.id = i.response_id
            WHERE i.tenant = $1 AND i.item_id = $2 AND r.tenant = i.tenant
              AND (r.expires_at IS NULL OR r.expires_at > $3)
            ORDER BY i.pk LIMIT 1""",
            tenant,
            item_id,
            time.time(),
        )
        return with_id(loads(row["data"]), item_id) if row is not None else None

    async def events(self, response_id: str, tenant: str) -> bytes | None:
        row = await self._fetchrow(
            "SELECT data FROM response_events WHERE response_id = $1 AND tenant = $2",
            response_id,
            tenant,
        )
        return bytes(row["data"]) if row is not None else None

    async def list_responses(
        self, where: ResponseFilter, *, limit: int = 50, cursor: str | None = None
    ) -> ResponsesPage:
        terms = filter_terms(where)
        params: list[Any] = [value for _, value in terms] + [time.time()]
        clauses = [f"{column} = ${n}" for n, (column, _) in enumerate(terms, 1)]
        clauses.append(f"(expires_at IS NULL OR expires_at > ${len(params)})")
        if cursor:
            created, response_id = decode_cursor(cursor, 2)
            params += [float(created), response_id]
            # (created_at, id) descending walks responses_created backwards.
            clauses.append(f"(created_at, id) < (${len(params) - 1}, ${len(params)})")
        params.append(limit + 1)
        rows = await self._fetch(
            f"SELECT {_RESPONSE_COLUMNS} FROM responses WHERE {' AND '.join(clauses)}"
            f" ORDER BY created_at DESC, id DESC LIMIT ${len(params)}",
            *params,
        )
        more = len(rows) > limit
        records = [_record(row) for row in rows[:limit]]
        last = records[-1] if more else None
        return ResponsesPage(records, encode_cursor(last.created_at, last.id) if last else None)

    # ------------------------------------------------------------------ background mode

    async def request_cancel(self, response_id: str, tenant: str) -> bool:
        result = await self._execute(
            "UPDATE responses SET cancel_requested = true WHERE id = $1 AND tenant = $2",
            response_id,
            tenant,
        )
        return result != "UPDATE 0"

    async def cancel_requested(self, response_id: str, tenant: str) -> bool:
        row = await self._fetchrow(
            "SELECT cancel_requested FROM responses WHERE id = $1 AND tenant = $2",
            response_id,
            tenant,
        )
        return bool(row and row["cancel_requested"])

    async def heartbeat(self) -> None:
        now = time.time()
        await self._execute(
            """INSERT INTO owners (owner_id, started_at, heartbeat_at) VALUES ($1, $2, $2)
            ON CONFLICT (owner_id) DO UPDATE SET heartbeat_at = EXCLUDED.heartbeat_at""",
            self.owner_id,
            now,
        )

    async def recover_interrupted(self, *, stale_after: float = 30.0) -> list[str]:
        now = time.time()

        async def recover(conn: Conn) -> list[str]:
            self.query_count += 2
            owners = await conn.fetch("SELECT owner_id, heartbeat_at, stopped_at FROM owners")
            alive = live_owners(
                ((r["owner_id"], r["heartbeat_at"], r["stopped_at"]) for r in owners),
                self.owner_id,
                now,
                stale_after,
            )
            rows = await conn.fetch(
                """SELECT id, owner, response FROM responses WHERE status = ANY($1::text[])
                AND (owner IS NULL OR owner <> ALL($2::text[]))
                AND id NOT IN (SELECT response_id FROM background_jobs) FOR UPDATE SKIP LOCKED""",
                list(ACTIVE_STATUSES),
                list(alive),
            )
            rows = [r for r in rows if r["owner"] not in alive]
            if rows:
                self.query_count += 1
                await conn.execute(
                    """UPDATE responses AS r
                    SET status = 'failed', response = t.body, updated_at = $3
                    FROM unnest($1::text[], $2::bytea[]) AS t(id, body) WHERE r.id = t.id""",
                    [r["id"] for r in rows],
                    [rewrite_status(r["response"], "failed", INTERRUPTED_ERROR) for r in rows],
                    now,
                )
            dead = [r["owner_id"] for r in owners if r["owner_id"] not in alive]
            if dead:
                self.query_count += 1
                await conn.execute(
                    """UPDATE sessions SET lease_token = NULL, lease_owner = NULL,
                        lease_expires_at = NULL WHERE lease_owner = ANY($1::text[])
                        AND lease_token NOT IN (SELECT session_token FROM background_jobs
                            WHERE session_token IS NOT NULL)""",
                    dead,
                )
            return [r["id"] for r in rows]

        return await self._in_tx(recover)

    # ------------------------------------------------------------------ sessions

    async def begin_session_turn(
        self, tenant: str, session_id: str, *, lease_seconds: float = 600.0, create: bool = True
    ) -> SessionTurn:
        now = time.time()
        token = uuid.uuid4().hex
        expires = now + lease_seconds
        try:
            # Idempotent for this token: a retry after a lost connection (whose first attempt
            # may have committed) finds the lease already its own.
            row = await self._fetchrow(
                _CLAIM if create else _CLAIM_EXISTING,
                tenant,
                session_id,
                now,
                token,
                self.owner_id,
                expires,
            )
        except StoreUnavailable:
            # The claim may have committed before the connection was lost: release it later.
            self.lease_releases.add(SessionTurn(tenant, session_id, token, None, None, expires))
            raise
        if row is None:
            if not create and await self.get_conversation(session_id, tenant) is None:
                raise UnknownSession(tenant, session_id)
            raise SessionBusy(tenant, session_id)
        return SessionTurn(
            tenant,
            session_id,
            token,
            row["latest_response_id"],
            row["deployment"],
            expires,
            tuple(row["hidden"] or ()),
        )

    # ------------------------------------------------------------------ conversations

    async def create_conversation(
        self, tenant: str, conversation_id: str, *, metadata: dict[str, str]
    ) -> Conversation:
        now = time.time()
        row = await self._fetchrow(
            f"""INSERT INTO sessions (tenant, session_id, updated_at, created_at, metadata)
            VALUES ($1, $2, $3, $3, $4) ON CONFLICT (tenant, session_id) DO NOTHING
            RETURNING {_CONVERSATION_COLUMNS}""",
            tenant,
            conversation_id,
            now,
            dumps(metadata),
            idempotent=False,  # a replay would find the row its first attempt made
        )
        if row is None:
            raise StoreError(f"conversation {conversation_id!r} exists already")
        return _conversation(row)

    async def get_conversation(self, conversation_id: str, tenant: str) -> Conversation | None:
        row = await self._fetchrow(
            f"SELECT {_CONVERSATION_COLUMNS} FROM sessions WHERE tenant = $1 AND session_id = $2",
            tenant,
            conversation_id,
        )
        return _conversation(row) if row is not None else None

    async def update_conversation(
        self, conversation_id: str, tenant: str, *, metadata: dict[str, str]
    ) -> Conversation | None:
        row = await self._fetchrow(
            f"""UPDATE sessions SET metadata = $3 WHERE tenant = $1 AND session_id = $2
            RETURNING {_CONVERSATION_COLUMNS}""",
            tenant,
            conversation_id,
            dumps(metadata),
        )
        return _conversation(row) if row is not None else None

    async def delete_conversation(self, conversation_id: str, tenant: str) -> bool:
        row = await self._fetchrow(
            """WITH gone AS (
                DELETE FROM sessions WHERE tenant = $1 AND session_id = $2
                    AND (lease_token IS NULL OR lease_expires_at <= $3) RETURNING 1
            )
            SELECT (SELECT count(*) FROM gone)::integer AS deleted,
                EXISTS (SELECT 1 FROM sessions WHERE tenant = $1 AND session_id = $2) AS here""",
            tenant,
            conversation_id,
            time.time(),
            idempotent=False,  # a replay would answer "not found" for what the first deleted
        )
        assert row is not None
        if row["deleted"]:
            return True
        if row["here"]:
            raise SessionBusy(tenant, conversation_id)
        return False

    async def hide_item(self, conversation_id: str, tenant: str, item_id: str) -> bool:
        result = await self._execute(
            """UPDATE sessions SET hidden = array_append(coalesce(hidden, '{}'::text[]), $3)
            WHERE tenant = $1 AND session_id = $2""",
            tenant,
            conversation_id,
            item_id,
        )
        return result != "UPDATE 0"

    async def _end_turn(self, turn: SessionTurn) -> None:
        await self._execute(
            """UPDATE sessions SET lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL
            WHERE tenant = $1 AND session_id = $2 AND lease_token = $3""",
            turn.tenant,
            turn.session_id,
            turn.token,
        )

    # ------------------------------------------------------------------ MCP approvals

    async def claim_approval(
        self, tenant: str, approval_request_id: str, response_id: str
    ) -> ApprovalClaim | None:
        # Two statements: after the insert met a row another transaction committed meanwhile, only
        # a new statement's snapshot sees it (READ COMMITTED). A claim released in between (its
        # response ran nothing) is tried again.
        for _ in range(3):
            if await self._fetchrow(
                """INSERT INTO approvals (tenant, approval_request_id, response_id, claimed_at)
                VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING RETURNING 1""",
                tenant,
                approval_request_id,
                response_id,
                time.time(),
            ):
                return None
            row = await self._fetchrow(
                """SELECT response_id, claimed_at, outcome FROM approvals
                WHERE tenant = $1 AND approval_request_id = $2""",
                tenant,
                approval_request_id,
            )
            if row is not None:
                return claim_of(approval_request_id, response_id, tuple(row))
        raise StoreError(f"approval {approval_request_id!r} is claimed and released over and over")

    async def settle_approval(
        self, tenant: str, approval_request_id: str, response_id: str, outcome: dict[str, Any]
    ) -> None:
        await self._execute(
            """UPDATE approvals SET outcome = $4, settled_at = $5
            WHERE tenant = $1 AND approval_request_id = $2 AND response_id = $3""",
            tenant,
            approval_request_id,
            response_id,
            orjson.dumps(outcome).decode(),
            time.time(),
        )

    async def release_approval(
        self, tenant: str, approval_request_id: str, response_id: str
    ) -> None:
        await self._execute(
            """DELETE FROM approvals WHERE tenant = $1 AND approval_request_id = $2
            AND response_id = $3 AND outcome IS NULL""",
            tenant,
            approval_request_id,
            response_id,
        )

    # ------------------------------------------------------------------ console

    async def revoke_console_session(self, session_id: str, expires_at: float) -> None:
        await self._execute(
            """WITH gone AS (DELETE FROM console_revoked WHERE expires_at <= $3)
            INSERT INTO console_revoked (session_id, expires_at) VALUES ($1, $2)
            ON CONFLICT (session_id) DO UPDATE SET expires_at = EXCLUDED.expires_at""",
            session_id,
            expires_at,
            time.time(),
        )

    async def console_session_revoked(self, session_id: str) -> bool:
        row = await self._fetchrow(
            "SELECT 1 FROM console_revoked WHERE session_id = $1", session_id
        )
        return row is not None

    async def signin_failed(
        self, subjects: Sequence[str], *, now: float, forget_after: float
    ) -> list[int]:
        stale = now - forget_after
        rows = await self._fetch(
            """WITH gone AS (
                DELETE FROM signin_throttle WHERE updated_at < $2 AND blocked_until < $3
                    AND subject <> ALL($1::text[])
            )
            INSERT INTO signin_throttle AS t (subject, failures, updated_at, blocked_until)
            SELECT s, 1, $3, 0 FROM unnest($1::text[]) AS s
            ON CONFLICT (subject) DO UPDATE SET
                failures = CASE WHEN t.updated_at < $2 THEN 1 ELSE t.failures + 1 END,
                updated_at = $3
            RETURNING subject, failures""",
            list(subjects),
            stale,
            now,
        )
        counts = {row["subject"]: row["failures"] for row in rows}
        return [counts[subject] for subject in subjects]

    async def signin_block(self, subject: str, until: float) -> None:
        await self._execute(
            """UPDATE signin_throttle SET blocked_until = GREATEST(blocked_until, $2)
            WHERE subject = $1""",
            subject,
            until,
        )

    async def signin_blocked_until(self, subjects: Sequence[str]) -> float:
        row = await self._fetchrow(
            "SELECT max(blocked_until) FROM signin_throttle WHERE subject = ANY($1::text[])",
            list(subjects),
        )
        return float(row[0] or 0.0) if row is not None else 0.0

    # ------------------------------------------------------------------ retention

    async def prune(self, *, older_than: float) -> int:
        now = time.time()
        cutoff = now - older_than
        row = await self._fetchrow(_PRUNE, cutoff, now, self.owner_id, min(cutoff, now - 86400))
        return row[0] if row is not None else 0

    async def tenants(self) -> dict[str, int]:
        async def read(conn: Conn) -> list[asyncpg.Record]:
            self.query_count += 1
            return await conn.fetch(
                """SELECT tenant, sum(n)::bigint AS n FROM (
                    SELECT tenant, count(*) AS n FROM responses GROUP BY tenant
                    UNION ALL SELECT DISTINCT tenant, 0 FROM sessions
                ) AS t GROUP BY tenant ORDER BY tenant"""
            )

        return {row["tenant"]: int(row["n"]) for row in await self._call(read)}

    async def rename_tenant(self, old: str, new: str) -> int:
        async def move(conn: Conn) -> int:
            self.query_count += 9
            # Every row of both tenants is locked first: a save that races the rename waits for it.
            await conn.execute(
                "LOCK TABLE responses, items, response_events, sessions, approvals,"
                " review_entries"
                " IN SHARE ROW EXCLUSIVE MODE"
            )
            if await conn.fetchval(
                "SELECT EXISTS (SELECT 1 FROM responses WHERE tenant = $1) OR EXISTS "
                "(SELECT 1 FROM sessions WHERE tenant = $1)",
                new,
            ):
                raise TenantInUse(
                    f"tenant {new!r} already holds data: two tenants' data are never merged"
                )
            if await conn.fetchval(
                "SELECT EXISTS (SELECT 1 FROM responses WHERE tenant = $1 AND status "
                "IN ('queued', 'in_progress'))",
                old,
            ):
                raise TenantInUse(
                    f"tenant {old!r} has a response in progress: stop the servers that "
                    "use this store first"
                )
            moved = await conn.execute(
                "UPDATE responses SET tenant = $1 WHERE tenant = $2", new, old
            )
            for table in ("items", "response_events", "sessions", "approvals", "review_entries"):
                await conn.execute(f"UPDATE {table} SET tenant = $1 WHERE tenant = $2", new, old)  # noqa: S608 - fixed names
            return int(moved.split()[-1])

        return await self._in_tx(move)

    async def count_prunable(self, *, older_than: float) -> int:
        now = time.time()
        row = await self._fetchrow(
            "SELECT count(*)::integer FROM responses"
            " WHERE created_at < $1 OR (expires_at IS NOT NULL AND expires_at <= $2)",
            now - older_than,
            now,
        )
        return row[0] if row is not None else 0

    async def stats(self) -> StoreStats:
        async def read(conn: Conn) -> tuple[dict[str, int], asyncpg.Record | None, int]:
            self.query_count += 3
            by_status = {
                r["status"]: r["n"]
                for r in await conn.fetch(
                    "SELECT status, count(*)::integer AS n FROM responses GROUP BY status"
                )
            }
            row = await conn.fetchrow(
                """SELECT min(created_at) AS oldest, max(created_at) AS newest,
                    (SELECT count(*) FROM items)::integer AS items,
                    (SELECT count(*) FROM sessions)::integer AS sessions,
                    (SELECT count(*) FROM response_events)::integer AS events,
                    (SELECT max(version) FROM schema_version) AS version
                FROM responses"""
            )
            size: int = await conn.fetchval("SELECT pg_database_size(current_database())")
            return by_status, row, size

        by_status, row, size = await self._call(read)
        assert row is not None
        return StoreStats(
            backend="postgresql",
            location=self.url,
            schema_version=row["version"],
            responses=sum(by_status.values()),
            by_status=by_status,
            items=row["items"],
            sessions=row["sessions"],
            events=row["events"],
            oldest_created_at=row["oldest"],
            newest_created_at=row["newest"],
            extra={"database_bytes": size},
        )

    async def close(self) -> None:
        if self._closed:
            return
        if self._heartbeat_task is not None:
            self._heartbeat_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heartbeat_task
        await self.lease_releases.close()
        try:
            await self._execute(
                "UPDATE owners SET stopped_at = $2 WHERE owner_id = $1", self.owner_id, time.time()
            )
        except StoreError:
            log.warning("could not mark store owner stopped", exc_info=True)
        finally:
            self._closed = True
            await self._pool.close()


def _pairs(ids: list[str] | None, items: list[bytes] | None) -> list[tuple[str, dict[str, Any]]]:
    """(id, item) pairs of the ids and encoded items of one query (None: no item)."""
    return [(item_id, loads(data)) for item_id, data in zip(ids or (), items or (), strict=True)]
