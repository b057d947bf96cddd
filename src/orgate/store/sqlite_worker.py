"""The SQLite store's database thread, with group commit and background checkpoints.

All statements run on one thread that owns the connection. Jobs queued while a
transaction runs are taken together: one ``BEGIN`` … ``COMMIT`` for the whole
batch, each job inside its own ``SAVEPOINT`` so a failing job rolls back alone.
Results are handed back only after the batch commits, so an acknowledged write is
in the WAL file. Under load this turns N commits (and N thread wake-ups) into one.

Checkpoints (WAL → database file, the only step that calls fsync with
``synchronous=NORMAL``) run on a second thread with its own connection, in
PASSIVE mode, so they never block the writer.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import queue
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

#: Most jobs committed together.
MAX_BATCH = 256


class Kind(enum.Enum):
    """How a job runs: in a read or write batch transaction, or alone (manages its own)."""

    READ = "read"
    WRITE = "write"
    RAW = "raw"


@dataclass(slots=True)
class _Job:
    kind: Kind
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    future: asyncio.Future[Any]
    loop: asyncio.AbstractEventLoop
    ok: bool = False
    result: Any = None


def _deliver(jobs: list[_Job]) -> None:
    for job in jobs:
        if job.future.done():  # the caller was cancelled; the job ran anyway
            continue
        if job.ok:
            job.future.set_result(job.result)
        else:
            job.future.set_exception(job.result)


class SqliteWorker:
    """One thread running jobs against one connection, in committed batches."""

    def __init__(self, name: str) -> None:
        self.conn: sqlite3.Connection | None = None
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()
        self._checkpointer: _Checkpointer | None = None

    async def call(self, kind: Kind, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(*args)`` on the database thread; its result once committed."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._queue.put(_Job(kind, fn, args, future, loop))
        return await future

    def start_checkpointer(self, path: str, interval: float) -> None:
        """Checkpoint the WAL of ``path`` every ``interval`` seconds from another thread."""
        self._checkpointer = _Checkpointer(path, interval)

    def stop(self) -> None:
        """Finish queued jobs, then end both threads (the connection is closed by a job)."""
        if self._checkpointer is not None:
            self._checkpointer.stop()
        self._queue.put(None)
        self._thread.join()

    # ------------------------------------------------------------------ thread side

    def _main(self) -> None:
        carried: list[_Job | None] = []
        while True:
            job = carried.pop() if carried else self._queue.get()
            if job is None:
                return
            batch = [job]
            while job.kind is not Kind.RAW and len(batch) < MAX_BATCH:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None or nxt.kind is Kind.RAW:
                    carried.append(nxt)  # runs after this batch
                    break
                batch.append(nxt)
            if job.kind is Kind.RAW:
                self._run_one(job)
            else:
                self._run_batch(batch)
            by_loop: dict[asyncio.AbstractEventLoop, list[_Job]] = {}
            for done in batch:
                by_loop.setdefault(done.loop, []).append(done)
            for loop, jobs in by_loop.items():
                with contextlib.suppress(RuntimeError):  # loop closed: nobody waits
                    loop.call_soon_threadsafe(_deliver, jobs)

    @staticmethod
    def _run_one(job: _Job) -> None:
        try:
            job.result = job.fn(*job.args)
            job.ok = True
        except BaseException as exc:  # handed to the awaiting coroutine
            job.result = exc

    def _run_batch(self, batch: list[_Job]) -> None:
        conn = self.conn
        if conn is None:
            for job in batch:
                job.result = sqlite3.ProgrammingError("the store is not open")
            return
        write = any(job.kind is Kind.WRITE for job in batch)
        try:
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            if len(batch) == 1:
                self._run_one(batch[0])
                conn.execute("COMMIT" if batch[0].ok else "ROLLBACK")
                return
            for job in batch:
                conn.execute("SAVEPOINT job")
                self._run_one(job)
                if not job.ok:
                    conn.execute("ROLLBACK TO job")
                conn.execute("RELEASE job")
            conn.execute("COMMIT")
        except sqlite3.Error as exc:  # the transaction itself failed: so did every job
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            for job in batch:
                job.ok = False
                job.result = exc


class _Checkpointer:
    """PASSIVE WAL checkpoints on their own connection and thread."""

    def __init__(self, path: str, interval: float) -> None:
        self._path = path
        self._interval = interval
        self._stopped = threading.Event()
        self._thread = threading.Thread(
            target=self._main, name="orgate-sqlite-checkpoint", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join()

    def _main(self) -> None:
        try:
            conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error:
            log.warning("cannot open the checkpoint connection", exc_info=True)
            return
        try:
            conn.execute("PRAGMA busy_timeout = 1000")
            conn.execute("PRAGMA synchronous = NORMAL")
            while not self._stopped.wait(self._interval):
                try:
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                except sqlite3.Error:
                    log.debug("checkpoint skipped", exc_info=True)
        finally:
            conn.close()
