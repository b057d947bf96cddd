"""Reading a JSON request body within the configured limits, with spec-shaped errors."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request

from orgate.config import LimitSettings
from orgate.protocol.errors import ApiError, invalid_request


async def read_json(request: Request, limits: LimitSettings) -> Any:
    content_type = request.headers.get("content-type", "")
    media = content_type.split(";", 1)[0].strip().lower()
    # `curl -d '{...}'` labels a JSON body as form data: accept it when it is JSON.
    lenient = media in ("", "application/x-www-form-urlencoded", "text/plain")
    if not lenient and media != "application/json" and not media.endswith("+json"):
        raise ApiError(415, f"Unsupported Content-Type '{media}': send application/json.", code="unsupported_media_type")
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limits.max_body_bytes:
        raise _too_large(limits)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limits.max_body_bytes:
            raise _too_large(limits)
        chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw.strip():
        raise invalid_request("The request body is empty; send a JSON object.", code="invalid_json")
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if lenient and media:
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
