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

``DrainingWebSocketProtocol`` is uvicorn's WebSocket protocol without its
shutdown behaviour (a 1012 close at once, the running response cut): an open
socket is left to the app, which finishes or interrupts its response, then
closes with 1012 itself.
"""

from __future__ import annotations

import asyncio
import socket
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

import uvicorn
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

#: Seconds after the drain deadline for the interrupted responses' last events and saves.
FINISH_GRACE = 5.0


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
        """``stop()`` runs when the drain time is over, before the requests still running are cancelled."""
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
    """uvicorn's server, starting the app's ``Shutdown`` and cancelling what is left at its deadline."""

    drain: Shutdown | None = None

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        drain = self.drain
        if drain is None:
            await super().shutdown(sockets)
            return
        drain.begin()
        deadline = asyncio.create_task(self._stop_unfinished(drain), name="orgate-drain-deadline")
        try:
            await super().shutdown(sockets)
        finally:
            deadline.cancel()

    async def _stop_unfinished(self, drain: Shutdown) -> None:
        await asyncio.sleep(drain.drain_timeout)
        await drain.expire()
        # What uvicorn would do at its own timeout, FINISH_GRACE earlier: the cancelled requests
        # answer server_shutdown and save, while uvicorn still waits for them (and the store is open).
        for task in list(self.server_state.tasks):
            if task not in drain.followers:
                task.cancel(msg="the drain timeout passed")


def draining_config(drain_timeout: float, **options: Any) -> uvicorn.Config:
    """``uvicorn.Config`` for a ``DrainingServer``: its WebSocket protocol, and the grace after the drain."""
    return uvicorn.Config(
        ws=DrainingWebSocketProtocol,
        timeout_graceful_shutdown=drain_timeout + FINISH_GRACE,
        **options,
    )


class DrainingWebSocketProtocol(WebSocketsSansIOProtocol):
    """A socket open at shutdown is the app's to finish and close (``server/websocket.py``)."""

    def shutdown(self) -> None:
        if self.handshake_complete and self.initial_response is None and not self.close_sent:
            return
        super().shutdown()
