"""Rendering errors (``orgate.server.errors``) in process: a small Starlette app with the
server's handlers, called through httpx's ASGI transport (no socket).

Every error leaves in the spec's ``{"error": {"message", "type", "param", "code"}}`` shape:
an ``ApiError`` with its status and headers; an unknown URL as 404 ``invalid_request_error``
(with a hint when it is the Chat Completions adapter that is off); a 405 whose ``Allow``
names every method the path serves (RFC 9110), also when two routes share the path; any
other exception as the generic 500, its detail in the log only.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx
import orjson
import pytest
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from orgate.protocol.errors import ApiError
from orgate.server.errors import (
    handle_api_error,
    handle_http_exception,
    handle_unexpected,
    send_error,
    send_json,
)
from tests.support.spec import validate


async def _limited(request: Request) -> Response:
    raise ApiError(
        429,
        "slow down",
        type="rate_limit_error",
        code="rate_limit_exceeded",
        headers={"Retry-After": "7"},
    )


async def _broken(request: Request) -> Response:
    raise RuntimeError("the database password is hunter2")


async def _teapot(request: Request) -> Response:
    raise HTTPException(418, "short and stout")


async def _ok(request: Request) -> Response:
    return Response("ok")


APP = Starlette(
    routes=[
        Route("/limited", _limited, methods=["POST"]),
        Route("/broken", _broken, methods=["GET"]),
        Route("/teapot", _teapot, methods=["GET"]),
        Route("/v1/responses/{id}", _ok, methods=["GET"]),
        Route("/v1/responses/{id}", _ok, methods=["DELETE"]),  # one path, two routes
    ],
    exception_handlers={
        ApiError: handle_api_error,
        HTTPException: handle_http_exception,
        Exception: handle_unexpected,
    },
)


async def call(method: str, path: str) -> httpx.Response:
    transport = httpx.ASGITransport(app=APP, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://orgate.test") as client:
        return await client.request(method, path)


def error_of(response: httpx.Response) -> dict[str, Any]:
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    validate("ErrorPayload", body["error"])  # the spec's shape of an error body
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    return body["error"]  # type: ignore[no-any-return]


async def test_an_api_error_keeps_its_status_body_and_headers() -> None:
    response = await call("POST", "/limited")
    assert response.status_code == 429 and response.headers["retry-after"] == "7"
    assert error_of(response) == {
        "message": "slow down",
        "type": "rate_limit_error",
        "param": None,
        "code": "rate_limit_exceeded",
    }


async def test_an_unknown_url_is_a_404_naming_it() -> None:
    response = await call("GET", "/v2/nothing")
    error = error_of(response)
    assert response.status_code == 404 and error["type"] == "invalid_request_error"
    assert "GET /v2/nothing" in error["message"] and "Chat Completions" not in error["message"]


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/chat/completions/"])
async def test_the_chat_url_when_the_adapter_is_off_says_how_to_turn_it_on(path: str) -> None:
    error = error_of(await call("POST", path))
    assert "chat_completions" in error["message"] and "docs/chat-completions.md" in error["message"]


async def test_a_405_allows_every_method_of_the_path() -> None:
    response = await call("PUT", "/v1/responses/resp_1")
    assert response.status_code == 405
    allowed = {m.strip() for m in response.headers["allow"].split(",")}
    assert {"GET", "DELETE"} <= allowed
    error = error_of(response)
    assert "PUT" in error["message"] and "/v1/responses/resp_1" in error["message"]


async def test_another_http_exception_keeps_its_status_and_detail() -> None:
    response = await call("GET", "/teapot")
    assert response.status_code == 418 and error_of(response)["message"] == "short and stout"


async def test_an_unexpected_exception_is_the_generic_500_logged_not_sent(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.ERROR, logger="orgate.server"):
        response = await call("GET", "/broken")
    assert response.status_code == 500
    error = error_of(response)
    assert error["type"] == "server_error" and "hunter2" not in response.text
    assert "hunter2" in caplog.text and "/broken" in caplog.text  # the detail is in the log


async def test_plain_asgi_errors_have_the_same_shape() -> None:
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await send_error(
        send, ApiError(413, "too big", code="request_too_large", headers={"X-Why": "Size"})
    )
    start, body = sent
    headers = dict(start["headers"])
    assert start["status"] == 413 and headers[b"content-type"] == b"application/json"
    assert headers[b"x-why"] == b"Size"  # names lower-cased, as ASGI sends them
    assert int(headers[b"content-length"]) == len(body["body"]) and body["more_body"] is False
    assert orjson.loads(body["body"])["error"]["code"] == "request_too_large"
    sent.clear()
    await send_json(send, 200, b"{}")
    assert dict(sent[0]["headers"]) == {
        b"content-type": b"application/json",
        b"content-length": b"2",
    }
