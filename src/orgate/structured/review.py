"""The review queue: attempts whose budget was spent, kept for a human.

The server keeps it in the response store (``StoreReviews``, ``review_store.py``: one queue for
every process and machine sharing the store), or, with the store disabled, in a SQLite file of
its own (``FileReviews`` over ``ReviewQueue``); both behind the async ``Reviews``. A review file
left by an earlier orgate is imported into the store once (``review_store.py``).

``ReviewQueue(path)`` is that file: it names the database; the first ``add`` creates it (owner-only,
``orgate.datadir``), the first use of an existing one migrates it, and reading a queue that
does not exist yet finds it empty and creates nothing. Every call opens its own short
connection, so the queue is safe to use from worker threads and from several processes at
once (WAL journal). The SafetyNet calls ``add`` through ``asyncio.to_thread``; the CLI
(``orgate review list|show|resolve``) and the HTTP endpoints use
``list``/``get``/``resolve``/``discard``.

Every entry records the tenant of the key whose request made it. ``list``,
``get``, ``resolve`` and ``discard`` take ``tenant``: given, another tenant's
entry behaves exactly like a missing one; ``None`` (an admin key, the CLI) sees
all. Entries written before tenants were recorded have tenant ``""``
(``UNASSIGNED``): only ``None`` sees them.

An entry holds the model, format name, mode, the schema validated against,
the request context (instructions and input items, JSON-serialised), every
attempt (text, finish reason, failing stage and messages) and, once handled,
the resolution: a value (validated against the stored schema) or a discard.
"""

from __future__ import annotations

import abc
import asyncio
import builtins
import contextlib
import sqlite3
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from jsonschema import Draft202012Validator

from orgate.datadir import private_file
from orgate.gate.patterns import bounded
from orgate.store.base import REVIEW_COLUMNS, ReviewStatus, StoredReview
from orgate.structured.layers import format_checker, schema_layer

_SCHEMA = """
CREATE TABLE IF NOT EXISTS structured_review (
    id           TEXT PRIMARY KEY,
    created_at   REAL NOT NULL,
    status       TEXT NOT NULL DEFAULT 'pending',
    model        TEXT NOT NULL,
    format_name  TEXT NOT NULL,
    mode         TEXT NOT NULL,
    stage        TEXT NOT NULL,
    errors       TEXT NOT NULL,
    schema       TEXT,
    request      TEXT NOT NULL,
    attempts     TEXT NOT NULL,
    response_id  TEXT,
    resolution   TEXT,
    resolved_at  REAL,
    note         TEXT,
    tenant       TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS structured_review_status ON structured_review (status, created_at);
"""

#: A queue made before entries recorded their tenant gets the column; its rows get ``UNASSIGNED``.
_ADD_TENANT = "ALTER TABLE structured_review ADD COLUMN tenant TEXT NOT NULL DEFAULT ''"
_TENANT_INDEX = (
    "CREATE INDEX IF NOT EXISTS structured_review_tenant ON structured_review (tenant, "
    "status, created_at)"
)

#: The tenant of entries written before tenants were recorded: no key has it (names are not empty).
UNASSIGNED = ""


@dataclass(slots=True)
class NewReview:
    """What the SafetyNet hands to the queue."""

    model: str
    format_name: str
    mode: str
    stage: str
    errors: Sequence[str]
    schema: Any
    request: dict[str, Any]
    attempts: list[dict[str, Any]]
    response_id: str | None = None
    tenant: str = UNASSIGNED


@dataclass(slots=True)
class ReviewItem:
    id: str
    created_at: float
    status: ReviewStatus
    model: str
    format_name: str
    mode: str
    stage: str
    errors: list[str]
    schema: Any
    request: dict[str, Any]
    attempts: list[dict[str, Any]]
    response_id: str | None = None
    resolution: Any = None
    resolved_at: float | None = None
    note: str | None = None
    tenant: str = UNASSIGNED
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "tenant": self.tenant,
            "created_at": self.created_at,
            "status": self.status,
            "model": self.model,
            "format_name": self.format_name,
            "mode": self.mode,
            "stage": self.stage,
            "errors": self.errors,
            "schema": self.schema,
            "request": self.request,
            "attempts": self.attempts,
            "response_id": self.response_id,
            "resolution": self.resolution,
            "resolved_at": self.resolved_at,
            "note": self.note,
        }


class ReviewError(Exception):
    """A queue operation that cannot be done (unknown id, already handled, invalid value)."""


class ReviewNotFound(ReviewError):
    """No entry with that id."""


def _jsonable(obj: Any) -> Any:
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_none=True)
    if isinstance(obj, dict | list | str | int | float | bool) or obj is None:
        return obj
    return repr(obj)


def _dumps(obj: Any) -> str:
    return orjson.dumps(obj, default=_jsonable).decode()


def _loads(text: str | None) -> Any:
    return None if text is None else orjson.loads(text)


def new_review_id() -> str:
    """A review entry's id: ``rev_`` + 24 hex."""
    return "rev_" + uuid.uuid4().hex[:24]


def stored_entry(entry: NewReview, review_id: str, created_at: float) -> StoredReview:
    """A new entry as stored: pending, its JSON columns encoded."""
    return StoredReview(
        id=review_id,
        tenant=entry.tenant,
        created_at=created_at,
        status="pending",
        model=entry.model,
        format_name=entry.format_name,
        mode=entry.mode,
        stage=entry.stage,
        errors=_dumps(list(entry.errors)),
        schema=_dumps(entry.schema),
        request=_dumps(entry.request),
        attempts=_dumps(entry.attempts),
        response_id=entry.response_id,
    )


def item_of(row: StoredReview) -> ReviewItem:
    """A stored entry as the queue's callers see it (its JSON columns read)."""
    return ReviewItem(
        id=row.id,
        created_at=row.created_at,
        status=row.status,
        model=row.model,
        format_name=row.format_name,
        mode=row.mode,
        stage=row.stage,
        errors=_loads(row.errors),
        schema=_loads(row.schema),
        request=_loads(row.request),
        attempts=_loads(row.attempts),
        response_id=row.response_id,
        resolution=_loads(row.resolution),
        resolved_at=row.resolved_at,
        note=row.note,
        tenant=row.tenant,
    )


class ReviewQueue:
    """A persistent queue of exhausted structured-output attempts."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._ready = False  # the file exists with the current schema

    def exists(self) -> bool:
        return self._ready or self.path.is_file()

    def create(self) -> None:
        """Create the database (and its directory) if missing. Raises ``OSError`` /
        ``sqlite3.Error``."""
        if not self._ready:
            private_file(self.path)
            self._migrate()

    def _migrate(self) -> None:
        db = sqlite3.connect(self.path, timeout=10.0)
        db.row_factory = sqlite3.Row
        try:
            with db:
                db.execute("PRAGMA journal_mode=WAL")
                self._schema(db)
        finally:
            db.close()
        self._ready = True

    @staticmethod
    def _schema(db: sqlite3.Connection) -> None:
        db.executescript(_SCHEMA)
        columns = {row[1] for row in db.execute("PRAGMA table_info(structured_review)")}
        if "tenant" not in columns:
            db.execute(_ADD_TENANT)
        db.execute(_TENANT_INDEX)

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        if not self._ready and self.path.is_file():
            self._migrate()  # an existing queue, perhaps from an older orgate
        if self._ready:
            db = sqlite3.connect(self.path, timeout=10.0)
        else:  # nothing queued yet: read an empty queue, create no file
            db = sqlite3.connect(":memory:")
            self._schema(db)
        db.row_factory = sqlite3.Row
        try:
            with db:
                yield db
        finally:
            db.close()

    def add(self, entry: NewReview) -> str:
        """Store an entry; returns its id (``rev_`` + 24 hex)."""
        review_id = new_review_id()
        self.create()
        with self._connect() as db:
            db.execute(
                "INSERT INTO structured_review (id, created_at, status, model, "
                "format_name, mode, stage, errors,"
                " schema, request, attempts, response_id, tenant) VALUES (?, ?, "
                "'pending', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    review_id,
                    time.time(),
                    entry.model,
                    entry.format_name,
                    entry.mode,
                    entry.stage,
                    _dumps(list(entry.errors)),
                    _dumps(entry.schema),
                    _dumps(entry.request),
                    _dumps(entry.attempts),
                    entry.response_id,
                    entry.tenant,
                ),
            )
        return review_id

    def entries(self) -> builtins.list[StoredReview]:
        """Every entry, as stored (what an import into the response store copies)."""
        with self._connect() as db:
            rows = db.execute(
                f"SELECT {REVIEW_COLUMNS} FROM structured_review ORDER BY created_at, id"
            ).fetchall()
        return [StoredReview(*row) for row in rows]

    @staticmethod
    def _item(row: sqlite3.Row) -> ReviewItem:
        return ReviewItem(
            id=row["id"],
            created_at=row["created_at"],
            status=row["status"],
            model=row["model"],
            format_name=row["format_name"],
            mode=row["mode"],
            stage=row["stage"],
            errors=_loads(row["errors"]),
            schema=_loads(row["schema"]),
            request=_loads(row["request"]),
            attempts=_loads(row["attempts"]),
            response_id=row["response_id"],
            resolution=_loads(row["resolution"]),
            resolved_at=row["resolved_at"],
            note=row["note"],
            tenant=row["tenant"],
        )

    def list(
        self,
        status: ReviewStatus | None = "pending",
        *,
        limit: int = 100,
        offset: int = 0,
        tenant: str | None = None,
    ) -> builtins.list[ReviewItem]:
        """Entries, oldest first; ``status=None`` lists all; ``tenant=None`` every tenant's."""
        where, args = _scope(status, tenant)
        sql = f"SELECT * FROM structured_review{where} ORDER BY created_at, id LIMIT ? OFFSET ?"
        with self._connect() as db:
            return [self._item(r) for r in db.execute(sql, [*args, limit, offset]).fetchall()]

    def for_response(self, response_id: str, *, tenant: str | None = None) -> ReviewItem | None:
        """The entry a response's exhausted request made, if any (``tenant`` given: only its own).

        Scans the queue (no index on ``response_id``): for inspecting one response, not a hot path.
        """
        where, args = _scope(None, tenant)
        clause = f"{where} AND response_id = ?" if where else " WHERE response_id = ?"
        with self._connect() as db:
            row = db.execute(
                f"SELECT * FROM structured_review{clause} LIMIT 1", [*args, response_id]
            ).fetchone()
        return None if row is None else self._item(row)

    def count(self, status: ReviewStatus | None = "pending", *, tenant: str | None = None) -> int:
        where, args = _scope(status, tenant)
        with self._connect() as db:
            row = db.execute(f"SELECT COUNT(*) FROM structured_review{where}", args).fetchone()
        return int(row[0])

    def get(self, review_id: str, *, tenant: str | None = None) -> ReviewItem | None:
        """The entry, or None when there is none — or it is another tenant's (``tenant`` given)."""
        with self._connect() as db:
            row = db.execute(
                "SELECT * FROM structured_review WHERE id = ?", (review_id,)
            ).fetchone()
        if row is None or (tenant is not None and row["tenant"] != tenant):
            return None
        return self._item(row)

    def _finish(
        self,
        review_id: str,
        status: ReviewStatus,
        resolution: Any,
        note: str | None,
        tenant: str | None,
    ) -> ReviewItem:
        with self._connect() as db:
            cur = db.execute(
                "UPDATE structured_review SET status = ?, resolution = ?, resolved_at = ?, note = ?"
                " WHERE id = ? AND status = 'pending' AND (? IS NULL OR tenant = ?)",
                (
                    status,
                    None if resolution is None else _dumps(resolution),
                    time.time(),
                    note,
                    review_id,
                    tenant,
                    tenant,
                ),
            )
            if cur.rowcount != 1:
                found = db.execute(
                    "SELECT status, tenant FROM structured_review WHERE id = ?", (review_id,)
                ).fetchone()
                if found is None or (tenant is not None and found["tenant"] != tenant):
                    raise ReviewNotFound(f"no review entry {review_id}")
                raise ReviewError(f"review entry {review_id} is already {found['status']}")
        item = self.get(review_id)
        assert item is not None
        return item

    def resolve(
        self,
        review_id: str,
        value: Any,
        *,
        note: str | None = None,
        force: bool = False,
        tenant: str | None = None,
    ) -> ReviewItem:
        """Resolve with a corrected value; it must validate against the stored schema unless
        ``force``."""
        item = self.get(review_id, tenant=tenant)
        if item is None:
            raise ReviewNotFound(f"no review entry {review_id}")
        if not force and (errors := schema_errors(item, value)):
            raise ReviewError("value does not match the schema: " + "; ".join(errors))
        return self._finish(review_id, "resolved", value, note, tenant)

    def discard(
        self, review_id: str, *, note: str | None = None, tenant: str | None = None
    ) -> ReviewItem:
        return self._finish(review_id, "discarded", None, note, tenant)


class Reviews(abc.ABC):
    """The review queue as the server uses it: the safety net adds, the API and the console
    list, read and resolve. Every call is scoped like ``ReviewQueue``'s: ``tenant`` given,
    another tenant's entry behaves exactly like a missing one; None sees all."""

    @abc.abstractmethod
    async def add(self, entry: NewReview) -> str:
        """Store an entry; returns its id."""

    @abc.abstractmethod
    async def list(
        self,
        status: ReviewStatus | None = "pending",
        *,
        limit: int = 100,
        offset: int = 0,
        tenant: str | None = None,
    ) -> builtins.list[ReviewItem]:
        """Entries, oldest first; ``status=None`` lists all."""

    @abc.abstractmethod
    async def get(self, review_id: str, *, tenant: str | None = None) -> ReviewItem | None:
        """The entry, or None."""

    @abc.abstractmethod
    async def for_response(
        self, response_id: str, *, tenant: str | None = None
    ) -> ReviewItem | None:
        """The entry a response's exhausted request made, if any."""

    @abc.abstractmethod
    async def count(
        self, status: ReviewStatus | None = "pending", *, tenant: str | None = None
    ) -> int:
        """How many entries ``list`` would find."""

    @abc.abstractmethod
    async def _finish(
        self,
        review_id: str,
        status: ReviewStatus,
        resolution: Any,
        note: str | None,
        tenant: str | None,
    ) -> ReviewItem:
        """Resolve or discard a pending entry; ``ReviewNotFound`` / ``ReviewError`` if it cannot."""

    async def resolve(
        self,
        review_id: str,
        value: Any,
        *,
        note: str | None = None,
        force: bool = False,
        tenant: str | None = None,
    ) -> ReviewItem:
        """Resolve with a corrected value; it must validate against the stored schema unless
        ``force``."""
        item = await self.get(review_id, tenant=tenant)
        if item is None:
            raise ReviewNotFound(f"no review entry {review_id}")
        if not force and (errors := await asyncio.to_thread(schema_errors, item, value)):
            raise ReviewError("value does not match the schema: " + "; ".join(errors))
        return await self._finish(review_id, "resolved", value, note, tenant)

    async def discard(
        self, review_id: str, *, note: str | None = None, tenant: str | None = None
    ) -> ReviewItem:
        return await self._finish(review_id, "discarded", None, note, tenant)


class FileReviews(Reviews):
    """The queue in its own SQLite file (``ReviewQueue``), each call on a worker thread: the
    server's queue when it runs without a store, and ``orgate eval``'s."""

    def __init__(self, queue: ReviewQueue) -> None:
        self.queue = queue

    async def add(self, entry: NewReview) -> str:
        return await asyncio.to_thread(self.queue.add, entry)

    async def list(
        self,
        status: ReviewStatus | None = "pending",
        *,
        limit: int = 100,
        offset: int = 0,
        tenant: str | None = None,
    ) -> builtins.list[ReviewItem]:
        return await asyncio.to_thread(
            self.queue.list, status, limit=limit, offset=offset, tenant=tenant
        )

    async def get(self, review_id: str, *, tenant: str | None = None) -> ReviewItem | None:
        return await asyncio.to_thread(self.queue.get, review_id, tenant=tenant)

    async def for_response(
        self, response_id: str, *, tenant: str | None = None
    ) -> ReviewItem | None:
        return await asyncio.to_thread(self.queue.for_response, response_id, tenant=tenant)

    async def count(
        self, status: ReviewStatus | None = "pending", *, tenant: str | None = None
    ) -> int:
        return await asyncio.to_thread(self.queue.count, status, tenant=tenant)

    async def _finish(
        self,
        review_id: str,
        status: ReviewStatus,
        resolution: Any,
        note: str | None,
        tenant: str | None,
    ) -> ReviewItem:
        return await asyncio.to_thread(
            self.queue._finish, review_id, status, resolution, note, tenant
        )


def reviews_of(queue: ReviewQueue | Reviews | None) -> Reviews | None:
    """The async queue of a review file (or of an async queue: itself)."""
    return FileReviews(queue) if isinstance(queue, ReviewQueue) else queue


def schema_errors(item: ReviewItem, value: Any) -> builtins.list[str]:
    """Why ``value`` cannot resolve ``item``: its schema's errors (none without a schema)."""
    if not isinstance(item.schema, dict | bool):
        return []
    validator = bounded(Draft202012Validator)  # the client's patterns, matched in linear time
    failure = schema_layer(
        value, validator(item.schema, format_checker=format_checker(item.schema))
    )
    return [] if failure is None else builtins.list(failure.errors)


def _scope(status: ReviewStatus | None, tenant: str | None) -> tuple[str, builtins.list[Any]]:
    """The WHERE clause (and its arguments) of a status and a tenant; None = any."""
    clauses: builtins.list[str] = []
    args: builtins.list[Any] = []
    if status is not None:
        clauses.append("status = ?")
        args.append(status)
    if tenant is not None:
        clauses.append("tenant = ?")
        args.append(tenant)
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), args
