"""The typed state of one HTTP request or WebSocket handshake, shared by the edge and the endpoints.

``RequestIdMiddleware`` (``server/middleware.py``) makes a ``RequestState`` and puts
it in the ASGI scope under ``STATE_KEY``; the other middlewares fill it in (the
caller, from ``AuthMiddleware``; what was answered, from the ``send`` of
``RequestIdMiddleware``) and read it (the model and the outcome, for the access log);
endpoints read it with ``request_state(scope)`` and ``auth.caller_of(scope)``.

While an HTTP request is served its state is also the current request of a context
variable, so that log lines from deeper layers carry its request id and the upstream
instrumentation charges its tokens to the caller's rate limit.
"""

from __future__ import annotations

import contextvars
from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import Any

from orgate.engine.service import Caller
from orgate.protocol.errors import ApiError

#: The scope key of a request's ``RequestState`` (an ASGI extension key:
# Starlette copies the scope).
STATE_KEY = "orgate.request"


@dataclass(slots=True)
class RequestState:
    """What is known about the request being served."""

    request_id: str
    method: str
    path: str
    credential: bytes | None = None  # the first ``Authorization`` value as sent
    credential_conflict: bool = False  # two different ``Authorization`` values: refused (401)
    model: str | None = None  # the requested model (the log line and the metrics' label)
    deployment: str | None = None  # the deployment that answered
    caller: Caller | None = None  # who sent a valid key (``AuthMiddleware``)
    auth_error: ApiError | None = None  # why the credential the request carries was refused
    key_name: str | None = None  # the caller the rate limits count (a model call, with limits on)
    client_gone: bool = False  # the client left before any answer: recorded as 499, not 500
    status: int = (
        0  # of the http.response.start sent (0: none yet; nothing else can answer after one)
    )
    streaming: bool = False  # the response is an event stream
    first_chunk: float | None = None  # a stream's first body chunk left (``time.perf_counter``)

    @property
    def response_started(self) -> bool:
        return self.status != 0

    def note_model(self, model: object) -> None:
        """Record the requested model name (for the log line and metrics)."""
        if isinstance(model, str):
            self.model = model[:200]


#: The HTTP request being served in this context (set by ``AccessLogMiddleware``).
CURRENT_REQUEST: contextvars.ContextVar[RequestState | None] = contextvars.ContextVar(
    "orgate_request", default=None
)


def current_request() -> RequestState | None:
    """The HTTP request being served in this context (None outside of one)."""
    return CURRENT_REQUEST.get()


def request_state(scope: MutableMapping[str, Any]) -> RequestState:
    """The request's state, made by ``RequestIdMiddleware``."""
    state: RequestState = scope[STATE_KEY]
    return state


__all__ = ["CURRENT_REQUEST", "STATE_KEY", "RequestState", "current_request", "request_state"]
