"""``orgate eval --modes``: the same model and cases in several structured-output modes, side by
side.

A mode says how the JSON is asked for, whatever the deployment could do (``EvalMode``):

==========================  ===============================================================
mode                        the net sends
==========================  ===============================================================
``prompt``                  the schema in the instructions only (no response format)
``json_object``             ``json_object`` + the schema in the instructions
``constrained``             the upstream's own constrained decoding: the first schema
                            dialect it takes (``capabilities.schema_dialects``, learnt down
                            the refusal ladder), parse and schema checks only
``constrained+semantic``    the same, with the semantic checks (the case's and the config's)
==========================  ===============================================================

``prompt`` and ``json_object`` run the semantic checks too, as the net does by default; the
``constrained`` mode without them shows what the semantic layer adds. Each mode gets its
own counters (so its own three rates), upstream calls per request and latency; the modes
share what the upstream was seen to refuse (one upstream), and take turns case by case. The
comparison is one table and
one chart (``to_markdown``, ``print_comparison``; the HTML report draws the same), and the
regression rule of ``--baseline`` applies per mode (a saved comparison's mode against the
same mode now).
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry

from orgate.evaluation.run import (
    RATE_NAMES,
    Case,
    EvalReport,
    RunResult,
    bar,
    build_report,
    compare,
    run_eval,
    to_markdown,
)
from orgate.neutral import Capabilities, Deployment, Provider
from orgate.structured.downgrades import ModeDowngrades
from orgate.structured.metrics import StructuredMetrics
from orgate.structured.settings import StructuredSettings

if TYPE_CHECKING:
    from rich.console import Console


def _prompt_only(caps: Capabilities) -> Capabilities:
    return dataclasses.replace(caps, json_schema=False, json_object=False)


def _json_object(caps: Capabilities) -> Capabilities:
    return dataclasses.replace(caps, json_schema=False, json_object=True)


def _as_configured(caps: Capabilities) -> Capabilities:
    return caps


@dataclass(frozen=True, slots=True)
class EvalMode:
    """One way of asking for JSON: the deployment's capabilities seen through it, and whether
    the semantic checks run."""

    name: str
    about: str
    capabilities: Callable[[Capabilities], Capabilities]
    semantic: bool = True

    def deployment(self, deployment: Deployment) -> Deployment:
        return dataclasses.replace(
            deployment, capabilities=self.capabilities(deployment.capabilities)
        )


MODES: dict[str, EvalMode] = {
    mode.name: mode
    for mode in (
        EvalMode("prompt", "the schema in the instructions only", _prompt_only),
        EvalMode("json_object", "json_object + the schema in the instructions", _json_object),
        EvalMode(
            "constrained",
            "the upstream's constrained decoding, parse and schema checks only",
            _as_configured,
            semantic=False,
        ),
        EvalMode(
            "constrained+semantic",
            "the upstream's constrained decoding and the semantic checks",
            _as_configured,
        ),
    )
}


def parse_modes(spec: str) -> list[EvalMode]:
    """``"all"`` or names separated by commas → the modes, in the order given."""
    names = list(MODES) if spec.strip() == "all" else [n.strip() for n in spec.split(",")]
    unknown = [n for n in names if n not in MODES]
    if unknown or not names:
        raise ValueError(
            f"--modes: unknown mode(s) {', '.join(unknown) or '(none)'}; "
            f"expected 'all' or some of {', '.join(MODES)}"
        )
    return [MODES[n] for n in dict.fromkeys(names)]


async def run_modes(
    modes: list[EvalMode],
    cases: list[Case],
    provider: Provider,
    deployment: Deployment,
    settings: StructuredSettings,
    *,
    cases_file: str,
    runs: int = 1,
    concurrency: int = 1,
    on_result: Callable[[RunResult], None] | None = None,
) -> list[EvalReport]:
    """Every case in every mode; a report per mode.

    The modes take turns case by case (a case in each mode, then the next case), so that a
    machine busier at one moment than another weighs on every mode alike: their latencies
    compare.
    """
    downgrades = ModeDowngrades()  # one upstream: what it refuses is learnt once, for all
    metrics = {mode.name: StructuredMetrics(CollectorRegistry()) for mode in modes}
    used: dict[str, Counter[str]] = {mode.name: Counter() for mode in modes}
    results: dict[str, list[RunResult]] = {mode.name: [] for mode in modes}
    for case in cases:
        for mode in modes:
            done, _ = await run_eval(
                [case],
                provider,
                mode.deployment(deployment),
                settings,
                runs=runs,
                concurrency=concurrency,
                metrics=metrics[mode.name],
                on_result=on_result,
                semantic=mode.semantic,
                downgrades=downgrades,
                modes_used=used[mode.name],
            )
            results[mode.name] += done
    return [
        build_report(
            results[mode.name],
            metrics[mode.name],
            model=deployment.name,
            cases=cases,
            cases_file=cases_file,
            runs=runs,
            misbehave=None,
            mode=mode.name,
            modes_used=used[mode.name],
        )
        for mode in modes
    ]


# --------------------------------------------------------------------------- comparing


Comparison = list[tuple[str, str, float, float, bool]]  # mode, rate, before, now, regressed


def compare_modes(current: list[EvalReport], baseline: list[EvalReport]) -> Comparison:
    """Per mode present in both, per rate: the regression rule of ``--baseline``."""
    before = {report.mode: report for report in baseline}
    rows: Comparison = []
    for report in current:
        earlier = before.get(report.mode)
        if earlier is not None:
            rows += [(str(report.mode), *row) for row in compare(report, earlier)]
    return rows


def schema_first_failure_rate(report: EvalReport) -> float:
    """The share of judged requests whose first attempt failed at the schema stage."""
    requests = report.counts.get("requests", 0)
    return report.first_attempt_stages.get("schema", 0) / requests if requests else 0.0


def _row(report: EvalReport) -> list[str]:
    rates, lat = report.rates, report.latency_ms
    return [
        str(report.mode),
        f"{report.counts.get('requests', 0)}",
        _pct(rates["first_attempt_failure_rate"]),
        _pct(schema_first_failure_rate(report)),
        _pct(rates["retry_recovery_rate"]),
        _pct(rates["budget_exhaustion_rate"]),
        f"{report.upstream_calls.get('mean', 0.0):.2f}",
        _duration(lat["p50"]),
        _duration(lat["p95"]),
        ", ".join(f"{m} {n}" for m, n in report.modes_used.items()) or "-",
    ]


HEADERS = [
    "mode",
    "requests",
    "first-attempt failures",
    "of them at the schema stage",
    "retry recovery",
    "budget exhaustion",
    "upstream calls / request",
    "p50",
    "p95",
    "sent as",
]


#: The same columns, short enough for a terminal.
SHORT_HEADERS = [
    "mode",
    "req",
    "1st fail",
    "1st fail: schema",
    "recovery",
    "exhausted",
    "calls/req",
    "p50",
    "p95",
]


def _duration(ms: float) -> str:
    return f"{ms / 1000:.2f} s" if ms >= 1000 else f"{ms:.1f} ms"


def _pct(x: float) -> str:
    return f"{x * 100:.1f}%"


def chart_lines(reports: list[EvalReport], width: int = 30) -> list[str]:
    """The three rates of every mode as text bars, grouped by rate."""
    label = max((len(str(r.mode)) for r in reports), default=4)
    lines = []
    for name in RATE_NAMES:
        lines.append(name.replace("_", " "))
        for report in reports:
            value = report.rates[name]
            lines.append(f"  {str(report.mode):<{label}} {bar(value, width)} {_pct(value):>6}")
    return lines


def to_markdown_comparison(reports: list[EvalReport], comparison: Comparison | None) -> str:
    """The table, the chart, then each mode's own report."""
    first = reports[0]
    lines = [
        f"# orgate eval — {first.model}: modes side by side",
        "",
        f"{first.cases} case(s) × {first.runs} run(s) from `{first.cases_file}`, in "
        f"{len(reports)} mode(s).",
        "",
        "| " + " | ".join(HEADERS) + " |",
        "|" + "---|" * len(HEADERS),
    ]
    lines += ["| " + " | ".join(_row(report)) + " |" for report in reports]
    lines += ["", "```text", *chart_lines(reports), "```"]
    if comparison is not None:
        lines += [
            "",
            "## Against the baseline",
            "",
            "| mode | rate | baseline | now | change | |",
            "|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {mode} | {rate.replace('_', ' ')} | {_pct(before)} | {_pct(now)} "
            f"| {(now - before) * 100:+.1f} pts | {'REGRESSION' if regressed else 'ok'} |"
            for mode, rate, before, now, regressed in comparison
        ]
    for report in reports:
        own = to_markdown(report).replace("\n## ", "\n### ").replace("# orgate eval — ", "## ")
        lines += ["", own.replace(f"## {report.model}\n", f"## mode {report.mode}\n", 1)]
    return "\n".join(lines) + "\n"


def print_comparison(
    reports: list[EvalReport], console: Console, comparison: Comparison | None
) -> None:
    from rich.table import Table

    first = reports[0]
    table = Table(title=f"orgate eval — {first.model} ({first.cases} cases × {first.runs} runs)")
    for index, header in enumerate(SHORT_HEADERS):
        table.add_column(header, justify="right" if index else "left", no_wrap=True)
    for report in reports:
        table.add_row(*_row(report)[: len(SHORT_HEADERS)])
    console.print(table)
    for report in reports:
        console.print(f"{report.mode} sent as: {_row(report)[-1]}", highlight=False)
    console.print("\n".join(chart_lines(reports)), highlight=False)
    if comparison is not None:
        against = Table(title="against the baseline")
        for col in ("mode", "rate", "baseline", "now", "change", "verdict"):
            against.add_column(col)
        for mode, rate, before, now, regressed in comparison:
            against.add_row(
                mode,
                rate.replace("_", " "),
                _pct(before),
                _pct(now),
                f"{(now - before) * 100:+.1f} pts",
                "[red]REGRESSION[/red]" if regressed else "ok",
            )
        console.print(against)


def to_document(reports: list[EvalReport]) -> dict[str, Any]:
    """What ``--save`` writes as JSON for a comparison: every mode's report."""
    return {"modes": [report.to_dict() for report in reports]}


def read_reports(path: str | Path) -> list[EvalReport]:
    """A saved report (one, as configured) or a saved comparison (one per mode)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if isinstance(data, dict) and isinstance(data.get("modes"), list):
        return [EvalReport.from_dict(item) for item in data["modes"]]
    return [EvalReport.from_dict(data)]


def save_comparison(
    reports: list[EvalReport], path: str | Path, comparison: Comparison | None
) -> tuple[Path, Path]:
    """FILE (JSON) and FILE with the suffix ``.md``; returns both paths."""
    json_path = Path(path)
    md_path = json_path.with_suffix(".md" if json_path.suffix != ".md" else ".md.md")
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(to_document(reports), indent=2) + "\n", encoding="utf-8")
    md_path.write_text(to_markdown_comparison(reports, comparison), encoding="utf-8")
    return json_path, md_path
