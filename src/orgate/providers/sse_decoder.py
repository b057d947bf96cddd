"""The byte-level half shared by the SSE stream decoders (``anthropic``, ``openai-responses``).

``SseStreamDecoder`` splits the fed bytes into SSE events and hands each to
the subclass's ``_event``; an ``ApiError`` raised after some events were
decoded from the same chunk is held back (``failed``) and raised by the next
``feed`` / ``close``, so the events before it still reach the client.
``recognized`` turns true with the first event of the provider's wire format:
a body that ends without one was not that format at all (a junk 200), one
that ends after it without the terminal event was cut short. Nothing of these wire formats
follows their terminal event, so the answer is ``complete`` and the stream has ``ended`` once
it is ``finished`` (the protocol of ``upstream.UpstreamDecoder``).
"""

from __future__ import annotations

from collections import Counter

from orgate.neutral import ModelEvent
from orgate.protocol.errors import ApiError, upstream_invalid_response
from orgate.providers.sse import LineTooLong, SseEvent, SseParser


class SseStreamDecoder:
    """Base of an incremental SSE decoder; ``name`` (the deployment) goes into error messages."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.finished = False
        self.recognized = False  # an event of the wire format was seen (set by the subclass)
        self.skipped: Counter[str] = Counter()
        self._sse = SseParser()
        self._pending: ApiError | None = None

    @property
    def complete(self) -> bool:
        """The answer is complete (its terminal event came)."""
        return self.finished

    @property
    def ended(self) -> bool:
        """Nothing more is decoded: what follows the terminal event is only the body's end."""
        return self.finished

    @property
    def failed(self) -> bool:
        """An upstream error is pending: the next ``feed`` / ``close`` raises it."""
        return self._pending is not None

    def feed(self, chunk: bytes) -> list[ModelEvent]:
        if self._pending is not None:
            raise self._pending
        try:
            events = self._sse.feed(chunk)
        except LineTooLong as exc:
            raise upstream_invalid_response(
                f"upstream '{self.name}'", str(exc), what="stream"
            ) from None
        return self._run_events(events)

    def close(self) -> list[ModelEvent]:
        return self._run_events(self._sse.close())

    def _run_events(self, events: list[SseEvent]) -> list[ModelEvent]:
        """Decode ``events``; an error after some output is raised by the next call instead."""
        if self._pending is not None:
            raise self._pending
        out: list[ModelEvent] = []
        try:
            for sse in events:
                self._event(sse.event, sse.data, out)
        except ApiError as exc:
            if not out:
                raise
            self._pending = exc
        return out

    def _event(self, name: str, data: str, out: list[ModelEvent]) -> None:
        """Decode one SSE event (its ``event:`` name and ``data``) into ``out``."""
        raise NotImplementedError
