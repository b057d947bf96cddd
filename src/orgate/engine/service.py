"""The responses service: run one turn from request to stored response, as one event stream.

``create()`` resolves the model and the context, calls the provider, and
awaits the provider's first event before returning, so that an upstream
failure that happens before any output (429, 5xx, refused connection) is an
HTTP error with the right status, not a failed stream. The returned
``ResponseStream`` yields spec event dicts; the terminal response is
persisted before the terminal event is yielded, so a response a client saw
complete is already durable. Non-streaming callers drain the same stream.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from orgate.engine.builder import ResponseBuilder
from orgate.engine.context import Turn, build_turn, item_to_wire, items_from_wire, normalize_input
from orgate.engine.input_gate import Policy, check_context
from orgate.neutral import Deployment, ModelEvent, ModelRequest, Provider
from orgate.protocol import CreateResponseBody
from orgate.protocol.errors import SERVER_ERROR, ApiError, invalid_request, not_found

log = logging.getLogger("orgate.engine")


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is asking: the API key's name, its tenant, and the models it may use (None = all)."""

    key_name: str
    tenant: str
    models: tuple[str, ...] | None = None


class HistoryStore(Protocol):
    """What the service needs of the response store."""

    async def context(self, response_id: str, tenant: str) -> list[dict[str, Any]] | None: ...

    async def get_item(self, item_id: str, tenant: str) -> dict[str, Any] | None: ...

    async def save(
        self,
        response: dict[str, Any],
        *,
        tenant: str,
        input_items: list[dict[str, Any]],
        previous_response_id: str | None,
        session_id: str | None,
        deployment: str | None,
        request: dict[str, Any],
        events: bytes | None = None,
    ) -> None: ...


ProviderFactory = Callable[[Deployment], Provider]


class Pipeline(Protocol):
    """Wraps a deployment's provider for one turn (safety net, tool guard); returns the provider and its outcome."""

    def open(self, turn: Turn, provider: Provider, budget: Any = None) -> tuple[Provider, Any]: ...


class ResponsesService:
    """Runs turns. Built once per app with its deployments, providers and (optional) store."""

    def __init__(
        self,
        deployments: Mapping[str, Deployment],
        providers: ProviderFactory,
        store: HistoryStore | None = None,
        gate_policy: Policy = "enforce",
        pipeline: Pipeline | None = None,
    ) -> None:
        self.deployments = deployments
        self.providers = providers
        self.store = store
        self.gate_policy: Policy = gate_policy
        self.pipeline = pipeline

    def resolve(self, model: str | None, caller: Caller) -> Deployment:
        if not model:
            raise invalid_request("Missing required parameter: 'model'.", param="model", code="missing_required_parameter")
        deployment = self.deployments.get(model)
        if deployment is None or (caller.models is not None and model not in caller.models):
            raise ApiError(404, f"The model '{model}' does not exist or you do not have access to it.", code="model_not_found", param="model")
        return deployment

    async def prepare(self, body: CreateResponseBody, caller: Caller, warnings: list[str] | None = None) -> Turn:
        deployment = self.resolve(body.model, caller)
        new_input = await self._resolve_references(normalize_input(body), caller)
        history: list[Any] = []
        if body.previous_response_id:
            if self.store is None:
                raise not_found(
                    f"Previous response with id '{body.previous_response_id}' not found (this server does not store responses).",
                    param="previous_response_id",
                )
            stored = await self.store.context(body.previous_response_id, caller.tenant)
            if stored is None:
                raise not_found(f"Previous response with id '{body.previous_response_id}' not found.", param="previous_response_id")
            history = items_from_wire(stored)
        warnings = [] if warnings is None else warnings
        check_context(history, new_input, self.gate_policy, warnings)
        turn = build_turn(body, deployment, new_input, history, store_enabled=self.store is not None)
        turn.warnings = warnings
        return turn

    async def _resolve_references(self, items: list[Any], caller: Caller) -> list[Any]:
        if not any(getattr(item, "type", "") in ("item_reference", None) and not hasattr(item, "role") for item in items):
            return items
        resolved: list[Any] = []
        for index, item in enumerate(items):
            if type(item).__name__ != "ItemReferenceParam":
                resolved.append(item)
                continue
            found = await self.store.get_item(item.id, caller.tenant) if self.store is not None else None
            if found is None:
                raise not_found(f"Item with id '{item.id}' not found.", param=f"input[{index}].id")
            resolved.extend(items_from_wire([found]))
        return resolved

    async def create(
        self, body: CreateResponseBody, caller: Caller, warnings: list[str] | None = None, *, budget: Any = None
    ) -> ResponseStream:
        """Start a turn. Raises ``ApiError`` for anything that fails before the first event."""
        turn = await self.prepare(body, caller, warnings)
        provider = self.providers(turn.deployment)
        outcome: Any = None
        if self.pipeline is not None:
            provider, outcome = self.pipeline.open(turn, provider, budget)
        upstream = provider.stream(turn.request)
        try:
            first = await anext(upstream)
        except StopAsyncIteration:
            raise ApiError(
                502, f"upstream '{turn.deployment.name}' ended its answer without any event", type=SERVER_ERROR, code="upstream_invalid_response"
            ) from None
        except BaseException:
            await _aclose(upstream)
            raise
        stream = ResponseStream(self, turn, caller, upstream, first)
        if outcome is not None and outcome.status != "passthrough" and outcome.status != "pending":
            stream.headers.update(outcome.headers())
        if turn.warnings:
            stream.headers["X-Orgate-Gate-Warnings"] = " | ".join(turn.warnings)
        return stream

    async def persist(self, builder: ResponseBuilder, turn: Turn, caller: Caller) -> None:
        if not turn.store or self.store is None:
            return
        response = builder.snapshot()
        await self.store.save(
            response,
            tenant=caller.tenant,
            input_items=[item_to_wire(item) for item in turn.new_input],
            previous_response_id=turn.base.get("previous_response_id"),
            session_id=None,
            deployment=turn.deployment.name,
            request=_request_record(turn.request),
        )


def _request_record(request: ModelRequest) -> dict[str, Any]:
    return {
        "model": request.model,
        "instructions": request.instructions,
        "max_output_tokens": request.max_output_tokens,
        "temperature": request.temperature,
        "top_p": request.top_p,
        "text_format": None if request.text_format is None else request.text_format.type,
    }


async def _aclose(agen: AsyncIterator[Any]) -> None:
    close = getattr(agen, "aclose", None)
    if close is not None:
        try:
            await close()
        except Exception:  # noqa: BLE001 - closing a failed upstream must not mask the real error
            log.debug("error while closing an upstream stream", exc_info=True)


class ResponseStream:
    """The events of one response, in order; iterate once."""

    def __init__(self, service: ResponsesService, turn: Turn, caller: Caller, upstream: AsyncIterator[ModelEvent], first: ModelEvent) -> None:
        self.service = service
        self.turn = turn
        self.caller = caller
        self.builder = ResponseBuilder(turn.base, response_id=turn.response_id)
        self.headers: dict[str, str] = {}  # to send with the HTTP response (gate warnings, safety-net outcome)
        self._upstream = upstream
        self._first = first
        self.error: ApiError | None = None  # why the response failed, if it did

    @property
    def response_id(self) -> str:
        return self.builder.id

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        return self._run()

    async def _run(self) -> AsyncIterator[dict[str, Any]]:
        builder = self.builder
        builder.start()
        for event in builder.drain():
            yield event
        try:
            try:
                builder.feed(self._first)
                if not builder.finished:
                    for event in builder.drain():
                        yield event
                    async for model_event in self._upstream:
                        builder.feed(model_event)
                        if builder.finished:
                            break
                        for event in builder.drain():
                            yield event
                if not builder.finished:
                    raise ApiError(
                        502,
                        f"upstream '{self.turn.deployment.name}' ended its answer without finishing it",
                        type=SERVER_ERROR,
                        code="upstream_stream_truncated",
                    )
            except ApiError as error:
                self.error = error
                builder.fail(error)
            except asyncio.CancelledError:
                raise
            except Exception as error:  # noqa: BLE001 - any bug ends the stream cleanly, logged
                log.exception("response %s failed: %s", builder.id, type(error).__name__)
                self.error = ApiError(500, "The server had an error while processing your request.", type=SERVER_ERROR, code="server_error")
                builder.fail(self.error)
            events = builder.drain()
            # Persist before the terminal event leaves: what the client sees complete is durable.
            try:
                await self.service.persist(builder, self.turn, self.caller)
            except ApiError as error:
                log.error("could not store response %s: %s", builder.id, error.message)
            for event in events:
                yield event
        finally:
            await _aclose(self._upstream)

    async def final(self) -> dict[str, Any]:
        """Drain the stream and return the final response (the non-streaming path)."""
        last: dict[str, Any] | None = None
        async for event in self:
            last = event
        assert last is not None and "response" in last
        return last["response"]
