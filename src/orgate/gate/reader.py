"""Reading gate/diff input files: one JSON document or a JSON Lines log.

A file (or ``-`` for stdin) whose first non-blank line is a complete JSON
value is read as JSON Lines, streamed one line at a time; otherwise the whole
file is parsed as one JSON document (a pretty-printed item, array or response).
Unreadable input raises ``InputError`` with a message fit for stderr.
"""

from __future__ import annotations

import io
import os
import stat
import sys
from collections.abc import Iterator
from typing import Any, BinaryIO

import orjson

_loads = orjson.loads


class InputError(Exception):
    """The input could not be read or is not JSON / JSON Lines."""


class JsonSource:
    """JSON values from a path; ``consumed``/``size`` (bytes) drive a progress bar."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.name = "<stdin>" if path == "-" else path
        self.size: int | None = None
        self.consumed = 0
        self.lineno = 0

    def _open(self) -> BinaryIO:
        if self.path == "-":
            return sys.stdin.buffer
        try:
            f = open(self.path, "rb")  # noqa: SIM115 - closed by values()
        except OSError as exc:
            raise InputError(f"cannot read {self.name}: {exc.strerror or exc}") from None
        try:
            st = os.fstat(f.fileno())
            if stat.S_ISREG(st.st_mode):
                self.size = st.st_size
        except OSError:
            pass
        return f

    def values(self) -> Iterator[Any]:
        """Yield each JSON value (one document, or one per JSON Lines line)."""
        f = self._open()
        try:
            yield from self._values(f)
        except OSError as exc:
            raise InputError(f"cannot read {self.name}: {exc.strerror or exc}") from None
        finally:
            if f is not sys.stdin.buffer:
                f.close()

    def _values(self, f: BinaryIO) -> Iterator[Any]:
        head = b""
        for raw in f:
            self.lineno += 1
            self.consumed += len(raw)
            if not head:
                raw = raw.removeprefix(
                    b"\xef\xbb\xbf"
                )  # a UTF-8 byte order mark (Windows editors, PowerShell)
            head += raw
            if raw.strip():
                break
        if not head.strip():
            return  # empty input: no values
        try:
            first = _loads(head)
        except ValueError:
            rest = f.read()
            self.consumed += len(rest)
            try:
                doc = _loads(head + rest)
            except ValueError as exc:
                raise InputError(f"{self.name}: invalid JSON: {exc}") from None
            yield doc
            return
        yield first
        lineno = self.lineno
        consumed = self.consumed
        for raw in f:
            lineno += 1
            consumed += len(raw)
            try:
                value = _loads(raw)
            except ValueError as exc:
                if not raw.strip():
                    continue
                self.lineno, self.consumed = lineno, consumed
                # orjson's own "line 1 column N" is within this line (and "line 2" past its end):
                # the column only
                where = (
                    f" (column {exc.colno})"
                    if isinstance(exc, orjson.JSONDecodeError) and exc.lineno == 1
                    else ""
                )
                detail = exc.msg if isinstance(exc, orjson.JSONDecodeError) else str(exc)
                raise InputError(f"{self.name}:{lineno}: invalid JSON: {detail}{where}") from None
            self.lineno = lineno
            if not lineno & 1023:
                self.consumed = consumed
            yield value
        self.lineno, self.consumed = lineno, consumed


def read_bytes(data: bytes, name: str) -> list[Any]:
    """Every JSON value of ``data`` (one document, or JSON Lines),
    read as from a file called ``name``."""
    return list(JsonSource(name)._values(io.BytesIO(data)))


def read_all(path: str) -> list[Any]:
    """Every JSON value of a file, as a list."""
    return list(JsonSource(path).values())


def read_document(path: str) -> Any:
    """A file that must hold exactly one JSON value (e.g. a tools file)."""
    values = read_all(path)
    if len(values) != 1:
        raise InputError(
            f"{'<stdin>' if path == '-' else path}: expected one JSON document, found {len(values)}"
        )
    return values[0]
