"""Reading a request body (``orgate.server.body``) in process: headers, bytes, JSON, count limits.

Each check as the module docstring and docs/operations.md state it: a media type that is
JSON (or the label ``curl -d`` puts on JSON), a ``Content-Encoding`` orgate decodes (else 415;
the decoding itself: tests/hardening/test_compressed_bodies.py), a declared or
received size within ``max_body_bytes`` (413), the body within ``body_timeout`` (408),
JSON that parses (400 ``invalid_json``), and the count limits of a create body
(``max_input_items``, ``max_tools``, ``max_schema_bytes``, the ``max_schema_*`` bounds),
each error naming its limit. The JSON structure walk (depth, strings, duplicate keys) has
its property tests in tests/hardening/test_units.py.
"""

from __future__ import annotations

import asyncio
import gzip
import zlib
from typing import Any

import pytest

from orgate.config import LimitSettings
from orgate.protocol.errors import ApiError
from orgate.server.body import (
    DeferredSchema,
    body_decoder,
    check_body_headers,
    check_content_encoding,
    check_declared_length,
    check_deferred_schemas,
    check_request_limits,
    check_schema_bounds,
    media_type,
    parse_json,
    receive_body,
    with_body_timeout,
)
from tests.hostile.shapes import chained_conjunctions

LIMITS = LimitSettings()
SMALL = LimitSettings(
    max_body_bytes=1024, max_input_items=2, max_tools=1, max_schema_bytes=1024, max_schema_depth=4
)


def refused(call: Any, *args: Any, **kwargs: Any) -> ApiError:
    with pytest.raises(ApiError) as caught:
        call(*args, **kwargs)
    return caught.value


# --- headers --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content_type", "media"),
    [
        ("application/json", "application/json"),
        ("Application/JSON; charset=utf-8", "application/json"),
        ("application/merge-patch+json", "application/merge-patch+json"),
        ("", ""),
        ("application/x-www-form-urlencoded", "application/x-www-form-urlencoded"),  # curl -d
        ("text/plain;charset=UTF-8", "text/plain"),
    ],
)
def test_json_media_types_are_accepted(content_type: str, media: str) -> None:
    assert media_type(content_type) == media


@pytest.mark.parametrize(
    "content_type", ["text/html", "multipart/form-data; boundary=x", "application/xml"]
)
def test_other_media_types_are_415(content_type: str) -> None:
    error = refused(media_type, content_type)
    assert (error.status, error.code) == (415, "unsupported_media_type")
    assert content_type.split(";")[0] in error.message


@pytest.mark.parametrize(
    "encoding", [None, "", "identity", " Identity ", "gzip", "GZIP", "x-gzip", "deflate", "zstd"]
)
def test_an_uncompressed_or_decodable_body_passes(encoding: str | None) -> None:
    check_content_encoding(encoding)


@pytest.mark.parametrize("encoding", ["br", "compress", "gzip, zstd", "zstd;q=1"])
def test_a_coding_not_decoded_is_415_naming_those_decoded(encoding: str) -> None:
    error = refused(check_content_encoding, encoding)
    assert (error.status, error.code) == (415, "unsupported_content_encoding")
    assert error.headers == {"Accept-Encoding": "zstd, gzip, deflate, identity"}
    assert encoding.lower() in error.message


def test_a_declared_length_over_the_limit_is_413() -> None:
    check_declared_length(None, SMALL)
    check_declared_length("1024", SMALL)
    check_declared_length(
        "not a number", SMALL
    )  # the server's HTTP parser judges that; the read still counts
    error = refused(check_declared_length, "1025", SMALL)
    assert (error.status, error.code) == (413, "request_too_large")
    assert "1024" in error.message and "limits.max_body_bytes" in error.message


def test_the_headers_are_checked_together() -> None:
    ok = {"content-type": "application/json", "content-length": "10"}
    assert check_body_headers(ok, SMALL) == "application/json"
    assert check_body_headers({}, SMALL) == ""
    assert (
        refused(check_body_headers, ok | {"content-type": "text/html"}, SMALL).code
        == "unsupported_media_type"
    )
    assert (
        refused(check_body_headers, ok | {"content-encoding": "br"}, SMALL).code
        == "unsupported_content_encoding"
    )
    assert (
        refused(check_body_headers, ok | {"content-length": "5000"}, SMALL).code
        == "request_too_large"
    )


# --- the bytes ------------------------------------------------------------------------------------


def _receiver(*messages: dict[str, Any]) -> Any:
    queue = list(messages)

    async def receive() -> dict[str, Any]:
        return queue.pop(0)

    return receive


async def test_a_body_is_read_from_all_its_chunks() -> None:
    one = _receiver({"type": "http.request", "body": b'{"a": 1}'})
    assert await receive_body(one, SMALL) == b'{"a": 1}'
    parts = _receiver(
        {"type": "http.request", "body": b'{"a"', "more_body": True},
        {"type": "http.request", "body": b"", "more_body": True},
        {"type": "http.request", "body": b": 1}", "more_body": False},
    )
    assert await receive_body(parts, SMALL) == b'{"a": 1}'


async def test_a_client_gone_mid_body_is_none() -> None:
    gone = _receiver(
        {"type": "http.request", "body": b"{", "more_body": True}, {"type": "http.disconnect"}
    )
    assert await receive_body(gone, SMALL) is None


async def test_a_body_growing_past_the_limit_is_413_as_soon_as_it_does() -> None:
    chunk = {"type": "http.request", "body": b"x" * 600, "more_body": True}
    receive = _receiver(chunk, chunk)  # a third read would fail: the second one is over the limit
    with pytest.raises(ApiError) as caught:
        await receive_body(receive, SMALL)
    assert (caught.value.status, caught.value.code) == (413, "request_too_large")


async def test_a_compressed_body_is_decompressed_chunk_by_chunk() -> None:
    data = gzip.compress(b'{"a": 1}')
    chunks = [
        {"type": "http.request", "body": data[i : i + 3], "more_body": i + 3 < len(data)}
        for i in range(0, len(data), 3)
    ]
    decoder = body_decoder("gzip", SMALL)
    assert await receive_body(_receiver(*chunks), SMALL, decoder) == b'{"a": 1}'


async def test_the_limit_bounds_the_decompressed_size_not_the_wire_size() -> None:
    data = gzip.compress(b" " * 5000)  # 5000 bytes, a few dozen on the wire
    receive = _receiver({"type": "http.request", "body": data})
    with pytest.raises(ApiError) as caught:
        await receive_body(receive, SMALL, body_decoder("gzip", SMALL))
    assert (caught.value.status, caught.value.code) == (413, "request_too_large")
    assert "decompressed" in caught.value.message


def test_the_decoder_never_holds_more_than_the_limit() -> None:
    """One chunk of a bomb yields at most limit + 1 bytes before the 413."""
    decoder = body_decoder("deflate", SMALL)
    assert decoder is not None
    with pytest.raises(ApiError):
        decoder.feed(zlib.compress(bytes(10_000_000)))
    assert decoder.size == SMALL.max_body_bytes + 1


async def test_a_body_within_its_time_is_returned() -> None:
    async def reading() -> bytes:
        await asyncio.sleep(0)
        return b"{}"

    assert await with_body_timeout(reading(), LIMITS) == b"{}"


async def test_a_body_that_never_ends_is_408_naming_the_limit() -> None:
    slow = LimitSettings(body_timeout=0.05)

    async def reads_forever() -> bytes:
        await asyncio.Event().wait()  # a client that stopped sending
        return b""

    with pytest.raises(ApiError) as caught:
        await asyncio.create_task(with_body_timeout(reads_forever(), slow))
    assert (caught.value.status, caught.value.code) == (408, "request_timeout")
    assert "limits.body_timeout" in caught.value.message


async def test_a_cancellation_from_outside_stays_a_cancellation() -> None:
    started = asyncio.Event()

    async def reading() -> bytes:
        started.set()
        await asyncio.Event().wait()
        return b""

    task = asyncio.create_task(with_body_timeout(reading(), LIMITS))
    await started.wait()
    task.cancel()  # the client went away, or the server shuts down
    with pytest.raises(asyncio.CancelledError):
        await task


# --- the JSON -------------------------------------------------------------------------------------


def test_a_json_body_is_parsed() -> None:
    assert parse_json(b' {"model": "m", "input": "hi"} ', "application/json", LIMITS) == {
        "model": "m",
        "input": "hi",
    }
    assert parse_json(b"[1, 2]", "", LIMITS) == [
        1,
        2,
    ]  # any JSON: the shape is the endpoint's to judge


@pytest.mark.parametrize(
    "raw", [b"", b"  \n", b"{", b'{"a": NaN}', b'{"a": Infinity}', b"\xff\xfe", b'{"a": 1} x']
)
def test_a_body_that_is_not_json_is_400(raw: bytes) -> None:
    error = refused(parse_json, raw, "application/json", LIMITS)
    assert (error.status, error.code, error.type) == (400, "invalid_json", "invalid_request_error")


@pytest.mark.parametrize("media", ["application/x-www-form-urlencoded", "text/plain"])
def test_a_form_labelled_body_that_is_not_json_is_a_media_type_error(media: str) -> None:
    assert parse_json(b'{"a": 1}', media, LIMITS) == {"a": 1}  # curl -d with JSON: fine
    error = refused(parse_json, b"a=1&b=2", media, LIMITS)
    assert (error.status, error.code) == (415, "unsupported_media_type")


def test_parsing_applies_the_structure_limits() -> None:
    assert (
        refused(parse_json, b'{"a": 1, "a": 2}', "application/json", LIMITS).code == "duplicate_key"
    )
    deep = LimitSettings(max_json_depth=4)
    assert refused(parse_json, b"[[[[[1]]]]]", "application/json", deep).code == "nesting_too_deep"


def test_a_scalar_body_is_walked_like_any_other() -> None:
    limits = LimitSettings(max_string_bytes=1024)
    number = b"1" + b" " * 1100  # past the quick check (longer than a string may be): walked
    assert parse_json(number, "application/json", limits) == 1
    text = b'"' + b"x" * 1100 + b'"'
    assert refused(parse_json, text, "application/json", limits).code == "string_too_long"
    # A long string inside a list, and the colons inside strings, which are not members.
    assert (
        refused(parse_json, b'["' + b"y" * 1100 + b'"]', "application/json", limits).code
        == "string_too_long"
    )
    colons = b'[{"a": "' + b":" * 1100 + b'"}]'
    assert parse_json(colons, "application/json", LIMITS) == [{"a": ":" * 1100}]
    assert (
        refused(parse_json, b'[{"a": ":", "a": 1}]', "application/json", LIMITS).code
        == "duplicate_key"
    )
    # An escaped colon is a colon in the parsed string but not in the raw bytes.
    escaped = b'{"a": 1, "a": "\\u003a"}'
    assert refused(parse_json, escaped, "application/json", LIMITS).code == "duplicate_key"


# --- count limits of a create body ----------------------------------------------------------------

TOOL = {"type": "function", "name": "f", "parameters": {"type": "object"}}


def test_bodies_within_the_count_limits_pass() -> None:
    check_request_limits({"input": [{}, {}], "tools": [TOOL]}, SMALL)
    check_request_limits(
        {"input": "a string is one item", "tools": "not a list: the parser's to refuse"}, SMALL
    )
    check_request_limits(["not", "an", "object"], SMALL)


def test_too_many_input_items_or_tools_is_400_on_the_field() -> None:
    items = refused(check_request_limits, {"input": [{}, {}, {}]}, SMALL)
    assert (items.status, items.code, items.param) == (400, "too_many_items", "input")
    assert "3 items" in items.message and "limits.max_input_items" in items.message
    tools = refused(check_request_limits, {"tools": [TOOL, TOOL]}, SMALL)
    assert (tools.code, tools.param) == (
        "too_many_tools",
        "tools",
    ) and "limits.max_tools" in tools.message


def test_a_schema_over_max_schema_bytes_is_400_naming_where() -> None:
    big = {"type": "object", "description": "x" * 2000}
    tool = refused(check_request_limits, {"tools": [{**TOOL, "parameters": big}]}, SMALL)
    assert (tool.code, tool.param) == ("schema_too_large", "tools[0].parameters")
    assert "limits.max_schema_bytes" in tool.message
    text = refused(
        check_request_limits, {"text": {"format": {"type": "json_schema", "schema": big}}}, SMALL
    )
    assert (text.code, text.param) == ("schema_too_large", "text.format.schema")


def test_a_schema_deeper_than_the_bounds_is_400_naming_the_path() -> None:
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(6):
        deep = {"type": "object", "properties": {"x": deep}}
    error = refused(
        check_request_limits,
        {"tools": [TOOL, {**TOOL, "parameters": deep}]},
        LimitSettings(max_schema_depth=4),
    )
    assert (error.status, error.code) == (400, "schema_too_complex")
    assert error.param is not None and error.param.startswith("tools[1].parameters.properties.x")
    check_request_limits(
        {"tools": [{**TOOL, "parameters": deep}]}, LIMITS
    )  # within the default bounds


@pytest.mark.parametrize(
    ("schema", "keyword"),
    [
        ({"type": "string", "minLength": 10**9}, "minLength"),
        ({"type": "array", "minItems": 10**9}, "minItems"),
        ({"type": "object", "minProperties": 10**6}, "minProperties"),
        ({"type": "string", "pattern": "a" * 5000}, "pattern"),
    ],
)
def test_a_schema_asking_for_too_much_work_names_its_keyword(
    schema: dict[str, Any], keyword: str
) -> None:
    error = refused(
        check_schema_bounds,
        {"type": "object", "properties": {"v": schema}},
        "text.format.schema",
        LIMITS,
    )
    assert error.code == "schema_too_complex"
    assert error.param == f"text.format.schema.properties.v.{keyword}"


def test_only_a_body_that_fails_the_colon_count_pays_for_the_exact_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from orgate.server import body

    exact: list[bytes] = []
    monkeypatch.setattr(body, "find_duplicate_key", lambda raw: exact.append(raw))
    for raw in (b'[{"a": "' + b":" * 1100 + b'"}]', b'{"a": "b:c", "d": "\\u003a"}'):
        body.parse_json(raw, "application/json", LIMITS)
    assert exact == []
    suspicious = b'{"a": 1, "a": 2}'
    body.parse_json(suspicious, "application/json", LIMITS)
    assert exact == [suspicious]


def test_a_large_schema_never_seen_is_left_to_be_costed_off_the_event_loop() -> None:
    """Past ``INLINE_SCHEMA_BYTES``, a new schema's bounds and cost wait in ``deferred`` (the
    endpoint runs them in a thread); a small one, or one already seen, is checked at once."""
    limits = LimitSettings()
    large = chained_conjunctions(1_200)  # past max_schema_fanout
    body = {"model": "m", "input": "x", "text": {"format": {"schema": large}}}
    deferred: list[DeferredSchema] = []
    check_request_limits(body, limits, deferred)
    assert [param for _, param, _ in deferred] == ["text.format.schema"]
    with pytest.raises(ApiError) as refused:
        check_deferred_schemas(deferred, limits)
    assert refused.value.code == "schema_too_complex"
    assert "limits.max_schema_fanout" in refused.value.message
    small = {
        "model": "m",
        "input": "x",
        "tools": [{"type": "function", "name": "f", "parameters": chained_conjunctions(3)}],
    }
    fine: list[DeferredSchema] = []
    check_request_limits(small, limits, fine)
    assert fine == []
    with pytest.raises(ApiError):  # without a list to defer to, it is checked at once
        check_request_limits(body, limits)
