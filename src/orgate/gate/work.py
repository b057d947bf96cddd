"""Where the work a client's JSON Schema asks for runs, so that it cannot hold the server.

Checking a model's output against a client's schema, and generating a value from one (the
built-in model), is small work for almost every request — and a hostile schema within
every static bound can make it minutes of CPU: a union nested a few levels deep checks
each value thousands of times, and the detailed validator words every error of every
branch. Python cannot stop a thread, and the native validator (``jsonschema-rs``) holds the
interpreter lock for the whole of a call, so a thread running such work stalls every
request and outlives its client and a server's SIGTERM. Hence two places:

- work that the schema's cost (``cost.py``) and the size of its input show to be small
  runs where it is asked for: inline (``run_small``), or in a small pool of threads
  (``in_thread``) when it is Python that should not stall the event loop at all;
- any other runs in a worker process (``in_process``): at most ``processes`` of them (the
  others wait), forked on first use from a fork server that has the job modules preloaded,
  at a lower CPU priority than the server and under an address-space limit. The server
  awaits the answer holding nothing, and the process is killed — a new one is forked for
  the next job — when the work passes ``seconds`` (``SchemaWorkTimeout``), when the request
  awaiting it is cancelled (its client went away, a shutdown's drain deadline passed), or
  when the server stops (``stop``).

A job is a module-level function and its arguments, pickled both ways (the job by its
name), so what crosses is the schema and the text or value at hand, all bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pickle
import signal
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

from orgate.gate.cost import SchemaCost

if TYPE_CHECKING:
    from multiprocessing.connection import Connection
    from multiprocessing.context import ForkServerContext, SpawnContext

    WorkerContext = ForkServerContext | SpawnContext
    from multiprocessing.process import BaseProcess

log = logging.getLogger("orgate.schema_work")

T = TypeVar("T")

#: The address space one worker process may use: the interpreter and the validators take about
#: 70 MB of it; a job that needs more fails (``SchemaWorkFailed``) instead of the machine
#: swapping.
MEMORY_LIMIT = 256 * 1024 * 1024
#: How much lower a worker's CPU priority is than the server's (``nice``): the event loop is
#: scheduled first when both want the CPU.
NICENESS = 10
#: Threads for the small Python work that should not run on the event loop itself.
THREADS = 4


#: Checking a text against a schema is small work up to this many characters × the schema's
#: fan-out: tens of milliseconds at worst, every error worded (bench/hostile_schemas.py).
SMALL_CHECK = 65_536
#: Checking a tool call's arguments is small work up to this many characters × fan-out: the
#: gate words every error with the native validator, which builds them all at once.
SMALL_CALL_CHECK = 4_096
#: Generating a value from a schema is small work when the schema checks a value against at
#: most this many subschemas, and asks for no more than these sizes (the generator validates
#: each candidate it makes, so what costs is the size of the candidates times the fan-out).
SMALL_GENERATION_FANOUT = 8
SMALL_GENERATION_CHARS = 16_384
SMALL_GENERATION_COUNT = 1_000


def small_check(cost: SchemaCost, chars: int) -> bool:
    """Whether checking ``chars`` characters of JSON against a schema of ``cost`` is small work."""
    return chars * cost.fanout <= SMALL_CHECK


def small_call_check(cost: SchemaCost, chars: int) -> bool:
    """Whether the gate's check of ``chars`` characters of arguments is small work."""
    return chars * cost.fanout <= SMALL_CALL_CHECK


def small_generation(cost: SchemaCost, prompt_chars: int) -> bool:
    """Whether generating a value from a schema of ``cost`` (its strings drawn from a prompt of
    ``prompt_chars`` characters) is small work."""
    return (
        cost.fanout <= SMALL_GENERATION_FANOUT
        and cost.min_chars <= SMALL_GENERATION_CHARS
        and cost.largest_count <= SMALL_GENERATION_COUNT
        and prompt_chars <= SMALL_GENERATION_CHARS
    )


class SchemaWorkTimeout(Exception):
    """The work took longer than its time limit; its process was killed."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        super().__init__(f"the schema work took longer than {seconds:g} seconds")


class SchemaWorkFailed(Exception):
    """The worker process ended without an answer (it crashed, or was killed by a stop)."""


@dataclass(eq=False, slots=True)
class _Worker:
    process: BaseProcess
    conn: Connection


class SchemaWork:
    """Runs schema work inline, in threads or in killable worker processes (module docstring)."""

    def __init__(
        self,
        processes: int = 2,
        seconds: float = 10.0,
        *,
        memory: int = MEMORY_LIMIT,
        preload: Sequence[str] = (),
    ) -> None:
        self.processes = processes
        self.seconds = seconds
        self.memory = memory
        self.preload = list(preload)
        self._context: WorkerContext | None = None
        self._threads: ThreadPoolExecutor | None = None
        self._idle: list[_Worker] = []
        self._busy: set[_Worker] = set()
        self._slots: asyncio.Semaphore | None = None
        self._slots_loop: asyncio.AbstractEventLoop | None = None
        self.started = 0  # worker processes started
        self.killed = 0  # worker processes killed (timeout, cancellation, stop)
        self.answered = 0  # jobs a worker process answered

    def configure(self, processes: int, seconds: float, preload: Sequence[str] = ()) -> None:
        """Take the ``[limits]`` settings of the server being built, and the modules of its
        jobs (imported once by the fork server, not by each worker)."""
        self.processes, self.seconds = processes, seconds
        if preload:
            self.preload = list(preload)

    # --- the three places --------------------------------------------------------------

    async def run(self, job: Callable[..., T], *args: Any, small: bool) -> T:
        """``job(*args)`` in a thread when ``small``, else in a worker process."""
        if small:
            return await self.in_thread(job, *args)
        return await self.in_process(job, *args)

    async def in_thread(self, job: Callable[..., T], *args: Any) -> T:
        """``job(*args)`` in one of a few threads: for work known to be small."""
        if self._threads is None:
            self._threads = ThreadPoolExecutor(THREADS, thread_name_prefix="orgate-schema")
        return await asyncio.get_running_loop().run_in_executor(self._threads, job, *args)

    async def in_process(self, job: Callable[..., T], *args: Any) -> T:
        """``job(*args)`` in a worker process, within ``seconds`` (waiting for one included)."""
        try:
            async with asyncio.timeout(self.seconds):
                async with self._slot():
                    worker = self._idle.pop() if self._idle else await self._start()
                    self._busy.add(worker)
                    kept = False
                    try:
                        status, value = await _call(worker, job, args)
                        kept = True
                        self.answered += 1
                    finally:
                        self._busy.discard(worker)
                        if kept:
                            self._idle.append(worker)
                        else:
                            self._kill(worker)
        except TimeoutError:
            raise SchemaWorkTimeout(self.seconds) from None
        if status == "error":
            if isinstance(value, MemoryError):
                raise SchemaWorkFailed(
                    f"the schema work needed more than {self.memory // 2**20} MB"
                ) from None
            raise value
        return cast(T, value)  # what ``job`` returned, sent back by the worker

    def stop(self) -> None:
        """Kill every worker process (the jobs they run end with ``SchemaWorkFailed``)."""
        for worker in self._idle:
            self._kill(worker)
        self._idle.clear()
        for worker in self._busy:  # its job sees the pipe close, then closes its end itself
            with contextlib.suppress(Exception):
                worker.process.kill()

    # --- processes --------------------------------------------------------------------

    def _slot(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if self._slots is None or self._slots_loop is not loop:
            self._slots, self._slots_loop = asyncio.Semaphore(self.processes), loop
        return self._slots

    async def _start(self) -> _Worker:
        # Starting the first one starts the fork server (an interpreter importing the job
        # modules): off the event loop.
        loop = asyncio.get_running_loop()
        if self._threads is None:
            self._threads = ThreadPoolExecutor(THREADS, thread_name_prefix="orgate-schema")
        return await loop.run_in_executor(self._threads, self._start_now)

    def _start_now(self) -> _Worker:
        context = self._multiprocessing()
        ours, theirs = context.Pipe(duplex=True)
        process = context.Process(
            target=serve_jobs,
            args=(theirs, self.memory),
            name="orgate-schema-work",
            daemon=True,
        )
        process.start()
        theirs.close()
        self.started += 1
        log.debug("schema work process %d started", process.pid)
        return _Worker(process, ours)

    def _multiprocessing(self) -> WorkerContext:
        # Imported with the first worker process, not with the server: most servers never
        # start one, and ``multiprocessing`` is start-up time (bench/startup.py).
        import multiprocessing

        if self._context is None:
            context: WorkerContext
            if "forkserver" in multiprocessing.get_all_start_methods():
                context = multiprocessing.get_context("forkserver")
                if self.preload:
                    context.set_forkserver_preload(self.preload)
            else:
                context = multiprocessing.get_context("spawn")
            self._context = context
        return self._context

    def _kill(self, worker: _Worker) -> None:
        self.killed += 1
        with contextlib.suppress(Exception):
            worker.process.kill()
        with contextlib.suppress(Exception):
            worker.conn.close()
        # Its exit status is collected without waiting (the next start forgets it).
        with contextlib.suppress(Exception):
            worker.process.join(0)


async def _call(worker: _Worker, job: Callable[..., Any], args: tuple[Any, ...]) -> tuple[str, Any]:
    """Send one job and await its answer, without blocking the event loop while it runs."""
    loop = asyncio.get_running_loop()
    payload = pickle.dumps((job, args), pickle.HIGHEST_PROTOCOL)
    answered: asyncio.Future[None] = loop.create_future()
    fd = worker.conn.fileno()
    loop.add_reader(fd, _set_once, answered)
    # uvloop makes a watched descriptor non-blocking: the pipe is read and written whole.
    os.set_blocking(fd, True)
    try:
        worker.conn.send_bytes(payload)  # the worker is waiting for it: it reads as we write
        await answered
        answer: tuple[str, Any] = pickle.loads(worker.conn.recv_bytes())
    except (EOFError, OSError) as exc:
        raise SchemaWorkFailed(
            f"the schema work process ended without an answer ({worker.process.exitcode})"
        ) from exc
    finally:
        loop.remove_reader(fd)
    return answer


def _set_once(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


# --- the worker process ----------------------------------------------------------------


def serve_jobs(conn: Connection, memory: int) -> None:
    """A worker process's life: one job at a time, until its server closes the pipe."""
    _lower_priority(memory)
    while True:
        try:
            raw = conn.recv_bytes()
        except (EOFError, OSError):
            return
        conn.send_bytes(_answer(raw))


def _answer(raw: bytes) -> bytes:
    try:
        job, args = pickle.loads(raw)
        answer: tuple[str, Any] = ("ok", job(*args))
    except BaseException as exc:  # noqa: BLE001 - every failure is the job's answer
        answer = ("error", exc)
    try:
        return pickle.dumps(answer, pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # noqa: BLE001 - an answer that does not pickle
        return pickle.dumps(("error", SchemaWorkFailed(f"{type(exc).__name__}: {exc}")))


def _lower_priority(memory: int) -> None:
    """Below the server in CPU priority, within ``memory`` bytes of address space, deaf to the
    terminal's ^C (the server stops it), and gone with its fork server."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(OSError):
        os.nice(NICENESS)
    with contextlib.suppress(ImportError, ValueError, OSError):
        import resource  # a worker process's own: Unix only

        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    _die_with_parent()


def _die_with_parent() -> None:
    """Linux: SIGKILL when the parent (the fork server, which ends with the server) exits."""
    with contextlib.suppress(Exception):
        import ctypes  # a worker process's own

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)


#: The process-wide schema work (configured by the server from ``[limits]``).
SCHEMA_WORK = SchemaWork()
