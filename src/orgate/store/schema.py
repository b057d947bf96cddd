"""The store's schema, one version number for both backends, as migration scripts.

``MIGRATIONS[n]`` turns a version ``n - 1`` database into version ``n``. To change
the schema: add version ``SCHEMA_VERSION + 1`` to both dicts (same tables and meaning,
each backend's dialect), bump ``SCHEMA_VERSION``, and describe it in docs/store.md.
"""

from __future__ import annotations

SCHEMA_VERSION = 1

#: ``pg_advisory_xact_lock`` key held while PostgreSQL migrates ("orgat").
POSTGRES_MIGRATION_LOCK = 0x6F72676174

SQLITE_MIGRATIONS: dict[int, list[str]] = {
    1: [
        """CREATE TABLE responses (
            id TEXT PRIMARY KEY,
            tenant TEXT NOT NULL,
            status TEXT NOT NULL,
            model TEXT,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            previous_response_id TEXT,
            session_id TEXT,
            deployment TEXT,
            chain TEXT NOT NULL,
            depth INTEGER NOT NULL,
            history_len INTEGER NOT NULL,
            own_items INTEGER NOT NULL,
            owner TEXT,
            cancel_requested INTEGER NOT NULL DEFAULT 0,
            expires_at REAL,
            response BLOB NOT NULL,
            request BLOB
        )""",
        "CREATE INDEX responses_created ON responses (created_at)",
        "CREATE INDEX responses_active ON responses (status) WHERE status IN ('queued', 'in_progress')",
        "CREATE INDEX responses_expires ON responses (expires_at) WHERE expires_at IS NOT NULL",
        """CREATE TABLE items (
            tenant TEXT NOT NULL,
            response_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            kind TEXT NOT NULL,
            item_id TEXT NOT NULL,
            data BLOB NOT NULL
        )""",
        "CREATE UNIQUE INDEX items_position ON items (response_id, seq)",
        "CREATE INDEX items_by_id ON items (tenant, item_id)",
        """CREATE TABLE response_events (
            response_id TEXT PRIMARY KEY,
            tenant TEXT NOT NULL,
            data BLOB NOT NULL
        )""",
        """CREATE TABLE sessions (
            tenant TEXT NOT NULL,
            session_id TEXT NOT NULL,
            latest_response_id TEXT,
            deployment TEXT,
            updated_at REAL NOT NULL,
            lease_token TEXT,
            lease_owner TEXT,
            lease_expires_at REAL,
            PRIMARY KEY (tenant, session_id)
        )""",
        """CREATE TABLE owners (
            owner_id TEXT PRIMARY KEY,
            started_at REAL NOT NULL,
            heartbeat_at REAL NOT NULL,
            stopped_at REAL
        )""",
    ],
}

POSTGRES_MIGRATIONS: dict[int, list[str]] = {
    1: [
        """CREATE TABLE responses (
            id text PRIMARY KEY,
            tenant text NOT NULL,
            status text NOT NULL,
            model text,
            created_at double precision NOT NULL,
            updated_at double precision NOT NULL,
            previous_response_id text,
            session_id text,
            deployment text,
            chain text[] NOT NULL,
            depth integer NOT NULL,
            history_len integer NOT NULL,
            own_items integer NOT NULL,
            owner text,
            cancel_requested boolean NOT NULL DEFAULT false,
            expires_at double precision,
            response bytea NOT NULL,
            request bytea
        )""",
        "CREATE INDEX responses_created ON responses (created_at)",
        "CREATE INDEX responses_active ON responses (status) WHERE status IN ('queued', 'in_progress')",
        "CREATE INDEX responses_expires ON responses (expires_at) WHERE expires_at IS NOT NULL",
        """CREATE TABLE items (
            pk bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            tenant text NOT NULL,
            response_id text NOT NULL,
            seq integer NOT NULL,
            kind text NOT NULL,
            item_id text NOT NULL,
            data bytea NOT NULL
        )""",
        "CREATE UNIQUE INDEX items_position ON items (response_id, seq)",
        "CREATE INDEX items_by_id ON items (tenant, item_id)",
        """CREATE TABLE response_events (
            response_id text PRIMARY KEY,
            tenant text NOT NULL,
            data bytea NOT NULL
        )""",
        """CREATE TABLE sessions (
            tenant text NOT NULL,
            session_id text NOT NULL,
            latest_response_id text,
            deployment text,
            updated_at double precision NOT NULL,
            lease_token text,
            lease_owner text,
            lease_expires_at double precision,
            PRIMARY KEY (tenant, session_id)
        )""",
        """CREATE TABLE owners (
            owner_id text PRIMARY KEY,
            started_at double precision NOT NULL,
            heartbeat_at double precision NOT NULL,
            stopped_at double precision
        )""",
    ],
}
