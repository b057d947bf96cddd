"""Fixtures: every store test runs against real SQLite files and a real PostgreSQL.

PostgreSQL comes from ``ORGATE_TEST_PG_URL`` (``eval "$(.ci/postgres.sh)"``); each test
gets its own schema (``?search_path=...``) so tests never see each other's rows.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from orgate.store import ResponseStore, open_store
from tests.store.helpers import PG_SKIP, PG_URL, OpenStore


def _with_search_path(url: str, schema: str) -> str:
    joiner = "&" if "?" in url else "?"
    return f"{url}{joiner}search_path={schema}"


@pytest.fixture(params=["sqlite", "postgresql"])
async def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A URL of an empty store of each backend."""
    if request.param == "sqlite":
        yield f"sqlite://{tmp_path}/orgate.db"
        return
    if not PG_URL:
        pytest.skip(PG_SKIP)
    schema = f"t_{uuid.uuid4().hex[:12]}"
    conn = await asyncpg.connect(PG_URL)
    try:
        await conn.execute(f"CREATE SCHEMA {schema}")
    finally:
        await conn.close()
    yield _with_search_path(PG_URL, schema)
    conn = await asyncpg.connect(PG_URL)
    try:
        await conn.execute(f"DROP SCHEMA {schema} CASCADE")
    finally:
        await conn.close()


@pytest.fixture
async def open_at(store_url: str) -> AsyncIterator[OpenStore]:
    """Open more stores (other "processes") on the same database; all closed at the end."""
    opened: list[ResponseStore] = []

    async def opener(url: str | None = None, **kwargs: Any) -> ResponseStore:
        kwargs.setdefault("heartbeat_interval", 0)
        store = await open_store(url or store_url, **kwargs)
        opened.append(store)
        return store

    yield opener
    for store in opened:
        await store.close()


@pytest.fixture
async def store(open_at: OpenStore) -> ResponseStore:
    return await open_at()
