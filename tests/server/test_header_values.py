"""``server/header_values.py``: every value orgate puts into a response header is one a server
sends and a client reads."""

from __future__ import annotations

import re

import pytest

from orgate.protocol.errors import ApiError, ErrorCode
from orgate.server.errors import encode_headers, error_response
from orgate.server.header_values import CUT, MAX_VALUE, has_control, header_bytes, header_text

#: What uvicorn refuses in a header value it is asked to send (``HEADER_VALUE_RE``).
UVICORN_REFUSES = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")


def test_printable_ascii_is_sent_as_it_is() -> None:
    assert header_bytes("resp_01 | input[0]: dropped") == b"resp_01 | input[0]: dropped"
    assert header_text("plain") == "plain"


@pytest.mark.parametrize(
    ("value", "sent"),
    [
        ("a\nb", b"a\\nb"),
        ("a\r\nSet-Cookie: x=1", b"a\\r\\nSet-Cookie: x=1"),
        ("a\x00b\x7f", b"a\\x00b\\x7f"),
        ("tab\there", b"tab\\there"),
    ],
)
def test_control_characters_are_escaped(value: str, sent: bytes) -> None:
    assert header_bytes(value) == sent
    assert not UVICORN_REFUSES.search(header_bytes(value))


def test_latin1_text_is_sent_as_latin1_and_the_rest_as_utf8() -> None:
    assert header_bytes("café") == "café".encode("latin-1")
    assert header_bytes("张三") == "张三".encode()
    assert header_bytes("张\n三") == "张\\n三".encode()
    # What a Starlette response encodes (latin-1) is the same octets.
    assert header_text("张三").encode("latin-1") == "张三".encode()


def test_a_long_value_is_cut_and_says_so() -> None:
    sent = header_bytes("x" * 100_000)
    assert len(sent) == MAX_VALUE and sent.endswith(CUT)
    assert header_text("é" * 10_000).encode("latin-1") == header_bytes("é" * 10_000)


def test_has_control() -> None:
    assert has_control("a\nb") and has_control("\x00") and has_control("a\tb")
    assert not has_control("café 张三 ok")


def test_every_plain_asgi_header_and_error_header_is_safe() -> None:
    [(name, value)] = encode_headers({"X-Orgate-Gate-Warnings": "input[0]: a:\nb"})
    assert name == b"x-orgate-gate-warnings" and value == b"input[0]: a:\\nb"
    error = ApiError.of(
        ErrorCode.RATE_LIMIT_EXCEEDED, "slow down", headers={"Retry-After": "7\r\nX: y"}
    )
    response = error_response(error)
    assert response.headers["retry-after"] == "7\\r\\nX: y"
