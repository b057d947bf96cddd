"""Reading a JSON request body within the configured limits, with spec-shaped errors.

Every limit has a name in ``[limits]`` and the error message names it:
``max_body_bytes`` (413), ``body_timeout`` (408), ``max_json_depth``,
``max_string_bytes``, ``max_input_items``, ``max_tools`` and
``max_schema_bytes`` and the ``max_schema_*`` bounds of a schema's work (400). Invalid UTF-8,
NaN/Infinity and duplicate object
keys are refused with 400 too (``invalid_json`` / ``duplicate_key``). A compressed body
(``Content-Encoding`` zstd, gzip or deflate) is decompressed as it arrives, and
``max_body_bytes`` applies to its decompressed size (``content_encoding.py``); any other
coding is 415.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from collections.abc import Awaitable, Mapping
from typing import Any, TypeVar

import orjson
from starlette.requests import Request

from orgate.config import LimitSettings
from orgate.gate.bounds import SchemaBounds, SchemaTooComplex, check_bounds, dotted
from orgate.protocol.errors import ApiError, ErrorCode
from orgate.server.content_encoding import BodyDecoder, coding_of, decoder_for
from orgate.server.disconnect import DisconnectWatch

T = TypeVar("T")

# `curl -d '{...}'` labels a JSON body as form data: accepted when the body is JSON.
LENIENT_MEDIA = frozenset({"", "application/x-www-form-urlencoded", "text/plain"})


async def read_json(request: Request, limits: LimitSettings) -> Any:
    """Read and parse a Starlette request's JSON body within the limits."""
    media = check_body_headers(request.headers, limits)
    decoder = body_decoder(request.headers.get("content-encoding"), limits)
    raw = await with_body_timeout(_stream_body(request, limits, decoder), limits)
    return parse_json(raw, media, limits)


def check_body_headers(headers: Mapping[str, str], limits: LimitSettings) -> str:
    """What the headers of a request with a JSON body must pass before it is read: its media
    type (returned), a ``Content-Encoding`` orgate decodes, a declared length within
    ``max_body_bytes``."""
    media = media_type(headers.get("content-type", ""))
    check_content_encoding(headers.get("content-encoding"))
    check_declared_length(headers.get("content-length"), limits)
    return media


def body_decoder(encoding: str | None, limits: LimitSettings) -> BodyDecoder | None:
    """The decompressor of a body's ``Content-Encoding`` (None: not compressed), bounded by
    ``max_body_bytes``."""
    if not encoding:
        return None
    return decoder_for(encoding, limits.max_body_bytes, lambda: _too_large(limits, "decompressed "))


async def _stream_body(
    request: Request, limits: LimitSettings, decoder: BodyDecoder | None = None
) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limits.max_body_bytes:
            raise _too_large(limits)
        chunks.append(chunk if decoder is None else decoder.feed(chunk))
    if decoder is not None:
        decoder.finish()
    return b"".join(chunks)


async def with_body_timeout(reading: Awaitable[T], limits: LimitSettings) -> T:
    """``limits.body_timeout`` for receiving a whole body (slow clients):
    else 408 ``request_timeout``.

    The deadline is ``DisconnectWatch``'s body phase (one timer handle that cancels the
    reading task, rather than ``asyncio.timeout``), stopped before it would watch the client:
    what ``POST /v1/responses`` uses too, with the watch going on after the body.
    """
    watch = DisconnectWatch(None, body_timeout=limits.body_timeout)
    try:
        return await reading
    except asyncio.CancelledError:
        if watch.body_timed_out():
            raise body_timeout_error(limits) from None
        raise  # cancelled from outside (client gone, shutdown)
    finally:
        watch.stop()


def body_timeout_error(limits: LimitSettings) -> ApiError:
    return ApiError.of(
        ErrorCode.REQUEST_TIMEOUT,
        f"The request body did not arrive within {limits.body_timeout:g} seconds "
        "(limits.body_timeout).",
    )


async def receive_body(
    receive: Any, limits: LimitSettings, decoder: BodyDecoder | None = None
) -> bytes | None:
    """The raw body of an ASGI request within the size limit (decompressed by ``decoder``, which
    bounds the decompressed size); None if the client went away. The time limit is the
    caller's (``with_body_timeout``, or ``DisconnectWatch``'s body phase)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        if chunk:
            size += len(chunk)
            if size > limits.max_body_bytes:
                raise _too_large(limits)
            chunks.append(chunk if decoder is None else decoder.feed(chunk))
        if not message.get("more_body", False):
            if decoder is not None:
                decoder.finish()
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def media_type(content_type: str) -> str:
    """The checked media type: JSON, or a label `curl -d` puts on JSON
    (then the body must be JSON)."""
    media = content_type.split(";", 1)[0].strip().lower()
    if media in LENIENT_MEDIA or media == "application/json" or media.endswith("+json"):
        return media
    raise ApiError.of(
        ErrorCode.UNSUPPORTED_MEDIA_TYPE,
        f"Unsupported Content-Type '{media}': send application/json.",
    )


def check_content_encoding(encoding: str | None) -> None:
    """A ``Content-Encoding`` orgate cannot decode is 415 (naming the ones it decodes in
    ``Accept-Encoding``), not garbled JSON."""
    coding_of(encoding)


def check_declared_length(declared: str | None, limits: LimitSettings) -> None:
    if declared is not None and declared.isdigit() and int(declared) > limits.max_body_bytes:
        raise _too_large(limits)


def parse_json(raw: bytes, media: str, limits: LimitSettings) -> Any:
    if not raw.strip():
        raise ApiError.of(ErrorCode.INVALID_JSON, "The request body is empty; send a JSON object.")
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if media in LENIENT_MEDIA and media:
            raise ApiError.of(
                ErrorCode.UNSUPPORTED_MEDIA_TYPE,
                f"Unsupported Content-Type '{media}' (the body is not JSON): send "
                "application/json.",
            ) from None
        raise ApiError.of(
            ErrorCode.INVALID_JSON, f"We could not parse the JSON body of your request: {exc}"
        ) from None
    check_structure(data, raw, limits)
    return data


def _too_large(limits: LimitSettings, what: str = "") -> ApiError:
    return ApiError.of(
        ErrorCode.REQUEST_TOO_LARGE,
        f"The {what}request body is larger than the limit of {limits.max_body_bytes} bytes "
        "(limits.max_body_bytes).",
    )


def _too_deep(limit: int) -> ApiError:
    return ApiError.of(
        ErrorCode.NESTING_TOO_DEEP,
        f"The request body is nested deeper than {limit} levels (limits.max_json_depth).",
    )


def check_structure(data: Any, raw: bytes, limits: LimitSettings) -> None:
    """One walk over the parsed body: depth, string sizes, and the duplicate-key check.

    Duplicate keys: orjson keeps the last value silently. Every object member has
    exactly one ``:`` outside strings, so a body is free of duplicates when the
    number of members parsed equals the number of ``:`` in the raw bytes minus
    those inside strings. Counting ``:`` in ``raw`` runs at memchr speed; the
    colons of strings are only counted when the first comparison leaves a gap
    (a string contains a colon). Only a body that fails the count pays for the
    exact (slow) pass that names the key.
    """
    max_depth = limits.max_json_depth
    max_string = limits.max_string_bytes
    # When neither limit can be reached (a string's UTF-8 is never longer than its JSON text, a
    # level takes a bracket), only the duplicate-key count is left: over the objects alone.
    if (
        len(raw) <= max_string
        and raw.count(b"{") + raw.count(b"[") <= max_depth
        and raw.count(b":") == _members(data)
    ):
        return
    members, strings = _walk(data, max_depth)
    _check_string_sizes(strings, max_string)
    if _may_repeat_a_key(raw, members, strings):
        duplicate = find_duplicate_key(raw)
        if duplicate is not None:
            raise ApiError.of(
                ErrorCode.DUPLICATE_KEY,
                f"The request body has the key '{duplicate[:100]}' twice in the same "
                "object; send each key once.",
            )


def _walk(data: Any, max_depth: int) -> tuple[int, list[str]]:
    """The number of object members and every string (keys too) of a parsed body; raises when
    it is nested deeper than ``max_depth``."""
    members = 0
    strings: list[str] = []
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > max_depth:
            raise _too_deep(max_depth)
        if isinstance(node, dict):
            members += len(node)
            for key, value in node.items():
                strings.append(key)
                if isinstance(value, dict | list):
                    stack.append((value, depth + 1))
                elif isinstance(value, str):
                    strings.append(value)
        elif isinstance(node, list):
            for value in node:
                if isinstance(value, dict | list):
                    stack.append((value, depth + 1))
                elif isinstance(value, str):
                    strings.append(value)
        elif isinstance(node, str):
            strings.append(node)
    return members, strings


def _check_string_sizes(strings: list[str], max_string: int) -> None:
    # A str of n characters is at most 4n UTF-8 bytes and at least n: only measure when it matters.
    for text in strings:
        if len(text) * 4 > max_string and len(text.encode("utf-8", "surrogatepass")) > max_string:
            raise ApiError.of(
                ErrorCode.STRING_TOO_LONG,
                "A string in the request body is longer than the limit of "
                f"{max_string} bytes (limits.max_string_bytes).",
            )


def _may_repeat_a_key(raw: bytes, members: int, strings: list[str]) -> bool:
    """Whether the raw body has more ``:`` outside strings than the parsed objects have members
    (then a key was given twice and orjson kept the last)."""
    colons = raw.count(b":")
    if colons == members:
        return False
    inside = sum(text.count(":") for text in strings if ":" in text)
    escaped = raw.count(b"\\u003a") + raw.count(
        b"\\u003A"
    )  # may over-count (never under-count): errs towards the exact pass
    return colons - inside + escaped > members


def _members(node: Any) -> int:
    """The number of object members in a parsed JSON value."""
    count = 0
    stack = [node]
    while stack:
        node = stack.pop()
        # Loops rather than ``stack.extend(<generator>)``: a generator per node cost more than the
        # walk.
        if type(node) is dict:
            count += len(node)
            for value in node.values():
                if type(value) is dict or type(value) is list:
                    stack.append(value)
        elif type(node) is list:
            for value in node:
                if type(value) is dict or type(value) is list:
                    stack.append(value)
    return count


class _Duplicate(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _Duplicate(key)
        seen[key] = value
    return seen


def find_duplicate_key(raw: bytes) -> str | None:
    """The first key found twice in one object (slow exact pass, only for suspicious bodies)."""
    try:
        json.loads(raw, object_pairs_hook=_pairs)
    except _Duplicate as dup:
        return dup.key
    except (ValueError, RecursionError):
        return None
    return None


#: A schema past this many bytes of JSON, seen for the first time, is costed off the event loop
#: when the caller can wait (``check_request_limits(..., deferred)``): a fresh schema of the
#: largest size takes a few hundred milliseconds of CPU to walk and cost (gate/cost.py).
INLINE_SCHEMA_BYTES = 32 * 1024

#: A schema whose bounds are left to ``check_deferred_schemas``: (schema, param, cache key).
DeferredSchema = tuple[Any, str, tuple[SchemaBounds, bytes]]


def check_request_limits(
    data: Any, limits: LimitSettings, deferred: list[DeferredSchema] | None = None
) -> None:
    """Count limits of a create-response body: input items, tools, schema sizes. With
    ``deferred``, the bounds of a large schema not seen before are left there for
    ``check_deferred_schemas`` (run it in a thread)."""
    if not isinstance(data, dict):
        return
    items = data.get("input")
    if isinstance(items, list) and len(items) > limits.max_input_items:
        raise ApiError.of(
            ErrorCode.TOO_MANY_ITEMS,
            f"'input' has {len(items)} items, more than the limit of "
            f"{limits.max_input_items} (limits.max_input_items).",
            param="input",
        )
    tools = data.get("tools")
    if tools is not None:
        _check_tools(tools, "tools", limits, deferred)
    if isinstance(items, list):
        for index, item in enumerate(items):
            # OpenAI's additional_tools item offers tools too (engine/turn_tools.py): same limits.
            if isinstance(item, dict) and item.get("type") == "additional_tools":
                _check_tools(item.get("tools"), f"input[{index}].tools", limits, deferred)
    text = data.get("text")
    if isinstance(text, dict) and isinstance(text.get("format"), dict):
        _check_schema(text["format"].get("schema"), "text.format.schema", limits, deferred)


def check_deferred_schemas(deferred: list[DeferredSchema], limits: LimitSettings) -> None:
    """The bounds ``check_request_limits`` left aside (400 ``schema_too_complex`` past one)."""
    for schema, param, key in deferred:
        check_schema_bounds(schema, param, limits)
        _remember(key)


def _check_tools(
    tools: Any, param: str, limits: LimitSettings, deferred: list[DeferredSchema] | None
) -> None:
    if not isinstance(tools, list):
        return
    if len(tools) > limits.max_tools:
        raise ApiError.of(
            ErrorCode.TOO_MANY_TOOLS,
            f"'{param}' has {len(tools)} tools, more than the limit of "
            f"{limits.max_tools} (limits.max_tools).",
            param=param,
        )
    for index, tool in enumerate(tools):
        if isinstance(tool, dict):
            _check_schema(tool.get("parameters"), f"{param}[{index}].parameters", limits, deferred)


def _check_schema(
    schema: Any, param: str, limits: LimitSettings, deferred: list[DeferredSchema] | None = None
) -> None:
    if not isinstance(schema, dict | list):
        return
    raw = orjson.dumps(schema)
    size = len(raw)
    if size > limits.max_schema_bytes:
        raise ApiError.of(
            ErrorCode.SCHEMA_TOO_LARGE,
            f"'{param}' is {size} bytes of JSON, more than the limit of "
            f"{limits.max_schema_bytes} (limits.max_schema_bytes).",
            param=param,
        )
    bounds = schema_bounds(limits)
    key = (bounds, hashlib.blake2b(raw, digest_size=16).digest())
    if key in _WITHIN_BOUNDS:  # the same tools come with every request of a client: walked once
        return
    if deferred is not None and size > INLINE_SCHEMA_BYTES:
        deferred.append((schema, param, key))
        return
    check_schema_bounds(schema, param, limits)
    _remember(key)


def _remember(key: tuple[SchemaBounds, bytes]) -> None:
    _WITHIN_BOUNDS[key] = None
    if len(_WITHIN_BOUNDS) > 4096:
        with contextlib.suppress(KeyError, RuntimeError, StopIteration):  # another thread's
            del _WITHIN_BOUNDS[next(iter(_WITHIN_BOUNDS))]


#: Schemas (by content and bounds) that passed ``check_schema_bounds``, oldest first.
_WITHIN_BOUNDS: dict[tuple[SchemaBounds, bytes], None] = {}


def schema_bounds(limits: LimitSettings) -> SchemaBounds:
    """The ``[limits]`` ``max_schema_*`` settings as the gate's ``SchemaBounds``
    (built once per settings)."""
    made = _BOUNDS.get(id(limits))
    if made is not None and made[0] is limits:
        return made[1]
    bounds = _bounds_of(limits)
    _BOUNDS[id(limits)] = (limits, bounds)
    return bounds


_BOUNDS: dict[int, tuple[LimitSettings, SchemaBounds]] = {}


def _bounds_of(limits: LimitSettings) -> SchemaBounds:
    return SchemaBounds(
        max_nodes=limits.max_schema_nodes,
        max_depth=limits.max_schema_depth,
        max_min_length=limits.max_schema_min_length,
        max_min_items=limits.max_schema_min_items,
        max_min_properties=limits.max_schema_min_properties,
        max_pattern_length=limits.max_schema_pattern_length,
        max_expansion=limits.max_schema_expansion,
        max_min_chars=limits.max_schema_min_chars,
        max_fanout=limits.max_schema_fanout,
    )


def check_schema_bounds(schema: Any, param: str, limits: LimitSettings) -> None:
    """400 ``schema_too_complex`` naming the keyword's path
    (``tools[0].parameters.properties.x.minItems``)
    when a client's schema asks for more work than the limits allow (``orgate.gate.bounds``)."""
    try:
        check_bounds(schema, schema_bounds(limits))
    except SchemaTooComplex as exc:
        where = dotted(param, exc.path)
        raise ApiError.of(ErrorCode.SCHEMA_TOO_COMPLEX, f"'{where}': {exc}.", param=where) from None
