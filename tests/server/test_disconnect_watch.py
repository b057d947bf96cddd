"""``DisconnectWatch``: one timer for the body's deadline, then for watching the connection."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from orgate.server.disconnect import DisconnectWatch
from tests.support.waiting import eventually


class Client:
    """An ASGI ``receive`` whose messages the test releases one by one."""

    def __init__(self) -> None:
        self.messages: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.calls = 0

    async def receive(self) -> dict[str, Any]:
        self.calls += 1
        return await self.messages.get()


async def _read_body(watch: DisconnectWatch, client: Client) -> str:
    """What the endpoint does with the body phase: the body, or why it did not come."""
    try:
        await client.receive()
    except asyncio.CancelledError:
        if watch.body_timed_out():
            return "timed out"
        raise
    watch.body_read()
    return "read"


async def _request(
    client: Client, *, delay: float, body_timeout: float, started: asyncio.Event | None = None
) -> str:
    """A request that reads its body under a watch, then stops the watch."""
    watch = DisconnectWatch(client.receive, delay=delay, body_timeout=body_timeout)
    if started is not None:
        started.set()
    try:
        return await _read_body(watch, client)
    finally:
        watch.stop()


async def test_a_body_past_its_deadline_cancels_the_reader_and_says_so() -> None:
    task = asyncio.create_task(_request(Client(), delay=0.02, body_timeout=0.06))
    assert await asyncio.wait_for(task, 30) == "timed out"
    assert task.cancelling() == 0  # the cancellation was undone: the 408 is answered normally


async def test_a_deadline_shorter_than_the_delay_is_kept() -> None:
    task = asyncio.create_task(_request(Client(), delay=5.0, body_timeout=0.03))
    assert await asyncio.wait_for(task, 30) == "timed out"


async def test_a_cancellation_from_elsewhere_is_not_a_body_timeout() -> None:
    started = asyncio.Event()
    task = asyncio.create_task(_request(Client(), delay=0.02, body_timeout=30.0, started=started))
    await started.wait()
    task.cancel()  # e.g. a shutdown past its drain timeout
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_body_in_time_stops_the_deadline_and_the_watch_starts_after_the_delay() -> None:
    client = Client()
    await client.messages.put({"type": "http.request", "body": b"{}", "more_body": False})
    result: list[str] = []

    async def request() -> None:
        # half a second of delay: "not yet" holds on a loaded machine too
        watch = DisconnectWatch(client.receive, delay=0.5, body_timeout=1.0)
        try:
            result.append(await _read_body(watch, client))
            assert client.calls == 1  # no watcher yet: the delay has not passed
            await asyncio.sleep(1.2)  # past the body's deadline too: nothing is cancelled
            result.append("answered")
        finally:
            watch.stop()

    await asyncio.wait_for(request(), 30)
    assert result == ["read", "answered"]
    assert client.calls == 2  # the watcher started after the delay and waits on receive()


async def _answer(watch: DisconnectWatch) -> str:
    """A long answer, which the client leaving cancels."""
    try:
        await asyncio.sleep(5)
        return "answered"
    except asyncio.CancelledError:
        assert watch.absorb()
        return "client gone"


async def test_a_client_leaving_after_a_slow_body_is_noticed_at_once() -> None:
    client = Client()

    async def request(watch_box: list[DisconnectWatch]) -> str:
        watch = DisconnectWatch(client.receive, delay=0.02, body_timeout=600.0)
        watch_box.append(watch)
        try:
            assert await _read_body(watch, client) == "read"
            return await _answer(watch)
        finally:
            watch.stop()

    box: list[DisconnectWatch] = []
    task = asyncio.create_task(request(box))
    await asyncio.sleep(0.1)  # past the delay: the timer now waits for the body's deadline
    await client.messages.put({"type": "http.request", "body": b"{}", "more_body": False})
    # body_read() started the watcher at once, not at the body's deadline (10 minutes away)
    assert await eventually(lambda: client.calls == 2)
    await client.messages.put({"type": "http.disconnect"})
    assert await asyncio.wait_for(task, 30) == "client gone"
    assert box[0].disconnected


async def test_without_a_body_phase_the_watch_starts_after_the_delay() -> None:
    client = Client()

    async def request() -> str:
        watch = DisconnectWatch(client.receive, delay=0.02)
        try:
            return await _answer(watch)
        finally:
            watch.stop()

    task = asyncio.create_task(request())
    assert await eventually(lambda: client.calls == 1)  # the watcher, after the delay
    await client.messages.put({"type": "http.disconnect"})
    assert await asyncio.wait_for(task, 30) == "client gone"
