"""What the eval charts draw, from reports saved by ``orgate eval --save``.

``eval_model(reports)`` orders the runs by time and gives the three rates per run (a saved
comparison of modes, ``orgate eval --modes``, is a run per mode, and its modes side by side
for the latest one), the
regression thresholds drawn over them (the previous run's rate plus the threshold
``orgate eval --baseline`` applies, from ``REGRESSION_THRESHOLDS``), the latest run's
failures by stage and per-case table, and which rates regressed against the previous
run (``compare``, as ``--baseline`` decides). The console page and the HTML report
written next to a saved report draw the same model with the same script.
"""

from __future__ import annotations

from typing import Any

from orgate.evaluation.run import RATE_NAMES, REGRESSION_THRESHOLDS, EvalReport, compare


class ReportError(ValueError):
    """A document that is not a report saved by ``orgate eval --save``."""


def parse_reports(data: Any, name: str) -> list[EvalReport]:
    """A saved report, or a saved comparison of modes (``{"modes": [report, ...]}``)."""
    if isinstance(data, dict) and isinstance(data.get("modes"), list) and data["modes"]:
        return [
            parse_report(item, f"{name} (mode {i + 1})") for i, item in enumerate(data["modes"])
        ]
    return [parse_report(data, name)]


def parse_report(data: Any, name: str) -> EvalReport:
    if not isinstance(data, dict) or not isinstance(data.get("rates"), dict) or "model" not in data:
        raise ReportError(f"{name}: not a report saved by orgate eval --save (no model or rates)")
    try:
        return EvalReport.from_dict(data)
    except TypeError as exc:
        raise ReportError(f"{name}: not a report saved by orgate eval --save ({exc})") from None


def mode_rows(reports: list[EvalReport]) -> list[dict[str, Any]]:
    """The modes of the latest comparison (``orgate eval --modes``), side by side."""
    compared = [report for report in reports if report.mode is not None]
    if not compared:
        return []
    latest = max(report.created_at for report in compared)
    return [
        {
            "mode": report.mode,
            "requests": report.counts.get("requests", 0),
            "rates": {name: report.rates.get(name, 0.0) for name in RATE_NAMES},
            "schema_first_failure_rate": (
                report.first_attempt_stages.get("schema", 0) / report.counts["requests"]
                if report.counts.get("requests")
                else 0.0
            ),
            "upstream_calls": report.upstream_calls.get("mean", 0.0),
            "latency_ms": report.latency_ms,
            "modes_used": report.modes_used,
        }
        for report in compared
        if report.created_at == latest
    ]


def eval_model(reports: list[EvalReport]) -> dict[str, Any]:
    runs = sorted(reports, key=lambda report: report.created_at)
    latest = runs[-1] if runs else None
    previous = runs[-2] if len(runs) > 1 else None
    if latest is not None and latest.mode is not None:  # a comparison: the one before it
        previous = next((r for r in reversed(runs) if r.created_at < latest.created_at), None)
    return {
        "modes": mode_rows(runs),
        "rate_names": list(RATE_NAMES),
        "thresholds": REGRESSION_THRESHOLDS,
        "runs": [
            {
                "created_at": run.created_at,
                "model": run.model,
                "cases_file": run.cases_file,
                "requests": run.counts.get("requests", 0),
                "mode": run.mode,
                "rates": {name: run.rates.get(name, 0.0) for name in RATE_NAMES},
            }
            for run in runs
        ],
        "latest": None
        if latest is None
        else {
            "model": latest.model,
            "created_at": latest.created_at,
            "failures_by_stage": latest.failures_by_stage,
            "outcomes": latest.outcomes,
            "per_case": latest.per_case,
            "latency_ms": latest.latency_ms,
        },
        "comparison": None
        if previous is None or latest is None
        else [
            {"rate": name, "previous": before, "latest": now, "regressed": regressed}
            for name, before, now, regressed in compare(latest, previous)
        ],
    }
