"""The life of one response, from its first event to its stored end: ``ResponseStream``.

``service.create`` prepares a turn, starts its upstream call and hands both to a
``ResponseStream``; iterating the stream runs the response in four named phases:

- **begin**: the lifecycle events (``response.created``, then ``response.in_progress``
  or, for a background response, ``response.queued``). A stored streaming response is
  saved ``in_progress`` before they leave, so it is fetchable while it runs.
- **pump**: the first batch of model events (a background response's upstream call
  starts here), then every later batch, fed to the ``ResponseBuilder``; each batch's
  spec events leave as one item, through the sink (``engine/sink.py``).
- **finish**: the terminal events, saved before they leave (a failing store gets a
  grace, then the answer goes out marked not stored); the session lease released.
- **abandon**, on every way out: the upstream call closed; a response that never
  finished (its client left, it was cancelled, the server stopped it) ended as such
  and saved; the session lease released.

How the response ended is an ``Ending``. Failures of the upstream or of the model's
output end it ``failed`` with an ``error`` event; a bug ends it ``failed`` with a 500;
a cancellation from the server while the client still waits (a shutdown past the
drain time) sends the terminal events before the cancellation goes on.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from orgate.engine.builder import ResponseBuilder
from orgate.engine.sink import DictSink, Encoder, FrameSink, Sink
from orgate.neutral import ModelEvent, aclose_quietly, one_by_one
from orgate.protocol.errors import (
    ApiError,
    ErrorCode,
    client_disconnected,
    internal,
    upstream_without_events,
)
from orgate.store.base import SessionTurn

if TYPE_CHECKING:
    from orgate.engine.service import Caller, ResponsesService
    from orgate.engine.turn import Turn, TurnRun

log = logging.getLogger("orgate.engine")

STORE_ERROR_HEADER = (
    "X-Orgate-Store-Error"  # set when the answer was not stored (see docs/store.md)
)
FOREGROUND_SAVE_GRACE = 2.0  # seconds a finished answer's save is retried while its client waits
BACKGROUND_SAVE_RETRY = 600.0  # ... and a background response's, which nobody waits for


@dataclass(slots=True)
class BackgroundLease:
    """A background response's lease in the store: ``token`` holds it; the queued save takes it
    with ``request`` (what another node needs to run the response again) and the session lease
    it holds; ``lost`` once another process took it over (nothing more of it is saved)."""

    token: str
    lease_seconds: float
    request: dict[str, Any] | None = None
    session_token: str | None = None
    lost: bool = False


def shutdown_error(what: str = "response") -> ApiError:
    """Why a response (or request) ended unfinished when the server shut down."""
    return ApiError.of(
        ErrorCode.SERVER_SHUTDOWN, f"The server is shutting down: the {what} was interrupted."
    )


class Ending(enum.Enum):
    """How a response ended."""

    COMPLETED = "completed"  # the model finished its answer
    INCOMPLETE = "incomplete"  # the model stopped early (output token limit, content filter)
    FAILED = "failed"  # the upstream failed, or the model's output never validated: an error event
    SERVER_ERROR = "server_error"  # a bug in orgate, logged: an error event (500)
    CANCELLED = "cancelled"  # a background response cancelled by its owner
    CLIENT_GONE = "client_gone"  # the client left before the end: stored failed, nothing more sent
    SHUTDOWN = "shutdown"  # the server stopped it (past the drain time): failed, server_shutdown


_DICTS = DictSink()  # stateless: one for every stream
_BY_STATUS = {
    "completed": Ending.COMPLETED,
    "incomplete": Ending.INCOMPLETE,
    "failed": Ending.FAILED,
}


class ResponseStream:
    """The events of one response, in order; iterate once (``events()``,
    ``frames()`` or ``final()``)."""

    __slots__ = (
        "service", "turn", "run", "caller", "builder", "headers", "error", "ending", "record",
        "cancel_requested", "client_gone", "interrupted", "lease",
        "_terminal", "_upstream", "_first", "_session",
    )  # fmt: skip

    def __init__(
        self,
        service: ResponsesService,
        turn: Turn,
        run: TurnRun,
        caller: Caller,
        upstream: AsyncIterator[list[ModelEvent]],
        first: list[ModelEvent] | None,
        session: SessionTurn | None = None,
        *,
        created_at: int | None = None,
    ) -> None:
        self.service = service
        self.turn = turn  # the plan
        self.run = run  # what happens: route, safety-net outcome, warnings
        self.caller = caller
        self.builder = ResponseBuilder(
            turn.base, response_id=turn.response_id, created_at=created_at
        )
        self.headers: dict[
            str, str
        ] = {}  # to send with the HTTP response (gate warnings, safety-net outcome, session)
        self.error: ApiError | None = None  # why the response failed, if it did
        self.ending: Ending | None = None  # how it ended, once it has
        self._upstream = upstream
        self._first = first  # None: a background response, whose upstream call starts in the pump
        self._session = session
        self.record: tuple[list[dict[str, Any]], dict[str, Any]] | None = (
            None  # what every save stores of the request: built by the first
        )
        self.cancel_requested = False  # set by the background runner before it cancels the task
        # Set by a consumer that watches its client: False while the client is known to be there (a
        # cancellation is then the server's own, e.g. a shutdown past its drain timeout),
        # True once it left.
        self.client_gone: bool | None = None
        # Set by the server before it cancels a response it stops (a shutdown past the drain time: a
        # background or WebSocket response): the stream then ends with this error, stored as failed.
        self.interrupted: ApiError | None = None
        # A background response's lease in the store (engine/background.py): its saves keep it.
        self.lease: BackgroundLease | None = None

    @property
    def response_id(self) -> str:
        return self.builder.id

    def guard_upstream(
        self,
        wrap: Callable[[AsyncIterator[list[ModelEvent]]], AsyncIterator[list[ModelEvent]]],
    ) -> None:
        """Put ``wrap`` around the upstream call before the stream starts (a background
        response marks its tool calls in the store before they run)."""
        self._upstream = wrap(self._upstream)

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        # a consumer that stops early (closes it) ends the turn now, not at garbage collection
        return one_by_one(self._run(_DICTS))

    def frames(self, encode: Encoder, trailer: bytes = b"") -> AsyncIterator[bytes]:
        """The events encoded by ``encode`` (e.g. as SSE frames), one chunk per batch of model
        events;
        ``trailer`` (e.g. ``data: [DONE]``) ends the last chunk. Stored responses keep the frames
        for replay."""
        return self._run(FrameSink(encode, trailer, self.turn.store))

    async def final(self) -> dict[str, Any]:
        """Drain the stream and return the final response (the non-streaming path)."""
        last: dict[str, Any] | None = None
        async for events in self._run(_DICTS):
            last = events[-1]
        assert last is not None and "response" in last
        response: dict[str, Any] = last["response"]
        return response

    async def _run(self, sink: Sink) -> AsyncIterator[Any]:
        """begin → pump → finish; abandon on every way out. One item per batch of events.

        Hot path (every request): the phases await only when they have I/O to do (a save,
        a session to release, a background call to start), so that a plain response pays
        for no coroutine it does not need (see bench/instructions.py)."""
        builder = self.builder
        try:
            for item in self._begin(sink):
                yield item
            if sink.keeps and not self.turn.background:
                await self._save_running()  # a stored streaming response, before its first events
            try:
                batch = self._first if self._first is not None else await self._first_batch()
                if not self._feed(batch):
                    # pump: the loop runs once per upstream read, inline (no call, no generator)
                    feed, emit = builder.feed, sink.emit
                    for item in emit(builder.drain()):
                        yield item
                    async for batch in self._upstream:
                        for model_event in batch:
                            feed(model_event)
                            if builder.finished:
                                break
                        if builder.finished:
                            break
                        for item in emit(builder.drain()):
                            yield item
                    else:
                        self._truncated()
            except ApiError as error:
                self._fail(error)
            except asyncio.CancelledError:
                if not self._stopped_by_server():
                    raise  # the client left (or the response was cancelled): abandon ends it
                for item in await self._stop(sink):
                    yield item
                raise
            except Exception as error:  # noqa: BLE001 - any bug ends the stream cleanly, logged
                self._crash(error)
            items = self._finish(sink)
            if self.turn.store or self._session is not None:
                items = await self._settle(sink, items)
            for item in sink.end(items):
                yield item
        finally:
            await self._abandon(sink)

    # --- phases ---------------------------------------------------------------------------

    def _begin(self, sink: Sink) -> list[Any]:
        """The lifecycle events: a background response's leave now; the others' leave with the
        first batch (one write)."""
        builder = self.builder
        if self.turn.background:
            builder.start(queued=True)
            builder.in_progress()
            return sink.emit(builder.drain())
        builder.start()
        return []

    async def _save_running(self) -> None:
        """A streaming client learns the id from response.created: store the response
        (in_progress) before that event leaves, so that it is fetchable while it runs and,
        after a crash mid-stream, recovered as failed instead of lost (404). The
        response.in_progress event's snapshot is the response as it stands."""
        await self.service.persist(self, response=self.builder.events[-1]["response"])

    async def _first_batch(self) -> list[ModelEvent]:
        """(A background response) the first batch of a call started now."""
        await self.service.persist(self)  # in_progress
        try:
            first = await anext(self._upstream)
        except StopAsyncIteration:
            raise upstream_without_events(self.turn.deployment.name) from None
        if self.turn.opaque:
            self.service.report_opaque(
                self.turn, self.run
            )  # logged: a background turn sends no headers
        return first

    def _feed(self, batch: list[ModelEvent]) -> bool:
        """Feed one batch to the builder; True once the answer is finished (the rest is dropped)."""
        builder = self.builder
        feed = builder.feed
        for model_event in batch:
            feed(model_event)
            if builder.finished:
                return True
        return False

    def _truncated(self) -> None:
        raise ApiError.of(
            ErrorCode.UPSTREAM_STREAM_TRUNCATED,
            f"upstream '{self.turn.deployment.name}' ended its answer without finishing it",
        )

    def _fail(self, error: ApiError, ending: Ending = Ending.FAILED) -> None:
        self.error = error
        self.ending = ending
        self.builder.fail(error)

    def _crash(self, error: Exception) -> None:
        log.exception("response %s failed: %s", self.builder.id, type(error).__name__)
        self._fail(internal(), Ending.SERVER_ERROR)

    def _stopped_by_server(self) -> bool:
        """A cancellation the server made while the client still waits (a shutdown past the
        drain time), not one that says the client left or the response was cancelled."""
        return self.client_gone is False or self.interrupted is not None

    async def _stop(self, sink: Sink) -> list[Any]:
        """The terminal events of a response the server stops: the client gets error +
        response.failed (+ the trailer), not a cut stream; stored so, whatever cancels next."""
        self._fail(self.interrupted or shutdown_error(), Ending.SHUTDOWN)
        items = sink.emit(self.builder.drain())
        await asyncio.shield(self.service.persist(self, sink.replay()))
        return sink.end(items)

    def _finish(self, sink: Sink) -> list[Any]:
        """The terminal events, and how the response ended."""
        builder = self.builder
        if self.ending is None:
            self.ending = _BY_STATUS[builder.status]
        self._terminal = builder.drain()
        return sink.emit(self._terminal)

    async def _settle(self, sink: Sink, items: list[Any]) -> list[Any]:
        """Before the terminal events leave: the response saved (what the client sees complete is
        durable) and the session released. A failing store gets a short grace (a background
        response, nobody waiting, a long one); then the answer, paid for, still goes out,
        marked not stored (docs/store.md)."""
        retry_for = BACKGROUND_SAVE_RETRY if self.turn.background else FOREGROUND_SAVE_GRACE
        if self.turn.store and not await self.service.persist(
            self, sink.replay(), retry_for=retry_for
        ):
            items = sink.render(self._not_stored(self._terminal))
        if self._session is not None:
            session, self._session = self._session, None
            await self.service.end_session(session)
        return items

    async def _abandon(self, sink: Sink) -> None:
        """On every way out: the upstream closed, an unfinished response ended and saved, the
        session released, each also when a second cancellation (shutdown) interrupts the one
        before."""
        try:
            await aclose_quietly(self._upstream)
        finally:
            try:
                if not self.builder.finished:
                    self._end_unfinished()
                    sink.emit(self.builder.drain())  # the replay ends as the stored response does
                    await asyncio.shield(self.service.persist(self, sink.replay()))
            finally:
                if self._session is not None:
                    session, self._session = self._session, None
                    await asyncio.shield(self.service.end_session(session))

    # --- decisions ------------------------------------------------------------------------

    def abandoned_as(self) -> Ending:
        """How a response that stops before its end ended: cancelled by its owner, stopped by
        the server while it could not tell the client, or its client went away."""
        if self.cancel_requested:
            return Ending.CANCELLED
        if self.interrupted is not None:
            return Ending.SHUTDOWN
        return Ending.CLIENT_GONE

    def _end_unfinished(self) -> None:
        self.ending = ending = self.abandoned_as()
        if ending is Ending.CANCELLED:
            self.builder.cancel()
        elif ending is Ending.SHUTDOWN:
            assert self.interrupted is not None
            self.builder.fail(self.interrupted)
        else:  # keep what was produced, marked failed
            self.builder.fail(client_disconnected("finished"))

    def _not_stored(self, terminal: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The terminal events of a response whose save failed: its ``store`` says false, and
        ``X-Orgate-Store-Error`` says why (a non-streaming answer's headers are not sent yet)."""
        self.headers[STORE_ERROR_HEADER] = "store_unavailable"
        return [
            {**event, "response": {**event["response"], "store": False}}
            if "response" in event
            else event
            for event in terminal
        ]
