"""Reading a JSON request body within the configured limits, with spec-shaped errors."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request

from orgate.config import LimitSettings
from orgate.protocol.errors import ApiError, invalid_request

# `curl -d '{...}'` labels a JSON body as form data: accepted when the body is JSON.
LENIENT_MEDIA = frozenset({"", "application/x-www-form-urlencoded", "text/plain"})


async def read_json(request: Request, limits: LimitSettings) -> Any:
    """Read and parse a Starlette request's JSON body within the limits."""
    media = media_type(request.headers.get("content-type", ""))
    check_declared_length(request.headers.get("content-length"), limits)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limits.max_body_bytes:
            raise _too_large(limits)
        chunks.append(chunk)
    return parse_json(b"".join(chunks), media, limits)


async def read_asgi_body(receive: Any, limits: LimitSettings) -> bytes | None:
    """The raw body of an ASGI request within the size limit; None if the client went away."""
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
            chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def media_type(content_type: str) -> str:
    """The checked media type: JSON, or a label `curl -d` puts on JSON (then the body must be JSON)."""
    media = content_type.split(";", 1)[0].strip().lower()
    if media in LENIENT_MEDIA or media == "application/json" or media.endswith("+json"):
        return media
    raise ApiError(415, f"Unsupported Content-Type '{media}': send application/json.", code="unsupported_media_type")


def check_declared_length(declared: str | None, limits: LimitSettings) -> None:
    if declared is not None and declared.isdigit() and int(declared) > limits.max_body_bytes:
        raise _too_large(limits)


def parse_json(raw: bytes, media: str, limits: LimitSettings) -> Any:
    if not raw.strip():
        raise invalid_request("The request body is empty; send a JSON object.", code="invalid_json")
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if media in LENIENT_MEDIA and media:
            raise ApiError(415, f"Unsupported Content-Type '{media}' (the body is not JSON): send application/json.", code="unsupported_media_type") from None
        raise invalid_request(f"We could not parse the JSON body of your request: {exc}", code="invalid_json") from None
    check_depth(data, limits.max_json_depth)
    return data


def _too_large(limits: LimitSettings) -> ApiError:
    return ApiError(413, f"The request body is larger than the limit of {limits.max_body_bytes} bytes (limits.max_body_bytes).", code="request_too_large")


def check_depth(data: Any, limit: int) -> None:
    """Refuse JSON nested deeper than ``limit`` (iterative: no recursion on hostile input)."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            raise invalid_request(f"The request body is nested deeper than {limit} levels (limits.max_json_depth).", code="nesting_too_deep")
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values() if isinstance(v, dict | list))
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node if isinstance(v, dict | list))
