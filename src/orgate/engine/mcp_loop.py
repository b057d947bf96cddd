"""The MCP tool loop inside one response: list → offer → gate → permission → call → model again.

``McpLoop`` wraps the turn's provider (outside the safety net and the tool guard,
which see the MCP tools as the function tools they are to the model). It:

1. lists each server's tools (``McpListStart``/``McpListDone``: an ``mcp_list_tools``
   item), and offers those the operator and the request allow as function tools
   named ``<label>__<tool>``;
2. acts on the client's answered approvals first (``orgate.mcptools.items.Pending``), each
   claimed before anything runs so that it is acted on at most once (``engine/approvals.py``:
   a replay gets the recorded outcome, or a 409 while another response acts on it);
3. asks the model; a call of an MCP function is held back from the client and goes
   through the replay gate (status, arguments, the tool's ``inputSchema``), then the
   permission decision (``require_approval``); only then does it run, with the server's
   timeout (``McpCallStart``/``McpCallDone``: an ``mcp_call`` item);
4. gives the model what it said in that round (its text) and each call with its output
   (or error) as a ``function_call`` + ``function_call_output`` pair, and asks again,
   until it answers, a call needs
   approval (an ``mcp_approval_request`` item ends the response), or
   ``max_tool_calls`` calls have run. What a server returned is marked as untrusted data
   (``orgate.mcptools.items.untrusted``); once the model has read such output, a call of a
   server with ``approval_after_untrusted`` asks for approval, whatever ``require_approval``.

A refused or denied call is an ``mcp_call`` with an error that the model reads; it
never runs. Failures of a server are values (``orgate.mcptools.client``). The
events go to the one ``ResponseBuilder``: streaming and non-streaming see the same
items. Closing the stream (a client that left) cancels a running call.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging
import re
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from orgate.engine.approvals import (
    Answer,
    ApprovalLedger,
    LocalApprovals,
    claim_answers,
    outcome,
    release_quietly,
    settle_quietly,
    unknown_outcome,
)
from orgate.gate import Code, ToolsError, check, load_tools
from orgate.mcptools.client import REFUSED, CallResult, McpClient, McpTool, protocol_error
from orgate.mcptools.items import Pending, Source, call_output, from_server
from orgate.mcptools.servers import McpRegistry, McpUse
from orgate.neutral import (
    Finish,
    FinishReason,
    McpApproval,
    McpCallDone,
    McpCallStart,
    McpListDone,
    McpListStart,
    ModelEvent,
    ModelRequest,
    Provider,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    Usage,
    WrapperProvider,
)
from orgate.protocol import (
    AssistantMessageItemParam,
    FunctionCallItemParam,
    FunctionCallOutputItemParam,
    FunctionToolParam,
)

log = logging.getLogger("orgate.mcp")
audit = logging.getLogger("orgate.mcp.audit")

#: How long another response's claim of an approval for a server no longer configured may stay
#: unsettled (the configured servers' own timeouts decide otherwise).
_DEFAULT_LEASE = 300.0

_FUNCTION_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
GATE_REFUSED = REFUSED  # JSON-RPC "invalid params": orgate refused the call, which did not run


@dataclass(frozen=True, slots=True)
class CallRecord:
    """One MCP call decision, for the audit log and the metrics."""

    tenant: str
    server: str
    tool: str
    arguments_sha256: str
    # ok | tool_error | failed | cancelled | refused | denied | approval_requested | over_budget
    # | replayed (an answered approval another response acted on: its outcome, not run again)
    outcome: str
    duration: float
    approval_request_id: str | None
    response_id: str


@dataclass(slots=True)
class McpRuntime:
    """Built once per app: the servers, the client (its tool-list cache), what records a call."""

    registry: McpRegistry
    client: McpClient = field(default_factory=McpClient)
    max_tool_calls: int = 16
    on_call: Callable[[CallRecord], None] | None = None
    on_list: Callable[[str, str], None] | None = None  # (server, outcome)

    def record(self, entry: CallRecord) -> None:
        audit.info(
            "mcp call tenant=%s server=%s tool=%s arguments_sha256=%s outcome=%s "
            "duration=%.3f approval_request_id=%s response=%s",
            entry.tenant, entry.server, entry.tool, entry.arguments_sha256, entry.outcome,
            entry.duration, entry.approval_request_id or "-", entry.response_id,
        )  # fmt: skip
        if self.on_call is not None:
            self.on_call(entry)


@dataclass(slots=True)
class McpTurn:
    """A turn's MCP part: its servers, the approvals it answers (claimed in ``ledger``), its call
    budget."""

    uses: list[McpUse]
    pending: list[Pending]
    max_calls: int
    tenant: str
    response_id: str
    ledger: ApprovalLedger = field(default_factory=LocalApprovals)


@dataclass(slots=True)
class _Offered:
    use: McpUse
    tool: McpTool


@dataclass(slots=True)
class _Held:
    start: ToolCallStart
    chunks: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Offer:
    """The MCP tools offered to the model in this response, by function name, and their
    schemas loaded together for the replay gate."""

    tools: dict[str, _Offered] = field(default_factory=dict)
    catalog: Any = None

    def functions(self) -> list[FunctionToolParam]:
        return [
            FunctionToolParam(
                name=name, description=o.tool.description, parameters=o.tool.input_schema
            )
            for name, o in self.tools.items()
        ]


class _Round:
    """One round of the model: its MCP calls held back from the client as they stream, whether it
    also called the client's own functions, what it said, and how it ended."""

    __slots__ = ("offered", "held", "client_calls", "said", "finish")

    def __init__(self, offered: dict[str, _Offered]) -> None:
        self.offered = offered
        self.held: dict[int, _Held] = {}
        self.client_calls = (
            False  # the model also called the client's own functions: those end the response
        )
        self.said: list[str] = []  # the round's text, which the model reads back before its calls
        self.finish: Finish | None = None

    def sort(self, batch: list[ModelEvent]) -> list[ModelEvent]:
        """Hold the batch's MCP calls (and its Finish) back; what leaves now."""
        out: list[ModelEvent] = []
        held = self.held
        for event in batch:
            # The neutral events are final classes: an identity test (cheaper than isinstance),
            # written out in each branch so that the type checker narrows ``event``.
            if type(event) is TextDelta:
                self.said.append(event.text)
            elif type(event) is ToolCallStart:
                if event.name in self.offered:
                    held[event.index] = _Held(event)
                    continue
                self.client_calls = True
            elif type(event) is ToolCallDelta and event.index in held:
                held[event.index].chunks.append(event.arguments)
                continue
            elif type(event) is Finish:
                self.finish = event
                continue
            out.append(event)
        return out

    def paid(self, usage: Usage) -> Usage:
        """``usage`` with this round's added."""
        assert self.finish is not None, "a provider stream ends with Finish"
        return usage + (self.finish.usage or Usage())

    def read_back(self) -> list[Any]:
        """What the model said in this round, as it reads it back before its calls' results."""
        said = "".join(self.said)
        return [AssistantMessageItemParam(content=said)] if said.strip() else []

    def ending(self, stopped: bool) -> FinishReason | None:
        """The finish reason of the response when this round ends it (no MCP call; a call asked
        for approval or spent the budget; the client's own functions were called), else None."""
        if not self.held:
            assert self.finish is not None
            return self.finish.reason
        if self.client_calls:
            return "tool_calls"
        return "stop" if stopped else None


class McpLoop(WrapperProvider):
    """A provider wrapper that runs the MCP tools of one turn (see the module docstring)."""

    def __init__(self, inner: Provider, turn: McpTurn, runtime: McpRuntime) -> None:
        super().__init__(inner)
        self.turn = turn
        self.runtime = runtime
        self.calls = 0  # MCP calls run in this response (max_tool_calls)
        self.stop = False  # a call of this round ends the response (approval asked, budget spent)
        # The approvals this response claimed and has not settled: approval id → its call started.
        self.unsettled: dict[str, bool] = {}
        self.unread_untrusted = False  # untrusted output goes to the model in its next round
        self.read_untrusted = False  # the model has read untrusted output in this response

    async def stream_batches(self, request: ModelRequest) -> AsyncIterator[list[ModelEvent]]:
        """list → offer → the answered approvals → rounds of the model and its calls."""
        offer = _Offer()
        extra: list[Any] = []  # what the model reads next: the calls run and their results
        try:
            async for batch in self._prepare(offer, extra):
                yield batch
        finally:
            # Ended before an answered approval was done with (a client that left, a failure):
            # a call that started may have run and is never run again; one that did not is freed.
            if self.unsettled:
                await self._abandon_claims()
        request = dataclasses.replace(request, tools=[*request.tools, *offer.functions()])
        usage = Usage()
        while True:
            if extra:
                request = dataclasses.replace(request, input=[*request.input, *extra])
            self.read_untrusted = self.read_untrusted or self.unread_untrusted
            round_ = _Round(offer.tools)
            async for batch in self.inner.stream_batches(request):
                out = round_.sort(batch)
                if out:
                    yield out
            usage = round_.paid(usage)
            if round_.held:
                extra = round_.read_back()
                async for batch in self._run_calls(round_, offer, extra):
                    yield batch
            reason = round_.ending(self.stop)
            if reason is not None:
                yield [Finish(reason, usage)]
                return
            if request.tool_choice == "required":
                # The model called as it was required to; asked again, it may answer.
                request = dataclasses.replace(request, tool_choice="auto")

    async def _prepare(self, offer: _Offer, extra: list[Any]) -> AsyncIterator[list[ModelEvent]]:
        """Before the model is asked: the answered approvals claimed (a 409 for one another
        response is acting on, before any event), each server's tools listed into ``offer``,
        then the calls the client approved run (or those it denied told, or another response's
        outcome given), their results into ``extra``."""
        answers = await self._claim() if self.turn.pending else []
        for use in self.turn.uses:
            yield [McpListStart(use.server.label)]
            yield [await self._list(use, offer)]
        offer.catalog = _catalog(offer.tools)
        for answer in answers:
            if answer.recorded is not None:
                yield self._replayed(answer.pending, answer.recorded, extra)
                continue
            async for batch in self._answered(answer.pending, offer.tools, offer.catalog, extra):
                yield batch

    async def _claim(self) -> list[Answer]:
        turn = self.turn
        answers = await claim_answers(
            turn.ledger, turn.pending, turn.tenant, turn.response_id, self._claim_lease
        )
        self.unsettled = {a.pending.request.id: False for a in answers if a.recorded is None}
        return answers

    def _claim_lease(self, answer: Pending) -> float:
        """How long a claim of another response may stay unsettled before its process counts
        as gone: a listing and a call of the server, each at most its connect and call
        timeouts, and a margin for the store."""
        registry = self.runtime.registry
        server = registry.servers.get(answer.request.server_label) or registry.request_defaults
        if server is None:
            return _DEFAULT_LEASE
        return 2 * (server.connect_timeout + server.call_timeout) + 30.0

    def _replayed(
        self, pending: Pending, recorded: dict[str, Any], extra: list[Any]
    ) -> list[ModelEvent]:
        """An answered approval another response acted on: its recorded outcome, not run again."""
        request = pending.request
        output, error = recorded.get("output"), recorded.get("error")
        self._report(
            request.server_label, request.name, request.arguments, "replayed", 0.0, request.id
        )
        name = f"{request.server_label}__{request.name}"
        source = self._source(request.server_label, request.name)
        self._read_back(source, error)
        text = call_output(output, error, source)
        extra.extend(_pair(request.id[:64], name, request.arguments, text))
        return [
            McpCallStart(request.server_label, request.name, request.arguments, request.id),
            McpCallDone(output, error),
        ]

    def _source(self, label: str, tool: str) -> Source:
        """Where a result came from, for marking it untrusted: None for a server whose operator
        vouches for its output (never one a request names)."""
        server = self.runtime.registry.servers.get(label)
        return None if server is not None and server.trust_output else (label, tool)

    def _read_back(self, source: Source, error: dict[str, Any] | None) -> None:
        """A result goes back to the model: untrusted output, when the server said it."""
        if source is not None and from_server(error):
            self.unread_untrusted = True

    async def _settle(self, approval_id: str, output: str | None, error: Any) -> None:
        """Record how an answered approval's call went (before its ``mcp_call`` leaves)."""
        if self.unsettled.pop(approval_id, None) is not None:
            turn = self.turn
            await settle_quietly(
                turn.ledger, turn.tenant, approval_id, turn.response_id, outcome(output, error)
            )

    async def _release(self, approval_id: str) -> None:
        """Nothing ran for an answered approval: the next answer may act on it."""
        if self.unsettled.pop(approval_id, None) is not None:
            turn = self.turn
            await release_quietly(turn.ledger, turn.tenant, approval_id, turn.response_id)

    async def _abandon_claims(self) -> None:
        turn, left = self.turn, self.unsettled
        self.unsettled = {}
        for approval_id, started in left.items():
            if started:
                recorded = unknown_outcome(turn.response_id)
                await asyncio.shield(
                    settle_quietly(
                        turn.ledger, turn.tenant, approval_id, turn.response_id, recorded
                    )
                )
            else:
                await asyncio.shield(
                    release_quietly(turn.ledger, turn.tenant, approval_id, turn.response_id)
                )

    async def _run_calls(
        self, round_: _Round, offer: _Offer, extra: list[Any]
    ) -> AsyncIterator[list[ModelEvent]]:
        """The MCP calls the model made in a round, in order; ``self.stop`` once one ends the
        response."""
        self.stop = False
        for call in round_.held.values():
            async for batch in self._model_call(call, offer.tools, offer.catalog, extra):
                yield batch

    async def _list(self, use: McpUse, offer: _Offer) -> McpListDone:
        """List a server's tools and offer those the operator and the request allow."""
        listed = await self.runtime.client.list_tools(use.server)
        tools = [
            t
            for t in listed.tools
            if use.offers(t.name) and _FUNCTION_NAME.match(use.function_name(t.name))
        ]
        for tool in tools:
            offer.tools[use.function_name(tool.name)] = _Offered(use, tool)
        if self.runtime.on_list is not None:
            self.runtime.on_list(use.server.label, "failed" if listed.error else "ok")
        return McpListDone([t.wire() for t in tools], listed.error)

    async def _model_call(
        self, call: _Held, offered: dict[str, _Offered], catalog: Any, extra: list[Any]
    ) -> AsyncIterator[list[ModelEvent]]:
        """One call the model made: gate, permission, budget, then run it."""
        name = call.start.name
        arguments = "".join(call.chunks)
        entry = offered[name]
        tool = entry.tool.name
        label = entry.use.server.label
        call_id = call.start.call_id or f"call_{_digest(arguments)[:24]}"
        verdict = check(
            {"type": "function_call", "name": name, "arguments": arguments, "status": "completed"},
            catalog,
        )
        if verdict.code is not Code.OK:
            error = protocol_error(
                GATE_REFUSED,
                f"the call failed the replay gate ({verdict.code.value}): {verdict.message}",
            )
            self._report(label, tool, arguments, "refused", 0.0, None)
            yield [McpCallStart(label, tool, arguments), McpCallDone(error=error)]
            extra.extend(_pair(call_id, name, arguments, call_output(None, error)))
            return
        if entry.use.needs_approval(tool, after_untrusted=self.read_untrusted):
            self._report(label, tool, arguments, "approval_requested", 0.0, None)
            yield [McpApproval(label, tool, arguments)]
            self.stop = True
            return
        if self.calls >= self.turn.max_calls:
            error = protocol_error(
                GATE_REFUSED,
                f"not run: the response reached max_tool_calls ({self.turn.max_calls})",
            )
            self._report(label, tool, arguments, "over_budget", 0.0, None)
            yield [McpCallStart(label, tool, arguments), McpCallDone(error=error)]
            self.stop = True
            return
        async for batch in self._run(entry, arguments, None, call_id, name, extra):
            yield batch

    async def _answered(
        self, pending: Pending, offered: dict[str, _Offered], catalog: Any, extra: list[Any]
    ) -> AsyncIterator[list[ModelEvent]]:
        """A call the client approved (run it, through the gate again) or denied
        (the model is told)."""
        request = pending.request
        name = f"{request.server_label}__{request.name}"
        entry = offered.get(name)
        call_id = request.id[:64]
        if not pending.approve or entry is None:
            why = (
                "the user denied the call" + (f": {pending.reason}" if pending.reason else "")
                if not pending.approve
                else (
                    f"the tool '{request.name}' of server '{request.server_label}' is "
                    "not offered in this request"
                )
            )
            error = protocol_error(GATE_REFUSED, f"not run: {why}")
            self._report(
                request.server_label,
                request.name,
                request.arguments,
                "denied" if not pending.approve else "refused",
                0.0,
                request.id,
            )
            if pending.approve:  # not offered now (a listing failed, say): a retry may run it
                await self._release(request.id)
            else:
                await self._settle(request.id, None, error)
            yield [
                McpCallStart(request.server_label, request.name, request.arguments, request.id),
                McpCallDone(error=error),
            ]
            extra.extend(_pair(call_id, name, request.arguments, call_output(None, error)))
            return
        verdict = check(
            {
                "type": "function_call",
                "name": name,
                "arguments": request.arguments,
                "status": "completed",
            },
            catalog,
        )
        if verdict.code is not Code.OK:
            error = protocol_error(
                GATE_REFUSED,
                f"the call failed the replay gate ({verdict.code.value}): {verdict.message}",
            )
            self._report(
                request.server_label, request.name, request.arguments, "refused", 0.0, request.id
            )
            await self._settle(request.id, None, error)
            yield [
                McpCallStart(request.server_label, request.name, request.arguments, request.id),
                McpCallDone(error=error),
            ]
            extra.extend(_pair(call_id, name, request.arguments, call_output(None, error)))
            return
        async for batch in self._run(entry, request.arguments, request.id, call_id, name, extra):
            yield batch

    async def _run(
        self,
        entry: _Offered,
        arguments: str,
        approval: str | None,
        call_id: str,
        name: str,
        extra: list[Any],
    ) -> AsyncIterator[list[ModelEvent]]:
        label, tool = entry.use.server.label, entry.tool.name
        yield [
            McpCallStart(label, tool, arguments, approval)
        ]  # leaves before the call runs: in_progress is seen
        self.calls += 1
        started = time.monotonic()
        ended = "cancelled"
        if approval is not None:
            self.unsettled[approval] = True  # from here on the call may have run
        try:
            result: CallResult = await self.runtime.client.call(
                entry.use.server, tool, orjson.loads(arguments) if arguments else {}
            )
            ended = result.outcome
        finally:
            self._report(label, tool, arguments, ended, time.monotonic() - started, approval)
        if approval is not None:
            await self._settle(approval, result.output, result.error)
        yield [McpCallDone(result.output, result.error)]
        source = self._source(label, tool)
        self._read_back(source, result.error)
        extra.extend(
            _pair(call_id, name, arguments, call_output(result.output, result.error, source))
        )

    def _report(
        self,
        server: str,
        tool: str,
        arguments: str,
        outcome: str,
        duration: float,
        approval: str | None,
    ) -> None:
        self.runtime.record(
            CallRecord(
                self.turn.tenant,
                server,
                tool,
                _digest(arguments),
                outcome,
                duration,
                approval,
                self.turn.response_id,
            )
        )


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _pair(call_id: str, name: str, arguments: str, output: str) -> list[Any]:
    return [
        FunctionCallItemParam(call_id=call_id, name=name, arguments=arguments, status="completed"),
        FunctionCallOutputItemParam(call_id=call_id, output=output),
    ]


def _catalog(offered: dict[str, _Offered]) -> Any:
    if not offered:
        return None
    try:
        return load_tools({name: o.tool.input_schema for name, o in offered.items()})
    except ToolsError:  # each schema compiled when listed: not expected
        log.exception("MCP tool schemas could not be loaded together")
        return None
