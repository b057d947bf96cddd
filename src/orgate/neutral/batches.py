"""Between single events and batches of them (``Provider.stream_batches``, neutral/provider.py).

``batches_of_one`` turns a stream of single events into batches of one event each;
``one_by_one`` goes the other way, for consumers of single events. Both close what they
wrap as soon as they are closed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TypeVar

from orgate.neutral.events import ModelEvent


async def batches_of_one(events: AsyncIterator[ModelEvent]) -> AsyncIterator[list[ModelEvent]]:
    """Each event of ``events`` as a batch of its own."""
    try:
        async for event in events:
            yield [event]
    finally:
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()


T = TypeVar("T")


async def one_by_one(batches: AsyncIterator[list[T]]) -> AsyncIterator[T]:
    """The items of a batched stream one at a time. Closing this closes ``batches`` at once
    (an upstream call, a turn), not at garbage collection."""
    try:
        async for batch in batches:
            for item in batch:
                yield item
    finally:
        close = getattr(batches, "aclose", None)
        if close is not None:
            await close()
