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

from orgate.gate import Code, SchemaCache, ToolCatalog, ToolsError, Verdict, check, load_tools
from orgate.gate.checks import check_first_error
from orgate.gate.cost import cost_of
from orgate.gate.work import SCHEMA_WORK, SchemaWorkFailed, SchemaWorkTimeout, small_call_check
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
from orgate.protocol.errors import NO_CLIENT_RETRY, ApiError, ErrorCode

log = logging.getLogger("orgate.gate")

VerdictHook = Callable[[str], None]

#: The events the guard holds back: a call's start and argument chunks, and the Finish.
_HELD: frozenset[type] = frozenset({ToolCallStart, ToolCallDelta, Finish})


@dataclasses.dataclass(slots=True)
class _HeldCall:
    start: ToolCallStart
    deltas: list[ToolCallDelta]

    @property
    def arguments(self) -> str:
        return "".join(d.arguments for d in self.deltas)


@dataclasses.dataclass(slots=True)
class _Rules:
    """What a request allows: its function tools' schemas, its custom tools' names, and its
    ``tool_choice`` (the names it allows, None for all; whether a call is required)."""

    catalog: ToolCatalog
    custom: frozenset[str]
    allowed: frozenset[str] | None
    must_call: bool


class _Attempt:
    """One attempt of the model: its calls and the text held back with them, as they stream."""

    __slots__ = ("calls", "held", "finish", "text_sent", "problems", "_hold_text", "_drop_text")

    def __init__(self, hold_text: bool, drop_text: bool) -> None:
        self.calls: list[_HeldCall] = []
        self.held: list[ModelEvent] = []  # text (and other events) held with the calls
        self.finish: Finish | None = None
        self.text_sent = False  # text of this attempt reached the client
        self.problems: list[str] = []  # what the gate found wrong, once judged
        self._hold_text = hold_text  # a call is required: the text waits for the verdict
        self._drop_text = drop_text  # the client already has text from an earlier attempt

    def sort(self, batch: list[ModelEvent]) -> list[ModelEvent]:
        """Keep the batch's calls (and its held text) back; what may leave now."""
        out: list[ModelEvent] = []
        calls = self.calls
        for event in batch:
            # The neutral events are final classes: identity tests, not isinstance. What passes
            # (text, mostly) is told apart by one set lookup; the held kinds are tested in each
            # branch so that the type checker narrows ``event``.
            if type(event) not in _HELD:
                out.append(event)
            elif type(event) is ToolCallDelta:
                if calls:
                    calls[-1].deltas.append(event)
            elif type(event) is ToolCallStart:
                calls.append(_HeldCall(event, []))
            elif type(event) is Finish:
                self.finish = event
        # what is not a call is held, dropped or sent as a whole batch: no test per event
        if not out:
            return out
        if self._hold_text:
            self.held += out
            return []
        if self._drop_text:
            return []
        if not self.text_sent:
            self.text_sent = any(isinstance(event, TextDelta) for event in out)
        return out

    def ended(self) -> Finish:
        """How the attempt ended; an upstream that stopped without saying so is an upstream
        failure."""
        if self.finish is None:
            raise ApiError.of(
                ErrorCode.UPSTREAM_STREAM_TRUNCATED,
                "the upstream ended without finishing its answer",
            )
        return self.finish


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
        """Attempts until one passes (its calls released with its Finish) or the retries are
        spent."""
        rules = self._rules(request)
        text_sent = False
        usage = Usage()
        asked = request
        for number in range(1, self.retries + 2):
            attempt = _Attempt(rules.must_call, text_sent)
            async for batch in self.inner.stream_batches(asked):
                out = attempt.sort(batch)
                if out:
                    yield out
            text_sent = text_sent or attempt.text_sent
            finish = attempt.ended()
            usage = usage + (finish.usage or Usage())
            last = await self._verdict(attempt, finish, rules, request, usage)
            if last is not None:
                yield last
                return
            log.warning(
                "gate: attempt %d produced invalid tool calls: %s",
                number,
                "; ".join(attempt.problems),
            )
            asked = _with_feedback(asked, attempt.held, attempt.calls, attempt.problems)
        raise _spent(attempt.problems, self.retries + 1)

    async def _verdict(
        self, attempt: _Attempt, finish: Finish, rules: _Rules, request: ModelRequest, usage: Usage
    ) -> list[ModelEvent] | None:
        """The attempt's last batch (its calls, its Finish with the usage of every attempt), or
        None when its calls are refused (``attempt.problems`` says why): ask again."""
        if finish.reason == "length":
            # Truncated arguments are not judged: the response is incomplete, the item too.
            return [*self._release(attempt.held, attempt.calls), Finish(finish.reason, usage)]
        attempt.problems = problems = await self._problems(attempt.calls, rules)
        if problems and self.policy != "warn":
            return None
        for problem in problems:
            log.warning("gate: model output passed under policy=warn: %s", problem)
        calls = self._limit(attempt.calls, request)
        reason = "tool_calls" if calls and finish.reason == "stop" else finish.reason
        return [*self._release(attempt.held, calls), Finish(reason, usage)]

    # --- checks ----------------------------------------------------------------------------

    def _rules(self, request: ModelRequest) -> _Rules:
        custom = frozenset(t.name for t in request.tools if getattr(t, "type", None) == "custom")
        return _Rules(self._catalog(request), custom, *_constraints(request))

    def _catalog(self, request: ModelRequest) -> ToolCatalog:
        tools = [
            {"type": "function", "name": t.name, "parameters": getattr(t, "parameters", None)}
            for t in request.tools
            if getattr(t, "type", "function") == "function"
        ]
        try:
            return load_tools(tools, self.cache)
        except ToolsError as exc:
            raise ApiError.of(
                ErrorCode.INVALID_TOOL_SCHEMA,
                f"A tool's parameters are not a valid JSON Schema: {exc}",
                param=exc.param or "tools",
            ) from None

    async def _problems(self, calls: list[_HeldCall], rules: _Rules) -> list[str]:
        """What is wrong with an attempt's calls."""
        problems: list[str] = []
        if rules.must_call and not calls:
            problems.append("tool_choice requires a tool call, and the model called none")
        for call in calls:
            problem = await self._problem(call, rules)
            if problem is not None:
                problems.append(problem)
        return problems

    async def _problem(self, call: _HeldCall, rules: _Rules) -> str | None:
        """What is wrong with one call, if anything. A custom tool's call has free-form input:
        only its name is checked (a custom tool of the request), never a schema; a call of a
        tool in a ``namespace`` only against ``tool_choice``."""
        name = call.start.name
        if rules.allowed is not None and name not in rules.allowed:
            self._count("tool_choice")
            allowed_text = ", ".join(sorted(rules.allowed)) or "none"
            return f"tool_choice does not allow calling '{name}' (allowed: {allowed_text})"
        if call.start.namespace is not None:
            # A tool inside a ``namespace`` tool: the native upstream that runs namespaces has
            # its definition, which orgate passes on without reading; nothing to check it by.
            return None
        if call.start.custom:
            ok = name in rules.custom
            self._count(Code.OK.value if ok else Code.UNKNOWN_TOOL.value)
            return (
                None
                if ok
                else f"call to '{name}' is invalid ({Code.UNKNOWN_TOOL.value}): no custom "
                f"tool named {name!r} is defined"
            )
        return await self._schema_problem(call, rules.catalog)

    async def _schema_problem(self, call: _HeldCall, catalog: ToolCatalog) -> str | None:
        """What is wrong with a function call by the replay gate: a defined tool, arguments that
        parse and satisfy its schema."""
        name = call.start.name
        item = {
            "type": "function_call",
            "status": "completed",
            "name": name,
            "call_id": call.start.call_id,
            "arguments": call.arguments,
        }
        verdict = await _checked(item, catalog)
        self._count(verdict.code.value)
        if verdict.code is Code.OK:
            return None
        if verdict.errors:
            detail = "; ".join(f"{e.path}: {e.message}" for e in verdict.errors)
            return f"call to '{name}' has arguments that fail its schema: {detail}"
        return f"call to '{name}' is invalid ({verdict.code.value}): {verdict.message}"

    def _count(self, code: str) -> None:
        if self.on_verdict is not None:
            self.on_verdict(code)

    def _limit(self, calls: list[_HeldCall], request: ModelRequest) -> list[_HeldCall]:
        limit = request.max_tool_calls
        if (
            request.parallel_tool_calls is False
        ):  # at most one call, also when the upstream ignores the flag
            limit = 1
        if limit is not None and len(calls) > limit:
            log.warning(
                "gate: max_tool_calls=%d (parallel_tool_calls=%s): dropped %d extra call(s)",
                limit,
                request.parallel_tool_calls,
                len(calls) - limit,
            )
            return calls[:limit]
        return calls

    @staticmethod
    def _release(held: list[ModelEvent], calls: list[_HeldCall]) -> list[ModelEvent]:
        events: list[ModelEvent] = list(held)
        for index, call in enumerate(calls):
            events.append(
                ToolCallStart(
                    index,
                    call.start.call_id,
                    call.start.name,
                    call.start.custom,
                    call.start.namespace,
                )
            )
            events.extend(ToolCallDelta(index, d.arguments) for d in call.deltas)
        return events


async def _checked(item: dict[str, Any], catalog: ToolCatalog) -> Verdict:
    """The gate's verdict on one call: here when checking its arguments against its tool's
    schema is small work (``orgate.gate.work``), else in a schema work process, killed past its
    time limit (then a 400 naming the tool's parameters) or when the request is cancelled."""
    tool = catalog.get(item["name"])
    if tool is None or small_call_check(cost_of(tool.parameters), len(item["arguments"])):
        return check(item, catalog)
    try:
        return await SCHEMA_WORK.in_process(check_first_error, item, {tool.name: tool.parameters})
    except (SchemaWorkTimeout, SchemaWorkFailed) as exc:
        raise ApiError.of(
            ErrorCode.SCHEMA_TOO_COMPLEX,
            f"The arguments of a call of '{tool.name}' could not be checked against its "
            f"parameters: {exc} (limits.schema_work_seconds).",
            param="tools",
        ) from None


def _spent(problems: list[str], attempts: int) -> ApiError:
    """The last attempt's calls refused too: a model error, a ``tool_choice`` one when that was
    all."""
    choice_only = all(p.startswith("tool_choice") for p in problems)
    code = ErrorCode.TOOL_CHOICE_VIOLATION if choice_only else ErrorCode.INVALID_TOOL_ARGUMENTS
    return ApiError.of(
        code,
        f"The model produced invalid tool calls after {attempts} attempt(s): "
        + "; ".join(problems),
        headers=dict(NO_CLIENT_RETRY),  # the guard's retries are spent: a client's cannot help
    )


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


def _with_feedback(
    request: ModelRequest, held: list[ModelEvent], calls: list[_HeldCall], problems: list[str]
) -> ModelRequest:
    """The next attempt: the failed calls, each answered with the precise errors."""
    feedback: list[Any] = []
    if calls:
        for call in calls:
            call_id = call.start.call_id or f"call_retry_{len(feedback)}"
            rejected = (
                "ERROR: this call was rejected and not run. "
                + "; ".join(problems)
                + ". Call the tool again with corrected arguments."
            )
            if call.start.custom:
                feedback.append(
                    CustomToolCallItemParam(
                        call_id=call_id,
                        name=call.start.name,
                        input=call.arguments,
                        status="completed",
                    )
                )
                feedback.append(CustomToolCallOutputItemParam(call_id=call_id, output=rejected))
                continue
            feedback.append(
                FunctionCallItemParam(
                    type="function_call",
                    call_id=call_id,
                    name=call.start.name,
                    arguments=call.arguments,
                    status="completed",
                )
            )
            feedback.append(
                FunctionCallOutputItemParam(
                    type="function_call_output", call_id=call_id, output=rejected
                )
            )
    else:
        feedback.append(
            UserMessageItemParam(
                role="user",
                content="Your answer was rejected: "
                + "; ".join(problems)
                + ". Call one of the allowed tools.",
            )
        )
    return dataclasses.replace(request, input=[*request.input, *feedback])
