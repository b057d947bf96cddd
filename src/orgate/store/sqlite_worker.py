"""The SQLite store's execution: inline group commit for writes, a thread for the rest.

Writes (``InlineWriter``) run on the event loop's own thread, on a connection of
their own: every write submitted during one loop iteration is committed together
in the next one — one ``BEGIN IMMEDIATE`` … ``COMMIT`` for the whole batch — and
the awaiting callers are resumed only after that commit, so an acknowledged write
is in the WAL file. With WAL and ``synchronous=NORMAL`` a commit does not fsync,
so a batch costs tens of microseconds of the loop's time, and there is no thread
hop: no queue, no wake-up, and no GIL hand-offs with a database thread (which cost
the loop far more than the SQL itself). When the write lock is held elsewhere
(another process, or the database thread) the inline writer never waits: the batch
goes to the database thread, which waits for the lock with ``busy_timeout``.

Everything else runs on one thread that owns another connection (``SqliteWorker``).
Jobs queued while a transaction runs are taken together: one ``BEGIN`` … ``COMMIT``
for the whole batch; in a write batch each job runs inside its own ``SAVEPOINT`` so
a failing job rolls back alone.

Checkpoints (WAL → database file, the only step that calls fsync with
``synchronous=NORMAL``) run on a third thread with its own connection, in PASSIVE
mode, so they never block the writers.
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
            if not write:  # nothing to undo: no savepoints
                for job in batch:
                    self._run_one(job)
                conn.execute("COMMIT")
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
    """PASSIVE WAL checkpoints on their own connection and thread.

    After a checkpoint that copied the whole WAL, the next write transaction
    rewinds the WAL to its start, and with ``synchronous=NORMAL`` the connection
    doing that syncs the WAL header: an fsync, which can take milliseconds to
    hundreds of milliseconds. So that this never happens on the event loop (the
    inline writer), the checkpointer makes that first write itself, at once: it
    flips a bit of ``PRAGMA user_version`` (unused by orgate). It checkpoints only when
    another connection changed the database (``PRAGMA data_version``), so an idle
    store stays idle.
    """

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
            seen = None
            while not self._stopped.wait(self._interval):
                try:
                    version = conn.execute("PRAGMA data_version").fetchone()[0]
                    if version == seen:
                        continue  # nobody else wrote since the last round
                    self.checkpoint(conn)
                    seen = conn.execute("PRAGMA data_version").fetchone()[0]
                except sqlite3.Error:
                    log.debug("checkpoint skipped", exc_info=True)
        finally:
            conn.close()

    @staticmethod
    def checkpoint(conn: sqlite3.Connection) -> None:
        """Checkpoint; when the whole WAL was copied, rewind it here (see the class)."""
        busy, frames, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        if busy or frames <= 0 or copied != frames:
            return
        # A real change (a no-op UPDATE writes nothing): flip a bit of user_version,
        # which orgate does not use otherwise.
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        conn.execute(f"PRAGMA user_version = {int(version) ^ 1}")


#: What an inline write resolves to when the write lock was taken: run it on the thread.
LOCKED: Any = object()

#: Exceptions that write functions raise only before they write anything (a refused
#: save, a busy session, a bad argument): the batch's transaction stays usable.
CLEAN_ERRORS: tuple[type[BaseException], ...] = (ValueError,)


def _is_locked(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED) or (
        code is None and "locked" in str(exc)
    )


class InlineWriter:
    """Write transactions run on the event loop's thread, one per loop iteration.

    ``submit(fn, *args)`` queues ``fn(conn, *args)`` and returns a future; the first
    submit of an iteration schedules ``flush`` with ``call_soon``, so everything
    submitted until then shares one transaction. Functions must raise only
    ``clean`` exceptions (see ``CLEAN_ERRORS``) before writing; any other failure
    rolls the batch back and replays its jobs one transaction each, so that a
    failing job fails alone. The future's result is ``LOCKED`` when another
    connection held the write lock (the connection's ``busy_timeout`` is 0): the
    caller then runs the job on the database thread, which waits for the lock.
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        loop: asyncio.AbstractEventLoop,
        clean: tuple[type[BaseException], ...] = CLEAN_ERRORS,
    ) -> None:
        self.conn: sqlite3.Connection | None = conn
        self.loop = loop
        self._clean = clean
        self._jobs: list[_Job] = []
        self._handle: asyncio.Handle | None = None
        #: Transactions committed (for tests).
        self.commits = 0

    def submit(self, fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        """Queue ``fn(conn, *args)`` for this iteration's transaction (event loop thread only)."""
        future = self.loop.create_future()
        self._jobs.append(_Job(Kind.WRITE, fn, args, future, self.loop))
        if self._handle is None:
            self._handle = self.loop.call_soon(self.flush)
        return future

    def flush(self) -> None:
        """Commit what is queued now, then resume the callers."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        jobs, self._jobs = self._jobs, []
        if not jobs:
            return
        try:
            if not self._transaction(jobs) and len(jobs) > 1:
                for job in jobs:  # something failed half-way: each job in its own transaction
                    self._transaction([job])
        except BaseException as exc:  # a bug here must not leave the callers waiting forever
            for job in jobs:
                job.ok, job.result = False, exc
            raise
        finally:
            _deliver(jobs)

    def close(self) -> None:
        """Flush, then close the connection."""
        self.flush()
        conn, self.conn = self.conn, None
        if conn is not None:
            conn.close()

    def _transaction(self, jobs: list[_Job]) -> bool:
        """Run ``jobs`` in one transaction; False when it was rolled back by a job's failure."""
        conn = self.conn
        if conn is None:
            for job in jobs:
                job.ok, job.result = False, sqlite3.ProgrammingError("the store is not open")
            return True
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            locked = _is_locked(exc)
            for job in jobs:
                job.ok, job.result = locked, (LOCKED if locked else exc)
            return True
        try:
            for job in jobs:
                try:
                    job.result = job.fn(conn, *job.args)
                    job.ok = True
                except self._clean as exc:
                    job.ok, job.result = False, exc
                except BaseException as exc:  # it may have written part: undo the batch
                    job.ok, job.result = False, exc
                    conn.execute("ROLLBACK")
                    return False
            conn.execute("COMMIT")
            self.commits += 1
        except sqlite3.Error as exc:  # BEGIN/COMMIT/ROLLBACK failed: so did every job
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            for job in jobs:
                job.ok, job.result = False, exc
        return True
