"""An incremental Server-Sent Events parser: bytes in, ``(event, data)`` pairs out.

Pure and tolerant: chunks may split anywhere (inside a line, a ``\\r\\n`` pair or a
UTF-8 sequence); lines end in ``\\n``, ``\\r\\n`` or ``\\r``; comments (``:``) and
``id:`` / ``retry:`` fields are ignored; several ``data:`` lines join with ``\\n``.
Used by the anthropic and openai-responses decoders (through ``sse_decoder``).

Linear in the bytes fed, however a long line is split (the pieces of an
unfinished line are kept in a list and joined once, when its end arrives), and
bounded: a line longer than ``max_line`` bytes raises ``LineTooLong``.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_LINE = 32 * 1024 * 1024  # bytes of one SSE line (a 5 MB data line passes; an endless one does not)


class LineTooLong(ValueError):
    """The upstream sent a line longer than the parser's ``max_line`` without ending it."""


@dataclass(slots=True, frozen=True)
class SseEvent:
    """One dispatched event. ``event`` is ``"message"`` when the upstream sent no ``event:`` line."""

    event: str
    data: str


class SseParser:
    """Feed bytes with ``feed``; call ``close`` at end of stream to flush a final unterminated event."""

    def __init__(self, max_line: int = MAX_LINE) -> None:
        self.max_line = max_line
        self._parts: list[bytes] = []  # the unfinished last line, in the pieces it arrived in
        self._size = 0  # bytes in _parts
        self._event = ""
        self._data: list[str] = []
        self._has_data = False

    def feed(self, chunk: bytes) -> list[SseEvent]:
        out: list[SseEvent] = []
        parts = self._parts
        if b"\n" not in chunk and b"\r" not in chunk and not (parts and parts[-1].endswith(b"\r")):
            # no line ends here: keep the piece (no copy of what came before; linear, not quadratic)
            if chunk:
                parts.append(chunk)
                self._size += len(chunk)
                if self._size > self.max_line:
                    raise LineTooLong(f"a line longer than {self.max_line} bytes")
            return out
        if parts:
            parts.append(chunk)
            buf = b"".join(parts)
        else:
            buf = chunk
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
            if end - start > self.max_line:
                raise LineTooLong(f"a line longer than {self.max_line} bytes")
            self._line(buf[start:end], out)
            start = nxt
        rest = buf[start:]
        self._parts = [rest] if rest else []
        self._size = len(rest)
        if self._size > self.max_line:
            raise LineTooLong(f"a line longer than {self.max_line} bytes")
        return out

    def close(self) -> list[SseEvent]:
        """End of stream: a trailing line without terminator and a pending event are dispatched."""
        out: list[SseEvent] = []
        if self._parts:
            rest = b"".join(self._parts)
            self._parts, self._size = [], 0
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
