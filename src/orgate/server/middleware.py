"""The middlewares every HTTP request and WebSocket handshake passes, outermost first.

- ``RequestIdMiddleware``: the request's typed state (``request_state.py``) with its
  id — a valid incoming ``X-Request-Id`` (1-128 of ``A-Za-z0-9._:-``) or a new one —
  sent back in ``X-Request-Id``, and the credential it carries (the headers the edge
  reads are scanned once, here); for HTTP also what was answered (status, a stream's
  first chunk) noted on the state as it leaves.
- ``AccessLogMiddleware``: one line on ``orgate.access`` per HTTP request (method,
  route template, status, duration, model, request id; the request body only with
  ``[logging] bodies = true``), the ``orgate_http_*`` metrics, a span when tracing
  is on, and the clean 500 for an error no endpoint answered; while the request runs,
  its state is the current request of the context (log lines from deeper layers
  carry its id).
- ``AuthMiddleware``: the request's credential checked once (``auth.py``): the
  caller, or the 401 it earned, kept on the state for the endpoints that need a key
  (``auth.caller_of``); two different ``Authorization`` headers are refused at once.
- ``RateLimitMiddleware`` (only when some key has a limit): the per-key limits
  (``ratelimit.py``) on model calls.

Each is plain ASGI (no ``BaseHTTPMiddleware``): no body is buffered, ``send`` is
wrapped once (by the request id's middleware, which notes what the access log
reads), and a middleware with nothing to do after the app returns the app's
awaitable instead of awaiting it in a coroutine of its own (hot path — see
bench/instructions.py).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Awaitable, Callable, Iterable, MutableMapping, Sequence
from typing import Any

from starlette.middleware import Middleware

from orgate.engine.ids import random_hex
from orgate.protocol.errors import ApiError, internal
from orgate.server.auth import Authenticator, ambiguous_key
from orgate.server.errors import send_error
from orgate.server.observability import HttpMetrics, server_span_kind
from orgate.server.ratelimit import RateLimiter
from orgate.server.request_state import CURRENT_REQUEST, STATE_KEY, RequestState

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

access_log = logging.getLogger("orgate.access")
log = logging.getLogger("orgate.server")

REQUEST_ID_HEADER = b"x-request-id"
_VALID_ID = re.compile(rb"[A-Za-z0-9._:\-]{1,128}")
#: Model calls: what the per-key rate limits apply to.
LIMITED_PATHS = frozenset({"/v1/responses", "/v1/responses/compact", "/v1/chat/completions"})
MAX_LOGGED_BODY = 64 * 1024


def edge_middleware(
    *,
    metrics: HttpMetrics,
    auth: Authenticator,
    limiter: RateLimiter | None,
    log_bodies: bool,
    tracer: Any,
    static_routes: Iterable[str],
) -> list[Middleware]:
    """The stack, outermost first (build it with ``wrap``)."""
    stack = [
        Middleware(RequestIdMiddleware),
        Middleware(
            AccessLogMiddleware,
            metrics=metrics,
            log_bodies=log_bodies,
            tracer=tracer,
            static_routes=static_routes,
        ),
        Middleware(AuthMiddleware, auth=auth),
    ]
    if limiter is not None:
        stack.append(Middleware(RateLimitMiddleware, limiter=limiter, metrics=metrics))
    return stack


def wrap(app: ASGIApp, stack: Sequence[Middleware]) -> ASGIApp:
    """``app`` inside ``stack`` (outermost first), as Starlette builds its own middleware stack."""
    for cls, args, kwargs in reversed(stack):
        app = cls(app, *args, **kwargs)
    return app


# --- request id -----------------------------------------------------------------------------------


def edge_headers(scope: Scope) -> tuple[bytes | None, bytes | None, bool]:
    """The request's first ``X-Request-Id`` value, its first ``Authorization`` value, and whether
    it has two different ``Authorization`` values. Hot path (every request): one pass over the
    headers in C (a dict of each name's first value), a Python loop only when some name is
    repeated (see bench/instructions.py)."""
    headers = scope.get("headers") or ()
    if type(headers) is not list:
        headers = list(headers)  # any iterable of pairs (ASGI), read twice below
    first = dict(reversed(headers))
    credential = first.get(b"authorization")
    conflict = False
    if credential is not None and len(first) < len(headers):
        conflict = any(value != credential for name, value in headers if name == b"authorization")
    return first.get(REQUEST_ID_HEADER), credential, conflict


def _request_id(given: bytes | None) -> str:
    """The client's ``X-Request-Id`` when it is a valid one, else a new id."""
    if given is not None and _VALID_ID.fullmatch(given):
        return given.decode("ascii")
    return random_hex(16)


class RequestIdMiddleware:
    """The request's ``RequestState`` and its id, echoed in ``X-Request-Id`` on HTTP."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        given_id, credential, conflict = edge_headers(scope)
        state = RequestState(
            _request_id(given_id),
            scope.get("method", ""),
            scope.get("path", ""),
            credential,
            conflict,
        )
        scope[STATE_KEY] = state
        if scope["type"] != "http":
            return self.app(
                scope, receive, send
            )  # a WebSocket's handshake answer has no header of ours
        id_header = (REQUEST_ID_HEADER, state.request_id.encode("ascii"))
        watching = True  # False once nothing more is to be learned from the messages

        # The one wrapper of ``send`` on the edge, a plain function returning the server's
        # awaitable: no coroutine of its own per message (hot path — see bench/instructions.py).
        def send_noted(message: Message) -> Awaitable[None]:
            nonlocal watching
            if watching:
                kind = message["type"]
                if kind == "http.response.start":
                    state.status = message["status"]
                    headers = [*(message.get("headers") or ()), id_header]
                    for name, value in headers:
                        if name == b"content-type" and value.startswith(b"text/event-stream"):
                            state.streaming = True
                    watching = state.streaming
                    message = {**message, "headers": headers}
                elif kind == "http.response.body" and message.get("body"):
                    state.first_chunk = time.perf_counter()
                    watching = False
            return send(message)

        return self.app(scope, receive, send_noted)


# --- access log and metrics -----------------------------------------------------------------------


class AccessLogMiddleware:
    """One access log line and the HTTP metrics per request (and a span when tracing); the
    request's state is the context's current request while it runs."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        metrics: HttpMetrics,
        log_bodies: bool = False,
        tracer: Any = None,
        static_routes: Iterable[str] = ("/v1/responses",),
    ) -> None:
        self.app = app
        self.metrics = metrics
        self.log_bodies = log_bodies
        self.tracer = tracer
        # Paths served without Starlette's router (no scope["route"]): their path is their template.
        self.static_routes = frozenset(static_routes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state: RequestState = scope[STATE_KEY]
        started = time.perf_counter()
        body_log: bytearray | None = bytearray() if self.log_bodies else None
        app_receive = receive
        if body_log is not None:

            async def logging_receive() -> Message:
                message = await receive()
                if message["type"] == "http.request" and len(body_log) < MAX_LOGGED_BODY:
                    body_log.extend(message.get("body", b"")[: MAX_LOGGED_BODY - len(body_log)])
                return message

            app_receive = logging_receive

        span = self._start_span(state) if self.tracer is not None else None
        in_flight = self.metrics.in_flight
        in_flight.inc()
        token = CURRENT_REQUEST.set(state)
        try:
            await self.app(scope, app_receive, send)
        except Exception as exc:
            if state.status:
                raise  # mid-response: the server closes the connection; logged below
            log.exception("unhandled error on %s %s", state.method, state.path, exc_info=exc)
            await send_error(send, internal())
        finally:
            try:
                in_flight.dec()
                # nothing sent: the client left, or a failure
                status = state.status or (499 if state.client_gone else 500)
                self._record(
                    scope, state, status, started, time.perf_counter(), state.first_chunk, body_log
                )
                if span is not None:
                    self._end_span(span, state, status)
            finally:
                CURRENT_REQUEST.reset(
                    token
                )  # after the access log line, which carries the request id

    def _route(self, scope: Scope) -> str:
        route = scope.get("route")
        if route is not None:
            template = getattr(route, "path", None)
            if isinstance(template, str):
                return template
        path = scope["path"]
        return path if path in self.static_routes else "unmatched"

    def _record(
        self,
        scope: Scope,
        state: RequestState,
        status: int,
        started: float,
        ended: float,
        first_chunk: float | None,
        body: bytearray | None,
    ) -> None:
        route = self._route(scope)
        model = self.metrics.model_label(state.model)
        duration = ended - started
        counter, histogram = self.metrics.request_children(route, state.method, str(status), model)
        counter.inc()
        histogram.observe(duration)
        if first_chunk is not None:
            self.metrics.first_chunk.labels(route, model).observe(first_chunk - started)
        if not access_log.isEnabledFor(logging.INFO):
            return
        fields: dict[str, Any] = {
            "request_id": state.request_id,
            "method": state.method,
            "route": route,
            "status": status,
            "duration_ms": round(duration * 1000, 3),
        }
        if state.model is not None:
            fields["model"] = state.model
        if state.deployment is not None:
            fields["deployment"] = state.deployment
        if first_chunk is not None:
            fields["first_chunk_ms"] = round((first_chunk - started) * 1000, 3)
        if body is not None:
            fields["body"] = body.decode("utf-8", "replace")
        access_log.info(
            "%s %s %s %.1fms",
            state.method,
            route,
            status,
            duration * 1000,
            extra={"orgate": fields},
        )

    def _end_span(self, span: Any, state: RequestState, status: int) -> None:
        span.set_attribute("http.response.status_code", status)
        if state.model:
            span.set_attribute("gen_ai.request.model", state.model)
        span.end()

    def _start_span(self, state: RequestState) -> Any:
        span = self.tracer.start_span(f"{state.method} {state.path}", kind=server_span_kind())
        span.set_attribute("http.request.method", state.method)
        span.set_attribute("url.path", state.path)
        span.set_attribute("orgate.request_id", state.request_id)
        return span


# --- authentication -------------------------------------------------------------------------------


class AuthMiddleware:
    """The request's credential, checked once: the caller or the refusal, on the request's state.

    Routes without a key (health, metrics, the console's pages) never look; an endpoint
    that needs one asks ``auth.caller_of(scope)``. Two different ``Authorization``
    headers are refused here on HTTP (and by the WebSocket route at its handshake).
    """

    def __init__(self, app: ASGIApp, *, auth: Authenticator) -> None:
        self.app = app
        self.auth = auth

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        state: RequestState = scope[STATE_KEY]
        if state.credential_conflict:
            state.auth_error = ambiguous_key()
            if scope["type"] == "http":
                return send_error(send, state.auth_error)
        elif state.credential is not None:
            try:
                state.caller = self.auth.authenticate(state.credential.decode("latin-1"))
            except ApiError as refused:
                state.auth_error = refused
        return self.app(scope, receive, send)


# --- rate limits ----------------------------------------------------------------------------------


class RateLimitMiddleware:
    """The per-key limits on model calls (``POST`` to ``LIMITED_PATHS``) of an authenticated caller;
    a request without a valid key passes on to its route, which answers 401."""

    def __init__(self, app: ASGIApp, *, limiter: RateLimiter, metrics: HttpMetrics) -> None:
        self.app = app
        self.limiter = limiter
        self.metrics = metrics

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        if (
            scope["type"] == "http"
            and scope.get("method") == "POST"
            and scope.get("path") in LIMITED_PATHS
        ):
            state: RequestState = scope[STATE_KEY]
            if state.caller is not None:
                return self._admit(state, scope, receive, send)
        return self.app(scope, receive, send)

    async def _admit(self, state: RequestState, scope: Scope, receive: Receive, send: Send) -> None:
        assert state.caller is not None
        key_name = state.key_name = (
            state.caller.key_name
        )  # the upstream instrumentation charges its tokens
        refusal = await self.limiter.admit(key_name)
        if refusal is not None:
            self.metrics.rate_limited.labels(key_name).inc()
            await send_error(send, refusal)
            return
        await self.app(scope, receive, send)


__all__ = [
    "AccessLogMiddleware",
    "AuthMiddleware",
    "RateLimitMiddleware",
    "RequestIdMiddleware",
    "edge_middleware",
    "wrap",
]
