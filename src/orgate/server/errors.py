"""Rendering errors: every error leaves the server in the spec's ``{"error": {...}}`` shape."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import orjson
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match

from orgate.protocol.errors import ApiError, ErrorCode, internal, method_not_allowed
from orgate.server.header_values import header_bytes, header_text

log = logging.getLogger("orgate.server")


_JSON_HEADERS = ((b"content-type", b"application/json"),)


def encode_headers(extra: Mapping[str, str]) -> list[tuple[bytes, bytes]]:
    """Header names (ours) and values (made header-safe) as plain ASGI sends them."""
    return [(name.lower().encode("latin-1"), header_bytes(value)) for name, value in extra.items()]


async def send_json(
    send: Any, status: int, body: bytes, extra: Mapping[str, str] | None = None
) -> None:
    """A whole JSON response on plain ASGI (the paths that bypass Starlette's responses)."""
    headers = [*_JSON_HEADERS, (b"content-length", str(len(body)).encode())]
    if extra:
        headers += encode_headers(extra)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def send_error(send: Any, error: ApiError) -> None:
    """``error_response`` on plain ASGI."""
    await send_json(send, error.status, orjson.dumps(error.body()), error.headers)


def error_response(error: ApiError) -> Response:
    headers = {name: header_text(value) for name, value in error.headers.items()}
    return Response(
        orjson.dumps(error.body()),
        status_code=error.status,
        media_type="application/json",
        headers=headers,
    )


async def handle_api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return error_response(exc)


# Named here rather than imported: the chat package can be deleted, and is not imported when off.
CHAT_COMPLETIONS_PATH = "/v1/chat/completions"
CHAT_COMPLETIONS_OFF = (
    ". The legacy Chat Completions adapter is off: turn it on with [endpoints] chat_completions = "
    "{ enabled = true } (or ORGATE_ENDPOINTS__CHAT_COMPLETIONS__ENABLED=true); see "
    "docs/chat-completions.md."
)


async def handle_http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    status = exc.status_code
    if status == 404:
        # OpenAI answers an unknown URL with type invalid_request_error (as orgate's other 404s do).
        message = f"Unknown route: {request.method} {request.url.path}"
        if (
            request.url.path.rstrip("/") == CHAT_COMPLETIONS_PATH
        ):  # the adapter is off (it would be routed)
            message += CHAT_COMPLETIONS_OFF
        error = ApiError.of(ErrorCode.NOT_FOUND, message)
    elif status == 405:
        # RFC 9110: a 405 names the allowed methods. Starlette's Allow header lists one
        # route's methods; a path served by several routes (GET and DELETE) needs all.
        allow = _allowed_methods(request) or (exc.headers or {}).get("Allow", "")
        error = method_not_allowed(request.method, request.url.path, allow)
    else:
        error = ApiError(status, str(exc.detail), code=None)
    return error_response(error)


def _allowed_methods(request: Request) -> str:
    """The methods the app's routes serve on this request's path (``Allow`` of a 405)."""
    methods: list[str] = []
    for route in getattr(request.app, "routes", ()):
        match, _ = route.matches(request.scope)
        if match is not Match.NONE:
            methods += [m for m in (getattr(route, "methods", None) or ()) if m not in methods]
    return ", ".join(methods)


async def handle_unexpected(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return error_response(internal())
