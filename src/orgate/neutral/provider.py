"""The provider contract: ``Provider``, whose primitive is the batch stream,
and ``WrapperProvider``.

A provider answers ``stream_batches(request)``: the model's answer as neutral events in
lists, one list per upstream read where the provider can tell (a decoder fed one network
chunk returns the events that chunk completed), so the HTTP layer writes once per read
instead of once per event. The engine calls nothing else, but ``count_input_tokens``
(``POST /v1/responses/input_tokens``: the upstream's own count, when it has one).
``stream(request)`` gives the same events one at a time, for code that looks at single events.

A provider that produces its events one at a time (the built-in model, a wrapper that
holds an answer and releases it) may define ``stream`` instead; the base then hands each
event on as a batch of one. A class defining neither is refused when it is defined.

``WrapperProvider`` forwards everything to the provider it wraps. A wrapper changes what
it needs by overriding ``stream_batches``: a wrapper that overrode only ``stream`` would be
bypassed by the engine (which calls ``stream_batches``), so such a class is refused too.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from orgate.neutral.batches import batches_of_one, one_by_one
from orgate.neutral.events import ModelEvent
from orgate.neutral.request import ModelRequest


def _definer(cls: type, name: str) -> type:
    """The class of ``cls``'s MRO whose own namespace holds ``name``."""
    return next(klass for klass in cls.__mro__ if name in vars(klass))


class Provider:
    """One upstream wire protocol bound to one deployment (or a wrapper around one).

    Upstream failures are raised as ``ApiError`` (status 429 with Retry-After passed on,
    5xx ``server_error`` / ``model_error`` naming the upstream). The answer ends in exactly
    one ``Finish``. Closing the iterator (``aclose``) ends the upstream call at once.
    """

    def stream_batches(self, request: ModelRequest) -> AsyncIterator[list[ModelEvent]]:
        """The answer as lists of events, one list per upstream read where known."""
        return batches_of_one(self.stream(request))

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """The same events one at a time."""
        return one_by_one(self.stream_batches(request))

    async def count_input_tokens(self, request: ModelRequest) -> int | None:
        """The upstream's own count of the tokens ``request`` would take as input (never a
        model call); None when the upstream has no way to count (the caller estimates)."""
        return None

    async def aclose(self) -> None:
        """Release what this provider holds (a shared pool belongs to its owner, not to it)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        batches_owner = _definer(cls, "stream_batches")
        events_owner = _definer(cls, "stream")
        if batches_owner is Provider and events_owner is Provider:
            raise TypeError(f"{cls.__name__} must define stream_batches (or stream)")
        mro = cls.__mro__
        if batches_owner is not Provider and mro.index(events_owner) < mro.index(batches_owner):
            raise TypeError(
                f"{cls.__name__} overrides stream but inherits stream_batches from "
                f"{batches_owner.__name__}, which the engine calls instead: override stream_batches"
            )


class WrapperProvider(Provider):
    """A provider around ``inner``: every call is forwarded unless a subclass overrides it."""

    def __init__(self, inner: Provider) -> None:
        self.inner = inner

    def stream_batches(self, request: ModelRequest) -> AsyncIterator[list[ModelEvent]]:
        return self.inner.stream_batches(request)

    async def count_input_tokens(self, request: ModelRequest) -> int | None:
        return await self.inner.count_input_tokens(request)

    async def aclose(self) -> None:
        await self.inner.aclose()
