"""The review queue in the response store: one queue for every process and machine sharing it.

``StoreReviews(store)`` is the server's queue when the store is enabled (its entries live in
the store's ``review_entries`` table, SQLite or PostgreSQL). ``import_review_file(path,
store)`` copies a review file of an earlier orgate (``[structured] review_db``, by default
``review.db`` in the data directory) into the store once, at start-up: every entry keeps
its id, tenant, status and resolution (an id already in the store is left as it is, so an
import that is interrupted, or run by several processes at once, is simply done again), then
the file is renamed ``<name>.imported`` (kept, for a downgrade or a look; nothing reads it).
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import logging
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from orgate.store.base import ResponseStore, ReviewStatus
from orgate.structured.review import (
    NewReview,
    ReviewError,
    ReviewItem,
    ReviewNotFound,
    ReviewQueue,
    Reviews,
    _dumps,
    item_of,
    new_review_id,
    stored_entry,
)

log = logging.getLogger("orgate.structured")

#: What an imported review file is renamed to (its name plus this).
IMPORTED_SUFFIX = ".imported"


class StoreReviews(Reviews):
    """The review queue over a ``ResponseStore``."""

    def __init__(self, store: ResponseStore) -> None:
        self.store = store

    async def add(self, entry: NewReview) -> str:
        review_id = new_review_id()
        await self.store.add_reviews([stored_entry(entry, review_id, time.time())])
        return review_id

    async def list(
        self,
        status: ReviewStatus | None = "pending",
        *,
        limit: int = 100,
        offset: int = 0,
        tenant: str | None = None,
    ) -> builtins.list[ReviewItem]:
        rows = await self.store.list_reviews(status, tenant, limit=limit, offset=offset)
        return [item_of(row) for row in rows]

    async def get(self, review_id: str, *, tenant: str | None = None) -> ReviewItem | None:
        row = await self.store.get_review(review_id, tenant)
        return item_of(row) if row is not None else None

    async def for_response(
        self, response_id: str, *, tenant: str | None = None
    ) -> ReviewItem | None:
        row = await self.store.get_review(None, tenant, response_id=response_id)
        return item_of(row) if row is not None else None

    async def count(
        self, status: ReviewStatus | None = "pending", *, tenant: str | None = None
    ) -> int:
        return await self.store.count_reviews(status, tenant)

    async def _finish(
        self,
        review_id: str,
        status: ReviewStatus,
        resolution: Any,
        note: str | None,
        tenant: str | None,
    ) -> ReviewItem:
        encoded = None if resolution is None else _dumps(resolution)
        if not await self.store.finish_review(review_id, status, encoded, note, tenant):
            found = await self.get(review_id, tenant=tenant)
            if found is None:
                raise ReviewNotFound(f"no review entry {review_id}")
            raise ReviewError(f"review entry {review_id} is already {found.status}")
        item = await self.get(review_id)
        assert item is not None
        return item


async def import_review_file(path: str | Path, store: ResponseStore) -> int | None:
    """Copy the review file at ``path`` into ``store`` and rename it; the number of entries
    added (None when there is no file). A file that cannot be read is left where it is,
    with a warning: the server starts all the same, its queue the store's."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        entries = await asyncio.to_thread(ReviewQueue(path).entries)
    except (OSError, sqlite3.Error) as exc:
        log.warning("could not read the review file %s to import it into the store: %s", path, exc)
        return None
    added = await store.add_reviews(entries)
    for suffix in ("", "-wal", "-shm"):  # SQLite's own files go along (an import read it whole)
        with contextlib.suppress(FileNotFoundError):  # another process renamed it first
            os.replace(f"{path}{suffix}", f"{path}{IMPORTED_SUFFIX}{suffix}")
    log.info(
        "imported %d of the %d review entries of %s into the response store; the file is now %s",
        added,
        len(entries),
        path,
        f"{path}{IMPORTED_SUFFIX}",
    )
    return added
