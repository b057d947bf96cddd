"""The edge middlewares, driven as plain ASGI around a recording endpoint: request id,
access log, one authentication per request, rate limits."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
import pytest
from prometheus_client import CollectorRegistry

from orgate.config import ResolvedKey
from orgate.protocol.errors import ApiError
from orgate.server.auth import Authenticator, caller_of
from orgate.server.middleware import edge_middleware, wrap
from orgate.server.observability import HttpMetrics
from orgate.server.ratelimit import KeyLimits, LocalLimiter
from orgate.server.request_state import current_request, request_state

KEYS = [
    ResolvedKey(name="plain", tenant="t1", secret=b"sk-plain", sha256=None, models=None),
    ResolvedKey(
        name="hashed",
        tenant="t2",
        secret=None,
        sha256=hashlib.sha256(b"sk-hashed").digest(),
        models=None,
    ),
]


class CountingAuthenticator(Authenticator):
    def __init__(self) -> None:
        super().__init__(KEYS)
        self.checks = 0

    def authenticate(self, authorization: str | None) -> Any:
        self.checks += 1
        return super().authenticate(authorization)


class Endpoint:
    """Answers 200 with the caller's key name, or the 401 ``caller_of`` raises;
    records what it saw."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        state = request_state(scope)
        self.seen.append({"state": state, "current": current_request()})
        try:
            status, body = 200, {"key": caller_of(scope).key_name}
        except ApiError as refused:
            status, body = refused.status, refused.body()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": orjson.dumps(body), "more_body": False})


def _edge(endpoint: Endpoint, auth: Authenticator, limiter: Any = None) -> Any:
    metrics = HttpMetrics(CollectorRegistry())
    stack = edge_middleware(
        metrics=metrics,
        auth=auth,
        limiter=limiter,
        log_bodies=False,
        tracer=None,
        static_routes=["/v1/responses"],
    )
    return wrap(endpoint, stack)


async def _call(
    app: Any, headers: list[tuple[bytes, bytes]], path: str = "/v1/responses", kind: str = "http"
) -> tuple[int, dict[bytes, bytes], Any]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": kind, "method": "POST", "path": path, "headers": headers}
    await app(scope, receive, send)
    if not sent:
        return 0, {}, None
    return sent[0]["status"], dict(sent[0]["headers"]), orjson.loads(sent[1]["body"])


@pytest.mark.parametrize(
    ("headers", "status", "answer"),
    [
        ([(b"authorization", b"Bearer sk-plain")], 200, "plain"),
        ([(b"authorization", b"Bearer sk-hashed")], 200, "hashed"),
        ([], 401, "missing_api_key"),
        ([(b"authorization", b"Bearer sk-wrong")], 401, "invalid_api_key"),
        ([(b"authorization", b"Basic sk-plain")], 401, "invalid_api_key"),
    ],
)
async def test_the_key_is_checked_once_and_the_endpoint_reads_the_outcome(
    headers: list[tuple[bytes, bytes]], status: int, answer: str
) -> None:
    auth = CountingAuthenticator()
    endpoint = Endpoint()
    got, _, body = await _call(_edge(endpoint, auth), headers)
    assert got == status
    assert (body["key"] if status == 200 else body["error"]["code"]) == answer
    assert auth.checks == (1 if headers else 0)  # never again by the endpoint


async def test_two_different_keys_are_refused_before_the_endpoint() -> None:
    endpoint = Endpoint()
    headers = [
        (b"x-request-id", b"rid-7"),
        (b"authorization", b"Bearer sk-plain"),
        (b"authorization", b"Bearer sk-hashed"),
    ]
    status, sent_headers, body = await _call(_edge(endpoint, CountingAuthenticator()), headers)
    assert (status, body["error"]["code"], sent_headers[b"x-request-id"]) == (
        401,
        "invalid_api_key",
        b"rid-7",
    )
    assert endpoint.seen == []


async def test_a_websocket_handshake_gets_the_same_outcome_from_its_route() -> None:
    endpoint = Endpoint()
    app = _edge(endpoint, CountingAuthenticator())
    headers = [(b"authorization", b"Bearer sk-plain"), (b"authorization", b"Bearer sk-hashed")]
    await _call(app, headers, kind="websocket")
    with pytest.raises(ApiError) as refused:
        caller_of({"orgate.request": endpoint.seen[0]["state"]})
    assert refused.value.code == "invalid_api_key"
    assert (
        endpoint.seen[0]["current"] is None
    )  # a connection is not the current request of the context


async def test_the_request_id_is_kept_echoed_and_current_while_served() -> None:
    endpoint = Endpoint()
    app = _edge(endpoint, CountingAuthenticator())
    _, sent_headers, _ = await _call(
        app, [(b"x-request-id", b"abc.1"), (b"authorization", b"Bearer sk-plain")]
    )
    seen = endpoint.seen[0]
    assert sent_headers[b"x-request-id"] == b"abc.1" and seen["state"].request_id == "abc.1"
    assert seen["current"] is seen["state"] and current_request() is None
    _, sent_headers, _ = await _call(app, [(b"x-request-id", b"not valid")])
    assert (
        sent_headers[b"x-request-id"].decode()
        == endpoint.seen[1]["state"].request_id
        != "not valid"
    )


async def test_rate_limits_count_authenticated_model_calls_only() -> None:
    endpoint = Endpoint()
    app = _edge(endpoint, CountingAuthenticator(), LocalLimiter({"plain": KeyLimits(rpm=1)}))
    key = [(b"authorization", b"Bearer sk-plain")]
    assert (await _call(app, key))[0] == 200
    assert (
        endpoint.seen[0]["state"].key_name == "plain"
    )  # the upstream instrumentation charges its tokens
    status, _, body = await _call(app, key)
    assert (status, body["error"]["type"]) == (429, "rate_limit_error")
    assert (await _call(app, key, path="/v1/models"))[0] == 200  # not a model call
    assert (await _call(app, []))[0] == 401  # no key: the route answers
