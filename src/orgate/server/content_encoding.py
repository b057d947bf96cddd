"""Compressed request bodies: ``Content-Encoding`` ``zstd``, ``gzip`` and ``deflate``, decoded
as they arrive, within the body limit.

Codex compresses its requests with zstd (``Content-Encoding: zstd``, ``Content-Type:
application/json``); other clients send gzip. ``limits.max_body_bytes`` applies to the
decompressed size, and the decoder never produces more than that plus one byte however
small the compressed input: each chunk is decompressed with an output bound
(``max_length``), so a compression bomb (a gigabyte of zeros is a few kilobytes of zstd)
is refused with 413 when its output passes the limit, not after it filled the memory.
A zstd frame may ask for a larger window than the 8 MiB RFC 8878 sets for HTTP; it is
refused (400) rather than allocated. An unknown coding, or more than one, is 415 with
``Accept-Encoding`` naming the codings that are decoded (RFC 7694).
"""

from __future__ import annotations

import sys
import zlib
from collections.abc import Callable

if sys.version_info >= (3, 14):  # Python 3.14's module; its backport (the same API) before
    from compression import zstd
else:  # pragma: no cover - depends on the interpreter
    from backports import zstd

from orgate.protocol.errors import ApiError, ErrorCode

#: The codings decoded, as a 415 names them in ``Accept-Encoding``.
ACCEPTED_ENCODINGS = "zstd, gzip, deflate, identity"
#: RFC 8878 (section 3.1.1.1.2): a zstd content coding's window is at most 8 MiB.
ZSTD_WINDOW_LOG_MAX = 23


class _ZstdFrame:
    """One zstd frame."""

    def __init__(self) -> None:
        self._d = zstd.ZstdDecompressor(
            options={zstd.DecompressionParameter.window_log_max: ZSTD_WINDOW_LOG_MAX}
        )

    @property
    def eof(self) -> bool:
        return self._d.eof

    def step(self, data: bytes, max_length: int) -> tuple[bytes, bytes, bool]:
        """(output, input left over, whether more output may come without input)."""
        d = self._d
        out = d.decompress(data, max_length)
        if d.eof:
            return out, d.unused_data, False
        return out, b"", not d.needs_input


class _ZlibStream:
    """One gzip member, or a deflate stream (zlib-wrapped, or raw as some clients send it)."""

    def __init__(self, wbits: int) -> None:
        self._d = zlib.decompressobj(wbits)

    @property
    def eof(self) -> bool:
        return self._d.eof

    def step(self, data: bytes, max_length: int) -> tuple[bytes, bytes, bool]:
        d = self._d
        out = d.decompress(data, max_length)
        if d.eof:
            return out, d.unused_data, False
        return out, d.unconsumed_tail, len(out) == max_length


Frame = _ZstdFrame | _ZlibStream


def _open_zstd(first: bytes) -> Frame:
    return _ZstdFrame()


def _open_gzip(first: bytes) -> Frame:
    return _ZlibStream(16 + zlib.MAX_WBITS)


def _open_deflate(first: bytes) -> Frame:
    # RFC 9110's deflate is zlib-wrapped (RFC 1950); a raw stream is read too.
    wrapped = len(first) >= 2 and first[0] & 0x0F == 8 and (first[0] << 8 | first[1]) % 31 == 0
    return _ZlibStream(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)


# coding -> (how a frame begins, whether frames may follow one another: zstd frames, gzip members)
_CODINGS: dict[str, tuple[Callable[[bytes], Frame], bool]] = {
    "zstd": (_open_zstd, True),
    "gzip": (_open_gzip, True),
    "deflate": (_open_deflate, False),
}


class BodyDecoder:
    """Decompresses a body chunk by chunk, never past ``limit`` bytes of output."""

    def __init__(self, coding: str, limit: int, too_large: Callable[[], ApiError]) -> None:
        self.coding = coding
        self._open, self._many = _CODINGS[coding]
        self._frame: Frame | None = None
        self._limit = limit
        self._too_large = too_large
        self.size = 0  # decompressed bytes so far

    def feed(self, chunk: bytes) -> bytes:
        """The decompressed bytes of one received chunk (413 once past the limit)."""
        out: list[bytes] = []
        data = chunk
        while True:
            frame = self._frame
            if frame is None or frame.eof:
                if not data:
                    break
                if frame is not None and not self._many:
                    raise _corrupt(f"data after the end of the {self.coding} stream")
                frame = self._frame = self._open(data)
            try:
                piece, data, more = frame.step(data, self._limit - self.size + 1)
            except (zlib.error, zstd.ZstdError, EOFError) as exc:
                raise _corrupt(str(exc)) from None
            self.size += len(piece)
            if self.size > self._limit:
                raise self._too_large()
            out.append(piece)
            if not data and not more:
                break
        return out[0] if len(out) == 1 else b"".join(out)

    def finish(self) -> None:
        """The body ended: a stream cut short is a 400, not half a JSON document."""
        if self._frame is not None and not self._frame.eof:
            raise _corrupt(f"the {self.coding} data ends before its end")


def _corrupt(detail: str) -> ApiError:
    return ApiError.of(
        ErrorCode.INVALID_COMPRESSED_BODY,
        f"The request body could not be decompressed: {detail[:200]}.",
    )


def coding_of(encoding: str | None) -> str | None:
    """The coding a ``Content-Encoding`` names (None: identity); 415 for one not decoded here."""
    coding = (encoding or "").strip().lower()
    if coding in ("", "identity"):
        return None
    if coding == "x-gzip":
        coding = "gzip"
    if coding in _CODINGS:
        return coding
    raise ApiError.of(
        ErrorCode.UNSUPPORTED_CONTENT_ENCODING,
        f"Unsupported Content-Encoding '{coding[:100]}': send the body as zstd, gzip, deflate "
        "or uncompressed.",
        headers={"Accept-Encoding": ACCEPTED_ENCODINGS},
    )


def decoder_for(
    encoding: str | None, limit: int, too_large: Callable[[], ApiError]
) -> BodyDecoder | None:
    """The decoder of a ``Content-Encoding`` (None: identity); 415 for any other coding."""
    coding = coding_of(encoding)
    return None if coding is None else BodyDecoder(coding, limit, too_large)


__all__ = ["ACCEPTED_ENCODINGS", "BodyDecoder", "coding_of", "decoder_for"]
