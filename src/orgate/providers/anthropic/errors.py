"""Anthropic error replies (HTTP status + body, or a mid-stream ``error`` event) → ``ApiError``.

Pure. Anthropic error bodies look like
``{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}``.

upstream → orgate:

- 429 / ``rate_limit_error`` → 429 ``rate_limit_error`` ``rate_limit_exceeded``, ``Retry-After``
  passed on
- 529 / ``overloaded_error`` → 503 ``server_error`` ``upstream_overloaded`` (``Retry-After`` if
  sent)
- 400, 413, 422 / ``invalid_request_error``, ``request_too_large`` → 400 ``invalid_request_error``
  ``upstream_bad_request``
- 401, 403 / ``authentication_error``, ``permission_error`` → 502 ``server_error``
  ``upstream_auth_failed`` (upstream message withheld)
- 404 / ``not_found_error`` → 502 ``server_error`` ``upstream_model_not_found``
- 408, 504 / ``timeout_error`` → 504 ``server_error`` ``upstream_timeout``
- other (500 ``api_error``, 502, 503...) → 502 ``server_error`` ``upstream_error``

Messages name the deployment, never the API key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from orgate.protocol.errors import ApiError, ErrorCode
from orgate.providers.upstream_errors import clip as _clip
from orgate.providers.upstream_errors import retry_after, status_error

# Anthropic error ``type`` → the HTTP status it is sent with (for mid-stream errors).
ERROR_STATUS: dict[str, int] = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


def parse_error_body(raw: bytes) -> tuple[str | None, str]:
    """(Anthropic error type or None, message) of an error body; tolerant of non-JSON bodies."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None, _clip(raw.decode("utf-8", "replace").strip() or "(empty body)")
    error = body.get("error") if isinstance(body, Mapping) else None
    if isinstance(error, Mapping):
        kind = error.get("type")
        message = error.get("message")
        return (str(kind) if kind else None), _clip(
            str(message) if message else str(kind or "unknown error")
        )
    return None, _clip(orjson.dumps(body).decode())


def error_for(
    status: int, kind: str | None, message: str, headers: Mapping[str, str], name: str
) -> ApiError:
    """The ``ApiError`` for an upstream status from deployment ``name``.

    The status decides, except that an ``overloaded_error`` body is an overload
    whatever the status (proxies in front of Anthropic may send it with a 5xx).
    """
    who = f"upstream '{name}' (anthropic)"
    if status != 429 and (status == 529 or kind == "overloaded_error"):
        return ApiError.of(
            ErrorCode.UPSTREAM_OVERLOADED,
            f"{who} is overloaded: {message}",
            headers=retry_after(headers),
        )
    error = status_error(status, message, who, headers)
    if error is not None:
        return error
    if status in (408, 504):
        return ApiError.of(
            ErrorCode.UPSTREAM_TIMEOUT,
            f"{who} timed out: {message}",
        )
    return ApiError.of(
        ErrorCode.UPSTREAM_ERROR,
        f"{who} failed (HTTP {status}): {message}",
    )


def http_error(status: int, raw: bytes, headers: Mapping[str, str], name: str) -> ApiError:
    """The ``ApiError`` for an HTTP error reply of deployment ``name``."""
    kind, message = parse_error_body(raw)
    return error_for(status, kind, message, headers, name)


def stream_error(payload: Any, name: str) -> ApiError:
    """The ``ApiError`` for a mid-stream ``error`` event (its whole JSON payload)."""
    error = payload.get("error") if isinstance(payload, Mapping) else None
    if not isinstance(error, Mapping):
        error = payload if isinstance(payload, Mapping) else {}
    kind = str(error.get("type") or "api_error")
    message = _clip(str(error.get("message") or kind))
    return error_for(ERROR_STATUS.get(kind, 500), kind, message, {}, name)
