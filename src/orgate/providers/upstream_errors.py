"""The HTTP status → ``ApiError`` mapping every upstream shares (pure).

| upstream | orgate |
|---|---|
| 429 | 429 ``rate_limit_error`` ``rate_limit_exceeded``, ``Retry-After`` passed on |
| 400, 413, 422 | 400 ``invalid_request_error`` ``upstream_bad_request`` |
| 401, 403 | 502 ``server_error`` ``upstream_auth_failed`` (upstream message withheld) |
| 404 | 502 ``server_error`` ``upstream_model_not_found`` |

Each provider's ``errors`` module maps the rest (timeouts, overload, 5xx) its own way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from orgate.protocol.errors import INVALID_REQUEST, RATE_LIMIT, SERVER_ERROR, ApiError


def status_error(
    status: int,
    message: str,
    who: str,
    headers: Mapping[str, str],
    retry_after: Callable[[Mapping[str, str]], dict[str, str]],
) -> ApiError | None:
    """The ``ApiError`` for a shared upstream ``status`` (``who`` names the upstream), else None."""
    if status == 429:
        return ApiError(
            429,
            f"{who} is rate limiting requests: {message}",
            type=RATE_LIMIT,
            code="rate_limit_exceeded",
            headers=retry_after(headers),
        )
    if status in (400, 413, 422):
        return ApiError(
            400,
            f"{who} rejected the request: {message}",
            type=INVALID_REQUEST,
            code="upstream_bad_request",
        )
    if status in (401, 403):
        return ApiError(
            502,
            f"{who} rejected our credentials (HTTP {status})",
            type=SERVER_ERROR,
            code="upstream_auth_failed",
        )
    if status == 404:
        return ApiError(
            502,
            f"{who} does not know the model or endpoint: {message}",
            type=SERVER_ERROR,
            code="upstream_model_not_found",
        )
    return None
