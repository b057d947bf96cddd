"""One turn's plan: from a validated ``CreateResponseBody`` to the model request and the response
skeleton (``build_turn`` → ``Turn``), and the record of the turn once it runs (``TurnRun``).

The rules ``build_turn`` applies live beside it: what a body may hold (``request_body.py``),
which tools go upstream (``turn_tools.py``), the echoed response fields
(``response_echo.py``). History is given by the caller (the service reads the store, through
``history_items.py``); this module does no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from orgate.engine import ids
from orgate.engine.output_fit import check_output_fits, output_schemas
from orgate.engine.request_body import (
    check_capabilities,
    refuse_unknown_fields,
    text_format_of,
    wants_logprobs,
)
from orgate.engine.response_echo import response_skeleton
from orgate.engine.router import RouteTrace
from orgate.engine.turn_tools import (
    check_tool_choice,
    lift_additional_tools,
    mcp_tools,
    split_tools,
)
from orgate.neutral import Deployment, ModelRequest, Translation
from orgate.protocol import AdditionalToolsItemParam, CreateResponseBody
from orgate.protocol.errors import missing_required_parameter
from orgate.protocol.response import ResponseResource

if TYPE_CHECKING:
    from orgate.structured.outcome import Outcome


class Turn(NamedTuple):
    """The plan of one response: what was asked, and what was decided before the upstream is called.

    Built once by ``build_turn`` (the service makes an adjusted copy with ``_replace`` while it
    prepares the turn) and never changed after; its lists are not changed either. What happens
    once the upstream is called is the turn's ``TurnRun``. ``base`` is the response skeleton,
    which the ``ResponseBuilder`` owns from the response's first event on. A named tuple: as
    immutable as a frozen dataclass, without its per-field ``object.__setattr__`` on every
    request (hot path — see bench/instructions.py)."""

    deployment: Deployment
    request: ModelRequest
    base: ResponseResource  # the response skeleton (response_echo.py; see ResponseBuilder)
    new_input: list[Any]  # this request's own input items (protocol models), references resolved
    history: list[Any]  # items from previous_response_id / session
    response_id: str
    dropped_tools: list[tuple[str, str]]  # (param path, type) of hosted tools not sent
    mcp_tools: list[tuple[int, dict[str, Any]]]  # (tools index, tool) of type mcp: orgate runs them
    stream: bool = False
    store: bool = True
    background: bool = False
    history_unlinked: bool = (
        False  # history given by the caller (not the store): saved as input, unchained
    )
    session_id: str | None = None
    tenant: str = ""  # the caller's: a review queue entry the turn leaves is that tenant's
    opaque: tuple[
        Any, ...
    ] = ()  # the OpaqueItems of request.input (history items only one origin may take)
    mcp: Any = None  # the turn's MCP servers and approvals (engine/mcp_loop.py), set by the service
    # the stored response a conversation's turn continues (its echo names the conversation instead)
    parent: str | None = None
    # the compaction made before the model is called (compaction/on_create.py ServerCompaction)
    compacted: Any = None


@dataclass(slots=True)
class TurnRun:
    """The record of a turn once it runs: which route served it, what the safety net did, and the
    warnings a client gets in ``X-Orgate-Gate-Warnings`` (the gate's findings, then the
    upstream's)."""

    warnings: list[str] = field(default_factory=list)
    route: RouteTrace | None = None  # which deployment served the turn (engine/router.py)
    outcome: Outcome | None = None  # what the safety net did, when output checks ran


def build_turn(
    body: CreateResponseBody,
    deployment: Deployment,
    new_input: list[Any],
    history: list[Any],
    *,
    store_enabled: bool,
    previous_response_id: str | None = None,
    history_unlinked: bool = False,
    session_id: str | None = None,
    tenant: str = "",
    response_id: str | None = None,
    history_cached: bool = False,
) -> Turn:
    """Assemble the model request and the echoed response skeleton (``previous_response_id``:
    the response the turn continues, the request's own or its session's latest; ``response_id``:
    a background response run again keeps its id, a new turn gets one; ``history_cached``: a
    stored history is read through the history cache, so its items are the same objects next
    turn — a history the caller sent, ``history_unlinked``, is not)."""
    refuse_unknown_fields(body)
    context = [*history, *new_input]
    if not context:
        raise missing_required_parameter(
            "'input' is required (or a previous_response_id to continue).", param="input"
        )
    check_capabilities(deployment, new_input, body)
    sent = list(body.tools or ())
    lifted: list[Any] = []
    lifted_paths: list[str] = []
    if AdditionalToolsItemParam in map(type, context):  # compared in C: hot path
        context, lifted, lifted_paths = lift_additional_tools(context, len(history))
    if lifted:
        paths = [*(f"tools[{i}]" for i in range(len(sent))), *lifted_paths]
        tools, hosted_tools, dropped_tools = split_tools([*sent, *lifted], deployment, paths)
        dropped_tools += [
            (lifted_paths[i], "mcp")
            for i, t in enumerate(lifted)
            if getattr(t, "type", None) == "mcp"
        ]
    else:
        tools, hosted_tools, dropped_tools = split_tools(sent, deployment)
    requested_mcp = mcp_tools(sent) if sent else []
    check_tool_choice(body.tool_choice, tools, mcp=bool(requested_mcp))
    fmt = text_format_of(body)
    if (fmt is not None and fmt.schema is not None) or body.tools:
        check_output_fits(deployment, output_schemas(fmt.schema if fmt else None, body.tools))
    extra = body.model_extra or {}
    stop = extra.get("stop")
    reasoning = body.reasoning
    request = ModelRequest(
        model=deployment.upstream_model,
        input=context,
        instructions=body.instructions,
        tools=tools,
        hosted_tools=hosted_tools,
        tool_choice=body.tool_choice,
        temperature=body.temperature,
        top_p=body.top_p,
        presence_penalty=body.presence_penalty,
        frequency_penalty=body.frequency_penalty,
        max_output_tokens=body.max_output_tokens,
        parallel_tool_calls=body.parallel_tool_calls,
        max_tool_calls=body.max_tool_calls,
        text_format=fmt,
        reasoning_effort=reasoning.effort if reasoning else None,
        reasoning_summary=reasoning.summary
        if reasoning and deployment.capabilities.reasoning
        else None,
        user=extra.get("user"),
        safety_identifier=body.safety_identifier,
        prompt_cache_key=body.prompt_cache_key,
        verbosity=body.text.verbosity if body.text is not None else None,
        service_tier=body.service_tier if deployment.capabilities.service_tier else None,
        metadata=dict(body.metadata) if body.metadata else None,
        stop=[stop] if isinstance(stop, str) else stop,
        logprobs=wants_logprobs(body),
        top_logprobs=body.top_logprobs,
        history_length=len(history) if history_cached and not history_unlinked else 0,
    )
    if (
        dropped_tools
        or lifted_paths
        or request.service_tier != body.service_tier
        or (reasoning is not None and reasoning.summary and request.reasoning_summary is None)
    ):
        _note_engine_translations(request, body, dropped_tools, lifted_paths)
    store = store_enabled and body.store is not False
    base = response_skeleton(body, tools, fmt, previous_response_id, store, request.service_tier)
    return Turn(
        deployment=deployment,
        request=request,
        base=base,
        new_input=new_input,
        history=history,
        response_id=response_id or ids.response_id(),
        stream=bool(body.stream),
        store=store,
        background=bool(body.background),
        history_unlinked=history_unlinked,
        session_id=session_id,
        tenant=tenant,
        dropped_tools=dropped_tools,
        mcp_tools=requested_mcp,
    )


def _note_engine_translations(
    request: ModelRequest,
    body: CreateResponseBody,
    dropped_tools: list[tuple[str, str]],
    lifted_paths: list[str],
) -> None:
    """The ledger entries of what the turn itself translated: hosted tools not sent, tools of
    ``additional_tools`` items offered as tools, settings the deployment does not take."""
    ledger = request.ledger
    for path, kind in dropped_tools:
        ledger.note(Translation.HOSTED_TOOL_DROPPED, path, kind)
    for path in lifted_paths:
        ledger.note(Translation.ADDITIONAL_TOOLS_OFFERED, path)
    if body.service_tier is not None and request.service_tier is None:
        ledger.note(Translation.FIELD_DROPPED, "service_tier", str(body.service_tier))
    reasoning = body.reasoning
    if reasoning is not None and reasoning.summary and request.reasoning_summary is None:
        ledger.note(Translation.FIELD_DROPPED, "reasoning.summary", "no reasoning")


__all__ = ["Turn", "TurnRun", "build_turn"]
