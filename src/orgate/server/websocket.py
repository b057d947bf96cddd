"""WebSocket mode of ``/v1/responses`` (Open Responses 2026-04-24).

A client opens a WebSocket to ``/v1/responses`` with the usual
``Authorization: Bearer`` header and sends ``response.create`` messages (the
create body plus ``type``; ``stream``, ``stream_options`` and ``background`` are
refused). Each response is answered with exactly the events the SSE stream of the
same request carries (same dicts, same ``sequence_number``s), one JSON text
message per event. Rules:

- A refused key ends the handshake with HTTP 401 and the spec error body (when
  the ASGI server supports the WebSocket denial extension, as uvicorn does;
  otherwise the socket is accepted, gets a 401 error event and is closed with
  1008). With WebSocket mode disabled the handshake is refused with HTTP 426,
  so clients fall back to HTTP.
- One response in flight per connection: a ``response.create`` that arrives
  before the running response's terminal event gets a 409 error event
  (``response_in_progress``) and the running one goes on undisturbed.
- Request errors (bad JSON, unknown ``type``, validation, a failed create) are
  ``WebSocketErrorEvent`` envelopes; the connection stays usable.
- ``previous_response_id`` resolves from the store, or from this connection's
  own cache of the responses it made (context = input + output of each, the
  model's extension items included, the last ``cache_responses`` of them),
  which is how ``store: false`` chains continue. The cache belongs to the connection: after a reconnect the id is
  ``previous_response_not_found``. A continuation that fails evicts the
  referenced id from the cache.
- After ``max_connection_seconds`` no new response is accepted; a running one
  gets ``drain_seconds`` to finish, then the client receives an error with code
  ``websocket_connection_limit_reached`` and the socket is closed (1000).
- A connection with no response running that receives no message for
  ``idle_seconds`` gets an error with code ``websocket_idle_timeout`` and is
  closed (1000). Before the handshake, ``ws_limits.SocketLimits`` caps the open
  sockets per key (HTTP 429) and per process (503), so that idle sockets cannot
  take the descriptors HTTP requests and ``/healthz`` need.
- On shutdown (SIGTERM) no new message is read; a running response gets the
  server's drain time (``server/shutdown.py``). One that cannot finish in it ends
  with ``error`` + ``response.failed`` (code ``server_shutdown``, stored so); then
  the socket is closed with 1012 (service restart).
- Gate warnings (``X-Orgate-Gate-Warnings`` over HTTP) have no place here: the
  protocol's server messages are the spec's streaming events and the error
  envelope, and a WebSocket has no per-response headers. They are logged
  (``orgate.server.websocket``, with the response id), next to the gate's own
  log lines.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import inspect
import logging
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import orjson
from pydantic import ValidationError
from starlette.routing import BaseRoute, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from orgate.config import WebSocketSettings
from orgate.engine.context import item_to_wire
from orgate.engine.input_gate import split_namespaced
from orgate.engine.service import GATE_WARNINGS_HEADER, Caller, ResponseStream, shutdown_error
from orgate.protocol import TERMINAL_EVENT_TYPES, WebSocketResponseCreateEvent
from orgate.protocol.errors import (
    ApiError,
    ErrorCode,
    from_validation_error,
    internal,
    invalid_type,
    missing_required_parameter,
    unsupported_parameter,
)
from orgate.server.auth import caller_of
from orgate.server.body import check_request_limits, parse_json
from orgate.server.create_endpoint import structured_budget
from orgate.server.errors import error_response
from orgate.server.sse import openai_event
from orgate.server.ws_limits import SocketLimits

if TYPE_CHECKING:
    from orgate.server.services import Services

log = logging.getLogger("orgate.server.websocket")

DISALLOWED_FIELDS = ("stream", "stream_options", "background")
_DENIAL_EXTENSION = "websocket.http.response"


def error_event(error: ApiError) -> dict[str, Any]:
    """The ``WebSocketErrorEvent`` envelope of an ``ApiError``."""
    return {
        "type": "error",
        "status": error.status,
        "error": {
            "type": error.type,
            "code": error.code or error.type,
            "message": error.message,
            "param": error.param,
        },
    }


# --------------------------------------------------------------------------- continuation from the connection cache


class _ConnectionHistory:
    """A store stand-in for one create: ``context(previous_id)`` from the connection cache, the rest delegated.

    Interim, until ``ResponsesService.create`` takes ``history_override`` (see the
    report): a stored continuation of a cache-only response is saved unlinked,
    with the cached context as its leading input items.
    """

    def __init__(self, store: Any, response_id: str, items: list[dict[str, Any]]) -> None:
        self._store = store
        self._response_id = response_id
        self._items = items

    async def context(self, response_id: str, tenant: str) -> list[dict[str, Any]] | None:
        if response_id == self._response_id:
            return list(self._items)
        return await self._store.context(response_id, tenant) if self._store is not None else None

    async def get_item(self, item_id: str, tenant: str) -> dict[str, Any] | None:
        return await self._store.get_item(item_id, tenant) if self._store is not None else None

    async def save(self, response: dict[str, Any], **kwargs: Any) -> None:
        if self._store is None:
            return
        if kwargs.get("previous_response_id") == self._response_id:
            kwargs["previous_response_id"] = None
            kwargs["input_items"] = [*self._items, *kwargs.get("input_items", [])]
        await self._store.save(response, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


async def create_with_history(
    services: Services,
    body: Any,
    caller: Caller,
    warnings: list[str],
    previous_id: str,
    history: list[dict[str, Any]],
    *,
    budget: Any = None,
) -> ResponseStream:
    """``services.responses.create`` with the history of ``previous_id`` given, not looked up."""
    service = services.responses
    if "history_override" in inspect.signature(service.create).parameters:
        return await service.create(body, caller, warnings, budget=budget, history_override=history)  # type: ignore[call-arg]
    clone = copy.copy(service)
    clone.store = _ConnectionHistory(service.store, previous_id, history)  # type: ignore[assignment]
    if service.store is None:
        body = body.model_copy(update={"store": False})  # nothing is stored: say so in the response
    return await clone.create(body, caller, warnings, budget=budget)


# --------------------------------------------------------------------------- one connection


class _Entry:
    __slots__ = ("items", "stored")

    def __init__(self, items: list[dict[str, Any]], stored: bool) -> None:
        self.items = items
        self.stored = stored


class Connection:
    """One accepted socket: its receive loop, its running response and its response cache."""

    def __init__(
        self, services: Services, ws: WebSocket, caller: Caller, settings: WebSocketSettings
    ) -> None:
        self.services = services
        self.ws = ws
        self.caller = caller
        self.settings = settings
        self.cache: OrderedDict[str, _Entry] = OrderedDict()
        self._idle_since = time.monotonic()
        self.busy = False
        self.task: asyncio.Task[None] | None = None
        self.stream: ResponseStream | None = None  # the running response, once created
        self._send_lock = asyncio.Lock()
        self._openai_names = services.settings.endpoints.responses.event_names == "openai"

    @property
    def busy(self) -> bool:
        """A response runs on this connection (its end starts the idle time)."""
        return self._busy

    @busy.setter
    def busy(self, value: bool) -> None:
        self._busy = value
        self._idle_since = time.monotonic()

    def _wait(self, remaining: float) -> float | None:
        """How long to wait for the next message (at most ``remaining``); None: idle too long."""
        idle = self.settings.idle_seconds
        if not idle:
            return remaining
        if self._busy:  # look again later: the response may end while the client stays silent
            return min(remaining, idle)
        left = self._idle_since + idle - time.monotonic()
        return None if left <= 0 else min(remaining, left)

    async def send(self, event: dict[str, Any]) -> None:
        if self._openai_names:
            event = openai_event(event)
        async with self._send_lock:
            await self.ws.send_text(orjson.dumps(event).decode())

    async def send_error(self, error: ApiError) -> None:
        await self.send(error_event(error))

    async def serve(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.max_connection_seconds
        try:
            while True:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                wait = self._wait(remaining)
                if wait is None:
                    await self._close_idle()
                    return
                message = await self._receive(wait)
                if message is None:
                    if self.services.shutdown.started.is_set():
                        break
                    continue  # the lifetime, the idle time, or a response still running
                self._idle_since = time.monotonic()
                if message["type"] == "websocket.disconnect":
                    return
                raw = message.get("text")
                if raw is None and message.get("bytes") is not None:
                    raw = message["bytes"]
                if raw is None:
                    continue
                try:
                    await self.handle(raw)
                except ApiError as error:
                    await self.send_error(error)
            if self.services.shutdown.started.is_set():
                await self._shut_down()
            else:
                await self._end_of_life()
        except (
            WebSocketDisconnect,
            RuntimeError,
            OSError,
        ) as exc:  # the client went away while we were sending
            log.debug("websocket closed: %s", exc)
        finally:
            if self.task is not None and not self.task.done():
                self.task.cancel()
                with contextlib.suppress(BaseException):
                    await self.task

    async def _close_idle(self) -> None:
        await self.send_error(
            ApiError.of(
                ErrorCode.WEBSOCKET_IDLE_TIMEOUT,
                f"This WebSocket connection was idle for {self.settings.idle_seconds:g} seconds (websocket.idle_seconds); open a new connection to continue.",
            )
        )
        await self.ws.close(1000, "idle timeout")

    async def _receive(self, timeout: float) -> dict[str, Any] | None:
        """The client's next message; None after ``timeout`` or when the server starts shutting down."""
        stopping = self.services.shutdown.started
        if stopping.is_set():
            return None
        receiving = asyncio.ensure_future(self.ws.receive())
        waiting = asyncio.ensure_future(stopping.wait())
        try:
            done, _ = await asyncio.wait(
                {receiving, waiting}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            waiting.cancel()
            if not receiving.done():
                receiving.cancel()
        return receiving.result() if receiving in done else None

    async def _shut_down(self) -> None:
        """The running response finishes within the drain time, or the server cancels this task at
        its deadline: the response is interrupted (error + response.failed, server_shutdown). Then 1012."""
        if self.task is not None and not self.task.done():
            try:
                await asyncio.wait({self.task})
            except asyncio.CancelledError:
                await self._interrupt()
        with contextlib.suppress(Exception):
            await self.ws.close(1012, "server shutting down")

    async def _interrupt(self) -> None:
        assert self.task is not None
        stream = self.stream
        if stream is not None:
            stream.interrupted = shutdown_error()  # its stream now ends with the terminal events
        self.task.cancel()
        with contextlib.suppress(BaseException):
            await self.task
        if stream is None:  # not created yet: no response to end, the client is told all the same
            await self._tell(shutdown_error())

    async def _end_of_life(self) -> None:
        if self.task is not None and not self.task.done():
            done, _ = await asyncio.wait({self.task}, timeout=self.settings.drain_seconds)
            if not done:
                self.task.cancel()
                with contextlib.suppress(BaseException):
                    await self.task
        await self.send_error(
            ApiError.of(
                ErrorCode.WEBSOCKET_CONNECTION_LIMIT_REACHED,
                f"This WebSocket connection reached its maximum lifetime of {self.settings.max_connection_seconds:g} seconds; open a new connection to continue.",
            )
        )
        await self.ws.close(1000, "connection lifetime reached")

    # --- one client message --------------------------------------------------------------------

    async def handle(self, raw: str | bytes) -> None:
        limits = self.services.settings.limits
        if len(raw) > limits.max_body_bytes:
            raise ApiError.of(
                ErrorCode.REQUEST_TOO_LARGE,
                f"The message is larger than the limit of {limits.max_body_bytes} bytes (limits.max_body_bytes).",
            )
        # The same checks as an HTTP body: JSON, depth, string sizes, duplicate keys.
        data = parse_json(raw.encode() if isinstance(raw, str) else raw, "application/json", limits)
        if not isinstance(data, dict):
            raise invalid_type("A WebSocket message must be a JSON object with a 'type'.")
        kind = data.get("type")
        if kind is None:
            raise missing_required_parameter(
                "Missing required parameter: 'type' (send 'response.create').", param="type"
            )
        if kind != "response.create":
            raise ApiError.of(
                ErrorCode.UNKNOWN_EVENT_TYPE,
                f"Unknown message type {kind!r}: the only client message is 'response.create'.",
                param="type",
            )
        if self.busy:
            raise ApiError.of(
                ErrorCode.RESPONSE_IN_PROGRESS,
                "A response is already in progress on this connection; wait for its terminal event before sending another response.create.",
            )
        if "stream" in data and (data["stream"] is True or data["stream"] is None):
            # Streaming is implicit on a socket: `true` (or null) asks for nothing else. The OpenAI
            # Agents SDK's websocket transport always sends `stream: true`, and OpenAI accepts it.
            del data["stream"]
        for name in DISALLOWED_FIELDS:
            if name in data:
                raise unsupported_parameter(
                    f"'{name}' is not allowed in a WebSocket response.create message (responses are always streamed over the socket).",
                    param=name,
                )
        check_request_limits(data, limits)
        if self.services.limiter is not None:
            refusal = await self.services.limiter.admit(self.caller.key_name)
            if refusal is not None:
                raise refusal
        warnings: list[str] = []
        budget = structured_budget(data, None)
        if "input" in data:
            data["input"] = split_namespaced(
                data["input"], self.services.settings.gate.policy, warnings
            )
        try:
            body = WebSocketResponseCreateEvent.model_validate(data)
        except ValidationError as exc:
            raise from_validation_error(exc) from None
        self.busy = True
        self.task = asyncio.create_task(self._respond(body, warnings, budget))

    async def _respond(
        self, body: WebSocketResponseCreateEvent, warnings: list[str], budget: Any
    ) -> None:
        """Create the response, then send its events. In a task of its own from the start, so that the
        receive loop notices a client that closes the socket while the upstream has not answered yet
        (and cancels the upstream call then, not when the upstream answers or times out)."""
        previous = body.previous_response_id
        try:
            stream = await self._create(body, warnings, previous, budget)
        except ApiError as error:
            self.busy = False
            if previous:
                self.cache.pop(previous, None)
            await self._tell(error)
            return
        except Exception:  # a bug: the client is told (500) and the connection stays usable
            self.busy = False
            log.exception("websocket: creating a response failed")
            await self._tell(internal())
            return
        except BaseException:
            self.busy = False
            raise
        warned = stream.headers.get(GATE_WARNINGS_HEADER)
        if warned:
            log.warning(
                "websocket: response %s: gate warnings (not delivered: a WebSocket has no headers): %s",
                stream.response_id,
                warned,
            )
        self.stream = stream
        await self._pump(stream, previous)

    async def _tell(self, error: ApiError) -> None:
        """An error event, unless the client is gone (nobody to tell)."""
        try:
            await self.send_error(error)
        except Exception:  # noqa: BLE001 - the client went away
            log.debug("websocket error event not sent", exc_info=True)

    async def _create(
        self,
        body: WebSocketResponseCreateEvent,
        warnings: list[str],
        previous: str | None,
        budget: Any,
    ) -> ResponseStream:
        entry = self.cache.get(previous) if previous else None
        try:
            if (
                previous
                and entry is not None
                and not (entry.stored and self.services.responses.store is not None)
            ):
                self.cache.move_to_end(previous)
                return await create_with_history(
                    self.services, body, self.caller, warnings, previous, entry.items, budget=budget
                )
            return await self.services.responses.create(body, self.caller, warnings, budget=budget)
        except ApiError as error:
            if error.param == "previous_response_id" and error.status == 404:
                raise ApiError.of(
                    ErrorCode.PREVIOUS_RESPONSE_NOT_FOUND,
                    error.message,
                    param="previous_response_id",
                ) from None
            raise

    async def _pump(self, stream: ResponseStream, previous: str | None) -> None:
        finished = False
        try:
            async for event in stream:
                if event.get("type") in TERMINAL_EVENT_TYPES:
                    finished = True
                    self._finished(stream, event, previous)
                await self.send(event)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - a send to a gone client, or a bug: end this response, keep the server up
            log.debug("websocket response pump ended early", exc_info=True)
        finally:
            if self.stream is stream:
                self.stream = None
            if (
                not finished
            ):  # after the terminal event the connection may already run the next response
                self.busy = False

    def _finished(
        self, stream: ResponseStream, terminal: dict[str, Any], previous: str | None
    ) -> None:
        """Before the terminal event leaves: the connection is free again and the cache is updated."""
        self.busy = False
        response = terminal.get("response") or {}
        if terminal["type"] == "response.failed":
            if previous:
                self.cache.pop(previous, None)
            return
        if self.settings.cache_responses <= 0:
            return
        turn = stream.turn
        # The model's full output as history keeps it: extension items (kept for their upstream, not in the
        # spec output) included, reasoning marked with its origin.
        output = stream.service.history_output(stream.builder, turn, stream.run)
        if output is None:
            output = response.get("output", [])
        items = [
            *(item_to_wire(i) for i in turn.history),
            *(item_to_wire(i) for i in turn.new_input),
            *output,
        ]
        self.cache[stream.response_id] = _Entry(items, stored=bool(response.get("store")))
        while len(self.cache) > self.settings.cache_responses:
            self.cache.popitem(last=False)


# --------------------------------------------------------------------------- the route


async def _refuse(ws: WebSocket, error: ApiError) -> None:
    """Refuse the handshake with an HTTP status, or (without the denial extension) accept, tell and close."""
    if _DENIAL_EXTENSION in ws.scope.get("extensions", {}):
        await ws.send_denial_response(error_response(error))
        return
    await ws.accept()
    await ws.send_text(orjson.dumps(error_event(error)).decode())
    # 1013 "try again later" for a refusal of capacity (429, 503)
    await ws.close(
        1008 if error.status in (401, 403) else 1013 if error.status in (429, 503) else 1000
    )


def websocket_routes(
    services: Services, settings: WebSocketSettings | None = None
) -> Sequence[BaseRoute]:
    """``WebSocketRoute("/v1/responses")``; HTTP requests on the path still go to the POST route."""
    conf = settings or services.settings.websocket
    if not services.settings.endpoints.responses.enabled:
        return []
    limits = SocketLimits(conf.max_connections, conf.max_connections_per_key)

    async def responses_socket(ws: WebSocket) -> None:
        if not conf.enabled:
            await _refuse(
                ws,
                ApiError.of(
                    ErrorCode.WEBSOCKET_DISABLED,
                    "WebSocket mode is disabled on this server; use HTTP: POST /v1/responses (with stream: true for events).",
                ),
            )
            return
        try:
            caller = caller_of(ws.scope)  # as on HTTP (never one of two different keys)
        except ApiError as error:
            await _refuse(ws, error)
            return
        refusal = limits.admit(caller.key_name)
        if refusal is not None:
            log.info("websocket refused: %s (key %s)", refusal.code, caller.key_name)
            await _refuse(ws, refusal)
            return
        try:
            await ws.accept()
            connection = Connection(services, ws, caller, conf)
            try:
                await connection.serve()
            except Exception:  # noqa: BLE001 - a bug must not kill the worker; tell the client, close 1011
                log.exception("websocket connection failed")
                if ws.client_state is WebSocketState.CONNECTED:
                    with contextlib.suppress(Exception):
                        await connection.send_error(internal())
                        await ws.close(1011)
        finally:
            limits.release(caller.key_name)

    return [WebSocketRoute("/v1/responses", responses_socket)]


__all__ = [
    "Connection",
    "WebSocketSettings",
    "create_with_history",
    "error_event",
    "websocket_routes",
]
