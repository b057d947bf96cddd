"""Between single events and batches of them (``Provider.stream_batches``, neutral/provider.py).

``batches_of_one`` turns a stream of single events into batches of one event each;
``one_by_one`` goes the other way, for consumers of single events. Both close what they
wrap as soon as they are closed. ``aclose`` and ``aclose_quietly`` close a stream now
(an upstream call, a turn), not at garbage collection.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any, TypeVar

from orgate.neutral.events import ModelEvent

log = logging.getLogger("orgate.engine")


async def aclose(stream: Any) -> None:
    """Close ``stream`` when it can be closed (an async generator)."""
    close = getattr(stream, "aclose", None)
    if close is not None:
        await close()


async def aclose_quietly(stream: Any) -> None:
    """Close an upstream stream; an error while closing is logged, never raised (closing a
    failed upstream must not mask how it ended)."""
    close = getattr(
        stream, "aclose", None
    )  # not through ``aclose``: one coroutine less per response (hot path)
    if close is None:
        return
    try:
        await close()
    except Exception:  # noqa: BLE001 - see the docstring
        log.debug("error while closing an upstream stream", exc_info=True)


async def batches_of_one(events: AsyncIterator[ModelEvent]) -> AsyncIterator[list[ModelEvent]]:
    """Each event of ``events`` as a batch of its own."""
    try:
        async for event in events:
            yield [event]
    finally:
        await aclose(events)


T = TypeVar("T")


async def one_by_one(batches: AsyncIterator[list[T]]) -> AsyncIterator[T]:
    """The items of a batched stream one at a time. Closing this closes ``batches`` at once
    (an upstream call, a turn), not at garbage collection."""
    try:
        async for batch in batches:
            for item in batch:
                yield item
    finally:
        await aclose(batches)
