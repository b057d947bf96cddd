"""Where a response's spec events go: as dicts, or encoded as frames and kept for replay.

A ``ResponseStream`` hands each batch of drained events to its sink, which turns
them into the one item the stream yields for that batch: the list of event dicts
(``DictSink``: the non-streaming path, WebSocket mode, the chat adapter) or one
chunk of encoded frames (``FrameSink``: SSE, one write downstream). A ``FrameSink``
of a stored response also records its chunks, which are saved with the response
for ``GET /v1/responses/{id}?stream=true`` (the replay).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Encoder = Callable[[dict[str, Any]], bytes]
Events = list[dict[str, Any]]


class DictSink:
    """Each batch's events, as one list."""

    __slots__ = ()

    #: Records what it emits (for replay): never, events as dicts are not replayed.
    keeps = False

    def emit(self, events: Events) -> list[Any]:
        """The batch as the items to yield: none for an empty batch."""
        return [events] if events else events

    render = emit  # nothing is recorded, so a replacement is emitted the same way

    def replay(self) -> bytes | None:
        return None

    def end(self, items: list[Any]) -> list[Any]:
        return items


class FrameSink:
    """Each batch's events encoded as one chunk; ``trailer`` (e.g. ``data: [DONE]``) ends the
    last chunk. With ``keep``, the chunks are recorded for the stored response's replay."""

    __slots__ = ("_encode", "_trailer", "_kept", "keeps")

    def __init__(self, encode: Encoder, trailer: bytes = b"", keep: bool = False) -> None:
        self._encode = encode
        self._trailer = trailer
        self._kept: list[bytes] | None = [] if keep else None
        self.keeps = keep

    def emit(self, events: Events) -> list[Any]:
        """The batch as one chunk to yield (none for an empty batch), recorded when kept."""
        if not events:
            return events
        encode = self._encode
        chunk = b"".join([encode(event) for event in events])
        if self._kept is not None:
            self._kept.append(chunk)
        return [chunk]

    def render(self, events: Events) -> list[Any]:
        """Events that replace the last emitted ones for the client only (the replay keeps
        what was recorded)."""
        encode = self._encode
        return [b"".join([encode(event) for event in events])]

    def replay(self) -> bytes | None:
        """The recorded chunks (None when not kept)."""
        return b"".join(self._kept) if self._kept is not None else None

    def end(self, items: list[Any]) -> list[Any]:
        """The last items, the trailer joined to them (one write)."""
        return [b"".join([*items, self._trailer])] if self._trailer else items


Sink = DictSink | FrameSink
