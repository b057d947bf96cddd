"""The responses service: run one turn from request to stored response, as one event stream.

``create()`` resolves the model and the context (``previous_response_id``,
``item_reference``, the session's latest response), calls the provider
through the pipeline, and awaits the first model event before returning, so
that an upstream failure that happens before any output (429, 5xx, refused
connection) is an HTTP error with the right status, not a failed stream.
The returned ``ResponseStream`` yields spec event dicts (or SSE frames); the
terminal response is persisted before the terminal event is yielded, so a
response a client saw complete is already durable. Non-streaming callers
drain the same stream.

Sessions: a request in a session (header or ``user``) holds the session's
turn lease from ``create()`` until its response is stored; a second
concurrent request in the same session gets 409 ``session_busy``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from orgate.engine.builder import ResponseBuilder
from orgate.engine.compaction import expand, fit_context
from orgate.engine.context import Turn, build_turn, item_to_wire, items_from_wire, normalize_input
from orgate.engine.input_gate import Policy, check_context, opaque_items, report_opaque
from orgate.engine.mcp_loop import McpLoop, McpRuntime, McpTurn
from orgate.engine.router import RouteTrace, TurnProviders, turn_providers
from orgate.mcptools.items import has_mcp_items, read_context
from orgate.neutral import (
    Deployment,
    ModelEvent,
    ModelRequest,
    Provider,
    one_by_one,
    origin_of,
)
from orgate.protocol import CreateResponseBody, ItemReferenceParam
from orgate.protocol.errors import (
    ApiError,
    ErrorCode,
    client_disconnected,
    internal,
    invalid_request,
    invalid_value,
    missing_required_parameter,
    model_not_found,
    not_found,
    upstream_without_events,
)
from orgate.store.base import (
    ResponseConflict,
    ResponseStore,
    SessionBusy,
    SessionTurn,
    StoreError,
    UnknownResponse,
)

log = logging.getLogger("orgate.engine")

Encoder = Callable[[dict[str, Any]], bytes]

GATE_WARNINGS_HEADER = "X-Orgate-Gate-Warnings"  # the gate's findings under policy=warn (and dropped opaque items)

#: The error code of a response the server stopped because it shuts down (past its drain time).


def shutdown_error(what: str = "response") -> ApiError:
    """Why a response (or request) ended unfinished when the server shut down."""
    return ApiError.of(ErrorCode.SERVER_SHUTDOWN, f"The server is shutting down: the {what} was interrupted.")


# Failures of the model's output (not of the transport): in a stream they end in response.failed.
MODEL_OUTPUT_FAILURES = frozenset({ErrorCode.STRUCTURED_OUTPUT_INVALID, ErrorCode.INVALID_TOOL_ARGUMENTS, ErrorCode.TOOL_CHOICE_VIOLATION})


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is asking: the API key's name, its tenant, the models it may use (None = all), and
    whether it is an admin key (sees every tenant where a route says so: the review queue)."""

    key_name: str
    tenant: str
    models: tuple[str, ...] | None = None
    admin: bool = False


ProviderFactory = Callable[[Deployment], Provider]


class Pipeline(Protocol):
    """Wraps a deployment's provider for one turn (safety net, tool guard); returns the provider and its outcome."""

    def open(self, turn: Turn, provider: Provider, budget: Any = None) -> tuple[Provider, Any]: ...


STORE_ERROR_HEADER = "X-Orgate-Store-Error"  # set when the answer was not stored (see docs/store.md)
FOREGROUND_SAVE_GRACE = 2.0  # seconds a finished answer's save is retried while its client waits
BACKGROUND_SAVE_RETRY = 600.0  # ... and a background response's, which nobody waits for
_REFUSALS = (UnknownResponse, ResponseConflict, SessionBusy)  # a save the store refused: retrying cannot help


def store_failure(exc: StoreError) -> ApiError:
    # The detail (URL, host, file path) goes to the log, not to the client.
    log.warning("response store unavailable: %s", exc)
    return ApiError.of(
        ErrorCode.STORE_UNAVAILABLE,
        "The response store is unavailable; try again shortly.",
        headers={"Retry-After": "1"},
    )


class ResponsesService:
    """Runs turns. Built once per app with its deployments, providers and (optional) store."""

    def __init__(
        self,
        deployments: Mapping[str, Deployment],
        providers: TurnProviders | ProviderFactory,
        store: ResponseStore | None = None,
        gate_policy: Policy = "enforce",
        pipeline: Pipeline | None = None,
        ttl_seconds: float | None = None,
        compaction_key: bytes | None = None,
        mcp: McpRuntime | None = None,
    ) -> None:
        self.mcp = mcp  # the MCP servers the operator allows (None: none configured)
        self.deployments = deployments
        self.providers = turn_providers(providers)  # a Router, or a plain factory (no routes)
        self.store = store
        self.gate_policy: Policy = gate_policy
        self.pipeline = pipeline
        self.ttl_seconds = ttl_seconds
        self.compaction_key = compaction_key  # opens `compaction` input items (see prepare)

    def _open(self, deployment: Deployment, prefer: str | None) -> tuple[Provider, RouteTrace]:
        """The provider for one turn; ``prefer`` = the session's last deployment (prompt-cache locality)."""
        return self.providers.open(deployment, prefer)

    def resolve(self, model: str | None, caller: Caller) -> Deployment:
        if not model:
            raise missing_required_parameter("Missing required parameter: 'model'.", param="model")
        deployment = self.deployments.get(model)
        if deployment is None or (caller.models is not None and model not in caller.models):
            raise model_not_found(model)
        return deployment

    async def prepare(
        self,
        body: CreateResponseBody,
        caller: Caller,
        warnings: list[str] | None = None,
        *,
        session: SessionTurn | None = None,
        history_override: list[dict[str, Any]] | None = None,
    ) -> Turn:
        deployment = self.resolve(body.model, caller)
        own_input = normalize_input(body)
        new_input = await self.resolve_references(own_input, caller)
        if self.compaction_key is not None:
            new_input = expand(new_input, self.compaction_key, context=caller.tenant)
        # item_reference resolved from the store, or compaction items opened (they may hold extension items)
        unsealed = new_input is not own_input
        previous = body.previous_response_id
        if previous is None and session is not None and session.latest_response_id:
            previous = session.latest_response_id
        history: list[Any] = []
        if history_override is not None:
            history = items_from_wire(history_override)
        elif previous:
            stored = None
            if self.store is not None:
                try:
                    stored = await self.store.context(previous, caller.tenant)
                except StoreError as exc:
                    raise store_failure(exc) from None
            if stored is None:
                raise not_found(f"Previous response with id '{previous}' not found.", param="previous_response_id")
            history = items_from_wire(stored)
        warnings = [] if warnings is None else warnings
        check_context(history, new_input, self.gate_policy, warnings, body.tools)
        turn = build_turn(body, deployment, new_input, history, store_enabled=self.store is not None)
        turn.base["previous_response_id"] = previous
        turn.history_unlinked = history_override is not None
        turn.warnings = warnings
        turn.tenant = caller.tenant
        if turn.mcp_tools or has_mcp_items(turn.request.input):
            self._prepare_mcp(turn, body, history, new_input)
        for index, kind in turn.dropped_tools:
            warnings.append(f"tools[{index}]: dropped tool of type {kind} (no upstream of '{deployment.name}' runs it)")
            log.warning("tools: dropped tools[%d] of type %s for model %s (no upstream runs it)", index, kind, deployment.name)
        window = deployment.capabilities.context_window
        if window is not None:  # unknown: everything goes (fit_context's own answer, without the call on the hot path)
            fit = fit_context(
                turn.request.input,
                context_window=window,
                truncation=body.truncation,
                instructions=body.instructions,
                reserve=body.max_output_tokens or 0,
            )
            if fit.dropped:  # truncation "auto": the model gets the most recent turns; storage keeps everything
                turn.request = dataclasses.replace(turn.request, input=fit.items)
        if history or unsealed:  # only stored items (history, references, compaction items) can be opaque
            turn.opaque = opaque_items(turn.request.input)
        if turn.background and not turn.store:
            raise invalid_request("background responses must be stored: remove store=false (or enable the store).", param="background")
        return turn

    def _prepare_mcp(self, turn: Turn, body: CreateResponseBody, history: list[Any], new_input: list[Any]) -> None:
        """The turn's MCP servers (a 400/403 for one the caller may not use) and answered approvals;
        the model's input with MCP items as the function calls they were (``orgate.mcptools.items``)."""
        model_input, pending = read_context(history, new_input)
        turn.request = dataclasses.replace(turn.request, input=model_input)
        uses = []
        if turn.mcp_tools:
            if self.mcp is None:
                index = turn.mcp_tools[0][0]
                raise ApiError.of(ErrorCode.UNKNOWN_MCP_SERVER, f"tools[{index}]: no MCP server is configured on this gateway.", param=f"tools[{index}].server_label")
            uses = self.mcp.registry.resolve(turn.mcp_tools, turn.tenant)
        labels = {use.server.label for use in uses}
        for answer in pending:
            if answer.request.server_label not in labels:
                raise invalid_value(
                    f"{answer.param}: the approved call is for the MCP server '{answer.request.server_label}', which is not in this request's tools.",
                    param=answer.param,
                )
        if uses:
            assert self.mcp is not None
            budget = body.max_tool_calls if body.max_tool_calls is not None else self.mcp.max_tool_calls
            turn.mcp = McpTurn(uses, pending, budget, turn.tenant, turn.response_id)

    async def resolve_references(self, items: list[Any], caller: Caller) -> list[Any]:
        for item in items:
            if type(item) is ItemReferenceParam:
                break
        else:
            return items
        resolved: list[Any] = []
        for index, item in enumerate(items):
            if type(item) is not ItemReferenceParam:
                resolved.append(item)
                continue
            found = None
            if self.store is not None:
                try:
                    found = await self.store.get_item(item.id, caller.tenant)
                except StoreError as exc:
                    raise store_failure(exc) from None
            if found is None:
                raise not_found(f"Item with id '{item.id}' not found.", param=f"input[{index}].id")
            resolved.extend(items_from_wire([found]))
        return resolved

    async def begin_session(self, caller: Caller, session_id: str | None) -> SessionTurn | None:
        if session_id is None or self.store is None:
            return None
        try:
            return await self.store.begin_session_turn(caller.tenant, session_id)
        except SessionBusy:
            raise ApiError.of(
                ErrorCode.SESSION_BUSY,
                f"Session '{session_id}' already has a response in progress; send the next turn when it is done.",
                param="session",
            ) from None
        except StoreError as exc:
            raise store_failure(exc) from None

    async def end_session(self, session: SessionTurn | None) -> None:
        if session is None or self.store is None:
            return
        try:
            await self.store.end_session_turn(session)
        except StoreError:
            log.warning("could not release session %s (the store retries in the background)", session.session_id, exc_info=True)

    async def create(
        self,
        body: CreateResponseBody,
        caller: Caller,
        warnings: list[str] | None = None,
        *,
        budget: Any = None,
        session_id: str | None = None,
        history_override: list[dict[str, Any]] | None = None,
    ) -> ResponseStream:
        """Start a turn. Raises ``ApiError`` for anything that fails before the first event."""
        session = await self.begin_session(caller, session_id) if session_id is not None else None
        try:
            turn = await self.prepare(body, caller, warnings, session=session, history_override=history_override)
            turn.session_id = session_id
            provider, turn.route = self._open(turn.deployment, session.deployment if session is not None else None)
            outcome: Any = None
            if self.pipeline is not None:
                provider, outcome = self.pipeline.open(turn, provider, budget)
                turn.outcome = outcome
            if turn.mcp is not None:
                assert self.mcp is not None
                provider = McpLoop(provider, turn.mcp, self.mcp)
            upstream = provider.stream_batches(turn.request)
            if turn.background:
                # Background work starts in its own task; nothing is awaited here.
                stream = ResponseStream(self, turn, caller, upstream, None, session)
                stream.builder.status = "queued"
                # Nothing was asked of the model yet: a response that cannot be stored (so never
                # fetched, continued nor cancelled) is refused now, 503.
                try:
                    await self.persist(stream.builder, turn, caller, required=True)
                except asyncio.CancelledError:
                    # The client left (or the server stops) during that save, which may still land:
                    # no job will ever run this response, so it is stored failed, not left queued.
                    stream.builder.fail(client_disconnected("started"))
                    await asyncio.shield(self.persist(stream.builder, turn, caller))
                    raise
                return stream
            failed: ApiError | None = None
            first: list[ModelEvent] | None = None
            try:
                first = await anext(upstream)
                if turn.opaque:
                    self.report_opaque(turn)
                turn.warnings.extend(f"upstream: {note}" for note in turn.request.notices)
            except StopAsyncIteration:
                raise upstream_without_events(turn.deployment.name) from None
            except ApiError as error:
                await _aclose(upstream)
                if not (turn.stream and error.code in MODEL_OUTPUT_FAILURES):
                    raise
                # The model answered, but never validly: a stream says so with response.failed.
                failed = error
            except BaseException:
                await _aclose(upstream)
                raise
        except BaseException:
            await self.end_session(session)
            raise
        stream = ResponseStream(self, turn, caller, upstream, first, session, failed=failed)
        # Every answer to a format says what the net did, a passed-through tool call included.
        if outcome is not None and outcome.status != "pending" and (outcome.status != "passthrough" or turn.request.text_format is not None):
            stream.headers.update(outcome.headers())
        if turn.warnings:
            stream.headers[GATE_WARNINGS_HEADER] = " | ".join(turn.warnings)
        if session_id is not None:
            stream.headers["X-Session-Id"] = session_id
        return stream

    def served(self, turn: Turn) -> Deployment:
        """The deployment whose answer the turn streams (a routed model's fallback, if one answered)."""
        return self.providers.served(turn.deployment, turn.route.served_by if turn.route is not None else None)

    def history_output(self, builder: ResponseBuilder, turn: Turn) -> list[dict[str, Any]] | None:
        """The output items the history keeps when they differ from the spec ``output`` (else None):
        extension items included, reasoning marked with the origin that made its ``encrypted_content``."""
        if not builder.history_differs:
            return None
        return builder.output_items(origin_of(self.served(turn)))

    def report_opaque(self, turn: Turn) -> None:
        """Once the upstream answered: warn about the opaque history items its provider left out."""
        report_opaque(turn.opaque, self.served(turn), self.gate_policy, turn.warnings)

    async def persist(
        self,
        builder: ResponseBuilder,
        turn: Turn,
        caller: Caller,
        events: bytes | None = None,
        *,
        response: dict[str, Any] | None = None,
        required: bool = False,
        retry_for: float = 0.0,
    ) -> bool:
        """Save the response (``response``: a snapshot of it as it stands, when the caller has one).

        True when it is stored (or is not to be stored). A store failure is retried with
        backoff for ``retry_for`` seconds (the save is an idempotent upsert), then logged and
        False, or with ``required`` raised as 503 ``store_unavailable``."""
        if not turn.store or self.store is None:
            return True
        expires_at = builder.created_at + self.ttl_seconds if self.ttl_seconds else None
        if turn.record is None:  # a turn is saved up to three times (queued / in progress, final): built once
            input_items = [item_to_wire(item) for item in turn.new_input]
            if turn.history_unlinked:  # history came from the caller (WebSocket connection cache), not the store
                input_items = [*(item_to_wire(item) for item in turn.history), *input_items]
            turn.record = (input_items, _request_record(turn))
        input_items, request = turn.record
        previous = None if turn.history_unlinked else turn.base.get("previous_response_id")
        deadline = asyncio.get_running_loop().time() + retry_for
        delay = 0.1
        while True:
            try:
                await self.store.save(
                    response if response is not None else builder.final if builder.final is not None else builder.snapshot(),
                    tenant=caller.tenant,
                    input_items=input_items,
                    previous_response_id=previous,
                    session_id=turn.session_id,
                    deployment=(turn.route.served_by if turn.route is not None else None) or turn.deployment.name,
                    request=_with_trace(request, turn),
                    events=events,
                    expires_at=expires_at,
                    output_items=self.history_output(builder, turn),
                )
                return True
            except UnknownResponse:
                # The previous response was deleted while this turn ran: keep the answer, unchained.
                log.warning("previous response of %s vanished; storing it without its chain", builder.id)
                builder.unlink_previous()  # re-snapshot without the vanished link (turn.base is the builder's)
                return await self.persist(builder, turn, caller, events, required=required, retry_for=retry_for)
            except StoreError as exc:
                left = deadline - asyncio.get_running_loop().time()
                if isinstance(exc, _REFUSALS) or left <= 0:
                    if required:
                        raise store_failure(exc) from None
                    log.error("could not store response %s: %s", builder.id, exc)
                    return False
                await asyncio.sleep(min(delay, left))
                delay = min(delay * 2, 5.0)


def _request_record(turn: Turn) -> dict[str, Any]:
    request: ModelRequest = turn.request
    return {
        "model": turn.base["model"],
        "upstream_model": request.model,
        "instructions": request.instructions,
        "max_output_tokens": request.max_output_tokens,
        "temperature": request.temperature,
        "top_p": request.top_p,
        "text_format": None if request.text_format is None else request.text_format.type,
        "stream": turn.stream,
    }


def _with_trace(request: dict[str, Any], turn: Turn) -> dict[str, Any]:
    """The stored request record plus what an inspection of the response wants and no header
    keeps: the route when it took more than one upstream call (retries, fallbacks), and what
    the safety net did for a structured-output request. A plain turn adds nothing."""
    route, outcome = turn.route, turn.outcome
    trace: dict[str, Any] = {}
    if route is not None and (len(route.attempts) > 1 or any(a.error for a in route.attempts)):
        trace["route"] = {"served_by": route.served_by, "attempts": [{"deployment": a.deployment, "error": a.error} for a in route.attempts]}
    if outcome is not None and outcome.status not in ("pending", "passthrough"):
        trace["structured"] = {
            "status": outcome.status,
            "mode": outcome.mode,
            "format_name": outcome.format_name,
            "exhausted_by": outcome.exhausted_by,
            "review_id": outcome.review_id,
            "attempts": [attempt.to_dict() for attempt in outcome.attempts],
        }
    return {**request, **trace} if trace else request


async def _aclose(agen: AsyncIterator[Any]) -> None:
    close = getattr(agen, "aclose", None)
    if close is not None:
        try:
            await close()
        except Exception:  # noqa: BLE001 - closing a failed upstream must not mask the real error
            log.debug("error while closing an upstream stream", exc_info=True)


class ResponseStream:
    """The events of one response, in order; iterate once (``events()``, ``frames()`` or ``final()``)."""

    def __init__(
        self,
        service: ResponsesService,
        turn: Turn,
        caller: Caller,
        upstream: AsyncIterator[list[ModelEvent]],
        first: list[ModelEvent] | None,
        session: SessionTurn | None = None,
        *,
        failed: ApiError | None = None,
    ) -> None:
        self.service = service
        self.turn = turn
        self.caller = caller
        self.builder = ResponseBuilder(turn.base, response_id=turn.response_id)
        self.headers: dict[str, str] = {}  # to send with the HTTP response (gate warnings, safety-net outcome, session)
        self.error: ApiError | None = None  # why the response failed, if it did
        self._upstream = upstream
        self._first = first  # None: a background response, whose upstream call starts in _run
        self._failed = failed  # the turn already failed before its first event
        self._session = session
        self.cancel_requested = False  # set by the background runner before it cancels the task
        # Set by a consumer that watches its client: False while the client is known to be there (a
        # cancellation is then the server's own, e.g. a shutdown past its drain timeout), True once it left.
        self.client_gone: bool | None = None
        # Set by the server before it cancels a response it stops (a shutdown past the drain time: a
        # background or WebSocket response): the stream then ends with this error, stored as failed.
        self.interrupted: ApiError | None = None

    @property
    def response_id(self) -> str:
        return self.builder.id

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        # a consumer that stops early (closes it) ends the turn now, not at garbage collection
        return one_by_one(self._run(None))

    def frames(self, encode: Encoder, trailer: bytes = b"") -> AsyncIterator[bytes]:
        """The events encoded by ``encode`` (e.g. as SSE frames), one chunk per batch of model events;
        ``trailer`` (e.g. ``data: [DONE]``) ends the last chunk. Stored responses keep the frames for replay."""
        return self._run(encode, trailer)  # type: ignore[return-value]

    async def _run(self, encode: Encoder | None, trailer: bytes = b"") -> AsyncIterator[Any]:
        builder = self.builder
        saved = self.turn.store  # False too when the service has no store (build_turn): persist() is not called
        kept: list[bytes] | None = [] if encode is not None and saved else None

        def out(events: list[dict[str, Any]]) -> list[Any]:
            """The events as one item to yield: dict mode, the list of them; encoded mode, one chunk (one write downstream)."""
            if not events:
                return events
            if encode is None:
                return [events]
            chunk = b"".join([encode(event) for event in events])
            if kept is not None:
                kept.append(chunk)
            return [chunk]

        try:
            if self._first is None and self._failed is None:
                # Background: the upstream call has not started; the client sees the lifecycle now.
                builder.start(queued=True)
                builder.in_progress()
                for item in out(builder.drain()):
                    yield item
            else:
                # The lifecycle events leave together with the first batch (one write).
                builder.start()
                if encode is not None and self._failed is None and saved:
                    # A streaming client learns the id from response.created: store the response
                    # (in_progress) before that event leaves, so that it is fetchable while it runs
                    # and, after a crash mid-stream, recovered as failed instead of lost (404).
                    # The response.in_progress event's snapshot is the response as it stands.
                    await self.service.persist(builder, self.turn, self.caller, response=builder.events[-1]["response"])
            try:
                if self._failed is not None:
                    raise self._failed
                if self._first is None:
                    await self.service.persist(builder, self.turn, self.caller)
                    try:
                        self._first = await anext(self._upstream)
                        if self.turn.opaque:
                            self.service.report_opaque(self.turn)  # logged: a background turn sends no headers
                    except StopAsyncIteration:
                        raise upstream_without_events(self.turn.deployment.name) from None
                feed = builder.feed
                for model_event in self._first:
                    feed(model_event)
                    if builder.finished:
                        break
                if not builder.finished:
                    for item in out(builder.drain()):
                        yield item
                    async for batch in self._upstream:
                        for model_event in batch:
                            feed(model_event)
                            if builder.finished:
                                break
                        if builder.finished:
                            break
                        for item in out(builder.drain()):
                            yield item
                if not builder.finished:
                    raise ApiError.of(
                        ErrorCode.UPSTREAM_STREAM_TRUNCATED,
                        f"upstream '{self.turn.deployment.name}' ended its answer without finishing it",
                    )
            except ApiError as error:
                self.error = error
                builder.fail(error)
            except asyncio.CancelledError:
                if self.client_gone is not False and self.interrupted is None:
                    raise
                # The server cancels a response its client still waits for (a shutdown past the drain
                # timeout): the client gets error + response.failed (+ [DONE]), not a cut stream.
                self.error = self.interrupted or shutdown_error()
                builder.fail(self.error)
                final = out(builder.drain())
                await asyncio.shield(self.service.persist(builder, self.turn, self.caller, b"".join(kept) if kept is not None else None))
                if trailer:
                    final = [b"".join([*final, trailer])]
                for item in final:
                    yield item
                raise
            except Exception as error:  # noqa: BLE001 - any bug ends the stream cleanly, logged
                log.exception("response %s failed: %s", builder.id, type(error).__name__)
                self.error = internal()
                builder.fail(self.error)
            terminal = builder.drain()
            final = out(terminal)
            # Persist before the terminal event leaves: what the client sees complete is durable.
            # A failing store gets a short grace (a background response, nobody waiting, a long
            # one); then the answer, paid for, still goes out, marked not stored (docs/store.md).
            retry_for = BACKGROUND_SAVE_RETRY if self.turn.background else FOREGROUND_SAVE_GRACE
            if saved and not await self.service.persist(builder, self.turn, self.caller, b"".join(kept) if kept is not None else None, retry_for=retry_for):
                terminal = self._not_stored(terminal)
                final = [b"".join([encode(event) for event in terminal])] if encode is not None else [terminal]
            if self._session is not None:
                await self.service.end_session(self._session)
                self._session = None
            if trailer:
                final = [b"".join([*final, trailer])]
            for item in final:
                yield item
        finally:
            try:
                await _aclose(self._upstream)
            finally:
                # Also when a second cancellation (shutdown) interrupts the close above: never left in_progress.
                try:
                    if not builder.finished:
                        if self.cancel_requested:
                            builder.cancel()
                        elif self.interrupted is not None:  # stopped by the server while it could not tell the client
                            builder.fail(self.interrupted)
                        else:
                            # The client went away mid-stream: keep what was produced, marked failed.
                            builder.fail(client_disconnected("finished"))
                        out(builder.drain())  # the kept events (GET ?stream=true replay) end as the stored response does
                        await asyncio.shield(self.service.persist(builder, self.turn, self.caller, b"".join(kept) if kept else None))
                finally:
                    if self._session is not None:
                        session, self._session = self._session, None
                        await asyncio.shield(self.service.end_session(session))

    def _not_stored(self, terminal: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The terminal events of a response whose save failed: its ``store`` says false, and
        ``X-Orgate-Store-Error`` says why (a non-streaming answer's headers are not sent yet)."""
        self.headers[STORE_ERROR_HEADER] = "store_unavailable"
        return [{**event, "response": {**event["response"], "store": False}} if "response" in event else event for event in terminal]

    async def final(self) -> dict[str, Any]:
        """Drain the stream and return the final response (the non-streaming path)."""
        last: dict[str, Any] | None = None
        async for events in self._run(None):
            last = events[-1]
        assert last is not None and "response" in last
        return last["response"]
