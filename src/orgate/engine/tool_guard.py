"""The replay gate on a model's output: every function call is checked before the client sees it.

``ToolGuard`` wraps a provider. Function-call events are held back until the
attempt finishes; then each call is checked: the tool must be defined and
allowed by ``tool_choice`` (``none`` allows none, a named function only that
one, ``allowed_tools`` only those), its ``arguments`` must parse and satisfy
the tool's JSON Schema (the gate never "fixes" a value), and
``required``/named choices must produce a call. ``max_tool_calls`` keeps the
first N calls and drops the rest (logged); ``parallel_tool_calls: false`` keeps
the first call only.

On a violation under ``enforce`` the model is asked again, within
``gate.tool_retries`` (default 1), with the failed calls and the precise
errors as ``function_call_output`` feedback. When the budget is spent the
response fails with ``model_error`` / code ``invalid_tool_arguments`` (or
``tool_choice_violation``): an invalid call is never returned as if valid.
Text the model writes streams live, except under ``required`` or a named
choice (held with the calls); a retry's text is dropped once text was sent.
Under ``warn`` violations are logged and passed through; ``off`` skips all.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from orgate.gate import Code, SchemaCache, ToolCatalog, ToolsError, check, load_tools
from orgate.neutral import (
    Finish,
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
    CustomToolCallItemParam,
    CustomToolCallOutputItemParam,
    FunctionCallItemParam,
    FunctionCallOutputItemParam,
    UserMessageItemParam,
)
from orgate.protocol.errors import ApiError, ErrorCode

log = logging.getLogger("orgate.gate")

VerdictHook = Callable[[str], None]


@dataclasses.dataclass(slots=True)
class _Call:
    start: ToolCallStart
    deltas: list[ToolCallDelta]

    @property
    def arguments(self) -> str:
        return "".join(d.arguments for d in self.deltas)


class ToolGuard(WrapperProvider):
    """A provider wrapper enforcing tool-call validity and ``tool_choice``."""

    def __init__(
        self,
        inner: Provider,
        *,
        policy: str = "enforce",
        retries: int = 1,
        cache: SchemaCache | None = None,
        on_verdict: VerdictHook | None = None,
    ) -> None:
        super().__init__(inner)
        self.policy = policy
        self.retries = retries
        self.cache = cache or SchemaCache()
        self.on_verdict = on_verdict

    @staticmethod
    def applies(request: ModelRequest) -> bool:
        """Whether a request has anything to guard (tools or a tool_choice)."""
        return bool(request.tools) or request.tool_choice is not None

    def stream_batches(self, request: ModelRequest) -> AsyncIterator[list[ModelEvent]]:
        if self.policy == "off" or not self.applies(request):
            return self.inner.stream_batches(request)
        return self._guarded(request)

    async def _guarded(self, request: ModelRequest) -> AsyncIterator[list[ModelEvent]]:
        catalog = self._catalog(request)
        custom = frozenset(t.name for t in request.tools if getattr(t, "type", None) == "custom")
        allowed, must_call = _constraints(request)
        hold_text = must_call
        text_sent = False
        usage = Usage()
        attempt_request = request
        for attempt in range(self.retries + 1):
            calls: list[_Call] = []
            held: list[ModelEvent] = []
            finish: Finish | None = None
            earlier_text = text_sent  # text of an earlier attempt already reached the client
            async for batch in self.inner.stream_batches(attempt_request):
                out: list[ModelEvent] = []
                for event in batch:
                    if isinstance(event, ToolCallStart):
                        calls.append(_Call(event, []))
                    elif isinstance(event, ToolCallDelta):
                        if calls:
                            calls[-1].deltas.append(event)
                    elif isinstance(event, Finish):
                        finish = event
                    elif hold_text:
                        held.append(event)
                    elif earlier_text:
                        continue  # the client already has text from an earlier attempt
                    else:
                        text_sent = text_sent or isinstance(event, TextDelta)
                        out.append(event)
                if out:
                    yield out
            if finish is None:
                raise ApiError.of(ErrorCode.UPSTREAM_STREAM_TRUNCATED, "the upstream ended without finishing its answer")
            usage = usage + (finish.usage or Usage())
            if finish.reason == "length":
                # Truncated arguments are not judged: the response is incomplete, the item too.
                yield [*self._release(held, calls), Finish(finish.reason, usage)]
                return
            problems = self._problems(calls, catalog, custom, allowed, must_call)
            if not problems or self.policy == "warn":
                for problem in problems:
                    log.warning("gate: model output passed under policy=warn: %s", problem)
                calls = self._limit(calls, request)
                reason = finish.reason
                if calls and reason == "stop":
                    reason = "tool_calls"
                yield [*self._release(held, calls), Finish(reason, usage)]
                return
            log.warning("gate: attempt %d produced invalid tool calls: %s", attempt + 1, "; ".join(problems))
            attempt_request = _with_feedback(attempt_request, held, calls, problems)
        choice_only = all(p.startswith("tool_choice") for p in problems)
        code = ErrorCode.TOOL_CHOICE_VIOLATION if choice_only else ErrorCode.INVALID_TOOL_ARGUMENTS
        raise ApiError.of(
            code,
            f"The model produced invalid tool calls after {self.retries + 1} attempt(s): " + "; ".join(problems),
        )

    # --- checks ----------------------------------------------------------------------------

    def _catalog(self, request: ModelRequest) -> ToolCatalog:
        tools = [
            {"type": "function", "name": t.name, "parameters": getattr(t, "parameters", None)}
            for t in request.tools
            if getattr(t, "type", "function") == "function"
        ]
        try:
            return load_tools(tools, self.cache)
        except ToolsError as exc:
            raise ApiError.of(ErrorCode.INVALID_TOOL_SCHEMA, f"A tool's parameters are not a valid JSON Schema: {exc}", param=exc.param or "tools") from None

    def _problems(self, calls: list[_Call], catalog: ToolCatalog, custom: frozenset[str], allowed: frozenset[str] | None, must_call: bool) -> list[str]:
        """What is wrong with an attempt's calls. A custom tool's call has free-form input: only
        its name is checked (a custom tool of the request), never a schema; a call of a tool in a
        ``namespace`` only against ``tool_choice``."""
        problems: list[str] = []
        if must_call and not calls:
            problems.append("tool_choice requires a tool call, and the model called none")
        for call in calls:
            name = call.start.name
            if allowed is not None and name not in allowed:
                self._count("tool_choice")
                allowed_text = ", ".join(sorted(allowed)) or "none"
                problems.append(f"tool_choice does not allow calling '{name}' (allowed: {allowed_text})")
                continue
            if call.start.namespace is not None:
                # A tool inside a ``namespace`` tool: the native upstream that runs namespaces has
                # its definition, which orgate passes on without reading; nothing to check it by.
                continue
            if call.start.custom:
                ok = name in custom
                self._count(Code.OK.value if ok else Code.UNKNOWN_TOOL.value)
                if not ok:
                    problems.append(f"call to '{name}' is invalid ({Code.UNKNOWN_TOOL.value}): no custom tool named {name!r} is defined")
                continue
            item = {"type": "function_call", "status": "completed", "name": name, "call_id": call.start.call_id, "arguments": call.arguments}
            verdict = check(item, catalog)
            self._count(verdict.code.value)
            if verdict.code is Code.OK:
                continue
            if verdict.errors:
                detail = "; ".join(f"{e.path}: {e.message}" for e in verdict.errors)
                problems.append(f"call to '{name}' has arguments that fail its schema: {detail}")
            else:
                problems.append(f"call to '{name}' is invalid ({verdict.code.value}): {verdict.message}")
        return problems

    def _count(self, code: str) -> None:
        if self.on_verdict is not None:
            self.on_verdict(code)

    def _limit(self, calls: list[_Call], request: ModelRequest) -> list[_Call]:
        limit = request.max_tool_calls
        if request.parallel_tool_calls is False:  # at most one call, also when the upstream ignores the flag
            limit = 1
        if limit is not None and len(calls) > limit:
            log.warning("gate: max_tool_calls=%d (parallel_tool_calls=%s): dropped %d extra call(s)", limit, request.parallel_tool_calls, len(calls) - limit)
            return calls[:limit]
        return calls

    @staticmethod
    def _release(held: list[ModelEvent], calls: list[_Call]) -> list[ModelEvent]:
        events: list[ModelEvent] = list(held)
        for index, call in enumerate(calls):
            events.append(ToolCallStart(index, call.start.call_id, call.start.name, call.start.custom, call.start.namespace))
            events.extend(ToolCallDelta(index, d.arguments) for d in call.deltas)
        return events


def _constraints(request: ModelRequest) -> tuple[frozenset[str] | None, bool]:
    """(allowed tool names or None for all, whether a call is required)."""
    choice = request.tool_choice
    if choice == "none":
        return frozenset(), False
    if choice == "required":
        return None, True
    kind = getattr(choice, "type", None)
    if kind in ("function", "custom"):
        return frozenset({choice.name}), True
    if kind == "allowed_tools":
        names = frozenset(t.name for t in choice.tools)
        mode = choice.mode or "auto"
        if mode == "none":
            return frozenset(), False
        return names, mode == "required"
    return None, False


def _with_feedback(request: ModelRequest, held: list[ModelEvent], calls: list[_Call], problems: list[str]) -> ModelRequest:
    """The next attempt: the failed calls, each answered with the precise errors."""
    feedback: list[Any] = []
    if calls:
        for call in calls:
            call_id = call.start.call_id or f"call_retry_{len(feedback)}"
            rejected = "ERROR: this call was rejected and not run. " + "; ".join(problems) + ". Call the tool again with corrected arguments."
            if call.start.custom:
                feedback.append(CustomToolCallItemParam(call_id=call_id, name=call.start.name, input=call.arguments, status="completed"))
                feedback.append(CustomToolCallOutputItemParam(call_id=call_id, output=rejected))
                continue
            feedback.append(FunctionCallItemParam(type="function_call", call_id=call_id, name=call.start.name, arguments=call.arguments, status="completed"))
            feedback.append(FunctionCallOutputItemParam(type="function_call_output", call_id=call_id, output=rejected))
    else:
        feedback.append(UserMessageItemParam(role="user", content="Your answer was rejected: " + "; ".join(problems) + ". Call one of the allowed tools."))
    return dataclasses.replace(request, input=[*request.input, *feedback])

