"""``POST /v1/responses`` reads the request headers it needs once: decoded, last one wins."""

from __future__ import annotations

from orgate.server.create_endpoint import _headers

NAMES = {
    b"authorization": "authorization",
    b"content-type": "content-type",
    b"x-session-id": "x-session-id",
}


def test_only_the_read_headers_are_decoded_under_their_str_names() -> None:
    scope = {
        "headers": [
            (b"host", b"h"),
            (b"authorization", b"Bearer k"),
            (b"content-type", b"application/json"),
            (b"x-other", b"\xff"),
        ]
    }
    assert _headers(scope, NAMES) == {
        "authorization": "Bearer k",
        "content-type": "application/json",
    }


def test_a_repeated_header_is_read_as_its_last_value() -> None:
    scope = {
        "headers": [
            (b"x-session-id", b"first"),
            (b"content-type", b"text/plain"),
            (b"x-session-id", b"last"),
        ]
    }
    assert _headers(scope, NAMES) == {"x-session-id": "last", "content-type": "text/plain"}


def test_values_are_latin_1() -> None:
    scope = {"headers": [(b"x-session-id", "café".encode("latin-1"))]}
    assert _headers(scope, NAMES) == {"x-session-id": "café"}


def test_no_headers() -> None:
    assert _headers({"headers": []}, NAMES) == {}
