"""Responses upstream errors → ``ApiError``.

HTTP error replies use the OpenAI error body, so they share the ``openai-chat``
mapping (``http_error``: 429 → 429 with ``Retry-After``, 400 → 400
``upstream_bad_request``, 401/403 → 502 ``upstream_auth_failed``, 5xx → 502...).
In a stream:

- an ``error`` event (OpenAI puts ``code`` / ``message`` at the top level, the
  Open Responses spec nests them in ``error``) → by its type / code: rate limit
  → 429, invalid request → 400, anything else → 502 ``upstream_error``;
- ``response.failed`` → 502 ``model_error`` carrying the upstream's message
  and code (``upstream_failed`` when it gives none).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orgate.protocol.errors import MODEL_ERROR, ApiError, ErrorCode
from orgate.providers.openai_chat.errors import error_for, http_error
from orgate.providers.upstream_errors import clip as _clip

__all__ = ["failed_error", "http_error", "stream_error"]


def stream_error(payload: Any, name: str) -> ApiError:
    """The ``ApiError`` for a mid-stream ``error`` event (its whole JSON payload)."""
    error: Any = payload.get("error") if isinstance(payload, Mapping) else None
    if not isinstance(error, Mapping):
        error = payload if isinstance(payload, Mapping) else {}
    code = error.get("code")
    kind = error.get("type")
    if kind == "error":  # OpenAI's flat shape: the event's own type
        kind = None
    message = _clip(str(error.get("message") or code or kind or "unknown error"))
    words = f"{kind or ''} {code or ''}"
    if isinstance(code, int) and 400 <= code <= 599:
        status = code
    elif "rate_limit" in words:
        status = 429
    elif "invalid_request" in words or "bad_request" in words or "invalid_prompt" in words:
        status = 400
    else:
        status = 500
    return error_for(status, message, {}, name)


def failed_error(response: Any, name: str) -> ApiError:
    """The ``ApiError`` for a ``response.failed`` event (its ``response`` object)."""
    error = response.get("error") if isinstance(response, Mapping) else None
    message = "the response failed"
    code: str = ErrorCode.UPSTREAM_FAILED  # or the upstream's own code, passed on
    if isinstance(error, Mapping):
        if error.get("message"):
            message = _clip(str(error["message"]))
        if isinstance(error.get("code"), str) and error["code"]:
            code = error["code"]
    return ApiError(502, f"upstream '{name}' failed: {message}", type=MODEL_ERROR, code=code)
