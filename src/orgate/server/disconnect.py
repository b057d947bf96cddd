"""Watching an HTTP client's connection while its request runs: ``DisconnectWatch``.

ASGI says a client went away only through ``receive()`` (``http.disconnect``),
so noticing it while the handler waits on something else (an upstream's first
token, a long non-streamed answer, a slow stream) takes a task awaiting
``receive()`` beside it. That task costs CPU on every request that starts one (hot
path — see bench/instructions.py); it is only started once a request has run
``WATCH_AFTER`` seconds, so a fast answer never pays for it, and a client that left
earlier is noticed the moment it starts (``receive()`` answers ``http.disconnect`` at once).

The same watch can also time the reading of the request body (``body_timeout``):
one timer handle per request then serves both, which is the hot path's
cheapest form (hot path — see bench/instructions.py).
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

    Watching starts once the request body has been read: from then on ``receive()``
    only ever answers ``http.disconnect``. A client that goes away while the
    upstream has not answered yet (a slow first token, a stall, a long
    non-streamed answer) or mid-stream cancels the turn where it waits, so the
    upstream call is closed and the response is stored as failed, instead of
    running on for nobody until its upstream ends (maybe never).

    Created before the body is read, with ``body_timeout``: the body must arrive
    within that many seconds, else the task is cancelled and ``body_timed_out()``
    says so; ``body_read()`` ends that phase. Created after it, without. Stopped
    before ``body_read()``, it is a body deadline alone (``body.with_body_timeout``,
    ``receive`` then unused).
    """

    __slots__ = (
        "disconnected",
        "stream",
        "_armed",
        "_receive",
        "_task",
        "_timer",
        "_watcher",
        "_delay",
        "_body_timeout",
        "_waited",
        "_expired",
        "_cancelling",
    )

    def __init__(
        self, receive: Any, delay: float = WATCH_AFTER, *, body_timeout: float | None = None
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._task = task
        self._receive = receive
        self._armed = True
        self.disconnected = False
        self.stream: Any = (
            None  # the ResponseStream being answered: told whether its client is there
        )
        self._watcher: asyncio.Task[None] | None = None
        self._delay = delay
        self._body_timeout = body_timeout  # None once the body is read (or when it was read before)
        self._expired = False
        self._cancelling = 0
        first = delay if body_timeout is None else min(delay, body_timeout)
        self._waited = first  # seconds from creation to the timer's firing
        self._timer: asyncio.TimerHandle | None = asyncio.get_running_loop().call_later(
            first, self._tick
        )

    def _tick(self) -> None:
        self._timer = None
        if not self._armed:
            return
        limit = self._body_timeout
        if limit is None:
            self._watcher = asyncio.create_task(self._watch())
        elif self._waited < limit:  # the body is late: the timer now waits for its deadline
            self._timer = asyncio.get_running_loop().call_later(limit - self._waited, self._tick)
            self._waited = limit
        else:
            self._expired = True
            self._cancelling = self._task.cancelling()
            self._task.cancel()

    def body_read(self) -> None:
        """The body is in: the connection is watched from ``delay`` seconds after creation
        (at once if that time has passed while the body was read)."""
        self._body_timeout = None
        if self._waited > self._delay and self._armed:  # the timer waits for the body's deadline
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            self._watcher = asyncio.create_task(self._watch())

    def body_timed_out(self) -> bool:
        """After a ``CancelledError`` while the body was read: True (and the cancellation undone)
        if it was the body's deadline alone (a cancellation from elsewhere too, e.g. a shutdown,
        wins)."""
        return self._expired and self._task.uncancel() <= self._cancelling

    async def _watch(self) -> None:
        while (await self._receive())["type"] != "http.disconnect":
            pass
        if self._armed:
            self.disconnected = True
            if self.stream is not None:
                self.stream.client_gone = True
            self._task.cancel()

    def follow(self, stream: Any) -> None:
        """Tell ``stream`` whether its client is there: a cancellation while it is,
        is the server's own."""
        self.stream = stream
        stream.client_gone = self.disconnected

    def absorb(self) -> bool:
        """After a ``CancelledError``: True (and the cancellation undone) if it was the client going
        away."""
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
