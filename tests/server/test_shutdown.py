"""The app's view of a graceful shutdown (``orgate.server.shutdown.Shutdown``), in process.

One drain deadline from the signal: ``begin`` fixes it once, ``remaining`` counts down to
0 (and is 0 when no drain began), ``started`` tells the waiting paths; at the deadline
``expire`` runs every ``at_deadline`` stop together, waiting at most half of
``FINISH_GRACE`` for them (the requests still running come next).
"""

from __future__ import annotations

import asyncio

import pytest

from orgate.server import shutdown
from orgate.server.shutdown import Shutdown


async def test_no_drain_before_the_signal() -> None:
    drain = Shutdown(30.0)
    assert drain.remaining() == 0.0 and drain.deadline is None and not drain.started.is_set()


async def test_begin_fixes_one_deadline_from_the_signal() -> None:
    drain = Shutdown(30.0)
    drain.begin()
    first = drain.deadline
    assert drain.started.is_set() and first is not None
    assert 0 < drain.remaining() <= 30.0
    await asyncio.sleep(0)
    drain.begin()  # a second signal does not move the deadline
    assert drain.deadline == first


async def test_remaining_never_goes_below_zero() -> None:
    drain = Shutdown(0.0)
    drain.begin()
    await asyncio.sleep(0.01)
    assert drain.remaining() == 0.0


async def test_expire_runs_every_stop_together() -> None:
    drain = Shutdown(1.0)
    ran: list[str] = []
    both = asyncio.Event()

    def stop(name: str):  # noqa: ANN202 - a factory of coroutine functions
        async def run() -> None:
            ran.append(name)
            if len(ran) == 2:
                both.set()
            await both.wait()  # each waits for the other: only together do they finish

        return run

    drain.at_deadline(stop("background"))
    drain.at_deadline(stop("websockets"))
    await asyncio.wait_for(drain.expire(), timeout=60)
    assert sorted(ran) == ["background", "websockets"]


async def test_expire_without_stops_returns_at_once() -> None:
    await asyncio.wait_for(Shutdown(1.0).expire(), timeout=60)


async def test_a_stop_that_hangs_is_left_after_half_the_grace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(shutdown, "FINISH_GRACE", 0.2)
    drain = Shutdown(1.0)
    hung = asyncio.Event()

    async def hangs() -> None:
        hung.set()
        await asyncio.Event().wait()

    drain.at_deadline(hangs)
    await asyncio.wait_for(drain.expire(), timeout=60)  # returns: the requests are next
    assert hung.is_set()
