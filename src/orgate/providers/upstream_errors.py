"""What every upstream's error mapping shares (pure): the common statuses, ``Retry-After``,
clipping,
the deployment's secrets cut out of an echoed message.

| upstream | orgate |
|---|---|
| 429 | 429 ``rate_limit_error`` ``rate_limit_exceeded``, ``Retry-After`` passed on |
| 400, 413, 422 | 400 ``invalid_request_error`` ``upstream_bad_request`` |
| 401, 403 | 502 ``server_error`` ``upstream_auth_failed`` (upstream message withheld) |
| 404 | 502 ``server_error`` ``upstream_model_not_found`` |
| other 4xx except 408 | 400 ``invalid_request_error`` ``upstream_bad_request`` |
| 501 | 501 ``server_error`` ``upstream_error`` (not retried, see docs/routing.md) |

Each provider's ``errors`` module maps the rest (timeouts, overload, 5xx) its own way.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from orgate.neutral import Deployment
from orgate.protocol.errors import ApiError, ErrorCode

MAX_MESSAGE = 1000  # characters of an upstream message passed on
REDACTED = "[redacted]"


def clip(message: str) -> str:
    """``message`` cut to ``MAX_MESSAGE`` characters (an ellipsis marks the cut)."""
    return message if len(message) <= MAX_MESSAGE else message[:MAX_MESSAGE] + "…"


def redact_secrets(error: ApiError, deployment: Deployment) -> ApiError:
    """``error`` with the deployment's ``api_key`` and configured header values cut out of its
    message: an upstream may echo what it was sent, and the message goes to the client."""
    for secret in (deployment.api_key, *deployment.headers.values()):
        if secret and len(secret) >= 6 and secret in error.message:
            error.message = error.message.replace(secret, REDACTED)
            error.args = (error.message,)
    return error


def retry_after(headers: Mapping[str, str]) -> dict[str, str]:
    """The ``Retry-After`` header to pass on (also from ``retry-after-ms``),
    if the upstream sent one."""
    lowered = {k.lower(): v for k, v in headers.items()}
    value = lowered.get("retry-after")
    if value:
        return {"Retry-After": value}
    millis = lowered.get("retry-after-ms")
    if millis:
        try:
            return {"Retry-After": str(max(1, math.ceil(float(millis) / 1000)))}
        except ValueError:
            return {}
    return {}


def status_error(
    status: int, message: str, who: str, headers: Mapping[str, str]
) -> ApiError | None:
    """The ``ApiError`` for a shared upstream ``status`` (``who`` names the upstream), else None."""
    if status == 429:
        return ApiError.of(
            ErrorCode.RATE_LIMIT_EXCEEDED,
            f"{who} is rate limiting requests: {message}",
            headers=retry_after(headers),
        )
    if status in (400, 413, 422):
        return ApiError.of(
            ErrorCode.UPSTREAM_BAD_REQUEST,
            f"{who} rejected the request: {message}",
        )
    if status in (401, 403):
        return ApiError.of(
            ErrorCode.UPSTREAM_AUTH_FAILED,
            f"{who} rejected our credentials (HTTP {status})",
        )
    if status == 404:
        return ApiError.of(
            ErrorCode.UPSTREAM_MODEL_NOT_FOUND,
            f"{who} does not know the model or endpoint: {message}",
        )
    if 400 <= status < 500 and status != 408:
        # any other 4xx (405, 409, 410, 415...): the request is wrong, another try cannot fix it
        return ApiError.of(
            ErrorCode.UPSTREAM_BAD_REQUEST,
            f"{who} rejected the request (HTTP {status}): {message}",
        )
    if status == 501:
        # the upstream does not implement what was asked: not retried, not fallen back
        return ApiError.of(
            ErrorCode.UPSTREAM_ERROR,
            f"{who} does not implement this request (HTTP 501): {message}",
            status=501,
        )
    return None
