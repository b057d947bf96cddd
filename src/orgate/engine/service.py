"""The responses service: run one turn from request to stored response, as one event stream.

``create()`` resolves the model and the context (``previous_response_id``,
``item_reference``, the session's latest response), calls the provider
through the output checks, and awaits the first model event before returning, so
that an upstream failure that happens before any output (429, 5xx, refused
connection) is an HTTP error with the right status, not a failed stream.
The returned ``ResponseStream`` yields spec event dicts (or SSE frames); the
terminal response is persisted before the terminal event is yielded, so a
response a client saw complete is already durable. Non-streaming callers
drain the same stream.

Sessions: a request in a session (header or ``user``), or in a conversation (the body's
``conversation``, which must exist; a session and a conversation are one thing), holds
the session's turn lease from ``create()`` until its response is stored; a second
concurrent request in the same session gets 409 ``session_busy``. A turn in a
conversation echoes ``conversation`` and no ``previous_response_id`` (OpenAI's shape);
the store chains it to the conversation's latest response all the same.

``generate: false`` stores a response with no output and asks no model; with
``context_management`` a turn over its threshold is compacted first
(``compaction/on_create.py``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from orgate.engine.approvals import ApprovalLedger, LocalApprovals
from orgate.engine.builder import ResponseBuilder
from orgate.engine.compaction.core import (
    estimate_request_tokens,
    estimate_tokens,
    expand,
    fit_context,
    has_compaction,
    model_view,
)
from orgate.engine.compaction.on_create import (
    CompactedProvider,
    ContextCompactor,
    ServerCompaction,
    threshold,
)
from orgate.engine.create_options import PLAIN, CreateOptions, create_options
from orgate.engine.history_cache import HistoryCache, read_history
from orgate.engine.history_items import item_to_wire, items_from_wire
from orgate.engine.input_gate import Policy, check_context, opaque_items, report_opaque
from orgate.engine.lifecycle import BackgroundLease, Ending, ResponseStream, shutdown_error
from orgate.engine.mcp_loop import McpLoop, McpRuntime, McpTurn
from orgate.engine.request_body import normalize_input
from orgate.engine.router import RouteTrace, TurnProviders, turn_providers
from orgate.engine.turn import Turn, TurnRun, build_turn
from orgate.engine.turn_tools import lift_additional_tools
from orgate.mcptools.items import has_mcp_items, read_context
from orgate.neutral import (
    Deployment,
    Finish,
    InputItem,
    Ledger,
    ModelEvent,
    ModelRequest,
    Provider,
    Translation,
    Usage,
    aclose_quietly,
    origin_of,
)
from orgate.protocol import CreateResponseBody, ItemReferenceParam
from orgate.protocol.errors import (
    ApiError,
    ErrorCode,
    client_disconnected,
    invalid_request,
    invalid_value,
    missing_required_parameter,
    model_not_found,
    not_found,
    translation_refused,
    unsupported_parameter,
    upstream_without_events,
)
from orgate.store.base import (
    ACTIVE_STATUSES,
    JobWrite,
    LeaseLost,
    ResponseConflict,
    ResponseStore,
    SessionBusy,
    SessionTurn,
    StoreError,
    UnknownResponse,
    UnknownSession,
)

if TYPE_CHECKING:  # the output checks' types: the engine passes them through, never builds them
    from orgate.structured.budget import BudgetOverride
    from orgate.structured.outcome import Outcome

log = logging.getLogger("orgate.engine")

GATE_WARNINGS_HEADER = (
    "X-Orgate-Gate-Warnings"  # the gate's findings under policy=warn (and dropped opaque items)
)
# What the turn translated on the way to its upstream (and back, as far as known when the
# response starts): the ledger's compact form (orgate.neutral.ledger, docs/translation.md).
TRANSLATION_HEADER = "X-Orgate-Translation"
# Ledger entries also shown as warnings, as they were before the ledger: "upstream: <detail>".
_WARNED = frozenset({Translation.REASONING_LEFT_OFF})


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is asking: the API key's name, its tenant, the models it may use (None = all), and
    whether it is an admin key (sees every tenant where a route says so: the review queue)."""

    key_name: str
    tenant: str
    models: tuple[str, ...] | None = None
    admin: bool = False


ProviderFactory = Callable[[Deployment], Provider]


@dataclass(frozen=True, slots=True)
class Resume:
    """A background response run again by the process that took its lease over (engine/
    background.py): its id, creation time and lease token, and the session lease it holds
    (its ``latest_response_id`` the response it continues)."""

    response_id: str
    created_at: int
    token: str
    session: SessionTurn | None


class OutputChecks(Protocol):
    """The checks of model output (safety net, tool guard; ``server/output_checks.py``): wrap a
    deployment's provider for one turn, and give the wrapped provider and the net's outcome."""

    def open(
        self, turn: Turn, provider: Provider, budget: BudgetOverride | None = None
    ) -> tuple[Provider, Outcome | None]: ...


_REFUSALS = (
    UnknownResponse,
    ResponseConflict,
    SessionBusy,
)  # a save the store refused: retrying cannot help


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
        output_checks: OutputChecks | None = None,
        ttl_seconds: float | None = None,
        compaction_key: bytes | None = None,
        mcp: McpRuntime | None = None,
        refuse_translations: frozenset[str] = frozenset(),
        background_lease_seconds: float = 30.0,
        history_cache: HistoryCache | None = None,
    ) -> None:
        self.mcp = mcp  # the MCP servers the operator allows (None: none configured)
        self.deployments = deployments
        self.providers = turn_providers(providers)  # a Router, or a plain factory (no routes)
        self.store = store
        self.gate_policy: Policy = gate_policy
        self.output_checks = output_checks
        self.ttl_seconds = ttl_seconds
        self.compaction_key = compaction_key  # opens `compaction` input items (see prepare)
        # translation codes and kinds refused rather than done ([translation] refuse)
        self.refuse_translations = refuse_translations
        # how long a background response's lease lasts unrenewed ([store] background_lease_seconds)
        self.background_lease_seconds = background_lease_seconds
        # compacts a turn over its `context_management` threshold (the compaction service)
        self.compactor: ContextCompactor | None = None
        self._local_approvals = LocalApprovals()  # claims without a store: this process only
        # decoded histories of stored chains kept between turns (None: each turn reads its all)
        self.history_cache = history_cache

    @property
    def approvals(self) -> ApprovalLedger:
        """Where answered MCP approvals are claimed: the store (opened once the app started),
        shared by every process and machine that serves it."""
        return self.store if self.store is not None else self._local_approvals

    def _open(self, deployment: Deployment, prefer: str | None) -> tuple[Provider, RouteTrace]:
        """The provider for one turn; ``prefer`` = the session's last deployment
        (prompt-cache locality)."""
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
        session_id: str | None = None,
        history_override: list[dict[str, Any]] | None = None,
        response_id: str | None = None,
        options: CreateOptions = PLAIN,
        fit: bool = True,
    ) -> Turn:
        """The turn's plan: model, context (history, references, compaction items), gate checks
        (findings appended to ``warnings``), model request and response skeleton."""
        deployment = self.resolve(body.model, caller)
        own_input = normalize_input(body)
        new_input = await self.resolve_references(own_input, caller)
        if self.compaction_key is not None:
            new_input = expand(new_input, self.compaction_key, context=caller.tenant)
        # item_reference resolved from the store, or compaction items opened
        # (they may hold extension items)
        unsealed = new_input is not own_input
        previous = body.previous_response_id
        if previous is None and session is not None and session.latest_response_id:
            previous = session.latest_response_id
        history: list[InputItem] = []
        if previous or history_override is not None:
            history = await self._history(
                previous, caller, history_override, session, options.conversation
            )
        warnings = [] if warnings is None else warnings
        check_context(history, new_input, self.gate_policy, warnings, body.tools)
        model_input = new_input
        if options is PLAIN and not unsealed and not history:  # the common request: no more to plan
            turn = build_turn(
                body,
                deployment,
                new_input,
                history,
                store_enabled=self.store is not None,
                previous_response_id=previous,
                history_unlinked=history_override is not None,
                session_id=session_id,
                tenant=caller.tenant,
                response_id=response_id,
                history_cached=self.history_cache is not None,
            )
        else:
            turn, model_input = await self._planned(
                body, caller, deployment, options, history, new_input, previous, session_id,
                history_override is not None, response_id,
            )  # fmt: skip
        request, mcp = turn.request, None
        if turn.mcp_tools or has_mcp_items(request.input):
            request, mcp = self._prepare_mcp(turn, body, turn.history, model_input)
        for path, kind in turn.dropped_tools:
            warnings.append(
                f"{path}: dropped tool of type {kind} (no upstream of '{deployment.name}' runs it)"
            )
            log.warning(
                "tools: dropped %s of type %s for model %s (no upstream runs it)",
                path,
                kind,
                deployment.name,
            )
        if fit:
            request = _fit(request, body, deployment)
        # only stored items (history, references, compaction items) can be opaque
        opaque = opaque_items(request.input) if history or unsealed or turn.compacted else ()
        if turn.background and not turn.store:
            raise invalid_request(
                "background responses must be stored: remove store=false (or enable the store).",
                param="background",
            )
        if request is not turn.request or mcp is not None or opaque:
            turn = turn._replace(request=request, mcp=mcp, opaque=opaque)
        if self.refuse_translations:
            refuse_translations(request.ledger, self.refuse_translations)
        return turn

    async def _history(
        self,
        previous: str | None,
        caller: Caller,
        history_override: list[dict[str, Any]] | None,
        session: SessionTurn | None = None,
        conversation: str | None = None,
    ) -> list[Any]:
        """The turn's context before its own input: the caller's (a WebSocket connection's cache),
        or the stored chain that ends with ``previous`` (a session's: without the items deleted
        from its conversation)."""
        if history_override is not None:
            return items_from_wire(history_override)
        assert previous is not None, "asked with a previous response or a history of its own"
        hidden = (
            session.hidden if session is not None and previous == session.latest_response_id else ()
        )
        if self.history_cache is not None and self.store is not None:
            return await self._cached_history(previous, caller, hidden, conversation)
        stored = None
        if self.store is not None:
            try:
                if hidden:
                    pairs = await self.store.context_items(previous, caller.tenant)
                    gone = set(hidden)
                    stored = None if pairs is None else [i for k, i in pairs if k not in gone]
                else:
                    stored = await self.store.context(previous, caller.tenant)
            except StoreError as exc:
                raise store_failure(exc) from None
        if stored is None:
            raise _lost(previous, conversation)
        return items_from_wire(stored)

    async def _cached_history(
        self, previous: str, caller: Caller, hidden: Sequence[str], conversation: str | None
    ) -> list[Any]:
        """``_history`` through the process's cache of decoded histories (``history_cache``):
        the same items, or the same 404, as reading the whole chain would give."""
        assert self.store is not None and self.history_cache is not None
        try:
            history = await read_history(self.store, self.history_cache, previous, caller.tenant)
        except StoreError as exc:
            raise store_failure(exc) from None
        if history is None:
            raise _lost(previous, conversation)
        return history.without(hidden)

    async def _planned(
        self,
        body: CreateResponseBody,
        caller: Caller,
        deployment: Deployment,
        options: CreateOptions,
        history: list[InputItem],
        new_input: list[InputItem],
        previous: str | None,
        session_id: str | None,
        unlinked: bool,
        response_id: str | None,
    ) -> tuple[Turn, list[Any]]:
        """The turn of a request with more to plan than its own input: what the model reads of
        the history and input (from the latest compaction made on create on, or a compaction
        made now, over the ``context_management`` threshold), and what the extra create fields
        decided (``_with_options``). Returns it with the new input the model reads."""
        parent = None  # the stored response a conversation's turn continues (not echoed)
        if options.conversation is not None:
            parent, previous = previous, None
        model_history, model_input = history, new_input
        if self.compaction_key is not None:
            model_history, model_input = self._model_view(history, new_input, caller)
        compacted = None
        if options.compaction and options.generate:
            compacted = await self._compact(
                body, caller, deployment, options, model_history, model_input
            )
            if compacted is not None:
                model_history, model_input = [], compacted.items
        turn = build_turn(
            body,
            deployment,
            model_input,
            model_history,
            store_enabled=self.store is not None,
            previous_response_id=previous,
            history_unlinked=unlinked,
            session_id=session_id,
            tenant=caller.tenant,
            response_id=response_id,
            history_cached=self.history_cache is not None,
        )
        if options.conversation is not None and not turn.store:
            raise invalid_value(
                "A turn in a conversation is stored in it: remove store=false (or the "
                "conversation).",
                param="store",
            )
        return self._with_options(turn, options, new_input, parent, compacted), model_input

    def _model_view(
        self, history: list[InputItem], new_input: list[InputItem], caller: Caller
    ) -> tuple[list[Any], list[Any]]:
        """History and input as the model reads them: from the latest compaction made on create
        on (``compaction.model_view``); the lists themselves when there is none."""
        assert self.compaction_key is not None
        if not (has_compaction(history) or has_compaction(new_input)):
            return history, new_input
        return model_view(
            history, new_input, self.compaction_key, context=caller.tenant, read=items_from_wire
        )

    async def _compact(
        self,
        body: CreateResponseBody,
        caller: Caller,
        deployment: Deployment,
        options: CreateOptions,
        history: list[InputItem],
        new_input: list[InputItem],
    ) -> ServerCompaction | None:
        """The turn's compaction (``context_management``) when its context passes the threshold."""
        limit = threshold(options.compact_threshold, deployment)
        context = [*history, *new_input]
        if estimate_tokens(context, body.instructions) <= limit:
            return None
        if self.compactor is None or self.compaction_key is None:
            raise unsupported_parameter(
                "context_management: compaction is not available on this server.",
                param="context_management",
            )
        return await self.compactor.compact_context(context, body, caller)

    @staticmethod
    def _with_options(
        turn: Turn,
        options: CreateOptions,
        new_input: list[InputItem],
        parent: str | None,
        compacted: ServerCompaction | None,
    ) -> Turn:
        """The turn with what the extra create fields decided: its own input as the client sent it
        (the model may read another view of it), the conversation it runs in, the compaction."""
        if options.conversation is not None:
            turn.base["conversation"] = {"id": options.conversation}
        return turn._replace(new_input=new_input, parent=parent, compacted=compacted)

    def _prepare_mcp(
        self,
        turn: Turn,
        body: CreateResponseBody,
        history: list[InputItem],
        new_input: list[InputItem],
    ) -> tuple[ModelRequest, McpTurn | None]:
        """The model request with MCP items as the function calls they were
        (``orgate.mcptools.items``),
        and the turn's MCP servers (a 400/403 for one the caller may not use) and answered
        approvals."""
        model_input, pending = read_context(history, new_input, self._trusted_mcp_output)
        model_input = lift_additional_tools(model_input)[
            0
        ]  # their tools are offered already (build_turn)
        request = dataclasses.replace(turn.request, input=model_input)
        uses = []
        if turn.mcp_tools:
            if self.mcp is None:
                index = turn.mcp_tools[0][0]
                raise ApiError.of(
                    ErrorCode.UNKNOWN_MCP_SERVER,
                    f"tools[{index}]: no MCP server is configured on this gateway.",
                    param=f"tools[{index}].server_label",
                )
            uses = self.mcp.registry.resolve(turn.mcp_tools, turn.tenant)
        labels = {use.server.label for use in uses}
        for answer in pending:
            if answer.request.server_label not in labels:
                raise invalid_value(
                    f"{answer.param}: the approved call is for the MCP server "
                    f"'{answer.request.server_label}', which is not in this request's "
                    "tools.",
                    param=answer.param,
                )
        if not uses:
            return request, None
        assert self.mcp is not None
        budget = body.max_tool_calls if body.max_tool_calls is not None else self.mcp.max_tool_calls
        return request, McpTurn(
            uses, pending, budget, turn.tenant, turn.response_id, self.approvals
        )

    def _trusted_mcp_output(self, label: str) -> bool:
        """Whether the operator vouches for what that MCP server returns (``trust_output``)."""
        server = self.mcp.registry.servers.get(label) if self.mcp is not None else None
        return server is not None and server.trust_output

    async def count_input_tokens(
        self, body: CreateResponseBody, caller: Caller
    ) -> tuple[int, bool]:
        """The input tokens of what ``body`` would send the model (history, conversation and
        references resolved, as ``create`` would) and whether the count is the upstream's own
        (else an estimate: ``compaction.estimate_request_tokens``). No model is called."""
        options = create_options(body)
        session = None
        if options.conversation is not None:
            session = await self._conversation_state(caller, options.conversation)
        turn = await self.prepare(body, caller, [], session=session, options=options, fit=False)
        counted = await self.providers.primary(turn.deployment).count_input_tokens(turn.request)
        if counted is not None:
            return counted, True
        return estimate_request_tokens(turn.request), False

    async def _conversation_state(self, caller: Caller, conversation: str) -> SessionTurn:
        """A conversation's latest response and deleted items, read without taking its turn."""
        found = None
        if self.store is not None:
            try:
                found = await self.store.get_conversation(conversation, caller.tenant)
            except StoreError as exc:
                raise store_failure(exc) from None
        if found is None:
            raise conversation_not_found(conversation, param="conversation")
        return SessionTurn(
            caller.tenant, conversation, "", found.latest_response_id, None, 0.0, found.hidden
        )

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

    async def begin_session(
        self, caller: Caller, session_id: str | None, *, conversation: bool = False
    ) -> SessionTurn | None:
        """Claim the session's turn (409 ``session_busy`` while another holds it). A
        ``conversation`` must exist already (404 ``conversation_not_found``)."""
        if session_id is None:
            return None
        if self.store is None:
            if conversation:
                raise conversation_not_found(session_id, param="conversation")
            return None
        try:
            return await self.store.begin_session_turn(
                caller.tenant, session_id, create=not conversation
            )
        except SessionBusy:
            raise session_busy(
                session_id, param="conversation" if conversation else "session"
            ) from None
        except UnknownSession:
            raise conversation_not_found(session_id, param="conversation") from None
        except StoreError as exc:
            raise store_failure(exc) from None

    async def end_session(self, session: SessionTurn | None) -> None:
        if session is None or self.store is None:
            return
        try:
            await self.store.end_session_turn(session)
        except StoreError:
            log.warning(
                "could not release session %s (the store retries in the background)",
                session.session_id,
                exc_info=True,
            )

    async def create(
        self,
        body: CreateResponseBody,
        caller: Caller,
        warnings: list[str] | None = None,
        *,
        budget: BudgetOverride | None = None,
        session_id: str | None = None,
        history_override: list[dict[str, Any]] | None = None,
        rerun: dict[str, Any] | None = None,
        resume: Resume | None = None,
    ) -> ResponseStream:
        """Start a turn. Raises ``ApiError`` for anything that fails before the first event.

        A background turn given ``rerun`` (what is needed to run it again) is leased in the
        store with its queued save, so that another process can run it if this one dies;
        ``resume`` runs such a response again, under the lease taken over."""
        options = create_options(body) if body.model_extra else PLAIN
        if options is not PLAIN and options.conversation is not None:
            session_id = options.conversation  # the body's conversation wins over header and `user`
        if resume is not None:
            session = resume.session
        else:
            session = (
                await self.begin_session(
                    caller, session_id, conversation=options.conversation is not None
                )
                if session_id is not None
                else None
            )
        run = TurnRun([] if warnings is None else warnings)
        try:
            turn = await self.prepare(
                body,
                caller,
                run.warnings,
                session=session,
                session_id=session_id,
                history_override=history_override,
                response_id=resume.response_id if resume is not None else None,
                options=options,
            )
            upstream = self._call(turn, run, session, budget) if options.generate else _nothing()
            if turn.background:
                return await self._background(turn, run, caller, upstream, session, rerun, resume)
            # The first batch, so that a failure before any output is an HTTP error.
            try:
                first = await anext(upstream)
            except BaseException as exc:
                await self._no_first_batch(turn, upstream, exc)
            if options.generate:
                self._answered(turn, run)
        except BaseException:
            await self.end_session(session)
            raise
        stream = ResponseStream(self, turn, run, caller, upstream, first, session)
        self._set_headers(stream, session_id)
        return stream

    def _call(
        self, turn: Turn, run: TurnRun, session: SessionTurn | None, budget: BudgetOverride | None
    ) -> AsyncIterator[list[ModelEvent]]:
        """The turn's upstream call, not started yet: the routed provider inside the output checks
        (safety net, tool guard) and the MCP loop, as batches of model events."""
        provider, run.route = self._open(
            turn.deployment, session.deployment if session is not None else None
        )
        if self.output_checks is not None:
            provider, run.outcome = self.output_checks.open(turn, provider, budget)
        if turn.mcp is not None:
            assert self.mcp is not None
            provider = McpLoop(provider, turn.mcp, self.mcp)
        if turn.compacted is not None:
            provider = CompactedProvider(provider, turn.compacted)
        return provider.stream_batches(turn.request)

    async def _background(
        self,
        turn: Turn,
        run: TurnRun,
        caller: Caller,
        upstream: AsyncIterator[list[ModelEvent]],
        session: SessionTurn | None,
        rerun: dict[str, Any] | None,
        resume: Resume | None,
    ) -> ResponseStream:
        """A background response's stream: leased and stored queued, or (``resume``) under the
        lease taken over, its queued record already stored."""
        created_at = resume.created_at if resume is not None else None
        stream = ResponseStream(
            self, turn, run, caller, upstream, None, session, created_at=created_at
        )
        lease_seconds = self.background_lease_seconds
        if resume is not None:
            stream.lease = BackgroundLease(resume.token, lease_seconds)
            return stream
        if rerun is not None and self.store is not None:
            token = session.token if session is not None else None
            stream.lease = BackgroundLease(uuid.uuid4().hex, lease_seconds, rerun, token)
        return await self._queue(stream)

    async def _queue(self, stream: ResponseStream) -> ResponseStream:
        """A background response stored ``queued``; its work starts in its own task, nothing is
        asked of the model yet. One that cannot be stored (so never fetched, continued nor
        cancelled) is refused now, 503."""
        stream.builder.status = "queued"
        try:
            await self.persist(stream, required=True)
        except asyncio.CancelledError:
            # The client left (or the server stops) during that save, which may still land:
            # no job will ever run this response, so it is stored failed, not left queued.
            stream.builder.fail(client_disconnected("started"))
            await asyncio.shield(self.persist(stream))
            raise
        return stream

    async def _no_first_batch(
        self, turn: Turn, upstream: AsyncIterator[list[ModelEvent]], exc: BaseException
    ) -> NoReturn:
        """The call failed before its first batch: raised (an HTTP error), the call closed.

        A streamed request too: the safety net's or the tool guard's spent budget
        (``structured_output_invalid``…) is then a 400 before the stream, not a
        ``response.failed`` in it, which Codex (and the Vercel AI SDK for a 5xx) would send
        again on its own (docs/structured-output.md#when-the-budget-is-spent)."""
        if isinstance(exc, StopAsyncIteration):
            raise upstream_without_events(turn.deployment.name) from None
        await aclose_quietly(upstream)
        raise exc

    def _answered(self, turn: Turn, run: TurnRun) -> None:
        """The upstream answered: the opaque history items its provider left out, and what the
        provider changed to make the request acceptable, go to the warnings."""
        if turn.opaque:
            self.report_opaque(turn, run)
        ledger = turn.request.ledger
        if ledger:
            run.warnings.extend(f"upstream: {e.detail}" for e in ledger if e.code in _WARNED)

    def _set_headers(self, stream: ResponseStream, session_id: str | None) -> None:
        turn, run = stream.turn, stream.run
        outcome = run.outcome
        # Every answer to a format says what the net did, a passed-through tool call included.
        if (
            outcome is not None
            and outcome.status != "pending"
            and (outcome.status != "passthrough" or turn.request.text_format is not None)
        ):
            stream.headers.update(outcome.headers())
        if run.warnings:
            stream.headers[GATE_WARNINGS_HEADER] = " | ".join(run.warnings)
        ledger = turn.request.ledger
        if ledger:
            stream.headers[TRANSLATION_HEADER] = ledger.header()
        if session_id is not None:
            stream.headers["X-Session-Id"] = session_id

    def served(self, turn: Turn, run: TurnRun) -> Deployment:
        """The deployment whose answer the turn streams (a routed model's fallback,
        if one answered)."""
        return self.providers.served(
            turn.deployment, run.route.served_by if run.route is not None else None
        )

    def history_output(
        self, builder: ResponseBuilder, turn: Turn, run: TurnRun
    ) -> list[dict[str, Any]] | None:
        """The output items the history keeps when they differ from the spec ``output`` (else None):
        extension items included, reasoning marked with the origin that made its
        ``encrypted_content``."""
        if not builder.history_differs:
            return None
        return builder.output_items(origin_of(self.served(turn, run)))

    def report_opaque(self, turn: Turn, run: TurnRun) -> None:
        """Once the upstream answered: warn about the opaque history items its provider left
        out, and note them in the ledger."""
        served = self.served(turn, run)
        report_opaque(turn.opaque, served, self.gate_policy, run.warnings)
        origin = origin_of(served)
        for item in turn.opaque:
            if item.origin != origin:
                turn.request.ledger.note(
                    Translation.EXTENSION_ITEM_DROPPED, "history", item.item_type
                )

    async def persist(
        self,
        stream: ResponseStream,
        events: bytes | None = None,
        *,
        response: dict[str, Any] | None = None,
        required: bool = False,
        retry_for: float = 0.0,
    ) -> bool:
        """Save the stream's response (``response``: a snapshot of it as it stands,
        when the caller has one).

        True when it is stored (or is not to be stored). A store failure is retried with
        backoff for ``retry_for`` seconds (the save is an idempotent upsert), then logged and
        False, or with ``required`` raised as 503 ``store_unavailable``."""
        if not stream.turn.store or self.store is None:
            return True
        if stream.lease is not None and stream.lease.lost:
            return False  # another process runs it now: nothing of this attempt is saved
        clock = asyncio.get_running_loop().time
        deadline, delay = clock() + retry_for, 0.1
        while True:
            try:
                await self._save(stream, events, response)
                return True
            except UnknownResponse:
                # The previous response was deleted while this turn ran: keep the answer, unchained.
                log.warning(
                    "previous response of %s vanished; storing it without its chain",
                    stream.builder.id,
                )
                # re-snapshot without the vanished link (turn.base is the builder's)
                stream.builder.unlink_previous()
                stream.turn = stream.turn._replace(parent=None)
                response, deadline, delay = None, clock() + retry_for, 0.1
            except LeaseLost:
                assert stream.lease is not None
                stream.lease.lost = True
                log.warning(
                    "background response %s was taken over by another process: this attempt "
                    "is not saved",
                    stream.builder.id,
                )
                return False
            except StoreError as exc:
                left = deadline - clock()
                if isinstance(exc, _REFUSALS) or left <= 0:
                    return _save_failed(stream.builder.id, exc, required)
                await asyncio.sleep(min(delay, left))
                delay = min(delay * 2, 5.0)

    async def _save(
        self, stream: ResponseStream, events: bytes | None, response: dict[str, Any] | None
    ) -> None:
        """One save of the response as it stands (or ``response``),
        with what every save of the turn stores."""
        assert self.store is not None
        builder, turn, run = stream.builder, stream.turn, stream.run
        if (
            stream.record is None
        ):  # a turn is saved up to three times (queued / in progress, final): built once
            stream.record = _stored_request(turn)
        input_items, request = stream.record
        body = (
            response
            if response is not None
            else builder.final
            if builder.final is not None
            else builder.snapshot()
        )
        await self.store.save(
            body,
            tenant=stream.caller.tenant,
            input_items=input_items,
            previous_response_id=None
            if turn.history_unlinked
            else turn.parent or turn.base.get("previous_response_id"),
            session_id=turn.session_id,
            deployment=(run.route.served_by if run.route is not None else None)
            or turn.deployment.name,
            request=_with_trace(request, run, turn.request.ledger),
            events=events,
            expires_at=builder.created_at + self.ttl_seconds if self.ttl_seconds else None,
            output_items=self.history_output(builder, turn, run),
            job=None if stream.lease is None else _job_write(stream.lease, body["status"]),
        )


async def _nothing() -> AsyncIterator[list[ModelEvent]]:
    """The answer of a turn with ``generate: false``: no output, no tokens, no model asked."""
    yield [Finish("stop", Usage())]


def session_busy(session_id: str, *, param: str) -> ApiError:
    """409: another request of the session (conversation) holds its turn."""
    return ApiError.of(
        ErrorCode.SESSION_BUSY,
        f"Session '{session_id}' already has a response in progress; send the next turn when "
        "it is done.",
        param=param,
    )


def conversation_not_found(conversation_id: str, *, param: str) -> ApiError:
    return ApiError.of(
        ErrorCode.CONVERSATION_NOT_FOUND,
        f"Conversation with id '{conversation_id}' not found.",
        param=param,
    )


def conversation_lost(conversation_id: str, response_id: str | None) -> ApiError:
    """404: the conversation's history broke (a response of its chain deleted or expired)."""
    return ApiError.of(
        ErrorCode.CONVERSATION_NOT_FOUND,
        f"Conversation '{conversation_id}' lost its items: response '{response_id}' of its "
        "history was deleted or has expired.",
        param="conversation",
    )


def _lost(previous: str | None, conversation: str | None) -> ApiError:
    """404: the stored history a turn continues is gone (deleted, expired, another tenant's)."""
    if conversation is not None:
        return conversation_lost(conversation, previous)
    return not_found(
        f"Previous response with id '{previous}' not found.", param="previous_response_id"
    )


def _fit(request: ModelRequest, body: CreateResponseBody, deployment: Deployment) -> ModelRequest:
    """The request within the deployment's context window: with truncation "auto" the model gets
    the most recent turns (storage keeps everything); "disabled" fails rather than drop context."""
    window = deployment.capabilities.context_window
    if (
        window is None
    ):  # unknown: everything goes (fit_context's own answer, without the call on the hot path)
        return request
    fit = fit_context(
        request.input,
        context_window=window,
        truncation=body.truncation,
        instructions=body.instructions,
        reserve=body.max_output_tokens or 0,
    )
    return dataclasses.replace(request, input=fit.items) if fit.dropped else request


def _job_write(lease: BackgroundLease, status: str) -> JobWrite:
    """What a save in ``status`` does to the lease: the queued save takes it, a save in progress
    keeps it, the final save ends the job."""
    if status == "queued":
        return JobWrite(
            lease.token, "lease", lease.lease_seconds, lease.request, lease.session_token
        )
    return JobWrite(lease.token, "hold" if status in ACTIVE_STATUSES else "finish")


def _save_failed(response_id: str, exc: StoreError, required: bool) -> bool:
    """A save that failed for good: 503 when it was ``required``, else logged and False."""
    if required:
        raise store_failure(exc) from None
    log.error("could not store response %s: %s", response_id, exc)
    return False


def _stored_request(turn: Turn) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """What every save of a turn stores of its request: its input items, the request record."""
    input_items = [item_to_wire(item) for item in turn.new_input]
    if (
        turn.history_unlinked
    ):  # history came from the caller (WebSocket connection cache), not the store
        input_items = [*(item_to_wire(item) for item in turn.history), *input_items]
    return input_items, _request_record(turn)


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


def refuse_translations(ledger: Ledger, refuse: frozenset[str]) -> None:
    """The ledger under a deployment's refuse policy: 400 for the first entry it names (the
    providers check again once their mapping noted its own, before the upstream is called)."""
    ledger.refuse = refuse
    entry = ledger.refused()
    if entry is not None:
        code = entry.code
        raise translation_refused(code.value, code.kind, entry.path, entry.detail)


def _with_trace(request: dict[str, Any], run: TurnRun, ledger: Ledger) -> dict[str, Any]:
    """The stored request record plus what an inspection of the response wants and no header
    keeps: the route when it took more than one upstream call (retries, fallbacks), what
    the safety net did for a structured-output request, and the translation ledger. A plain
    turn adds nothing."""
    route, outcome = run.route, run.outcome
    trace: dict[str, Any] = {}
    if ledger:
        trace["translation"] = [entry.as_dict() for entry in ledger]
    if route is not None and (len(route.attempts) > 1 or any(a.error for a in route.attempts)):
        trace["route"] = {
            "served_by": route.served_by,
            "attempts": [{"deployment": a.deployment, "error": a.error} for a in route.attempts],
        }
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


__all__ = [  # the engine's façade: the lifecycle's types are used through it
    "BackgroundLease",
    "Caller",
    "Ending",
    "conversation_lost",
    "conversation_not_found",
    "session_busy",
    "ResponseStream",
    "ResponsesService",
    "Resume",
    "TRANSLATION_HEADER",
    "refuse_translations",
    "shutdown_error",
    "store_failure",
]
