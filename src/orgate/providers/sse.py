"""An incremental Server-Sent Events parser: bytes in, ``(event, data)`` pairs out.

Pure and tolerant: chunks may split anywhere (inside a line, a ``\\r\\n`` pair or a
UTF-8 sequence); lines end in ``\\n``, ``\\r\\n`` or ``\\r``; comments (``:``) and
``id:`` / ``retry:`` fields are ignored; several ``data:`` lines join with ``\\n``.
Used by the anthropic and openai-responses decoders (through ``sse_decoder``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True, frozen=True)
class SseEvent:
    """One dispatched event. ``event`` is ``"message"`` when the upstream sent no ``event:`` line."""

    event: str
    data: str


class SseParser:
    """Feed bytes with ``feed``; call ``close`` at end of stream to flush a final unterminated event."""

    def __init__(self) -> None:
        self._buffer = b""
        self._event = ""
        self._data: list[str] = []
        self._has_data = False

    def feed(self, chunk: bytes) -> list[SseEvent]:
        self._buffer += chunk
        out: list[SseEvent] = []
        buf = self._buffer
        start = 0
        n = len(buf)
        while start < n:
            nl = buf.find(b"\n", start)
            cr = buf.find(b"\r", start)
            if nl < 0 and cr < 0:
                break
            if cr >= 0 and (nl < 0 or cr < nl):
                if cr == n - 1:  # a "\r" at the end: its "\n" may be in the next chunk
                    break
                end, nxt = cr, cr + 2 if buf[cr + 1 : cr + 2] == b"\n" else cr + 1
            else:
                end, nxt = nl, nl + 1
            self._line(buf[start:end], out)
            start = nxt
        self._buffer = buf[start:]
        return out

    def close(self) -> list[SseEvent]:
        """End of stream: a trailing line without terminator and a pending event are dispatched."""
        out: list[SseEvent] = []
        if self._buffer:
            rest, self._buffer = self._buffer, b""
            self._line(rest.rstrip(b"\r"), out)
        self._line(b"", out)
        return out

    def _line(self, raw: bytes, out: list[SseEvent]) -> None:
        if not raw:
            if self._has_data:
                out.append(SseEvent(self._event or "message", "\n".join(self._data)))
            self._event, self._data, self._has_data = "", [], False
            return
        line = raw.decode("utf-8", "replace")
        if line.startswith(":"):
            return
        field, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data.append(value)
            self._has_data = True
        elif field == "event":
            self._event = value
