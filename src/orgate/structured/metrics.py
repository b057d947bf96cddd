"""Prometheus counters of the safety net, per model and format name.

All counters live on the ``CollectorRegistry`` passed in (nothing global at
import time). One *request* is counted when the net reaches a verdict (valid
output, or budget spent); pass-throughs (tool calls, refusals, content filter)
and upstream errors are not requests. From the counters:

- first-attempt failure rate = ``first_attempt_failures / requests``
- retry recovery rate        = ``recovered_by_retry / first_attempt_failures``
- budget exhaustion rate     = ``budget_exhausted / requests``

``StructuredMetrics.rates(model=..., format_name=...)`` computes them (summing
over the labels not given), which is what ``orgate eval`` reports.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter

LABELS = ("model", "format")


@dataclass(slots=True, frozen=True)
class Rates:
    requests: float
    first_attempt_failures: float
    recovered_by_retry: float
    budget_exhausted: float

    @property
    def first_attempt_failure_rate(self) -> float:
        return self.first_attempt_failures / self.requests if self.requests else 0.0

    @property
    def retry_recovery_rate(self) -> float:
        return (
            self.recovered_by_retry / self.first_attempt_failures
            if self.first_attempt_failures
            else 0.0
        )

    @property
    def budget_exhaustion_rate(self) -> float:
        return self.budget_exhausted / self.requests if self.requests else 0.0


class StructuredMetrics:
    """The counters; ``namespace`` prefixes every name (``orgate_structured_requests_total``…)."""

    def __init__(self, registry: CollectorRegistry, namespace: str = "orgate") -> None:
        def counter(name: str, doc: str, labels: tuple[str, ...] = LABELS) -> Counter:
            return Counter(
                name, doc, labels, namespace=namespace, subsystem="structured", registry=registry
            )

        self.requests = counter("requests", "JSON-format requests that reached a verdict")
        self.first_attempt_failures = counter(
            "first_attempt_failures", "Requests whose first attempt failed"
        )
        self.recovered_by_retry = counter(
            "recovered_by_retry", "Requests valid after at least one retry"
        )
        self.budget_exhausted = counter(
            "budget_exhausted", "Requests that ended without valid output"
        )
        self.failures = counter("failures", "Failed attempts by stage", (*LABELS, "stage"))
        self.retries = counter(
            "retries", "Extra attempts made, by the stage that caused them", (*LABELS, "stage")
        )
        self.outcomes = counter(
            "outcomes",
            "Final outcomes (ok, recovered, default, review, error)",
            (*LABELS, "outcome"),
        )
        self.passthrough = counter(
            "passthrough", "Attempts passed through unchecked", (*LABELS, "reason")
        )
        self.modes = counter("mode", "Requests by the mode chosen", (*LABELS, "mode"))
        self.downgrades = counter(
            "mode_downgrades",
            "First attempts asked again one JSON mode down after the upstream refused a "
            "response format, by the format refused and the mode then sent",
            (*LABELS, "refused", "mode"),
        )

    @staticmethod
    def _sum(counter: Counter, model: str | None, format_name: str | None) -> float:
        total = 0.0
        for metric in counter.collect():
            for sample in metric.samples:
                if not sample.name.endswith("_total"):
                    continue
                if model is not None and sample.labels.get("model") != model:
                    continue
                if format_name is not None and sample.labels.get("format") != format_name:
                    continue
                total += sample.value
        return total

    def rates(self, *, model: str | None = None, format_name: str | None = None) -> Rates:
        return Rates(
            requests=self._sum(self.requests, model, format_name),
            first_attempt_failures=self._sum(self.first_attempt_failures, model, format_name),
            recovered_by_retry=self._sum(self.recovered_by_retry, model, format_name),
            budget_exhausted=self._sum(self.budget_exhausted, model, format_name),
        )
