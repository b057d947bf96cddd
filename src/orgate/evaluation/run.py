"""``orgate eval``: measure the safety net on representative prompts, in-process.

``orgate eval CASES --model M [--runs N] [--config FILE] [--baseline FILE]
[--save FILE] [--misbehave SPEC] [--concurrency N]`` runs every case of CASES N
times through the gateway's **own** safety net (``SafetyNet`` built from the
``[structured]`` section of the config, the same policy, checks and counters
the server uses) against the configured model, offline when the model is the
built-in ``orgate/echo`` or ``orgate/flaky``. It prints

- the three rates, read from the net's Prometheus counters
  (``StructuredMetrics.rates``): first-attempt failure rate, retry recovery
  rate, budget exhaustion rate;
- failed attempts by stage, retries used (by stage and per request),
  outcomes, latency percentiles (p50/p95) and a per-case table.

CASES is YAML (a list of cases, or a mapping with ``cases`` and an optional
``misbehave`` block for ``orgate/flaky``) or JSONL (one case per line). A
case has ``name``, ``prompt``, ``format`` (a ``text.format`` object:
``json_schema`` with ``name``/``schema``/``strict``, or ``json_object``), and
optionally ``semantic`` (``module:function`` checks for this case),
``max_output_tokens`` (a low limit induces truncation), ``instructions`` and
``temperature`` (a YAML mapping may set a ``temperature`` for all its cases: 0 makes a
real model's answers repeatable, so a ``--baseline`` rerun compares like with like).
The case file's folder is put on ``sys.path`` so checks can live next to it.

``--modes`` runs the cases in several structured-output modes side by side
(``modes.py``); the command itself is ``command.py``.

``--baseline FILE`` compares with a saved report and exits 1 when the budget
exhaustion rate rose by ≥ 1 percentage point or the first-attempt failure rate
by ≥ 5 points (``REGRESSION_THRESHOLDS``). ``--save FILE`` writes the JSON
report to FILE, a Markdown summary (with a text bar chart of the rates)
next to it (``FILE`` with the suffix ``.md``) and a self-contained HTML report
with the console's eval charts (suffix ``.html``, readable offline).
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import json
import math
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry

from orgate.config import ConfigError, Settings, deployments
from orgate.neutral import (
    Capabilities,
    Deployment,
    ModelEvent,
    ModelRequest,
    Provider,
    TextFormat,
    WrapperProvider,
)
from orgate.protocol import UserMessageItemParam
from orgate.protocol.errors import ApiError, ErrorCode
from orgate.providers import ProviderRegistry
from orgate.providers.builtin import BuiltinProvider
from orgate.providers.builtin_misbehave import FLAKY_MODEL, FlakyProvider, MisbehaveSettings
from orgate.structured.downgrades import ModeDowngrades
from orgate.structured.metrics import StructuredMetrics
from orgate.structured.net import SafetyNet
from orgate.structured.outcome import Outcome
from orgate.structured.review import ReviewQueue
from orgate.structured.settings import FormatSettings, StructuredPolicy, StructuredSettings

# yaml and rich are imported by the functions that read a case file and print a report: the
# console and `orgate serve` import this module for its report model, and need neither.
if TYPE_CHECKING:
    from rich.console import Console

RATE_NAMES = ("first_attempt_failure_rate", "retry_recovery_rate", "budget_exhaustion_rate")
REGRESSION_THRESHOLDS = {"budget_exhaustion_rate": 0.01, "first_attempt_failure_rate": 0.05}
"""A rise of at least this much (absolute, as a fraction: 0.01 = 1 percentage point) fails
``--baseline``."""
_EPS = 1e-9
_BUILTIN_CAPS = Capabilities(
    tools=True,
    images=True,
    json_schema=True,
    json_object=True,
    strict_json_schema=False,
    max_output_tokens=8192,
)


class CaseError(ValueError):
    """The CASES file is unreadable or a case is malformed; the message says which."""


@dataclass(slots=True, frozen=True)
class Case:
    name: str
    prompt: str
    format: dict[str, Any]
    semantic: tuple[str, ...] = ()
    max_output_tokens: int | None = None
    instructions: str | None = None
    temperature: float | None = None  # 0 makes a real model's answers repeatable

    @property
    def format_name(self) -> str:
        return str(self.format.get("name") or "json_object")

    def text_format(self) -> TextFormat:
        if self.format.get("type") == "json_object":
            return TextFormat("json_object")
        return TextFormat(
            "json_schema",
            self.format_name,
            self.format.get("schema"),
            self.format.get("strict"),
            self.format.get("description"),
        )


@dataclass(slots=True)
class CaseFile:
    cases: list[Case]
    misbehave: MisbehaveSettings | None = None


_CASE_KEYS = frozenset(
    {"name", "prompt", "format", "semantic", "max_output_tokens", "instructions", "temperature"}
)


def _case(raw: Any, where: str) -> Case:
    """One case of a case file; ``where`` names it in the ``CaseError`` when it is malformed."""
    if not isinstance(raw, dict):
        raise CaseError(f"{where}: a case must be a mapping")
    unknown = set(raw) - _CASE_KEYS
    if unknown:
        raise CaseError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    for key in ("name", "prompt", "format"):
        if key not in raw:
            raise CaseError(f"{where}: missing {key!r}")
    semantic = raw.get("semantic") or []
    return Case(
        name=str(raw["name"]),
        prompt=str(raw["prompt"]),
        format=dict(_text_format(raw["format"], where)),
        semantic=tuple(str(s) for s in ([semantic] if isinstance(semantic, str) else semantic)),
        max_output_tokens=_max_output_tokens(raw.get("max_output_tokens"), where),
        instructions=raw.get("instructions"),
        temperature=_temperature(raw.get("temperature"), where),
    )


def _text_format(fmt: Any, where: str) -> dict[str, Any]:
    """A case's ``format``: a ``json_schema`` (with a name and a schema) or ``json_object``."""
    if not isinstance(fmt, dict) or fmt.get("type") not in ("json_schema", "json_object"):
        raise CaseError(f"{where}: format must be a json_schema or json_object text.format object")
    if fmt["type"] == "json_schema" and (
        not isinstance(fmt.get("schema"), dict) or not fmt.get("name")
    ):
        raise CaseError(f"{where}: a json_schema format needs `name` and a `schema` object")
    return fmt


def _max_output_tokens(limit: Any, where: str) -> int | None:
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        raise CaseError(f"{where}: max_output_tokens must be a positive integer")
    return limit


def _temperature(temperature: Any, where: str) -> float | None:
    if temperature is not None and (
        not isinstance(temperature, int | float)
        or isinstance(temperature, bool)
        or not 0 <= temperature <= 2
    ):
        raise CaseError(f"{where}: temperature must be a number from 0 to 2")
    return temperature


def load_cases(path: str | Path) -> CaseFile:
    """Read a YAML or JSONL case file (by suffix; ``.jsonl``/``.ndjson`` are JSONL)."""
    import yaml

    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise CaseError(f"cannot read {file}: {exc}") from None
    misbehave: MisbehaveSettings | None = None
    try:
        raws: Any  # the file's cases as read, each checked below
        if file.suffix in (".jsonl", ".ndjson"):
            raws = []
            for lineno, line in enumerate(text.removeprefix("\ufeff").splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    raws.append(json.loads(line))
                except (
                    json.JSONDecodeError
                ) as exc:  # the file's line number, not the line's own "line 1"
                    raise CaseError(
                        f"line {lineno}: invalid JSON: {exc.msg} (column {exc.colno})"
                    ) from None
        else:
            data = yaml.safe_load(text)
            if isinstance(data, dict):
                raws = data.get("cases")
                if data.get("temperature") is not None and isinstance(raws, list):
                    # the file's default for every case that sets none
                    raws = [
                        {"temperature": data["temperature"], **raw}
                        if isinstance(raw, dict)
                        else raw
                        for raw in raws
                    ]
                if data.get("misbehave") is not None:
                    misbehave = MisbehaveSettings.model_validate(data["misbehave"])
            else:
                raws = data
    except (json.JSONDecodeError, yaml.YAMLError, ValueError) as exc:
        raise CaseError(f"{file}: {exc}") from None
    if not isinstance(raws, list) or not raws:
        raise CaseError(f"{file}: no cases (expected a list, or a mapping with `cases`)")
    cases = [_case(raw, f"{file} case {i + 1}") for i, raw in enumerate(raws)]
    names = [c.name for c in cases]
    if len(set(names)) != len(names):
        raise CaseError(f"{file}: case names must be unique")
    return CaseFile(cases, misbehave)


# --------------------------------------------------------------------------- results


@dataclass(slots=True)
class RunResult:
    case: str
    run: int
    status: str  # ok | recovered | default | review | error | passthrough | upstream_error
    stages: list[str | None]  # per attempt: None = valid
    exhausted_by: str | None
    latency_ms: float
    error: str | None = None
    upstream_calls: int = 0  # calls the request made upstream (refused first attempts too)

    @property
    def retries(self) -> int:
        return max(0, len(self.stages) - 1)


def _percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass(slots=True)
class EvalReport:
    model: str
    cases_file: str
    runs: int
    cases: int
    misbehave: dict[str, Any] | None
    # requests, first_attempt_failures, recovered_by_retry, budget_exhausted
    counts: dict[str, int]
    rates: dict[str, float]
    failures_by_stage: dict[str, int]
    retries_by_stage: dict[str, int]
    retries_used: dict[str, int]  # retries per request → how many requests
    outcomes: dict[str, int]
    latency_ms: dict[str, float]
    per_case: list[dict[str, Any]] = field(default_factory=list)
    created_at: float = field(default_factory=time.time)
    mode: str | None = None  # the mode compared (modes.py); None: as configured
    # the stage of each judged request's first attempt that failed → how many requests
    first_attempt_stages: dict[str, int] = field(default_factory=dict)
    upstream_calls: dict[str, float] = field(default_factory=dict)  # per request: mean, max
    modes_used: dict[str, int] = field(default_factory=dict)  # the mode each request ended in

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalReport:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


def build_report(
    results: list[RunResult],
    metrics: StructuredMetrics,
    *,
    model: str,
    cases: list[Case],
    cases_file: str,
    runs: int,
    misbehave: MisbehaveSettings | None,
    mode: str | None = None,
    modes_used: Counter[str] | None = None,
) -> EvalReport:
    rates = metrics.rates(model=model)
    failures, retries = _stages(results)
    judged = [r for r in results if _judged(r)]
    calls = [r.upstream_calls for r in results]
    return EvalReport(
        model=model,
        cases_file=cases_file,
        runs=runs,
        cases=len(cases),
        misbehave=misbehave.model_dump() if misbehave is not None else None,
        counts={  # counts of requests: integers (the metrics keep them as float counters)
            "requests": int(rates.requests),
            "first_attempt_failures": int(rates.first_attempt_failures),
            "recovered_by_retry": int(rates.recovered_by_retry),
            "budget_exhausted": int(rates.budget_exhausted),
        },
        rates={name: getattr(rates, name) for name in RATE_NAMES},
        failures_by_stage=dict(sorted(failures.items())),
        retries_by_stage=dict(sorted(retries.items())),
        retries_used={str(k): v for k, v in sorted(Counter(r.retries for r in judged).items())},
        outcomes=dict(sorted(Counter(r.status for r in results).items())),
        latency_ms=_latency([r.latency_ms for r in results]),
        per_case=[_case_row(case, results) for case in cases],
        mode=mode,
        first_attempt_stages=dict(
            sorted(Counter(r.stages[0] for r in judged if r.stages and r.stages[0]).items())
        ),
        upstream_calls={
            "mean": round(sum(calls) / len(calls), 3) if calls else 0.0,
            "max": float(max(calls, default=0)),
        },
        modes_used=dict(sorted((modes_used or Counter()).items())),
    )


def _judged(result: RunResult) -> bool:
    """Whether the net gave a verdict (pass-throughs and upstream errors are not its verdicts)."""
    return result.status not in ("passthrough", "upstream_error")


def _stages(results: list[RunResult]) -> tuple[Counter[str], Counter[str]]:
    """Failed attempts by stage, and those of them that were retried."""
    failures: Counter[str] = Counter()
    retries: Counter[str] = Counter()
    for r in results:
        for index, stage in enumerate(r.stages):
            if stage is not None:
                failures[stage] += 1
                if index + 1 < len(r.stages):
                    retries[stage] += 1
    return failures, retries


def _latency(latencies: list[float]) -> dict[str, float]:
    return {
        "p50": round(_percentile(latencies, 50), 3),
        "p95": round(_percentile(latencies, 95), 3),
        "max": round(max(latencies, default=0.0), 3),
    }


def _case_row(case: Case, results: list[RunResult]) -> dict[str, Any]:
    """One case's line of the report: its rates over its judged requests."""
    mine = [r for r in results if r.case == case.name]
    judged = [r for r in mine if _judged(r)]
    n = len(judged) or 1
    return {
        "name": case.name,
        "format": case.format_name,
        "requests": len(judged),
        "first_attempt_failure_rate": sum(r.stages[0] is not None for r in judged) / n,
        "budget_exhaustion_rate": sum(r.status not in ("ok", "recovered") for r in judged) / n,
        "retries": sum(r.retries for r in mine),
        "p50_ms": round(_percentile([r.latency_ms for r in mine], 50), 3),
    }


# --------------------------------------------------------------------------- running


def _policy(settings: StructuredSettings, case: Case) -> StructuredPolicy:
    """The configured policy, with the case's own semantic checks added to its format."""
    if not case.semantic:
        return StructuredPolicy.from_settings(settings)
    formats = dict(settings.formats)
    current = formats.get(case.format_name, FormatSettings())
    formats[case.format_name] = current.model_copy(
        update={"semantic": [*current.semantic, *case.semantic]}
    )
    return StructuredPolicy.from_settings(settings.model_copy(update={"formats": formats}))


def _request(deployment: Deployment, case: Case, run: int) -> ModelRequest:
    return ModelRequest(
        model=deployment.upstream_model,
        input=[UserMessageItemParam(content=case.prompt)],
        instructions=case.instructions,
        max_output_tokens=case.max_output_tokens,
        temperature=case.temperature,
        text_format=case.text_format(),
        metadata={"orgate_eval_case": case.name, "orgate_eval_run": str(run)},
    )


class _CountingProvider(WrapperProvider):
    """Counts the upstream calls of the request being run (each runs in its own task)."""

    def stream_batches(self, request: ModelRequest) -> AsyncIterator[list[ModelEvent]]:
        counter = _CALLS.get(None)
        if counter is not None:
            counter[0] += 1
        return self.inner.stream_batches(request)


_CALLS: contextvars.ContextVar[list[int]] = contextvars.ContextVar("orgate_eval_calls")


async def run_eval(
    cases: list[Case],
    provider: Provider,
    deployment: Deployment,
    settings: StructuredSettings,
    *,
    runs: int = 1,
    concurrency: int = 1,
    metrics: StructuredMetrics | None = None,
    review_db: str | None = None,
    on_result: Callable[[RunResult], None] | None = None,
    semantic: bool = True,
    downgrades: ModeDowngrades | None = None,
    modes_used: Counter[str] | None = None,
) -> tuple[list[RunResult], StructuredMetrics]:
    """Run every case ``runs`` times through a ``SafetyNet``; results in (case, run) order.

    ``semantic``: False runs the parse and schema layers only (no semantic check, the case's
    or the configuration's); ``downgrades``: what the upstream refused, shared across runs of
    the same upstream; ``modes_used`` counts the mode each request ended in.
    """
    metrics = metrics if metrics is not None else StructuredMetrics(CollectorRegistry())
    counting = _CountingProvider(provider)
    if not semantic:
        settings = settings.model_copy(
            update={
                "formats": {
                    name: fs.model_copy(update={"semantic": []})
                    for name, fs in settings.formats.items()
                }
            }
        )
    with tempfile.TemporaryDirectory(prefix="orgate-eval-") as tmp:
        queue = ReviewQueue(review_db or str(Path(tmp) / "review.db"))
        # one upstream: what it refuses is learnt once
        downgrades = downgrades if downgrades is not None else ModeDowngrades()
        nets = {
            case.name: SafetyNet(
                counting,
                deployment,
                _policy(settings, case if semantic else dataclasses.replace(case, semantic=())),
                metrics,
                queue,
                downgrades=downgrades,
            )
            for case in cases
        }
        gate = asyncio.Semaphore(max(1, concurrency))

        async def one(case: Case, run: int) -> RunResult:
            async with gate:
                outcome = Outcome(response_id=f"eval_{case.name}_{run}")
                calls = [0]
                _CALLS.set(calls)  # this task's own: gather runs each request in a task
                started = time.perf_counter()
                error: str | None = None
                try:
                    async for _ in nets[case.name].stream(
                        _request(deployment, case, run), outcome=outcome
                    ):
                        pass
                except ApiError as exc:
                    if exc.code != ErrorCode.STRUCTURED_OUTPUT_INVALID:
                        error = f"{exc.code}: {exc.message}"
                elapsed = (time.perf_counter() - started) * 1000
                status = outcome.status if error is None else "upstream_error"
                result = RunResult(
                    case.name,
                    run,
                    status,
                    [a.stage for a in outcome.attempts],
                    outcome.exhausted_by,
                    elapsed,
                    error,
                    calls[0],
                )
                if modes_used is not None and outcome.mode is not None:
                    modes_used[outcome.mode] += 1
                if on_result is not None:
                    on_result(result)
                return result

        results = await asyncio.gather(*(one(c, r) for c in cases for r in range(1, runs + 1)))
        close = getattr(queue, "close", None)
        if close is not None:
            close()
    return list(results), metrics


def resolve_target(
    settings: Settings, model: str, misbehave: MisbehaveSettings | None
) -> tuple[Deployment, Callable[[], Provider], MisbehaveSettings | None]:
    """The deployment for ``model`` and a factory of its provider (call it inside the loop).

    ``orgate/flaky`` is always built here, with ``misbehave`` (else the config's
    ``[builtin] misbehave``, else the defaults), so that the rates of an eval
    are the ones it reports.
    """
    table = deployments(settings)
    if model == FLAKY_MODEL and settings.builtin.enabled:
        rates = misbehave or getattr(settings.builtin, "misbehave", None) or MisbehaveSettings()
        dep = table.get(model) or Deployment(model, "builtin", model, capabilities=_BUILTIN_CAPS)
        return dep, lambda: FlakyProvider(BuiltinProvider(dep), rates), rates
    found = table.get(model)
    if found is None:
        known = ", ".join(sorted({*table, FLAKY_MODEL} if settings.builtin.enabled else table))
        raise ConfigError(f"unknown model {model!r}; configured: {known or '(none)'}")
    return found, lambda: _PooledProvider(found), None


class _PooledProvider(WrapperProvider):
    """A configured upstream's provider that owns its connection pool: closing it closes the
    pool's HTTP session too (an eval is one short-lived process)."""

    def __init__(self, deployment: Deployment) -> None:
        self._registry = ProviderRegistry()
        super().__init__(self._registry(deployment))

    async def aclose(self) -> None:
        await self._registry.aclose()  # its providers, then the pool


# --------------------------------------------------------------------------- output


def _pct(x: float) -> str:
    return f"{x * 100:.1f}%"


def compare(current: EvalReport, baseline: EvalReport) -> list[tuple[str, float, float, bool]]:
    """Per rate: (name, baseline, current, regressed)."""
    rows = []
    for name in RATE_NAMES:
        before, now = baseline.rates.get(name, 0.0), current.rates.get(name, 0.0)
        limit = REGRESSION_THRESHOLDS.get(name)
        rows.append((name, before, now, limit is not None and now - before >= limit - _EPS))
    return rows


def bar(value: float, width: int = 40) -> str:
    filled = round(max(0.0, min(1.0, value)) * width)
    return "█" * filled + "·" * (width - filled)


def to_markdown(
    report: EvalReport, comparison: list[tuple[str, float, float, bool]] | None = None
) -> str:
    lines = [
        f"# orgate eval — {report.model}",
        "",
        f"{report.cases} case(s) × {report.runs} run(s) from `{report.cases_file}`; "
        f"{int(report.counts['requests'])} request(s) judged.",
        "",
        "## Rates",
        "",
        "```text",
    ]
    for name in RATE_NAMES:
        label = name.replace("_", " ")
        lines.append(f"{label:<28} {bar(report.rates[name])} {_pct(report.rates[name]):>6}")
    lines += ["```", "", "| rate | value |", "|---|---|"]
    lines += [f"| {n.replace('_', ' ')} | {_pct(report.rates[n])} |" for n in RATE_NAMES]
    lines += [
        "",
        "## Failures and retries",
        "",
        "| stage | failed attempts | retries caused |",
        "|---|---|---|",
    ]
    for stage in sorted(set(report.failures_by_stage) | set(report.retries_by_stage)):
        lines.append(
            f"| {stage} | {report.failures_by_stage.get(stage, 0)}"
            f" | {report.retries_by_stage.get(stage, 0)} |"
        )
    lines += [
        "",
        "Retries used per request: "
        + ", ".join(f"{k}: {v}" for k, v in report.retries_used.items()),
    ]
    lines += ["", "Outcomes: " + ", ".join(f"{k} {v}" for k, v in report.outcomes.items())]
    lat = report.latency_ms
    lines += [
        "",
        f"Latency: p50 {lat['p50']:.1f} ms, p95 {lat['p95']:.1f} ms, max {lat['max']:.1f} ms",
    ]
    lines += [
        "",
        "## Cases",
        "",
        "| case | format | requests | first-attempt failures | exhausted | retries |",
        "|---|---|---|---|---|---|",
    ]
    for row in report.per_case:
        lines.append(
            f"| {row['name']} | {row['format']} | {row['requests']}"
            f" | {_pct(row['first_attempt_failure_rate'])} "
            f"| {_pct(row['budget_exhaustion_rate'])} | {row['retries']} |"
        )
    if comparison is not None:
        lines += [
            "",
            "## Against the baseline",
            "",
            "| rate | baseline | now | change | |",
            "|---|---|---|---|---|",
        ]
        for name, before, now, regressed in comparison:
            lines.append(
                f"| {name.replace('_', ' ')} | {_pct(before)} | {_pct(now)}"
                f" | {(now - before) * 100:+.1f} pts | {'REGRESSION' if regressed else 'ok'} |"
            )
    return "\n".join(lines) + "\n"


def print_report(
    report: EvalReport, console: Console, comparison: list[tuple[str, float, float, bool]] | None
) -> None:
    from rich.table import Table

    rates = Table(title=f"orgate eval — {report.model} ({report.cases} cases × {report.runs} runs)")
    rates.add_column("rate")
    rates.add_column("value", justify="right")
    rates.add_column("")
    for name in RATE_NAMES:
        rates.add_row(name.replace("_", " "), _pct(report.rates[name]), bar(report.rates[name], 30))
    console.print(rates)
    counts = report.counts
    console.print(
        f"requests {int(counts['requests'])},"
        f" first-attempt failures {int(counts['first_attempt_failures'])},"
        f" recovered by retry {int(counts['recovered_by_retry'])},"
        f" budget exhausted {int(counts['budget_exhausted'])}"
    )
    stages = Table(title="failures by stage")
    stages.add_column("stage")
    stages.add_column("failed attempts", justify="right")
    stages.add_column("retries caused", justify="right")
    for stage in sorted(set(report.failures_by_stage) | set(report.retries_by_stage)):
        stages.add_row(
            stage,
            str(report.failures_by_stage.get(stage, 0)),
            str(report.retries_by_stage.get(stage, 0)),
        )
    console.print(stages)
    console.print(
        "retries used per request: "
        + ", ".join(f"{k} → {v}" for k, v in report.retries_used.items())
    )
    console.print("outcomes: " + ", ".join(f"{k} {v}" for k, v in report.outcomes.items()))
    lat = report.latency_ms
    console.print(
        f"latency: p50 {lat['p50']:.1f} ms, p95 {lat['p95']:.1f} ms, max {lat['max']:.1f} ms"
    )
    if comparison is not None:
        table = Table(title="against the baseline")
        for col in ("rate", "baseline", "now", "change", "verdict"):
            table.add_column(col)
        for name, before, now, regressed in comparison:
            table.add_row(
                name.replace("_", " "),
                _pct(before),
                _pct(now),
                f"{(now - before) * 100:+.1f} pts",
                "[red]REGRESSION[/red]" if regressed else "ok",
            )
        console.print(table)


def save_report(
    report: EvalReport,
    path: str | Path,
    comparison: list[tuple[str, float, float, bool]] | None = None,
) -> tuple[Path, Path]:
    """Write FILE (JSON) and FILE with suffix ``.md`` (Markdown summary); returns both paths."""
    json_path = Path(path)
    md_path = (
        json_path.with_suffix(".md")
        if json_path.suffix != ".md"
        else json_path.with_suffix(".md.md")
    )
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(report.to_dict(), indent=2) + "\n", encoding="utf-8")
    md_path.write_text(to_markdown(report, comparison), encoding="utf-8")
    return json_path, md_path


def html_path(json_path: Path) -> Path:
    """FILE with the suffix ``.html``, beside the JSON and Markdown reports."""
    return (
        json_path.with_suffix(".html")
        if json_path.suffix != ".html"
        else json_path.with_suffix(".html.html")
    )
