"""Watching an HTTP client's connection while its request runs: ``DisconnectWatch``.

ASGI says a client went away only through ``receive()`` (``http.disconnect``),
so noticing it while the handler waits on something else (an upstream's first
token, a long non-streamed answer, a slow stream) takes a task awaiting
``receive()`` beside it. That task costs about a tenth of a millisecond of CPU
per request; it is only started once a request has run ``WATCH_AFTER`` seconds,
so a fast answer never pays for it, and a client that left earlier is noticed
the moment it starts (``receive()`` answers ``http.disconnect`` at once).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

log = logging.getLogger("orgate.server")

#: Seconds a request runs before its client's connection is watched (see the module docstring).
WATCH_AFTER = 0.25


class DisconnectWatch:
    """Cancels the request's task when the client disconnects, from ``WATCH_AFTER`` seconds
    after creation until ``stop()``.

    Created once the request body has been read: from then on ``receive()``
    only ever answers ``http.disconnect``. A client that goes away while the
    upstream has not answered yet (a slow first token, a stall, a long
    non-streamed answer) or mid-stream cancels the turn where it waits, so the
    upstream call is closed and the response is stored as failed, instead of
    running on for nobody until its upstream ends (maybe never).
    """

    __slots__ = ("disconnected", "stream", "_armed", "_receive", "_task", "_timer", "_watcher")

    def __init__(self, receive: Any, delay: float = WATCH_AFTER) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._task = task
        self._receive = receive
        self._armed = True
        self.disconnected = False
        self.stream: Any = None  # the ResponseStream being answered: told whether its client is there
        self._watcher: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = asyncio.get_running_loop().call_later(delay, self._start)

    def _start(self) -> None:
        self._timer = None
        if self._armed:
            self._watcher = asyncio.create_task(self._watch())

    async def _watch(self) -> None:
        while (await self._receive())["type"] != "http.disconnect":
            pass
        if self._armed:
            self.disconnected = True
            if self.stream is not None:
                self.stream.client_gone = True
            self._task.cancel()

    def follow(self, stream: Any) -> None:
        """Tell ``stream`` whether its client is there: a cancellation while it is, is the server's own."""
        self.stream = stream
        stream.client_gone = self.disconnected

    def absorb(self) -> bool:
        """After a ``CancelledError``: True (and the cancellation undone) if it was the client going away."""
        if not self.disconnected:
            return False
        self._task.uncancel()
        return True

    def stop(self) -> None:
        """Disarm (synchronously: no cancellation can follow) and end the watcher."""
        self._armed = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        watcher = self._watcher
        if watcher is None:
            return
        if not watcher.done():
            watcher.cancel()
        elif not watcher.cancelled() and (error := watcher.exception()) is not None:
            log.error("disconnect watcher failed: %r", error)
