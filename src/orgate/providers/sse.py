"""Server-Sent Events, incrementally: bytes in, lines (``SseLines``) or ``(event, data)`` pairs
(``SseParser``) out. The one SSE splitter of the providers.

Lines end in ``\\n``, ``\\r\\n`` or ``\\r`` (the WHATWG rules), wherever a network chunk splits
them: inside a line, between the ``\\r`` and ``\\n`` of a pair, or inside a UTF-8 sequence
(lines stay bytes until they are whole). ``SseParser`` applies the field rules on top:
comments (``:``) and ``id:`` / ``retry:`` are ignored, several ``data:`` lines join with
``\\n``, a blank line dispatches the event. ``SseLines`` alone serves ``openai-chat``, whose
decoder reads ``data:`` lines itself (a JSON object per line, dispatched without waiting for
the blank line); ``SseParser`` serves the anthropic and openai-responses decoders (through
``sse_decoder``).

Hot path (every upstream byte goes through here; ``bench/provider_bench.py``): a chunk is split
in C, by ``bytes.split`` on ``\\n`` when it holds no ``\\r`` (what nearly every server sends),
else by ``bytes.splitlines`` (exactly the SSE line ends, for bytes); the pieces of an
unfinished line are kept in a list and joined once, when its end arrives, so the work is
linear in the bytes fed however a long line is split; a line longer than ``max_line`` bytes
raises ``LineTooLong``.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_LINE = (
    32 * 1024 * 1024
)  # bytes of one SSE line (a 5 MB data line passes; an endless one does not)

_NO_LINES: list[bytes] = []  # what a chunk without a line end completes (never appended to)


class LineTooLong(ValueError):
    """The upstream sent a line longer than ``max_line`` bytes without ending it."""


class SseLines:
    """Feed bytes with ``feed``; it returns the lines they complete, without their line ends
    (a list to read, not to change: it may be shared). ``close`` at end of stream returns
    the last line if it had no line end."""

    __slots__ = ("max_line", "_parts", "_size", "_after_cr")

    def __init__(self, max_line: int = MAX_LINE) -> None:
        self.max_line = max_line
        self._parts: list[bytes] = []  # the unfinished last line, in the pieces it arrived in
        self._size = 0  # bytes in _parts
        self._after_cr = (
            False  # the last chunk ended in "\r": a "\n" opening the next one is its pair
        )

    def feed(self, chunk: bytes) -> list[bytes]:
        # find(), not `in`: `in` tries a bytes needle as an integer first and builds (then
        # drops) a TypeError, on every chunk
        if self._after_cr or chunk.find(b"\r") >= 0:
            return self._feed_cr(chunk)
        # "\n" line ends only, what nearly every server sends: one split in C
        parts = self._parts
        if parts:
            if chunk.find(b"\n") < 0:  # the unfinished line goes on: keep the piece, no join
                parts.append(chunk)
                self._size += len(chunk)
                if self._size > self.max_line:
                    raise LineTooLong(f"a line longer than {self.max_line} bytes")
                return _NO_LINES
            parts.append(chunk)
            chunk = b"".join(parts)
            parts.clear()
        lines = chunk.split(b"\n")
        tail = lines.pop()
        if tail:
            parts.append(tail)
        self._size = len(tail)
        if len(chunk) > self.max_line:  # no line of a shorter chunk can be too long
            self._check(chunk, lines)
        return lines

    def _feed_cr(self, chunk: bytes) -> list[bytes]:
        """``feed`` for a chunk holding a ``\\r``, or after a chunk that ended in one."""
        if self._after_cr:
            self._after_cr = False
            if chunk[:1] == b"\n":  # the "\n" of a "\r\n" pair cut between two chunks
                chunk = chunk[1:]
        parts = self._parts
        if chunk.find(b"\r") < 0 and chunk.find(b"\n") < 0:
            if chunk:
                parts.append(chunk)
                self._size += len(chunk)
                self._check(chunk, _NO_LINES)
            return _NO_LINES
        if parts:
            parts.append(chunk)
            chunk = b"".join(parts)
            parts.clear()
        lines = chunk.splitlines()
        last = chunk[-1]
        if last == 13:  # "\r": its "\n", if any, opens the next chunk
            self._after_cr = True
            self._size = 0
        elif last == 10:
            self._size = 0
        else:
            tail = lines.pop()
            parts.append(tail)
            self._size = len(tail)
        if len(chunk) > self.max_line:
            self._check(chunk, lines)
        return lines

    def _check(self, chunk: bytes, lines: list[bytes]) -> None:
        """Refuse an unfinished line, or a finished one of ``chunk``, longer than ``max_line``."""
        limit = self.max_line
        if self._size > limit or (len(chunk) > limit and max(map(len, lines), default=0) > limit):
            raise LineTooLong(f"a line longer than {limit} bytes")

    def close(self) -> list[bytes]:
        """End of stream: the unterminated last line, if any."""
        if not self._parts:
            return []
        rest = b"".join(self._parts)
        self._parts.clear()
        self._size = 0
        return [rest]


@dataclass(slots=True, frozen=True)
class SseEvent:
    """One dispatched event. ``event`` is ``"message"`` when the upstream sent no ``event:``
    line."""

    event: str
    data: str


class SseParser:
    """Feed bytes with ``feed``; call ``close`` at end of stream to flush a final unterminated
    event."""

    def __init__(self, max_line: int = MAX_LINE) -> None:
        self._lines = SseLines(max_line)
        self._event = ""
        self._data: list[str] = []
        self._has_data = False

    @property
    def max_line(self) -> int:
        return self._lines.max_line

    def feed(self, chunk: bytes) -> list[SseEvent]:
        out: list[SseEvent] = []
        for line in self._lines.feed(chunk):
            self._line(line, out)
        return out

    def close(self) -> list[SseEvent]:
        """End of stream: a trailing line without terminator and a pending event are dispatched."""
        out: list[SseEvent] = []
        for line in self._lines.close():
            self._line(line, out)
        self._line(b"", out)
        return out

    def _line(self, raw: bytes, out: list[SseEvent]) -> None:
        if not raw:
            if self._has_data:
                out.append(SseEvent(self._event or "message", "\n".join(self._data)))
            self._event, self._data, self._has_data = "", [], False
            return
        if raw[0] == 58:  # ":" a comment
            return
        field, sep, value = raw.decode("utf-8", "replace").partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data.append(value)
            self._has_data = True
        elif field == "event":
            self._event = value
