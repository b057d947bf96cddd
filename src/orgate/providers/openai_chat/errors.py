"""Upstream error replies (HTTP status + body, or an ``error`` object in a stream) → ``ApiError``.

Pure: takes the status, the raw body and the headers. The API key never
appears in a message; the upstream's own message is passed on (prefixed with
the deployment name) only where it helps the client fix its request.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from orgate.protocol.errors import ApiError, ErrorCode
from orgate.providers.upstream_errors import clip, retry_after, status_error


def _message_from(body: Any) -> str | None:
    if isinstance(body, Mapping):
        error = body.get("error")
        if isinstance(error, Mapping):
            msg = error.get("message")
            return str(msg) if msg is not None else None
        if isinstance(error, str):
            return error
        for key in ("message", "detail"):
            if body.get(key) is not None:
                value = body[key]
                return value if isinstance(value, str) else orjson.dumps(value).decode()
    return None


def upstream_message(raw: bytes) -> str:
    """The human message of an upstream error body (OpenAI, vLLM, Ollama, FastAPI shapes,
    or text)."""
    try:
        message = _message_from(orjson.loads(raw))
    except orjson.JSONDecodeError:
        message = None
    if message is None:
        message = raw.decode("utf-8", "replace").strip() or "(empty body)"
    return clip(message)


def http_error(status: int, raw: bytes, headers: Mapping[str, str], name: str) -> ApiError:
    """The ``ApiError`` for an upstream HTTP error reply from deployment ``name``."""
    message = upstream_message(raw)
    return error_for(status, message, headers, name)


def error_for(status: int, message: str, headers: Mapping[str, str], name: str) -> ApiError:
    who = f"upstream '{name}'"
    error = status_error(status, message, who, headers)
    if error is not None:
        return error
    if status in (408, 504):
        return ApiError.of(
            ErrorCode.UPSTREAM_TIMEOUT,
            f"{who} timed out (HTTP {status}): {message}",
        )
    return ApiError.of(
        ErrorCode.UPSTREAM_ERROR,
        f"{who} failed (HTTP {status}): {message}",
        headers=retry_after(headers) if status == 503 else None,
    )


def stream_error(error: Any, name: str) -> ApiError:
    """The ``ApiError`` for an ``{"error": {...}}`` object received inside a stream."""
    if isinstance(error, Mapping):
        message = str(error.get("message") or error.get("type") or "unknown error")
        status: Any = error.get("code")
        if not isinstance(status, int):
            status = (
                error.get(ErrorCode.STATUS)
                if isinstance(error.get(ErrorCode.STATUS), int)
                else None
            )
        if status is None:
            kind = str(error.get("type") or error.get("code") or "")
            status = 429 if "rate_limit" in kind else 400 if "invalid_request" in kind else 500
    else:
        message, status = str(error), 500
    if not 400 <= status <= 599:
        status = 500
    return error_for(status, message, {}, name)
