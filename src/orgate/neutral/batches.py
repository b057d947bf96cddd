"""Provider events in batches: one list per upstream read where the provider can say so.

A provider may offer ``stream_batches(request)`` next to ``stream(request)``:
the same events, grouped as they were decoded from one network read. Wrappers
that keep batches intact let the HTTP layer write once per read instead of
once per event.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from orgate.neutral.events import ModelEvent
from orgate.neutral.request import ModelRequest, Provider


def batches(provider: Provider, request: ModelRequest) -> AsyncIterator[list[ModelEvent]]:
    """The provider's events in batches: its own (``stream_batches``) or one event each."""
    native = getattr(provider, "stream_batches", None)
    if native is not None:
        return native(request)  # type: ignore[no-any-return]
    return _one_by_one(provider.stream(request))


async def _one_by_one(events: AsyncIterator[ModelEvent]) -> AsyncIterator[list[ModelEvent]]:
    try:
        async for event in events:
            yield [event]
    finally:
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()
