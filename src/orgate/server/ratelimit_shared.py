"""Rate limits shared by the workers of one ``orgate serve --workers N``, without Redis.

The buckets of ``LocalLimiter`` live in a small SQLite file in the server's
private directory; each check reads and updates them in one ``BEGIN IMMEDIATE``
transaction, so the workers see one bucket per key. The file is a scratch file
(``synchronous = OFF``, deleted with the directory): limits restart full when the
server restarts, as they do for a single process. A worker killed mid-check
leaves no lock behind (SQLite releases it with the process).
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

from orgate.protocol.errors import ApiError
from orgate.server.ratelimit_base import KeyLimits, refusal

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS buckets"
    " (key TEXT, which TEXT, level REAL, stamp REAL, PRIMARY KEY (key, which))"
)


class SharedLimiter:
    """``LocalLimiter``'s buckets in a SQLite file every worker of the server opens."""

    def __init__(
        self, limits: dict[str, KeyLimits], path: Path, clock: Any = time.monotonic
    ) -> None:
        self.limits = limits
        self.clock = clock  # CLOCK_MONOTONIC is one clock for every process of the machine
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=10.0)
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.execute("PRAGMA synchronous = OFF")
        self.db.execute(_SCHEMA)

    def _level(self, key_name: str, which: str, per_minute: int, now: float) -> float:
        row = self.db.execute(
            "SELECT level, stamp FROM buckets WHERE key = ? AND which = ?", (key_name, which)
        ).fetchone()
        if row is None:
            return float(per_minute)
        level: float
        stamp: float
        level, stamp = row
        return min(float(per_minute), level + (now - stamp) * per_minute / 60.0)

    def _store(self, key_name: str, which: str, level: float, now: float) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO buckets VALUES (?, ?, ?, ?)", (key_name, which, level, now)
        )

    async def admit(self, key_name: str) -> ApiError | None:
        limits = self.limits.get(key_name)
        if limits is None:
            return None
        # A short synchronous transaction: a few microseconds, far less than a thread hop.
        self.db.execute("BEGIN IMMEDIATE")
        try:
            now = self.clock()
            rpm = self._level(key_name, "rpm", limits.rpm, now) if limits.rpm else None
            tpm = self._level(key_name, "tpm", limits.tpm, now) if limits.tpm else None
            # The longer wait of the two buckets, as LocalLimiter does.
            rpm_wait = (
                (1 - rpm) * 60.0 / limits.rpm if rpm is not None and limits.rpm and rpm < 1 else 0.0
            )
            tpm_wait = (
                (1 - tpm) * 60.0 / limits.tpm
                if tpm is not None and limits.tpm and tpm <= 0
                else 0.0
            )
            if tpm_wait > rpm_wait and limits.tpm:
                return refusal(key_name, "tpm", limits.tpm, tpm_wait)
            if rpm_wait > 0 and limits.rpm:
                return refusal(key_name, "rpm", limits.rpm, rpm_wait)
            if rpm is not None:
                self._store(key_name, "rpm", rpm - 1, now)
            return None
        finally:
            self.db.execute("COMMIT")

    async def charge(self, key_name: str, tokens: int) -> None:
        limits = self.limits.get(key_name)
        if limits is None or not limits.tpm or tokens <= 0:
            return
        self.db.execute("BEGIN IMMEDIATE")
        try:
            now = self.clock()
            self._store(
                key_name, "tpm", self._level(key_name, "tpm", limits.tpm, now) - tokens, now
            )
        finally:
            self.db.execute("COMMIT")

    async def aclose(self) -> None:
        self.db.close()
