"""Rendering errors: every error leaves the server in the spec's ``{"error": {...}}`` shape."""

from __future__ import annotations

import logging

import orjson
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from orgate.protocol.errors import NOT_FOUND, SERVER_ERROR, ApiError

log = logging.getLogger("orgate.server")


def error_response(error: ApiError) -> Response:
    headers = dict(error.headers)
    return Response(orjson.dumps(error.body()), status_code=error.status, media_type="application/json", headers=headers)


async def handle_api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return error_response(exc)


async def handle_http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    status = exc.status_code
    if status == 404:
        error = ApiError(404, f"Unknown route: {request.method} {request.url.path}", type=NOT_FOUND, code="not_found")
    elif status == 405:
        error = ApiError(405, f"Method {request.method} is not allowed on {request.url.path}.", code="method_not_allowed")
    else:
        error = ApiError(status, str(exc.detail), code=None)
    return error_response(error)


async def handle_unexpected(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return error_response(ApiError(500, "The server had an error while processing your request.", type=SERVER_ERROR, code="server_error"))
