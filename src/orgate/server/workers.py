"""``orgate serve --workers N``: a supervisor process and N worker processes.

The supervisor binds one listening socket per worker slot, all on the same
address with ``SO_REUSEPORT`` (the kernel spreads new connections over them),
and keeps them open for the server's lifetime. Worker ``i`` is a fresh
``orgate serve`` process that inherits slot ``i``'s socket, so a slot's queued
connections survive its worker: they wait for the replacement of a crashed
worker, and during a reload the new worker accepts from the socket the old one
stops accepting from. The supervisor

- replaces a worker that exits unasked (with a growing pause if it keeps
  crashing at start-up); the replacement's store start-up fails the dead
  worker's in-flight responses, as for any dead process (``recover_interrupted``);
- on SIGTERM / SIGINT, sends SIGTERM to every worker (each drains its requests,
  ``[server] drain_timeout``) and exits 0 when they are done;
- on SIGHUP, checks the configuration again, starts a new set of workers with
  it, and once all are serving, drains the old ones: no connection is dropped.
  A configuration that does not load leaves the running workers as they are.

A worker learns its part from ``ORGATE_WORKER_OF`` (JSON: the server's private
directory, its slot, inherited descriptors): ``worker_context()``. It writes a
byte on its ready pipe once serving, and stops when the supervisor's end of its
alive pipe closes (a supervisor killed outright leaves no orphan workers). The
private directory holds the metrics snapshots (``worker_metrics``) and the rate
limits' file (``ratelimit_shared``); it is removed when the supervisor exits, or by
the workers when the supervisor was killed.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orgate.server import worker_metrics
from orgate.server.shutdown import ALARM_AFTER, exit_deadline

log = logging.getLogger("orgate.workers")

WORKER_ENV = "ORGATE_WORKER_OF"
#: A worker that exits within this many seconds of its start counts as a crash loop: the pause
#: before its replacement doubles each time (up to ``MAX_PAUSE``).
QUICK_EXIT = 10.0
MAX_PAUSE = 30.0
#: Seconds a new worker may take to start serving before a reload gives up on it.
START_TIMEOUT = 120.0


def workers_count(text: str) -> int:
    """``--workers``: a positive number, or ``auto`` (one per CPU core this process may use)."""
    if text == "auto":
        try:
            return len(os.sched_getaffinity(0))
        except AttributeError:  # not on this platform
            return os.cpu_count() or 1
    try:
        count = int(text)
    except ValueError:
        count = 0
    if count < 1:
        import argparse

        raise argparse.ArgumentTypeError(f"expected a positive number or 'auto', got {text!r}")
    return count


@dataclass(frozen=True)
class WorkerContext:
    """What a worker process inherits from its supervisor."""

    directory: Path
    slot: int
    listen_fds: list[int]
    ready_fd: int
    alive_fd: int

    def sockets(self) -> list[socket.socket]:
        return [socket.socket(fileno=fd) for fd in self.listen_fds]

    @property
    def metrics_dir(self) -> Path:
        return self.directory / "metrics"

    @property
    def ratelimit_file(self) -> Path:
        return self.directory / "ratelimit.db"


def worker_context() -> WorkerContext | None:
    """This process's part in a multi-worker server (None for a single-process server)."""
    raw = os.environ.get(WORKER_ENV)
    if not raw:
        return None
    data = json.loads(raw)
    return WorkerContext(
        Path(data["dir"]), data["slot"], data["listen"], data["ready"], data["alive"]
    )


def worker_server(config: Any, context: WorkerContext | None, base: type | None = None) -> Any:
    """A ``base`` (default ``uvicorn.Server``); for a worker, one that reports readiness and follows
    its supervisor."""
    import uvicorn

    server_class: Any = base or uvicorn.Server
    if context is None:
        return server_class(config)
    ctx = context  # narrowed: the methods below read it

    # A base chosen at run time (the caller's subclass of uvicorn.Server) is typed Any.
    class WorkerServer(server_class):  # type: ignore[misc]  # subclass of a runtime base
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if not self.started:
                return
            import asyncio

            asyncio.get_running_loop().add_reader(ctx.alive_fd, self._supervisor_gone)
            with contextlib.suppress(OSError):
                os.write(ctx.ready_fd, b"1")
                os.close(ctx.ready_fd)

        def _supervisor_gone(self) -> None:
            import asyncio

            asyncio.get_running_loop().remove_reader(ctx.alive_fd)
            log.warning("the supervisor is gone: draining and exiting")
            self.orphaned = True
            self.should_exit = True

        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            await super().shutdown(sockets)
            if getattr(self, "orphaned", False):  # nobody else will remove the private directory
                shutil.rmtree(ctx.directory, ignore_errors=True)

    # A terminal's hang-up goes to the process group: reloading is the supervisor's job.
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    return WorkerServer(config)


@dataclass(eq=False)
class _Worker:
    slot: int
    proc: subprocess.Popen[bytes]
    ready_r: int
    alive_w: int
    started: float = field(default_factory=time.monotonic)
    ready: bool = False
    awaited: bool = False  # started with others whose start is waited for (first start, reload)
    retiring: bool = False
    exited: int | None = None


class Supervisor:
    """Starts, watches, replaces, reloads and stops the workers of one server."""

    def __init__(
        self,
        slots: list[list[socket.socket]],
        argv: Sequence[str],
        *,
        drain_timeout: float,
        check_config: Callable[[], str | None],
        env: dict[str, str] | None = None,
    ) -> None:
        self.slots = slots
        self.argv = list(argv)
        self.drain_timeout = drain_timeout
        self.check_config = check_config
        self.env = dict(os.environ if env is None else env)
        self.directory = Path(tempfile.mkdtemp(prefix="orgate-workers-"))
        (self.directory / "metrics").mkdir()
        self.workers: list[_Worker] = []  # the serving generation (and the new one during a reload)
        self.selector = selectors.DefaultSelector()
        self.signals: list[int] = []
        self.pauses: dict[int, float] = {}  # slot → pause before its next replacement
        self.respawn_at: dict[int, float] = {}  # slot → when its replacement starts

    # -- processes

    def _spawn(self, slot: int) -> _Worker:
        ready_r, ready_w = os.pipe()
        alive_r, alive_w = os.pipe()
        listen = [sock.fileno() for sock in self.slots[slot]]
        context = {
            "dir": str(self.directory),
            "slot": slot,
            "listen": listen,
            "ready": ready_w,
            "alive": alive_r,
        }
        try:
            proc = subprocess.Popen(
                self.argv,
                env={**self.env, WORKER_ENV: json.dumps(context)},
                pass_fds=[*listen, ready_w, alive_r],
            )
        finally:
            os.close(ready_w)
            os.close(alive_r)
        worker = _Worker(slot, proc, ready_r, alive_w)
        self.selector.register(ready_r, selectors.EVENT_READ, worker)
        log.info("worker %d started (pid %d)", slot, proc.pid)
        return worker

    def _pump(self, timeout: float) -> None:
        """One round: readiness reports, signals, exited workers."""
        for key, _ in self.selector.select(timeout):
            if key.data is None:  # the signal wake-up pipe
                with contextlib.suppress(BlockingIOError):
                    self.signals.extend(os.read(key.fd, 64))
                continue
            worker: _Worker = key.data
            data = b""
            with contextlib.suppress(OSError):
                data = os.read(key.fd, 1)
            if data:
                worker.ready = True
            self._close_ready(worker)
        for worker in list(self.workers):
            if worker.exited is None and worker.proc.poll() is not None:
                self._exited(worker)

    def _exited(self, worker: _Worker) -> None:
        worker.exited = worker.proc.returncode
        self._close_ready(worker)
        os.close(worker.alive_w)
        self.workers.remove(worker)
        worker_metrics.retire(self.directory / "metrics", worker.proc.pid)
        if worker.retiring:
            log.info("worker %d (pid %d) stopped", worker.slot, worker.proc.pid)
            return
        if worker.awaited and not worker.ready:
            return  # a start that failed: whoever waited for it decides
        lived = time.monotonic() - worker.started
        pause = min(MAX_PAUSE, self.pauses.get(worker.slot, 0.5) * 2) if lived < QUICK_EXIT else 0.0
        self.pauses[worker.slot] = pause or 0.5
        log.error(
            "worker %d (pid %d) exited unexpectedly (%s); starting a replacement%s",
            worker.slot,
            worker.proc.pid,
            _describe_exit(worker.exited),
            f" in {pause:g} s" if pause else "",
        )
        self.respawn_at[worker.slot] = time.monotonic() + pause

    def _close_ready(self, worker: _Worker) -> None:
        if worker.ready_r >= 0:
            self.selector.unregister(worker.ready_r)
            os.close(worker.ready_r)
            worker.ready_r = -1

    def _respawn_due(self) -> None:
        now = time.monotonic()
        for slot, when in list(self.respawn_at.items()):
            if when <= now:
                del self.respawn_at[slot]
                self.workers.append(self._spawn(slot))

    def _wait_ready(self, batch: list[_Worker], timeout: float) -> bool:
        """Run the loop until every worker of ``batch`` serves (True), or one of them failed or the
        time ran out (False). Signals that arrive meanwhile are kept for the caller."""
        for worker in batch:
            worker.awaited = True
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(worker.exited is not None for worker in batch):
                return False
            if all(worker.ready for worker in batch):
                return True
            self._pump(0.2)
            if any(sig in (signal.SIGTERM, signal.SIGINT) for sig in self.signals):
                return False
        return False

    def _stop(self, batch: list[_Worker], grace: float) -> None:
        """SIGTERM ``batch`` and wait for it to exit (SIGKILL after ``grace`` seconds)."""
        for worker in batch:
            worker.retiring = True
            with contextlib.suppress(ProcessLookupError):
                worker.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        while any(worker.exited is None for worker in batch):
            if time.monotonic() > deadline:
                for worker in batch:
                    if worker.exited is None:
                        log.error(
                            "worker %d (pid %d) did not drain in time: killed",
                            worker.slot,
                            worker.proc.pid,
                        )
                        with contextlib.suppress(ProcessLookupError):
                            worker.proc.kill()
                deadline = float("inf")
            self._pump(0.1)

    # -- the server's life

    def run(self) -> int:
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        self.selector.register(wake_r, selectors.EVENT_READ, None)
        previous = signal.set_wakeup_fd(wake_w)
        handled = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD)
        originals = {sig: signal.signal(sig, _note) for sig in handled}
        try:
            return self._serve()
        finally:
            # A worker ends itself by then (server/shutdown.py): past it, it is killed.
            self._stop(list(self.workers), exit_deadline(self.drain_timeout) + ALARM_AFTER + 0.5)
            for sig, handler in originals.items():
                signal.signal(sig, handler)
            signal.set_wakeup_fd(previous)
            for fd in (wake_r, wake_w):
                os.close(fd)
            shutil.rmtree(self.directory, ignore_errors=True)

    def _serve(self) -> int:
        first = [self._spawn(slot) for slot in range(len(self.slots))]
        self.workers.extend(first)
        if not self._wait_ready(first, START_TIMEOUT):
            failed = next((worker for worker in first if worker.exited not in (None, 0)), None)
            if not any(sig in (signal.SIGTERM, signal.SIGINT) for sig in self.signals):
                log.error(
                    "a worker failed to start (%s): stopping",
                    _describe_exit(failed.exited) if failed else "timed out",
                )
                return failed.exited if failed and failed.exited and failed.exited > 0 else 1
            return 0
        log.info("%d workers serving", len(first))
        while True:
            self._pump(1.0)
            self._respawn_due()
            while self.signals:
                sig = self.signals.pop(0)
                if sig in (signal.SIGTERM, signal.SIGINT):
                    log.info("stopping: draining %d worker(s)", len(self.workers))
                    self._close_listeners()
                    return 0
                if sig == signal.SIGHUP:
                    self._reload()

    def _close_listeners(self) -> None:
        """New connections are refused once the workers close theirs too, as for one process."""
        for sockets in self.slots:
            for sock in sockets:
                sock.close()

    def _reload(self) -> None:
        problem = self.check_config()
        if problem:
            log.error("reload refused, the workers keep their configuration: %s", problem)
            return
        old = [worker for worker in self.workers if not worker.retiring]
        fresh = [self._spawn(slot) for slot in range(len(self.slots))]
        self.workers.extend(fresh)
        if not self._wait_ready(fresh, START_TIMEOUT):
            log.error("reload failed: the new workers did not start; the running ones keep serving")
            self._stop(fresh, 5.0)
            return
        # Slots of old workers that crashed during the reload are served by the new ones now.
        self.respawn_at.clear()
        log.info("reloaded: %d new worker(s) serving, draining the previous ones", len(fresh))
        for worker in old:
            worker.retiring = True
            with contextlib.suppress(ProcessLookupError):
                worker.proc.send_signal(signal.SIGTERM)


def _note(signum: int, frame: object) -> None:
    """The signal's number reaches the loop through the wake-up descriptor."""


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"signal {signal.Signals(-code).name}"
    return f"exit status {code}"


def bind_slots(
    bind: Callable[[int], list[socket.socket]], port: int, count: int
) -> list[list[socket.socket]]:
    """``count`` sets of listening sockets on one address (``bind(port)`` with ``SO_REUSEPORT``);
    ``port`` 0 takes the first set's port for all."""
    slots: list[list[socket.socket]] = []
    try:
        for _ in range(count):
            sockets = bind(port)
            slots.append(sockets)
            port = sockets[0].getsockname()[1]
            for sock in sockets:
                sock.listen(
                    2048
                )  # queue connections from now on, whether or not its worker runs yet
                sock.set_inheritable(True)
    except OSError:
        for sockets in slots:
            for sock in sockets:
                sock.close()
        raise
    return slots


def worker_argv(argv: Sequence[str], port: int) -> list[str]:
    """The worker's command line: the server's own, without ``--workers``, on the port picked."""
    kept: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--workers":
            skip = True
        elif not arg.startswith("--workers="):
            kept.append(arg)
    return [sys.executable, "-m", "orgate.cli", *kept, "--port", str(port)]


def supports_workers() -> str | None:
    """Why this platform cannot run workers (None when it can)."""
    if not hasattr(socket, "SO_REUSEPORT") or sys.platform == "win32":
        return (
            "--workers needs SO_REUSEPORT (Linux); run one process per core behind a load "
            "balancer instead"
        )
    return None


__all__ = [
    "Supervisor",
    "WorkerContext",
    "bind_slots",
    "worker_argv",
    "worker_context",
    "worker_server",
    "workers_count",
]
