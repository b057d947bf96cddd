"""Response store: responses, conversation items, sessions and stream events.

``open_store(url)`` picks the backend from the URL:

- ``sqlite:///abs/path/orgate.db``, ``sqlite://relative/orgate.db``, ``sqlite://:memory:``
  or a plain file path: the embedded SQLite store (the default);
- ``postgresql://user:pass@host:port/db`` (or ``postgres://``; optional
  ``?pool_size=N``, default 10): the PostgreSQL store for several processes;
- ``None`` or empty: SQLite at ``default_sqlite_path()``.

See ``docs/store.md``.
"""

from __future__ import annotations

from pathlib import Path

from orgate.datadir import STORE_FILE, data_dir
from orgate.store.base import (
    STATUSES,
    ChainTail,
    Conversation,
    ItemsPage,
    ResponseConflict,
    ResponseFilter,
    ResponsesPage,
    ResponseStore,
    SchemaTooNew,
    SessionBusy,
    SessionTurn,
    StoredItem,
    StoredResponse,
    StoreError,
    StoreStats,
    StoreUnavailable,
    UnknownResponse,
    UnknownSession,
)
from orgate.store.redaction import redact
from orgate.store.sqlite import SqliteStore

__all__ = [
    "ChainTail",
    "STATUSES",
    "Conversation",
    "ItemsPage",
    "ResponseConflict",
    "ResponseFilter",
    "ResponsesPage",
    "ResponseStore",
    "SchemaTooNew",
    "SessionBusy",
    "SessionTurn",
    "SqliteStore",
    "StoreError",
    "StoreStats",
    "StoreUnavailable",
    "StoredItem",
    "StoredResponse",
    "UnknownResponse",
    "UnknownSession",
    "default_sqlite_path",
    "describe_url",
    "open_store",
    "sqlite_path",
]


def default_sqlite_path() -> str:
    """``orgate.db`` in the data directory (``orgate.datadir``)."""
    return str(data_dir() / STORE_FILE)


def sqlite_path(url: str) -> str:
    """The file path named by a ``sqlite://`` URL (or a bare path)."""
    if url.startswith("sqlite://"):
        rest = url[len("sqlite://") :]
    elif url.startswith("sqlite:"):
        rest = url[len("sqlite:") :]
    else:
        rest = url
    rest = rest.split("?", 1)[0]
    if rest in (":memory:", "/:memory:"):
        return ":memory:"
    if not rest:
        raise ValueError(f"store URL {url!r} names no file")
    return str(Path(rest).expanduser())


def _is_postgres(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


def check_url(url: str | None) -> None:
    """``ValueError`` for a URL that names no backend: only its scheme is shown (the rest may
    hold a password). ``sqlite:…``, ``postgres(ql)://…`` and plain paths are fine."""
    if not url or _is_postgres(url) or url.startswith("sqlite:") or "://" not in url:
        return
    scheme = url.split("://", 1)[0]
    raise ValueError(
        f"unsupported store URL scheme {scheme!r}: use sqlite:///path/to/orgate.db or postgresql://user:pass@host/db"
    )


def describe_url(url: str | None) -> str:
    """A printable form of the store URL (password hidden, default path resolved)."""
    if not url:
        return f"sqlite://{default_sqlite_path()}"
    if _is_postgres(url):
        return redact(url)
    return f"sqlite://{sqlite_path(url)}"


async def open_store(url: str | None = None, *, heartbeat_interval: float = 10.0) -> ResponseStore:
    """Open the store named by ``url``: migrated, heartbeat running, ready to use.

    Raises ``StoreUnavailable`` when the database cannot be opened or reached and
    ``SchemaTooNew`` when it was migrated by a newer orgate.
    """
    if url and _is_postgres(url):
        try:
            from orgate.store.postgres import PostgresStore  # noqa: PLC0415 - optional dependency
        except ImportError as exc:
            raise StoreUnavailable(
                "a postgresql:// store needs asyncpg: pip install 'orgate[postgres]'"
            ) from exc
        return await PostgresStore.open(url, heartbeat_interval=heartbeat_interval)
    check_url(url)
    path = sqlite_path(url) if url else default_sqlite_path()
    return await SqliteStore.open(path, heartbeat_interval=heartbeat_interval)
