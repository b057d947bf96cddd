"""Provider events in batches: one list per upstream read where the provider can say so.

A provider may offer ``stream_batches(request)`` next to ``stream(request)``:
the same events, grouped as they were decoded from one network read. Wrappers
that keep batches intact let the HTTP layer write once per read instead of
once per event. ``one_by_one`` goes the other way, for consumers of single events.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TypeVar

from orgate.neutral.events import ModelEvent
from orgate.neutral.request import ModelRequest, Provider


def batches(provider: Provider, request: ModelRequest) -> AsyncIterator[list[ModelEvent]]:
    """The provider's events in batches: its own (``stream_batches``) or one event each."""
    native = getattr(provider, "stream_batches", None)
    if native is not None:
        return native(request)  # type: ignore[no-any-return]
    return _batches_of_one(provider.stream(request))


async def _batches_of_one(events: AsyncIterator[ModelEvent]) -> AsyncIterator[list[ModelEvent]]:
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
