"""Values written into response headers, made header-safe: the one rule for every header orgate
fills with text it did not write itself (a session id, gate warnings that quote a client's item
types, an upstream's ``Retry-After``).

A header value that is printable ASCII is sent as it is. Otherwise each control character
(C0 and DEL: no HTTP server sends them, and a client's parser would split or refuse the
header) is written as a backslash escape (``\\n``, ``\\t``, ``\\x00``), and the rest is
sent as Latin-1 when it is Latin-1 (the octets HTTP allows, which clients read back as
Latin-1), else as UTF-8 (which clients that read UTF-8, as httpx, read back exactly). A
value is never refused here: the edge refuses, with a 400 naming the parameter, what must
round-trip exactly (a session key: ``server/create_endpoint.py``). A value longer than
``MAX_VALUE`` octets (gate warnings about thousands of items) is cut there and says so: a
client reads a response's whole head into a bounded buffer (httpx: 16 KiB) and drops an
answer whose head does not fit.
"""

from __future__ import annotations

import re

#: What HTTP servers refuse in a header value (uvicorn: ``[\x00-\x08\x0a-\x1f\x7f]``), and the
#: tab, which a client may strip at either end. Octets from 0x80 up are HTTP's obs-text.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
#: The longest header value sent, in octets (a cut one ends with ``CUT``).
MAX_VALUE = 4096
CUT = b"... (cut)"


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(char) or f"\\x{ord(char):02x}"


def has_control(value: str) -> bool:
    """Whether ``value`` holds a character no header can carry as it is."""
    return _CONTROL.search(value) is not None


def header_bytes(value: str) -> bytes:
    """``value`` as the octets of a valid header value (see the module docstring)."""
    if value.isascii() and value.isprintable():  # the usual case, checked in C
        encoded = value.encode("ascii")
    else:
        value = _CONTROL.sub(_escape, value)
        try:
            encoded = value.encode("latin-1")
        except UnicodeEncodeError:
            encoded = value.encode("utf-8")
    if len(encoded) > MAX_VALUE:
        return encoded[: MAX_VALUE - len(CUT)] + CUT
    return encoded


def header_text(value: str) -> str:
    """``header_bytes(value)`` as the string a Starlette response encodes into those octets."""
    if value.isascii() and value.isprintable() and len(value) <= MAX_VALUE:
        return value
    return header_bytes(value).decode("latin-1")


__all__ = ["has_control", "header_bytes", "header_text"]
