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
- One response in flight per connection (the spec's single lane, the default): a
  ``response.create`` that arrives before the running response's terminal event gets a 409
  error event (``response_in_progress``) and the running one goes on undisturbed; a
  ``stream_id`` is an unknown parameter.
- With ``[websocket] multiplexing`` on (OpenAI's ``stream_id``): each ``response.create``
  runs on the stream its ``stream_id`` names (none: the default stream). A stream's
  responses run one after another, in the order sent (FIFO); streams run side by side.
  Every event of a response on a named stream, its errors included, carries its
  ``stream_id``; an error that belongs to no named stream (bad JSON, the connection's end)
  carries none: it is the default stream's. ``ws_limits.LaneLimits`` bounds the responses
  running or queued (``max_active_responses``) and the named streams
  (``max_streams``) of a connection. ``previous_response_id`` is lineage, not routing: a
  response on one stream may continue one made on another (a fork).
- Request errors (bad JSON, unknown ``type``, validation, a failed create) are
  ``WebSocketErrorEvent`` envelopes; the connection stays usable.
- ``previous_response_id`` resolves from the store, or from this connection's
  own cache of the responses it made (context = input + output of each, the
  model's extension items included, the last ``cache_responses`` of them),
  which is how ``store: false`` chains continue. The cache belongs to the connection:
  after a reconnect the id is
  ``previous_response_not_found``. A continuation that fails evicts the
  referenced id from the cache.
- After ``max_connection_seconds`` no new response is accepted; a queued one gets an error
  with code ``websocket_connection_limit_reached``, a running one ``drain_seconds`` to
  finish, then the client receives that error and the socket is closed (1000).
- A connection with no response running that receives no message for
  ``idle_seconds`` gets an error with code ``websocket_idle_timeout`` and is
  closed (1000). Before the handshake, ``ws_limits.SocketLimits`` caps the open
  sockets per key (HTTP 429) and per process (503), so that idle sockets cannot
  take the descriptors HTTP requests and ``/healthz`` need.
- On shutdown (SIGTERM) no new message is read; running responses get the
  server's drain time (``server/shutdown.py``). One that cannot finish in it ends
  with ``error`` + ``response.failed`` (code ``server_shutdown``, stored so), one still
  queued with that error; then the socket is closed with 1012 (service restart).
- Gate warnings (``X-Orgate-Gate-Warnings`` over HTTP) have no place here: the
  protocol's server messages are the spec's streaming events and the error
  envelope, and a WebSocket has no per-response headers. They are logged
  (``orgate.server.websocket``, with the response id), next to the gate's own
  log lines.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import orjson
from pydantic import ValidationError
from starlette.routing import BaseRoute, WebSocketRoute
from starlette.types import Message
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from orgate.config import WebSocketSettings
from orgate.engine.history_items import item_to_wire
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
from orgate.server.body import (
    DeferredSchema,
    check_deferred_schemas,
    check_request_limits,
    parse_json,
)
from orgate.server.create_endpoint import structured_budget
from orgate.server.errors import error_response
from orgate.server.sse import openai_event
from orgate.server.ws_limits import LaneLimits, SocketLimits, check_stream_id
from orgate.structured import BudgetOverride

if TYPE_CHECKING:
    from orgate.server.services import Services

log = logging.getLogger("orgate.server.websocket")

DISALLOWED_FIELDS = ("stream", "stream_options", "background")
_DENIAL_EXTENSION = "websocket.http.response"


def error_event(error: ApiError, stream_id: str | None = None) -> dict[str, Any]:
    """The ``WebSocketErrorEvent`` envelope of an ``ApiError`` (on a named stream: its id)."""
    event: dict[str, Any] = {
        "type": "error",
        "status": error.status,
        "error": {
            "type": error.type,
            "code": error.code or error.type,
            "message": error.message,
            "param": error.param,
        },
    }
    if stream_id is not None:
        event["stream_id"] = stream_id
    return event


# --------------------------------------------------------------------------- one connection


class _Entry:
    __slots__ = ("items", "stored")

    def __init__(self, items: list[dict[str, Any]], stored: bool) -> None:
        self.items = items
        self.stored = stored


class _Job(NamedTuple):
    """One accepted ``response.create``, waiting for its turn on its stream."""

    body: WebSocketResponseCreateEvent
    warnings: list[str]
    budget: BudgetOverride | None
    stream_id: str | None  # None: the default stream


class _Lane:
    """One stream of a connection: its responses run one after another, in the order sent."""

    __slots__ = ("counted", "jobs", "stream", "task")

    def __init__(self) -> None:
        self.jobs: deque[_Job] = deque()
        self.task: asyncio.Task[None] | None = None
        self.stream: ResponseStream | None = None  # the running response, once created
        self.counted = False  # the running response still counts in the connection's limits


class Connection:
    """One accepted socket: its receive loop, its streams (one unless multiplexing is on) and
    its response cache."""

    def __init__(
        self, services: Services, ws: WebSocket, caller: Caller, settings: WebSocketSettings
    ) -> None:
        self.services = services
        self.ws = ws
        self.caller = caller
        self.settings = settings
        self.cache: OrderedDict[str, _Entry] = OrderedDict()
        self.lanes: dict[str | None, _Lane] = {}
        # the spec's single lane: one response at a time (a second one is refused, not queued)
        active = settings.max_active_responses if settings.multiplexing else 1
        self.limits = LaneLimits(active, settings.max_streams)
        self._idle_since = time.monotonic()
        self._send_lock = asyncio.Lock()
        self._openai_names = services.settings.endpoints.responses.event_names == "openai"

    @property
    def busy(self) -> bool:
        """A response runs (or waits for its turn) on this connection."""
        return self.limits.active > 0

    def _release(self) -> None:
        """One response ended: the idle time starts again from here."""
        self.limits.release()
        self._idle_since = time.monotonic()

    def _done(self, lane: _Lane) -> None:
        """The lane's running response ended (counted once, however it ended)."""
        if lane.counted:
            lane.counted = False
            self._release()

    def _wait(self, remaining: float) -> float | None:
        """How long to wait for the next message (at most ``remaining``); None: idle too long."""
        idle = self.settings.idle_seconds
        if not idle:
            return remaining
        if self.busy:  # look again later: the response may end while the client stays silent
            return min(remaining, idle)
        left = self._idle_since + idle - time.monotonic()
        return None if left <= 0 else min(remaining, left)

    async def send(self, event: dict[str, Any], stream_id: str | None = None) -> None:
        if self._openai_names:
            event = openai_event(event)
        if stream_id is not None:  # a copy: the builder's event dicts are never changed
            event = {**event, "stream_id": stream_id}
        async with self._send_lock:
            await self.ws.send_text(orjson.dumps(event).decode())

    async def send_error(self, error: ApiError, stream_id: str | None = None) -> None:
        await self.send(error_event(error, stream_id))

    def _lane_tasks(self) -> set[asyncio.Task[None]]:
        return {lane.task for lane in self.lanes.values() if lane.task is not None}

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
            for task in self._lane_tasks():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task

    async def _close_idle(self) -> None:
        await self.send_error(
            ApiError.of(
                ErrorCode.WEBSOCKET_IDLE_TIMEOUT,
                "This WebSocket connection was idle for "
                f"{self.settings.idle_seconds:g} seconds (websocket.idle_seconds); "
                "open a new connection to continue.",
            )
        )
        await self.ws.close(1000, "idle timeout")

    async def _receive(self, timeout: float) -> Message | None:
        """The client's next message; None after ``timeout`` or when the server starts shutting
        down."""
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

    def _unstarted(self) -> list[_Job]:
        """The queued responses, taken off their streams (each is told why by the caller)."""
        jobs: list[_Job] = []
        for lane in self.lanes.values():
            jobs.extend(lane.jobs)
            lane.jobs.clear()
        for _ in jobs:
            self._release()
        return jobs

    async def _shut_down(self) -> None:
        """Running responses finish within the drain time, or the server cancels this task at
        its deadline: they are interrupted (error + response.failed, server_shutdown). Then 1012."""
        tasks = self._lane_tasks()
        if tasks:
            try:
                await asyncio.wait(tasks)
            except asyncio.CancelledError:
                await self._interrupt()
        with contextlib.suppress(Exception):
            await self.ws.close(1012, "server shutting down")

    async def _interrupt(self) -> None:
        unstarted = self._unstarted()
        not_created: list[str | None] = []
        # a copy: a lane whose task ends leaves ``self.lanes`` while its task is awaited below
        for key, lane in list(self.lanes.items()):
            if lane.task is None:
                continue
            if lane.stream is not None:  # its stream now ends with the terminal events
                lane.stream.interrupted = shutdown_error()
            else:  # not created yet: no response to end, the client is told all the same
                not_created.append(key)
            lane.task.cancel()
            with contextlib.suppress(BaseException):
                await lane.task
        for stream_id in [*not_created, *(job.stream_id for job in unstarted)]:
            await self._tell(shutdown_error(), stream_id)

    async def _end_of_life(self) -> None:
        limit = ApiError.of(
            ErrorCode.WEBSOCKET_CONNECTION_LIMIT_REACHED,
            "This WebSocket connection reached its maximum lifetime of "
            f"{self.settings.max_connection_seconds:g} seconds; open a new connection "
            "to continue.",
        )
        for job in self._unstarted():
            await self._tell(limit, job.stream_id)
        tasks = self._lane_tasks()
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=self.settings.drain_seconds)
            for task in pending:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        await self.send_error(limit)
        await self.ws.close(1000, "connection lifetime reached")

    # --- one client message --------------------------------------------------------------------

    async def handle(self, raw: str | bytes) -> None:
        """One client message: a ``response.create`` accepted onto its stream, or an error."""
        data = self._read(raw)
        stream_id = None
        if "stream_id" in data:
            if not self.settings.multiplexing:
                raise ApiError.of(
                    ErrorCode.UNKNOWN_PARAMETER,
                    "Unknown parameter: 'stream_id' (WebSocket multiplexing is off on this "
                    "server: [websocket] multiplexing).",
                    param="stream_id",
                )
            stream_id = check_stream_id(data.pop("stream_id"))
        try:
            job = await self._accept(data, stream_id)
        except ApiError as error:
            await self.send_error(error, stream_id)
            return
        lane = self.lanes.get(stream_id)
        if lane is None:
            lane = self.lanes[stream_id] = _Lane()
        lane.jobs.append(job)
        if lane.task is None:
            lane.task = asyncio.create_task(self._run(lane, stream_id))

    def _read(self, raw: str | bytes) -> dict[str, Any]:
        """The message as a ``response.create`` object: size, JSON checks and ``type``."""
        limits = self.services.settings.limits
        if len(raw) > limits.max_body_bytes:
            raise ApiError.of(
                ErrorCode.REQUEST_TOO_LARGE,
                f"The message is larger than the limit of {limits.max_body_bytes} "
                "bytes (limits.max_body_bytes).",
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
        if self.busy and not self.settings.multiplexing:
            raise ApiError.of(
                ErrorCode.RESPONSE_IN_PROGRESS,
                "A response is already in progress on this connection; wait for its "
                "terminal event before sending another response.create.",
            )
        return data

    async def _accept(self, data: dict[str, Any], stream_id: str | None) -> _Job:
        """The checks of an HTTP create (fields, limits, rate limit, validation), then the
        connection's own admission (``LaneLimits``): the response counts from here."""
        if "stream" in data and (data["stream"] is True or data["stream"] is None):
            # Streaming is implicit on a socket: `true` (or null) asks for nothing else. The OpenAI
            # Agents SDK's websocket transport always sends `stream: true`, and OpenAI accepts it.
            del data["stream"]
        for name in DISALLOWED_FIELDS:
            if name in data:
                raise unsupported_parameter(
                    f"'{name}' is not allowed in a WebSocket response.create message "
                    "(responses are always streamed over the socket).",
                    param=name,
                )
        limits = self.services.settings.limits
        deferred: list[DeferredSchema] = []
        check_request_limits(data, limits, deferred)
        if deferred:  # a large schema never seen: costed off the event loop
            await asyncio.to_thread(check_deferred_schemas, deferred, limits)
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
        refusal = self.limits.admit(stream_id)
        if refusal is not None:
            raise refusal
        return _Job(body, warnings, budget, stream_id)

    async def _run(self, lane: _Lane, stream_id: str | None) -> None:
        """A stream's responses, one after another; the stream is forgotten once it is empty."""
        try:
            while lane.jobs:
                job = lane.jobs.popleft()
                lane.counted = True
                try:
                    await self._respond(lane, job)
                finally:
                    self._done(lane)
        finally:
            lane.task = None
            while lane.jobs:  # cancelled (the client left): nobody waits for these any more
                lane.jobs.popleft()
                self._release()
            if self.lanes.get(stream_id) is lane:
                del self.lanes[stream_id]

    async def _respond(self, lane: _Lane, job: _Job) -> None:
        """Create the response, then send its events. In a task of its own from the start,
        so that the
        receive loop notices a client that closes the socket while the upstream has not answered yet
        (and cancels the upstream call then, not when the upstream answers or times out)."""
        previous = job.body.previous_response_id
        try:
            stream = await self._create(job, previous)
        except ApiError as error:
            self._done(lane)
            if previous:
                self.cache.pop(previous, None)
            await self._tell(error, job.stream_id)
            return
        except Exception:  # a bug: the client is told (500) and the connection stays usable
            self._done(lane)
            log.exception("websocket: creating a response failed")
            await self._tell(internal(), job.stream_id)
            return
        warned = stream.headers.get(GATE_WARNINGS_HEADER)
        if warned:
            log.warning(
                "websocket: response %s: gate warnings (not delivered: a WebSocket has "
                "no headers): %s",
                stream.response_id,
                warned,
            )
        lane.stream = stream
        try:
            await self._pump(lane, stream, previous, job.stream_id)
        finally:
            lane.stream = None

    async def _tell(self, error: ApiError, stream_id: str | None = None) -> None:
        """An error event, unless the client is gone (nobody to tell)."""
        try:
            await self.send_error(error, stream_id)
        except Exception:  # noqa: BLE001 - the client went away
            log.debug("websocket error event not sent", exc_info=True)

    async def _create(self, job: _Job, previous: str | None) -> ResponseStream:
        """The response, its context from the store or from this connection's cache."""
        entry = self.cache.get(previous) if previous else None
        history = None
        if (
            previous
            and entry is not None
            and not (entry.stored and self.services.responses.store is not None)
        ):
            self.cache.move_to_end(previous)
            history = entry.items
        try:
            return await self.services.responses.create(
                job.body, self.caller, job.warnings, budget=job.budget, history_override=history
            )
        except ApiError as error:
            if error.param == "previous_response_id" and error.status == 404:
                raise ApiError.of(
                    ErrorCode.PREVIOUS_RESPONSE_NOT_FOUND,
                    error.message,
                    param="previous_response_id",
                ) from None
            raise

    async def _pump(
        self, lane: _Lane, stream: ResponseStream, previous: str | None, stream_id: str | None
    ) -> None:
        """Send the response's events."""
        try:
            async for event in stream:
                if event.get("type") in TERMINAL_EVENT_TYPES:
                    self._done(lane)  # before it leaves: the client may send the next one at once
                    self._finished(stream, event, previous)
                await self.send(event, stream_id)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - a send to a gone client, or a bug: end this response, keep the server up
            log.debug("websocket response pump ended early", exc_info=True)

    def _finished(
        self, stream: ResponseStream, terminal: dict[str, Any], previous: str | None
    ) -> None:
        """Before the terminal event leaves: the cache is updated."""
        response = terminal.get("response") or {}
        if terminal["type"] == "response.failed":
            if previous:
                self.cache.pop(previous, None)
            return
        if self.settings.cache_responses <= 0:
            return
        turn = stream.turn
        # The model's full output as history keeps it: extension items (kept for their upstream,
        # not in the
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
    """Refuse the handshake with an HTTP status, or (without the denial extension) accept,
    tell and close."""
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
                    "WebSocket mode is disabled on this server; use HTTP: POST "
                    "/v1/responses (with stream: true for events).",
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
    "error_event",
    "websocket_routes",
]
