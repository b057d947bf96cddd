"""Graceful shutdown: one drain deadline for everything a SIGTERM finds running.

On SIGTERM (or SIGINT) uvicorn stops listening and waits for its connections.
``DrainingServer`` starts the app's ``Shutdown`` at that moment: HTTP requests
and streams, WebSocket responses (``server/websocket.py``) and background
responses (``engine/background.py``) all get ``[server] drain_timeout`` seconds
from the signal. At the deadline whatever is still running is stopped — first
the background responses (so that a client following one with ``GET
?stream=true`` receives its end), then the HTTP and WebSocket requests — and
each path tells its client and stores the response ``failed`` with code
``server_shutdown`` (``engine.service.shutdown_error``). uvicorn's own timeout is
``drain_timeout + FINISH_GRACE``: the time for those last events and saves,
before it gives up on them.

Then the process ends, whatever still runs: ``ExitWatchdog`` (a daemon thread started
with the drain) exits the process ``EXIT_GRACE`` after the app's shutdown (the store
closed: everything that can be kept is kept) if something left running — a thread busy
with abandoned work, which Python can neither stop nor leave behind at exit — still holds
it; and at ``drain_timeout + FINISH_GRACE + EXIT_GRACE`` from the signal in any case,
with a status of 1 when the app's shutdown did not finish. A ``SIGALRM`` half a second
later ends the process even if that thread cannot run.

``DrainingWebSocketProtocol`` is uvicorn's WebSocket protocol without its
shutdown behaviour (a 1012 close at once, the running response cut): an open
socket is left to the app, which finishes or interrupts its response, then
closes with 1012 itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
import threading
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

import uvicorn
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

#: Seconds after the drain deadline for the interrupted responses' last events and saves.
FINISH_GRACE = 3.0
#: Seconds the process is given to exit by itself once the app has shut down (or, from the
#: end of ``FINISH_GRACE``, to shut down at all) before the watchdog ends it.
EXIT_GRACE = 1.0
#: Seconds after the watchdog's deadline when ``SIGALRM`` ends the process regardless.
ALARM_AFTER = 0.5

log = logging.getLogger("orgate.server")


class Shutdown:
    """The app's view of a shutdown: whether it began and when the drain ends (loop time)."""

    def __init__(self, drain_timeout: float) -> None:
        self.drain_timeout = drain_timeout
        self.started = asyncio.Event()
        self.deadline: float | None = None
        self._at_deadline: list[Callable[[], Awaitable[None]]] = []
        # Requests that follow a background response (GET ?stream=true): they end with it once the
        # deadline stopped it, so they are not cancelled (a cancelled one would miss the end).
        self.followers: weakref.WeakSet[asyncio.Task[Any]] = weakref.WeakSet()

    def at_deadline(self, stop: Callable[[], Awaitable[None]]) -> None:
        """``stop()`` runs when the drain time is over, before the requests still running are
        cancelled."""
        self._at_deadline.append(stop)

    async def expire(self) -> None:
        """Run the ``at_deadline`` stops (for at most half the grace: the requests come next)."""
        stops = [asyncio.ensure_future(stop()) for stop in self._at_deadline]
        if stops:
            await asyncio.wait(stops, timeout=FINISH_GRACE / 2)

    def begin(self) -> None:
        if self.deadline is None:
            self.deadline = asyncio.get_running_loop().time() + self.drain_timeout
            self.started.set()

    def remaining(self) -> float:
        """Seconds left to drain; 0 when no drain began (an app closed without a signal)."""
        if self.deadline is None:
            return 0.0
        return max(0.0, self.deadline - asyncio.get_running_loop().time())


class DrainingServer(uvicorn.Server):
    """uvicorn's server, starting the app's ``Shutdown`` and cancelling what is left at its
    deadline."""

    drain: Shutdown | None = None

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        drain = self.drain
        if drain is None:
            await super().shutdown(sockets)
            return
        drain.begin()
        watchdog = ExitWatchdog(exit_deadline(drain.drain_timeout))
        watchdog.start()
        deadline = asyncio.create_task(self._stop_unfinished(drain), name="orgate-drain-deadline")
        try:
            await super().shutdown(sockets)
        finally:
            deadline.cancel()
            watchdog.app_closed()

    async def _stop_unfinished(self, drain: Shutdown) -> None:
        await asyncio.sleep(drain.drain_timeout)
        await drain.expire()
        # What uvicorn would do at its own timeout, FINISH_GRACE earlier: the cancelled requests
        # answer server_shutdown and save, while uvicorn still waits for them
        # (and the store is open).
        for task in list(self.server_state.tasks):
            if task not in drain.followers:
                task.cancel(msg="the drain timeout passed")


def exit_deadline(drain_timeout: float) -> float:
    """Seconds from a SIGTERM by which a server process has exited, at the latest (the
    watchdog's deadline; its alarm follows ``ALARM_AFTER`` later)."""
    return drain_timeout + FINISH_GRACE + EXIT_GRACE


class ExitWatchdog:
    """Ends the process if it has not exited by itself: ``EXIT_GRACE`` after the app closed, or
    ``seconds`` after the signal (see the module docstring)."""

    def __init__(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds
        self.closed = threading.Event()
        self.thread = threading.Thread(target=self._watch, name="orgate-exit-watchdog", daemon=True)

    def start(self) -> None:
        self.thread.start()
        _arm_alarm(self.deadline - time.monotonic() + ALARM_AFTER)

    def app_closed(self) -> None:
        """The app's shutdown is done: the store is closed, nothing more is kept by waiting."""
        self.closed.set()

    def _watch(self) -> None:
        closed = self.closed.wait(max(0.0, self.deadline - time.monotonic()))
        if closed:
            time.sleep(max(0.0, min(EXIT_GRACE, self.deadline - time.monotonic())))
        busy = sorted(t.name for t in threading.enumerate() if t is not threading.current_thread())
        if closed:
            log.warning("exiting with work still running in: %s", ", ".join(busy) or "nothing")
        else:
            log.error("the shutdown did not finish in time: exiting (threads: %s)", ", ".join(busy))
        _flush_logs()
        os._exit(0 if closed else 1)


def _arm_alarm(seconds: float) -> None:
    """The kernel ends the process ``seconds`` from now (``SIGALRM``'s default action), with no
    Python code to run: for a watchdog that cannot get the interpreter."""
    with contextlib.suppress(ValueError, OSError, AttributeError):
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.01))


def _flush_logs() -> None:
    for handler in logging.getLogger().handlers:
        with contextlib.suppress(Exception):
            handler.flush()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


def draining_config(drain_timeout: float, **options: Any) -> uvicorn.Config:
    """``uvicorn.Config`` for a ``DrainingServer``: its WebSocket protocol,
    and the grace after the drain."""
    # seconds as a float: uvicorn hands it to asyncio.wait_for (its annotation says int)
    grace = drain_timeout + FINISH_GRACE
    return uvicorn.Config(
        ws=DrainingWebSocketProtocol,
        timeout_graceful_shutdown=grace,  # type: ignore[arg-type]  # a float: see above
        **options,
    )


class DrainingWebSocketProtocol(WebSocketsSansIOProtocol):
    """A socket open at shutdown is the app's to finish and close (``server/websocket.py``)."""

    def shutdown(self) -> None:
        if self.handshake_complete and self.initial_response is None and not self.close_sent:
            return
        super().shutdown()
