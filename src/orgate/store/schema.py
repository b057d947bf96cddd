"""The store's schema per backend, as migration scripts.

``*_MIGRATIONS[n]`` turns a version ``n - 1`` database into version ``n``. Each
backend has its own version number: the tables mean the same things, but the
layout follows what is cheap on that engine (SQLite keeps a response's items in
its row, PostgreSQL in an items table). To change a schema: add version
``*_SCHEMA_VERSION + 1`` to its dict, bump the number, and describe it in
docs/store.md.
"""

from __future__ import annotations

SQLITE_SCHEMA_VERSION = 5
POSTGRES_SCHEMA_VERSION = 4

#: ``pg_advisory_xact_lock`` key held while PostgreSQL migrates ("orgat").
POSTGRES_MIGRATION_LOCK = 0x6F72676174


def _shared_state(real: str) -> list[str]:
    """The tables of the state every process serving one store shares (``real``: the backend's
    double-precision type): SQLite's version 3, PostgreSQL's version 2.

    ``approvals``: an MCP approval request, consumed by the first response that acts on it, and
    the ``outcome`` of its call (the ``mcp_call``'s output and error) once it ended; a replay
    finds it. ``console_revoked``: signed-out console sessions, until they would have expired.
    ``signin_throttle``: failed console sign-ins by subject (a client address, a key's
    fingerprint) and until when the subject is refused.
    """
    return [
        f"""CREATE TABLE approvals (
            tenant TEXT NOT NULL,
            approval_request_id TEXT NOT NULL,
            response_id TEXT NOT NULL,
            claimed_at {real} NOT NULL,
            settled_at {real},
            outcome TEXT,
            PRIMARY KEY (tenant, approval_request_id)
        )""",
        "CREATE INDEX approvals_claimed ON approvals (claimed_at)",
        f"""CREATE TABLE console_revoked (
            session_id TEXT PRIMARY KEY,
            expires_at {real} NOT NULL
        )""",
        "CREATE INDEX console_revoked_expiry ON console_revoked (expires_at)",
        f"""CREATE TABLE signin_throttle (
            subject TEXT PRIMARY KEY,
            failures INTEGER NOT NULL,
            updated_at {real} NOT NULL,
            blocked_until {real} NOT NULL
        )""",
        "CREATE INDEX signin_throttle_updated ON signin_throttle (updated_at)",
    ]


def _cluster_state(real: str, blob: str) -> list[str]:
    """The state every node serving one store shares (``real``, ``blob``: the backend's types):
    SQLite's version 4, PostgreSQL's version 3.

    ``review_entries``: the structured-output review queue (the columns of the review file of
    earlier versions, imported into it once: ``structured/review_store.py``).
    ``background_jobs``: a queued or running background response, leased by one process
    (``owner``, ``token``, until ``lease_expires_at``, renewed while it runs); what is needed
    to run it again (``request``), the session lease it holds, whether its output reached a
    client (``delivered_at``) or a tool with side effects ran (``effects_at``), and its events
    so far (``events``, for followers on other nodes). The final save deletes the row.
    ``owners`` gain what the console's node list shows: the version, the address a node
    serves on, and a snapshot of its metrics.
    """
    return [
        f"""CREATE TABLE review_entries (
            id TEXT PRIMARY KEY,
            tenant TEXT NOT NULL,
            created_at {real} NOT NULL,
            status TEXT NOT NULL,
            model TEXT NOT NULL,
            format_name TEXT NOT NULL,
            mode TEXT NOT NULL,
            stage TEXT NOT NULL,
            errors TEXT NOT NULL,
            schema TEXT,
            request TEXT NOT NULL,
            attempts TEXT NOT NULL,
            response_id TEXT,
            resolution TEXT,
            resolved_at {real},
            note TEXT
        )""",
        "CREATE INDEX review_entries_status ON review_entries (status, created_at)",
        "CREATE INDEX review_entries_tenant ON review_entries (tenant, status, created_at)",
        "CREATE INDEX review_entries_response ON review_entries (response_id)",
        f"""CREATE TABLE background_jobs (
            response_id TEXT PRIMARY KEY,
            tenant TEXT NOT NULL,
            owner TEXT NOT NULL,
            token TEXT NOT NULL,
            lease_expires_at {real} NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 1,
            request {blob} NOT NULL,
            session_id TEXT,
            session_token TEXT,
            delivered_at {real},
            effects_at {real},
            events {blob},
            created_at {real} NOT NULL
        )""",
        "CREATE INDEX background_jobs_lease ON background_jobs (lease_expires_at)",
        "ALTER TABLE owners ADD COLUMN version TEXT",
        "ALTER TABLE owners ADD COLUMN address TEXT",
        f"ALTER TABLE owners ADD COLUMN metrics {blob}",
        f"ALTER TABLE owners ADD COLUMN metrics_at {real}",
    ]


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
        "CREATE INDEX responses_active ON responses (status) WHERE status IN "
        "('queued', 'in_progress')",
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
    # 2: a response's own items move into its row (``inputs``, ``input_ids``, and
    # ``outputs`` when they differ from the body's ``output``); ``item_ids`` indexes
    # item ids for ``item_reference`` / lookups (this migration copies every id; later
    # saves leave out ids derived from the response, found through its row). A save
    # writes one row plus one narrow index entry per indexed item: half the pages of
    # version 1 per commit.
    # ``responses_created`` goes: prune walks the rowid order (creation order).
    2: [
        "ALTER TABLE responses ADD COLUMN inputs BLOB",
        "ALTER TABLE responses ADD COLUMN input_ids TEXT",
        "ALTER TABLE responses ADD COLUMN outputs BLOB",
        """CREATE TABLE item_ids (
            tenant TEXT NOT NULL,
            item_id TEXT NOT NULL,
            response_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            PRIMARY KEY (tenant, item_id, response_id)
        ) WITHOUT ROWID""",
        """UPDATE responses SET
            inputs = (SELECT json_group_array(json(CAST(data AS TEXT))) FROM
                (SELECT data FROM items WHERE items.response_id = responses.id
                    AND items.kind = 'input' ORDER BY seq)),
            input_ids = (SELECT json_group_array(item_id) FROM
                (SELECT item_id FROM items WHERE items.response_id = responses.id
                    AND items.kind = 'input' ORDER BY seq)),
            outputs = (SELECT json_group_array(json(CAST(data AS TEXT))) FROM
                (SELECT data FROM items WHERE items.response_id = responses.id
                    AND items.kind = 'output' ORDER BY seq))""",
        """INSERT INTO item_ids (tenant, item_id, response_id, seq)
            SELECT tenant, item_id, response_id, seq FROM items WHERE true
            ON CONFLICT DO NOTHING""",
        "DROP TABLE items",
        "DROP INDEX responses_created",
    ],
    3: _shared_state("REAL"),
    4: _cluster_state("REAL", "BLOB"),
    # 5: a session is a conversation (OpenAI's Conversations API): when it was created, its
    # metadata (orjson object) and the ids of the items deleted from it (a JSON array).
    5: [
        "ALTER TABLE sessions ADD COLUMN created_at REAL",
        "ALTER TABLE sessions ADD COLUMN metadata BLOB",
        "ALTER TABLE sessions ADD COLUMN hidden TEXT",
        "UPDATE sessions SET created_at = updated_at",
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
        "CREATE INDEX responses_active ON responses (status) WHERE status IN "
        "('queued', 'in_progress')",
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
    2: _shared_state("double precision"),
    3: _cluster_state("double precision", "bytea"),
    # 4: a session is a conversation (SQLite's version 5).
    4: [
        "ALTER TABLE sessions ADD COLUMN created_at double precision",
        "ALTER TABLE sessions ADD COLUMN metadata bytea",
        "ALTER TABLE sessions ADD COLUMN hidden text[]",
        "UPDATE sessions SET created_at = updated_at",
    ],
}
