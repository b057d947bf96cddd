"""The output checks: the checks of model output a turn's provider call goes through: provider
(its tool calls constrained where the upstream can: structured/tool_constraints.py) →
structured-output safety net → tool-call guard.

Built once per app (compiled schema cache, safety-net policy, metrics, review
queue); ``open(turn, provider, budget)`` composes the wrappers for one
request and returns the stream to drain plus the safety net's ``Outcome``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from orgate.config import Settings
from orgate.engine.tool_guard import ToolGuard
from orgate.engine.turn import Turn
from orgate.gate import SchemaCache
from orgate.neutral import ModelEvent, ModelRequest, Provider
from orgate.structured import (
    BudgetOverride,
    Outcome,
    ReviewQueue,
    Reviews,
    SafetyNet,
    StructuredMetrics,
    StructuredPolicy,
)
from orgate.structured.downgrades import ModeDowngrades
from orgate.structured.layers import ValidatorCache
from orgate.structured.review import FileReviews
from orgate.structured.tool_constraints import ConstrainedTools


class _NetCall(Provider):
    """A SafetyNet bound to one request's outcome and budget, seen as a plain provider."""

    def __init__(self, net: SafetyNet, outcome: Outcome, budget: BudgetOverride | None) -> None:
        self.net = net
        self.outcome = outcome
        self.budget = budget

    def stream_batches(self, request: ModelRequest) -> AsyncIterator[list[ModelEvent]]:
        return self.net.stream_batches(request, outcome=self.outcome, budget=self.budget)


class OutputChecks:
    """The checks of model output every provider call goes through (safety net, tool guard):
    composes their wrappers for one turn (``open``)."""

    def __init__(self, settings: Settings, registry: CollectorRegistry) -> None:
        self.settings = settings
        self.cache = SchemaCache()
        self.validators = ValidatorCache(gate_cache=self.cache)
        self.policy = StructuredPolicy.from_settings(settings.structured)
        self.metrics = StructuredMetrics(registry)
        # The review file until the store opens; then the store's queue (``server/app.py``).
        self.review: Reviews = FileReviews(ReviewQueue(settings.structured.review_path()))
        self.downgrades = ModeDowngrades()  # JSON modes each upstream refused, until restart
        self.gate_verdicts = Counter(
            "orgate_gate_verdicts",
            "Replay-gate verdicts on model tool calls, by code.",
            ["code"],
            registry=registry,
        )

        self.tools_dropped = Counter(
            "orgate_tools_dropped",
            "Hosted tools dropped because no upstream of the model runs them, by model and tool"
            " type.",
            ["model", "type"],
            registry=registry,
        )

    def _count(self, code: str) -> None:
        self.gate_verdicts.labels(code).inc()

    def open(
        self, turn: Turn, provider: Provider, budget: BudgetOverride | None = None
    ) -> tuple[Provider, Outcome | None]:
        request = turn.request
        for _, kind in turn.dropped_tools:
            self.tools_dropped.labels(turn.deployment.name, kind).inc()
        if request.text_format is None and not ToolGuard.applies(request):
            return provider, None  # nothing to check: both wrappers would pass the stream through
        outcome = Outcome()
        outcome.response_id = turn.response_id
        if request.tools:  # calls the upstream can constrain itself (the guard checks them all)
            provider = ConstrainedTools(provider, turn.deployment)
        net = SafetyNet(
            provider,
            turn.deployment,
            self.policy,
            self.metrics,
            self.review,
            validators=self.validators,
            tenant=turn.tenant,
            downgrades=self.downgrades,
        )
        guard = ToolGuard(
            _NetCall(net, outcome, budget),
            policy=self.settings.gate.policy,
            retries=self.settings.gate.tool_retries,
            cache=self.cache,
            on_verdict=self._count,
        )
        return guard, outcome

    def close(self) -> None:
        queue = getattr(self.review, "queue", None)
        close: Any = getattr(queue, "close", None)
        if close is not None:
            close()
