"""Pure pieces: the token buckets, the duplicate-key scan, the request-id rule,
the OpenAPI builder."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterable
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from orgate.config import LimitSettings
from orgate.protocol.errors import ApiError
from orgate.server.body import check_structure
from orgate.server.middleware import _request_id, edge_headers
from orgate.server.observability import JsonFormatter
from orgate.server.openapi import build_document
from orgate.server.ratelimit import KeyLimits, LocalLimiter, build_limiter
from orgate.server.request_state import CURRENT_REQUEST, RequestState


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_request_bucket_refills_continuously() -> None:
    clock = Clock()
    limiter = LocalLimiter({"a": KeyLimits(rpm=60)}, clock=clock)
    for _ in range(60):
        assert await limiter.admit("a") is None
    refusal = await limiter.admit("a")
    assert refusal is not None and refusal.status == 429 and refusal.headers["Retry-After"] == "1"
    assert refusal.body()["error"]["code"] == "rate_limit_exceeded"
    clock.now += 1.0  # one request per second comes back
    assert await limiter.admit("a") is None
    assert await limiter.admit("a") is not None
    assert await limiter.admit("unlimited-key") is None


async def test_token_debt_blocks_until_repaid() -> None:
    clock = Clock()
    limiter = LocalLimiter({"t": KeyLimits(tpm=600)}, clock=clock)
    assert await limiter.admit("t") is None
    await limiter.charge("t", 1200)  # 600 in debt: 10 tokens/s → 60 s to repay
    refusal = await limiter.admit("t")
    assert refusal is not None and 60 <= int(refusal.headers["Retry-After"]) <= 61
    clock.now += 59
    assert await limiter.admit("t") is not None
    clock.now += 2
    assert await limiter.admit("t") is None


def test_no_limits_no_limiter() -> None:
    class Key:
        def __init__(self, name: str, rpm: int | None = None, tpm: int | None = None) -> None:
            self.name, self.rpm, self.tpm = name, rpm, tpm

    assert build_limiter([Key("a"), Key("b")]) is None
    assert isinstance(build_limiter([Key("a", rpm=5)]), LocalLimiter)


# --- duplicate keys ------------------------------------------------------------------------------


LIMITS = LimitSettings()
KEYS = st.sampled_from(["a", "b", "a:b", ":", "\\u003a", "k"])
VALUES = st.recursive(
    st.one_of(
        st.none(), st.integers(), st.sampled_from(["", ":", "x:y", "::", "\\u003a", "http://h:1/"])
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.lists(st.tuples(KEYS, inner), max_size=4)
    ),
    max_leaves=12,
)


def _string(text: str, escape: bool) -> str:
    """A JSON string; with ``escape`` its colons written ``\\u003a`` (the same string,
    no ``:`` byte)."""
    encoded = json.dumps(text)
    return encoded.replace(":", "\\u003a") if escape else encoded


def _encode(value: object, escape: bool = False) -> str:
    """JSON text; a list of (key, value) tuples becomes an object that may repeat keys."""
    if isinstance(value, list) and value and all(isinstance(v, tuple) for v in value):
        return "{" + ",".join(_string(k, escape) + ":" + _encode(v, escape) for k, v in value) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_encode(v, escape) for v in value) + "]"
    if isinstance(value, str):
        return _string(value, escape)
    return json.dumps(value)


def _has_duplicates(value: object) -> bool:
    if isinstance(value, list) and value and all(isinstance(v, tuple) for v in value):
        keys = [json.loads(json.dumps(k)) for k, _ in value]
        return len(keys) != len(set(keys)) or any(_has_duplicates(v) for _, v in value)
    if isinstance(value, list):
        return any(_has_duplicates(v) for v in value)
    return False


@settings(max_examples=500, deadline=None)
@given(value=VALUES, escape=st.booleans())
@example(
    value=[("x", ":"), ("a", 1), ("a", 2)], escape=True
)  # the escaped colon hides a structural one
def test_duplicate_scan_is_exact(value: object, escape: bool) -> None:
    import orjson

    raw = _encode(value, escape).encode()
    data = orjson.loads(raw)
    if _has_duplicates(value):
        with pytest.raises(ApiError) as caught:
            check_structure(data, raw, LIMITS)
        assert caught.value.code == "duplicate_key"
    else:
        check_structure(data, raw, LIMITS)


TIGHT = LimitSettings.model_construct(
    max_json_depth=3, max_string_bytes=24
)  # below the config minimums: small bodies hit them
TEXTS = st.text(alphabet=st.sampled_from(["a", ":", "é", "😀", "\n", '"']), max_size=8)
SHAPES = st.recursive(
    st.one_of(st.none(), st.integers(-1000, 1000), TEXTS),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(TEXTS, inner, max_size=3)),
    max_leaves=10,
)


def _depth(value: object) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


def _longest(value: object) -> int:
    """The longest string (key or value) in UTF-8 bytes."""
    if isinstance(value, dict):
        return max(
            [len(k.encode()) for k in value] + [_longest(v) for v in value.values()], default=0
        )
    if isinstance(value, list):
        return max((_longest(v) for v in value), default=0)
    return len(value.encode()) if isinstance(value, str) else 0


@settings(max_examples=500, deadline=None)
@given(value=SHAPES)
@example(value=[[[[]]]])
@example(value=[[{"a": []}]])
@example(value={"k": "😀😀😀😀😀😀😀"})
@example(value=["a" * 25])
def test_depth_and_string_limits_are_exact(value: object) -> None:
    """Small bodies take a shortcut past the depth and string walk:
    the limits still hold exactly."""
    import orjson

    raw = orjson.dumps(value)
    if _depth(value) > TIGHT.max_json_depth:
        with pytest.raises(ApiError) as caught:
            check_structure(value, raw, TIGHT)
        assert caught.value.code == "nesting_too_deep"
    elif _longest(value) > TIGHT.max_string_bytes:
        with pytest.raises(ApiError) as caught:
            check_structure(value, raw, TIGHT)
        assert caught.value.code == "string_too_long"
    else:
        check_structure(value, raw, TIGHT)


# --- request ids, log format, OpenAPI -------------------------------------------------------------


@pytest.mark.parametrize(
    ("given_id", "kept"),
    [
        (b"abc", True),
        (b"A.b_c:d-1", True),
        (b"x" * 128, True),
        (b"x" * 129, False),
        (b"a b", False),
        (b"", False),
        (b"\xff", False),
    ],
)
def test_request_id_rule(given_id: bytes, kept: bool) -> None:
    found, _, _ = edge_headers({"headers": [(b"x-request-id", given_id)]})
    result = _request_id(found)
    assert (result == given_id.decode("latin-1")) is kept


@pytest.mark.parametrize(
    ("headers", "given", "conflict"),
    [
        ([(b"authorization", b"Bearer a"), (b"accept", b"*/*")], None, False),
        (
            [[b"x-request-id", b"l"], [b"authorization", b"Bearer a"]],
            b"l",
            False,
        ),  # lists, none repeated
        (
            [(b"accept", b"*/*"), (b"authorization", b"Bearer b"), (b"accept", b"*/*")],
            None,
            False,
        ),  # another header repeated
        ([(b"x-request-id", b"one"), (b"accept", b"*/*")], b"one", False),
        ([(b"x-request-id", b"one"), (b"x-request-id", b"two")], b"one", False),  # the first one
        (
            [
                (b"authorization", b"Bearer a"),
                (b"x-request-id", b"r"),
                (b"authorization", b"Bearer a"),
            ],
            b"r",
            False,
        ),  # same key twice
        ([(b"authorization", b"Bearer a"), (b"authorization", b"Bearer b")], None, True),
        (
            [[b"authorization", b"Bearer a"], [b"authorization", b"Bearer b"]],
            None,
            True,
        ),  # lists, as some servers give
        (
            (
                pair
                for pair in [
                    (b"x-request-id", b"g"),
                    (b"authorization", b"Bearer a"),
                    (b"authorization", b"Bearer b"),
                ]
            ),
            b"g",
            True,
        ),
    ],
)
def test_header_scan(headers: Iterable[Any], given: bytes | None, conflict: bool) -> None:
    found, _, repeated = edge_headers({"headers": headers})  # a generator too: scanned once
    assert (found, repeated) == (given, conflict)


def test_json_formatter_adds_request_id() -> None:
    import logging

    token = CURRENT_REQUEST.set(RequestState("rid-1", "GET", "/x"))
    try:
        record = logging.LogRecord(
            "orgate.engine", logging.WARNING, "", 0, "hello %s", ("world",), None
        )
        line = json.loads(JsonFormatter().format(record))
    finally:
        CURRENT_REQUEST.reset(token)
    assert (
        line["msg"] == "hello world"
        and line["request_id"] == "rid-1"
        and line["level"] == "warning"
    )


def test_openapi_only_lists_routed_paths() -> None:
    doc = build_document(routed={"/v1/responses", "/v1/models"})
    assert set(doc["paths"]) == {"/responses", "/models"}
    full = build_document(public_url="https://gw.example.com/")
    assert full["servers"] == [
        {"url": "https://gw.example.com/v1", "description": "this orgate gateway"}
    ]
    assert (
        "/chat/completions" not in full["paths"]
        and "/responses/{response_id}/cancel" in full["paths"]
    )


def test_serve_raises_the_open_files_soft_limit() -> None:
    """A soft limit of 256 open files would refuse clients at a few hundred connections:
    raised up to the hard limit."""
    code = (
        "import resource\n"
        "hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))\n"
        "from orgate.cli import raise_open_files_limit\n"
        "got = raise_open_files_limit(4096)\n"
        "want = 4096 if hard == resource.RLIM_INFINITY else min(4096, hard)\n"
        "assert got == want == resource.getrlimit(resource.RLIMIT_NOFILE)[0], (got, want)\n"
        "assert raise_open_files_limit(100) == want  # never lowered\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
