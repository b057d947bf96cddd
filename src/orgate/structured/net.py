"""``SafetyNet``: a ``Provider`` wrapper that only releases JSON output that passed its checks.

For a request whose ``text_format`` is ``json_schema`` or ``json_object`` the net

1. picks the mode for the deployment's capabilities and rewrites the request
   (``modes.plan``: strict schema, schema in instructions, the "json" word…);
2. runs an attempt: consumes the inner stream **fully** into a buffer;
3. if it stopped on the token limit (``Finish.reason == "length"``) asks again
   with ``max_output_tokens`` × ``truncation_growth`` (up to the model's cap),
   without feedback; at the cap it stops and says so;
4. otherwise checks parse → schema → semantic; on failure appends the failed
   output (assistant message) and a precise feedback message (user message)
   and asks again, within the budget (retries, semantic retries, seconds);
5. yields the accepted attempt's events — text normalised if fences, prose or
   strict-mode nulls were removed — with a final ``Finish`` whose usage is the
   sum over all attempts. Events of rejected attempts are never released.

When the budget is spent: the configured ``default`` object for the format
(validated against the request's schema) is yielded and the ``Outcome`` says
``default``; otherwise the attempt may be queued for review and an
``ApiError(500, type="model_error", code="structured_output_invalid")`` is
raised, which the engine renders as ``response.failed``.

Attempts ending in tool calls, a refusal or a content filter are passed through
unchecked. Text requests (``text_format`` None or ``text``) get the inner
provider's stream itself: zero overhead.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from orgate.gate.cost import CHARS_PER_TOKEN, SchemaCost, cost_of
from orgate.gate.work import SCHEMA_WORK, SchemaWorkFailed, SchemaWorkTimeout, small_check
from orgate.neutral import (
    Capabilities,
    Deployment,
    Finish,
    ModelEvent,
    ModelRequest,
    Provider,
    RefusalDelta,
    TextDelta,
    ToolCallStart,
    Usage,
    WrapperProvider,
    batches_of_one,
    one_by_one,
)
from orgate.protocol.errors import NO_CLIENT_RETRY, ApiError, ErrorCode
from orgate.structured import modes, strict
from orgate.structured.budget import Budget, BudgetOverride, Clock, grow_max_tokens
from orgate.structured.downgrades import ModeDowngrades, refuses_format, without
from orgate.structured.feedback import (
    FeedbackItems,
    clip_output,
    feedback_text,
    protocol_feedback_items,
)
from orgate.structured.layers import (
    Accepted,
    Failure,
    OutputSchema,
    SchemaProblem,
    SemanticCheckError,
    ValidatorCache,
    check_json,
    check_json_in_worker,
    check_semantics,
    dump_json,
)
from orgate.structured.metrics import StructuredMetrics
from orgate.structured.outcome import (
    AttemptRecord,
    ExhaustedBy,
    Outcome,
)
from orgate.structured.review import NewReview, ReviewQueue, Reviews, reviews_of
from orgate.structured.settings import FormatPolicy, StructuredPolicy

log = logging.getLogger("orgate.structured")


_WHY: dict[ExhaustedBy, str] = {
    "retries": "the retry budget is spent",
    "semantic_retries": "the semantic retry budget is spent",
    "seconds": "the time budget is spent",
    "truncation_cap": "the output was cut at the model's output token cap",
    "truncation_retries": "the output kept being cut at max_output_tokens",
}


@dataclass(slots=True)
class _Attempt:
    events: list[ModelEvent]
    text: str
    finish: Finish
    tool_calls: bool
    refusal: bool


def _add_usage(total: Usage | None, more: Usage | None) -> Usage | None:
    if more is None:
        return total
    return more if total is None else total + more


def _release(
    events: list[ModelEvent], usage: Usage | None, text: str | None = None
) -> list[ModelEvent]:
    """The attempt's events with the summed usage; text deltas replaced by ``text`` if given."""
    out: list[ModelEvent] = []
    placed = False
    for ev in events:
        if isinstance(ev, TextDelta) and text is not None:
            if not placed:
                out.append(TextDelta(text))
                placed = True
        elif isinstance(ev, Finish):
            out.append(Finish(ev.reason, usage))
        else:
            out.append(ev)
    return out


@dataclass(slots=True)
class _Guard:
    """One guarded request: what was planned for it, and what its attempts have spent so far."""

    request: ModelRequest
    outcome: Outcome
    caps: Capabilities
    plan: modes.Plan
    format_policy: FormatPolicy
    budget: Budget
    schema: OutputSchema
    cost: SchemaCost  # of the schema outputs are checked against: where the check runs
    #: undoes strict mode's nullable optional fields (None unless strict mode made them)
    normalize: Callable[[Any], Any] | None
    cap: int  # the model's output token cap
    clock: Clock
    #: this call's first attempt is attempt ``start + 1`` (the tool guard may call again)
    start: int
    base: ModelRequest  # the planned request, which feedback is appended to
    req: ModelRequest  # the request of the next attempt
    asked: str  # what the client asked, for the semantic checks that read it ("" if none)
    usage: Usage | None = None
    retries: int = 0
    semantic: int = 0
    truncations: int = 0


def asked_text(request: ModelRequest) -> str:
    """The client's instructions and input messages, as one text (for ``AskedCheck``s)."""
    texts = [request.instructions] if request.instructions else []
    texts += [text for item in request.input for text in modes.message_texts(item)]
    return "\n".join(texts)


def _passthrough_reason(attempt: _Attempt) -> str | None:
    """Why an attempt is released unchecked (tool calls, content filter, a bare refusal),
    or None."""
    reason = attempt.finish.reason
    if reason == "tool_calls" or attempt.tool_calls:
        return "tool_calls"
    if reason == "content_filter":
        return "content_filter"
    if attempt.refusal and not attempt.text.strip():
        return "refusal"
    return None


def _truncation_stop(grown: int | None, guard: _Guard) -> ExhaustedBy | None:
    """The budget that forbids asking again after a cut output, or None to ask with ``grown``."""
    if grown is None:
        return "truncation_cap"
    if guard.truncations >= guard.budget.truncation_retries:
        return "truncation_retries"
    if guard.clock.expired():
        return "seconds"
    return None


def _failure_stop(failure: Failure, guard: _Guard) -> ExhaustedBy | None:
    """The budget that forbids a retry with feedback after ``failure``, or None to retry."""
    if guard.retries >= guard.budget.retries:
        return "retries"
    if failure.stage == "semantic" and guard.semantic >= guard.budget.semantic_retries:
        return "semantic_retries"
    if guard.clock.expired():
        return "seconds"
    return None


class SafetyNet(WrapperProvider):
    """Wraps one deployment's provider; see the module docstring."""

    def __init__(
        self,
        inner: Provider,
        deployment: Deployment,
        policy: StructuredPolicy,
        metrics: StructuredMetrics | None = None,
        review_queue: ReviewQueue | Reviews | None = None,
        *,
        validators: ValidatorCache | None = None,
        feedback_items: FeedbackItems = protocol_feedback_items,
        tenant: str = "",
        downgrades: ModeDowngrades | None = None,
    ) -> None:
        super().__init__(inner)
        self.tenant = tenant  # of the caller: its review queue entries are its own
        self.deployment = deployment
        self.policy = policy
        self.metrics = metrics
        self.review_queue = reviews_of(review_queue)
        self.validators = validators if validators is not None else ValidatorCache()
        self.feedback_items = feedback_items
        self.downgrades = downgrades if downgrades is not None else ModeDowngrades()

    def stream_batches(
        self,
        request: ModelRequest,
        *,
        outcome: Outcome | None = None,
        budget: BudgetOverride | None = None,
    ) -> AsyncIterator[list[ModelEvent]]:
        """The checked stream; for non-JSON requests, the inner stream itself."""
        fmt = request.text_format
        if fmt is None or fmt.type == "text" or not self.policy.settings.enabled:
            return self.inner.stream_batches(request)
        return batches_of_one(
            self._guarded(request, outcome if outcome is not None else Outcome(), budget)
        )

    def stream(
        self,
        request: ModelRequest,
        *,
        outcome: Outcome | None = None,
        budget: BudgetOverride | None = None,
    ) -> AsyncIterator[ModelEvent]:
        """The same events one at a time."""
        return one_by_one(self.stream_batches(request, outcome=outcome, budget=budget))

    # ------------------------------------------------------------------ attempts

    async def _attempt(self, request: ModelRequest, timeout: float | None) -> _Attempt:
        events: list[ModelEvent] = []
        parts: list[str] = []
        finish: Finish | None = None
        tool_calls = refusal = False
        iterator = self.inner.stream_batches(request)
        try:
            async with asyncio.timeout(timeout):
                async for batch in iterator:
                    events += batch
                    for ev in batch:
                        if isinstance(ev, TextDelta):
                            parts.append(ev.text)
                        elif isinstance(ev, ToolCallStart):
                            tool_calls = True
                        elif isinstance(ev, RefusalDelta):
                            refusal = True
                        elif isinstance(ev, Finish):
                            finish = ev
        finally:
            closer = getattr(iterator, "aclose", None)
            if closer is not None:
                with contextlib.suppress(Exception):
                    await closer()
        if finish is None:  # tolerate a provider that forgot its Finish
            finish = Finish("stop")
            events.append(finish)
        return _Attempt(events, "".join(parts), finish, tool_calls, refusal)

    async def _first_attempt(
        self, request: ModelRequest, plan: modes.Plan, caps: Capabilities, outcome: Outcome
    ) -> tuple[modes.Plan, _Attempt]:
        """The first attempt, asked again one mode down each time the upstream refuses what the
        mode sends (structured/downgrades.py); the plan that was answered."""
        tried = plan
        refused: list[modes.Level] = []
        while True:
            try:
                attempt = await self._attempt(tried.request, None)
            except ApiError as error:
                level = tried.level
                if level is None or not refuses_format(error):
                    raise
                lower = without(caps, level)
                if lower is None:
                    raise
                caps = lower
                refused.append(level)
                tried = modes.plan(request, caps, prefer_strict=self.policy.settings.prefer_strict)
                log.warning(
                    "upstream of %s refused %s (%s %s): asking again as %s",
                    self.deployment.name,
                    level,
                    error.status,
                    error.code,
                    tried.mode,
                )
                self._count("downgrades", plan, refused=level, mode=tried.mode)
                continue
            self.downgrades.answered(self.deployment.name, tried.level)
            if refused:
                self.downgrades.learn(self.deployment.name, refused, tried.mode)
                outcome.refused_formats = tuple(
                    sorted(self.downgrades.refused(self.deployment.name))
                )
            return tried, attempt

    def _log(self, plan: modes.Plan, record: AttemptRecord, level: int = logging.INFO) -> None:
        log.log(
            level,
            "structured attempt %d for %s/%s (%s): finish=%s stage=%s",
            record.number,
            self.deployment.name,
            plan.format_name,
            plan.mode,
            record.finish_reason,
            record.stage or "ok",
            extra={
                "model": self.deployment.name,
                "format_name": plan.format_name,
                "attempt": record.number,
                "mode": plan.mode,
                "finish_reason": record.finish_reason,
                "stage": record.stage,
                "errors": list(record.errors),
                "max_output_tokens": record.max_output_tokens,
            },
        )

    def _count(self, name: str, plan: modes.Plan, **labels: str) -> None:
        if self.metrics is not None:
            getattr(self.metrics, name).labels(
                model=self.deployment.name, format=plan.format_name, **labels
            ).inc()

    def _verdict(self, plan: modes.Plan, outcome: Outcome, start: int = 0) -> None:
        """Count the request's verdict; ``start``: the first attempt of this call on ``outcome``."""
        self._count("requests", plan)
        if len(outcome.attempts) > start and outcome.attempts[start].stage is not None:
            self._count("first_attempt_failures", plan)
        if outcome.status == "recovered":
            self._count("recovered_by_retry", plan)
        elif outcome.status != "ok":
            self._count("budget_exhausted", plan)
        self._count("outcomes", plan, outcome=outcome.status)

    # ------------------------------------------------------------------ the loop

    async def _guarded(
        self, request: ModelRequest, outcome: Outcome, override: BudgetOverride | None
    ) -> AsyncIterator[ModelEvent]:
        """Ask until an attempt passes, passes through, or a budget is spent; release only that."""
        guard = self._begin(request, outcome, override)
        while True:
            number = len(outcome.attempts) + 1
            attempt = await self._next_attempt(guard, number)
            if attempt is None:
                exhausted_by: ExhaustedBy = "seconds"
                break
            guard.usage = _add_usage(guard.usage, attempt.finish.usage)
            why = _passthrough_reason(attempt)
            if why is not None:
                for ev in self._pass_through(guard, number, attempt, why):
                    yield ev
                return
            if attempt.finish.reason == "length":
                stop = self._after_truncation(guard, number, attempt)
            else:
                result = await self._checked(guard, attempt)
                if isinstance(result, Accepted):
                    for ev in self._accept(guard, number, attempt, result):
                        yield ev
                    return
                stop = self._after_failure(guard, number, attempt, result)
            if stop is not None:
                exhausted_by = stop
                break
        async for ev in self._exhausted(guard, exhausted_by):
            yield ev

    def _begin(
        self, request: ModelRequest, outcome: Outcome, override: BudgetOverride | None
    ) -> _Guard:
        """Plan the request (mode, policy, budget, compiled schema) and note it on ``outcome``."""
        settings = self.policy.settings
        name = self.deployment.name
        caps = self.downgrades.apply(name, self.deployment.capabilities)
        outcome.refused_formats = tuple(sorted(self.downgrades.refused(name)))
        plan = modes.plan(request, caps, prefer_strict=settings.prefer_strict)
        format_policy = self.policy.format(plan.format_name)
        budget = Budget.resolve(settings, format_policy, override)
        try:
            schema = self.validators.get(plan.validation_schema)
        except SchemaProblem as exc:
            raise ApiError.of(
                ErrorCode.INVALID_JSON_SCHEMA,
                f"text.format.schema is not a usable JSON Schema: {exc}",
                param="text.format.schema",
            ) from None
        outcome.mode, outcome.format_name, outcome.strict_changes = (
            plan.mode,
            plan.format_name,
            plan.strict_changes,
        )
        # The tool guard may call the net again on the same outcome (after rejecting a tool
        # call the net passed through): this call's JSON attempts start after those.
        start = len(outcome.attempts)
        if start == 0:
            self._count("modes", plan, mode=plan.mode)
        if plan.strict_blockers:
            log.info(
                "schema %s sent non-strict: %s", plan.format_name, "; ".join(plan.strict_blockers)
            )
        normalize: Callable[[Any], Any] | None = (
            functools.partial(strict.denull, schema=plan.validation_schema) if plan.denull else None
        )
        return _Guard(
            request,
            outcome,
            caps,
            plan,
            format_policy,
            budget,
            schema,
            cost_of(plan.validation_schema),
            normalize,
            cap=caps.max_output_tokens or settings.default_output_cap,
            clock=Clock(budget.seconds),
            start=start,
            base=plan.request,
            req=plan.request,
            asked=asked_text(request) if format_policy.reads_asked else "",
        )

    async def _next_attempt(self, guard: _Guard, number: int) -> _Attempt | None:
        """The next attempt; None when the time budget ran out during it (recorded)."""
        if number == guard.start + 1:
            first, attempt = await self._first_attempt(
                guard.request, guard.plan, guard.caps, guard.outcome
            )
            self._adopt(guard, first)
            return attempt
        # The first attempt is bounded by the deployment's own timeouts; retries by the clock.
        left = guard.clock.remaining()
        timeout = None if left is None else max(left, 0.0)
        try:
            return await self._attempt(guard.req, timeout)
        except TimeoutError:
            if timeout is None:  # not ours: the provider's own timeout
                raise
        record = AttemptRecord(
            number,
            None,
            "timeout",
            ("the time budget ran out during this attempt",),
            guard.req.max_output_tokens,
        )
        guard.outcome.attempts.append(record)
        self._log(guard.plan, record, logging.WARNING)
        return None

    @staticmethod
    def _adopt(guard: _Guard, first: modes.Plan) -> None:
        """Go on with the plan the first attempt was answered in (lower if a format was refused)."""
        if first is not guard.plan:
            guard.plan = first
            guard.outcome.mode = first.mode
            guard.base = guard.req = first.request
            guard.normalize = None  # only strict mode makes optional fields nullable

    def _pass_through(
        self, guard: _Guard, number: int, attempt: _Attempt, why: str
    ) -> list[ModelEvent]:
        """Record an attempt released unchecked; its events."""
        guard.outcome.attempts.append(
            AttemptRecord(
                number, attempt.finish.reason, None, (), guard.req.max_output_tokens, attempt.text
            )
        )
        guard.outcome.status, guard.outcome.passthrough_reason = "passthrough", why
        self._count("passthrough", guard.plan, reason=why)
        return _release(attempt.events, guard.usage)

    def _after_truncation(
        self, guard: _Guard, number: int, attempt: _Attempt
    ) -> ExhaustedBy | None:
        """Record a cut output; the budget that stops here, or None with the next request
        asking for more output tokens (without feedback)."""
        req = guard.req
        failure = Failure(
            "truncation",
            (
                "the output was cut at "
                f"max_output_tokens={req.max_output_tokens or 'provider default'}",
            ),
        )
        record = AttemptRecord(
            number,
            attempt.finish.reason,
            "truncation",
            failure.errors,
            req.max_output_tokens,
            attempt.text,
        )
        guard.outcome.attempts.append(record)
        self._log(guard.plan, record, logging.WARNING)
        self._count("failures", guard.plan, stage="truncation")
        used = attempt.finish.usage.output_tokens if attempt.finish.usage else None
        grown = grow_max_tokens(
            req.max_output_tokens, used, guard.cap, self.policy.settings.truncation_growth
        )
        stop = _truncation_stop(grown, guard)
        if stop is None:
            guard.truncations += 1
            self._count("retries", guard.plan, stage="truncation")
            guard.req = dataclasses.replace(req, max_output_tokens=grown)
        return stop

    async def _checked(self, guard: _Guard, attempt: _Attempt) -> Accepted | Failure:
        """The attempt's output through parse, schema and semantic checks: here when that is
        small work for the schema's cost; else the parse and schema layers in a schema work
        process (``orgate.gate.work``: killed past its time limit, or when this request is
        cancelled) and the semantic checks in a thread, off the event loop."""
        settings = self.policy.settings
        small = small_check(guard.cost, len(attempt.text))
        if small:
            result = check_json(
                attempt.text,
                schema=guard.schema,
                strip_fences=settings.strip_fences,
                strip_prose=settings.strip_prose,
                normalize=guard.normalize,
            )
        else:
            result = await self._checked_in_worker(guard, attempt.text)
        if isinstance(result, Failure) or not guard.format_policy.checks:
            return result
        try:
            if small:
                return check_semantics(result, guard.format_policy.checks, guard.asked)
            return await SCHEMA_WORK.in_thread(
                check_semantics, result, guard.format_policy.checks, guard.asked
            )
        except SemanticCheckError as exc:
            raise ApiError.of(
                ErrorCode.SEMANTIC_CHECK_ERROR,
                str(exc),
                headers=dict(NO_CLIENT_RETRY),
            ) from exc

    async def _checked_in_worker(
        self, guard: _Guard, text: str, *, normalize: bool = True
    ) -> Accepted | Failure:
        """The parse and schema layers over ``text`` in a schema work process."""
        settings = self.policy.settings
        try:
            return await SCHEMA_WORK.in_process(
                check_json_in_worker,
                text,
                guard.plan.validation_schema,
                settings.strip_fences,
                settings.strip_prose,
                guard.normalize if normalize else None,
            )
        except (SchemaWorkTimeout, SchemaWorkFailed) as exc:
            raise ApiError.of(
                ErrorCode.SCHEMA_TOO_COMPLEX,
                f"'text.format.schema': checking the model's output against it failed: "
                f"{exc} (limits.schema_work_seconds).",
                param="text.format.schema",
                headers=dict(NO_CLIENT_RETRY),
            ) from None

    def _accept(
        self, guard: _Guard, number: int, attempt: _Attempt, result: Accepted
    ) -> list[ModelEvent]:
        """Record the accepted attempt and the verdict; its events, text normalised if changed."""
        outcome = guard.outcome
        record = AttemptRecord(
            number, attempt.finish.reason, None, (), guard.req.max_output_tokens, attempt.text
        )
        outcome.attempts.append(record)
        self._log(guard.plan, record)
        outcome.status = "ok" if number == guard.start + 1 else "recovered"
        outcome.value = result.value
        self._verdict(guard.plan, outcome, guard.start)
        return _release(attempt.events, guard.usage, result.text if result.changed else None)

    def _after_failure(
        self, guard: _Guard, number: int, attempt: _Attempt, result: Failure
    ) -> ExhaustedBy | None:
        """Record a failed check; the budget that stops here, or None with the next request
        carrying the failed output and the feedback."""
        req = guard.req
        record = AttemptRecord(
            number,
            attempt.finish.reason,
            result.stage,
            result.errors,
            req.max_output_tokens,
            attempt.text,
        )
        guard.outcome.attempts.append(record)
        self._log(guard.plan, record, logging.WARNING)
        self._count("failures", guard.plan, stage=result.stage)
        stop = _failure_stop(result, guard)
        if stop is not None:
            return stop
        guard.retries += 1
        guard.semantic += result.stage == "semantic"
        self._count("retries", guard.plan, stage=result.stage)
        items = self.feedback_items(
            clip_output(attempt.text, self.policy.settings.max_feedback_chars),
            feedback_text(result),
        )
        # The feedback asks for the corrected JSON only: a retry offers no tool to call (a
        # call would carry the feedback as its arguments). The tools stay, for the history.
        base = guard.base
        guard.req = dataclasses.replace(
            base,
            input=[*base.input, *items],
            max_output_tokens=req.max_output_tokens,
            tool_choice="none" if base.tools else base.tool_choice,
        )
        return None

    async def _exhausted(
        self, guard: _Guard, exhausted_by: ExhaustedBy
    ) -> AsyncIterator[ModelEvent]:
        """The budget is spent: the configured default, else a review entry or only the error."""
        request, plan, format_policy, outcome = (
            guard.request,
            guard.plan,
            guard.format_policy,
            guard.outcome,
        )
        outcome.exhausted_by = exhausted_by
        action = format_policy.on_exhaustion
        if action == "default" and format_policy.has_default:
            problem = await self._default_problem(guard)
            if problem is None:
                outcome.status, outcome.value = "default", format_policy.default
                self._verdict(plan, outcome, guard.start)
                log.warning(
                    "structured budget spent for %s/%s: returning the configured default",
                    self.deployment.name,
                    plan.format_name,
                    extra={
                        "model": self.deployment.name,
                        "format_name": plan.format_name,
                        "outcome": "default",
                    },
                )
                yield TextDelta(dump_json(format_policy.default))
                yield Finish("stop", guard.usage)
                return
            log.error("configured default for %s: %s", plan.format_name, problem)
        if action == "review" and self.review_queue is not None:
            outcome.review_id = await self.review_queue.add(
                self._review_entry(request, plan, outcome)
            )
            outcome.status = "review"
        else:
            if action == "review":
                log.warning("on_exhaustion = review but no review queue is configured")
            outcome.status = "error"
        self._verdict(plan, outcome, guard.start)
        raise self._error(outcome, exhausted_by, guard.cap)

    async def _default_problem(self, guard: _Guard) -> str | None:
        """Why the configured default cannot be the answer (None when it can): longer than the
        response's output budget (``max_output_tokens``, else the model's cap, at
        ``CHARS_PER_TOKEN`` characters a token), or not valid for the request's schema."""
        text = dump_json(guard.format_policy.default)
        tokens = guard.request.max_output_tokens or guard.cap
        if len(text) > tokens * CHARS_PER_TOKEN:
            return f"it is longer than the response's output budget ({tokens} tokens)"
        if small_check(guard.cost, len(text)):
            problem = guard.schema.validate(guard.format_policy.default)
        else:
            result = await self._checked_in_worker(guard, text, normalize=False)
            problem = result if isinstance(result, Failure) else None
        if problem is not None:
            return f"it does not match the request's schema: {problem.summary()}"
        return None

    def _error(self, outcome: Outcome, exhausted_by: ExhaustedBy, cap: int) -> ApiError:
        failed = [a for a in outcome.attempts if a.stage is not None and a.stage != "timeout"]
        why = _WHY[exhausted_by]
        if exhausted_by == "truncation_cap":
            why += f" ({cap} tokens)"
        message = (
            "The model's output failed the structured-output checks after "
            f"{len(outcome.attempts)} attempt(s): {why}."
        )
        if failed:
            last = failed[-1]
            shown = list(last.errors[:5]) + (
                [f"… {len(last.errors) - 5} more"] if len(last.errors) > 5 else []
            )
            message += f" Last failure at stage {last.stage}: " + "; ".join(shown) + "."
        if outcome.review_id:
            message += f" Queued for review as {outcome.review_id}."
        # outcome, mode, attempts and review id, as on success; a 400 (its code's status) and
        # no blind client retry: the budget is spent, sending it again would spend it again
        # (docs/structured-output.md#when-the-budget-is-spent argues it client by client).
        headers = {**outcome.headers(), **NO_CLIENT_RETRY}
        return ApiError.of(
            ErrorCode.STRUCTURED_OUTPUT_INVALID, message, param="text.format", headers=headers
        )

    def _review_entry(self, request: ModelRequest, plan: modes.Plan, outcome: Outcome) -> NewReview:
        failed = [a for a in outcome.attempts if a.stage is not None]
        last = failed[-1] if failed else AttemptRecord(0, None, "unknown")
        fmt = request.text_format
        return NewReview(
            model=self.deployment.name,
            format_name=plan.format_name,
            mode=plan.mode,
            stage=last.stage or "unknown",
            errors=list(last.errors),
            schema=plan.validation_schema,
            request={
                "model": request.model,
                "instructions": request.instructions,
                "input": request.input,
                "text_format": dataclasses.asdict(fmt) if fmt is not None else None,
                "max_output_tokens": request.max_output_tokens,
            },
            attempts=[a.to_dict() for a in outcome.attempts],
            response_id=outcome.response_id,
            tenant=self.tenant,
        )
