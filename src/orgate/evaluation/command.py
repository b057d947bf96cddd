"""``orgate eval``, the command: reads the cases, the config and a baseline, runs the cases
against the model (as configured, or in each of ``--modes`` side by side), prints and saves
the reports, and exits 1 on a regression against the baseline.

The measuring is ``run.py`` (one run) and ``modes.py`` (the modes compared); the HTML
report, with the console's charts, is ``html.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from orgate import terminal
from orgate.config import ConfigError, Settings, load_settings
from orgate.evaluation.modes import (
    Comparison,
    EvalMode,
    compare_modes,
    parse_modes,
    print_comparison,
    read_reports,
    run_modes,
    save_comparison,
    to_document,
)
from orgate.evaluation.run import (
    CaseError,
    CaseFile,
    EvalReport,
    RunResult,
    build_report,
    compare,
    html_path,
    load_cases,
    print_report,
    resolve_target,
    run_eval,
    save_report,
)
from orgate.neutral import Deployment, Provider
from orgate.providers.builtin_misbehave import MisbehaveSettings
from orgate.structured.metrics import StructuredMetrics

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress


@dataclass(slots=True)
class _EvalInputs:
    """What one ``orgate eval`` command runs: read and resolved before anything is asked."""

    case_file: CaseFile
    settings: Settings
    deployment: Deployment
    make_provider: Callable[[], Provider]
    misbehave: MisbehaveSettings | None  # of orgate/flaky, as reported
    baseline: list[EvalReport]  # one report, or one per mode of a saved comparison
    modes: list[EvalMode]  # empty: as configured


def cmd_eval(args: argparse.Namespace) -> int:
    from rich.console import Console

    err = Console(
        stderr=True, soft_wrap=True
    )  # one message, one line (not cut at 80 columns in a log)
    out = Console(width=max(100, Console().width))
    if not args.verbose:  # one log record per attempt is noise here; the report has the numbers
        logging.getLogger("orgate.structured").addHandler(logging.NullHandler())
        logging.getLogger("orgate.structured").propagate = False
    folder = str(Path(args.cases).resolve().parent)
    if folder not in sys.path:  # semantic checks next to the case file are importable
        sys.path.insert(0, folder)
    try:
        inputs = _eval_inputs(args)
    except (CaseError, ConfigError, ValueError, OSError, TypeError) as exc:
        terminal.error(str(exc))
        return 2
    if args.runs < 1:
        terminal.error("--runs must be at least 1")
        return 2
    if inputs.modes:  # a wider table: one column per number
        return _compare_modes(args, inputs, Console(width=max(140, out.width)), err)
    results, metrics = asyncio.run(_run_with_progress(args, inputs, err))
    report = build_report(
        results,
        metrics,
        model=inputs.deployment.name,
        cases=inputs.case_file.cases,
        cases_file=str(args.cases),
        runs=args.runs,
        misbehave=inputs.misbehave,
    )
    baseline = next((b for b in inputs.baseline if b.mode is None), None)
    if inputs.baseline and baseline is None:
        err.print("the baseline compares modes: run with --modes to compare with it")
    comparison = compare(report, baseline) if baseline is not None else None
    if args.json:
        print(
            json.dumps(
                {"report": report.to_dict(), "baseline": [list(c) for c in comparison or []]},
                indent=2,
            )
        )
    else:
        print_report(report, out, comparison)
    if args.save:
        _save_all(report, baseline, comparison, args.save, err)
    upstream_errors = sum(r.status == "upstream_error" for r in results)
    return _exit_code(upstream_errors, comparison, err)


def _compare_modes(
    args: argparse.Namespace, inputs: _EvalInputs, out: Console, err: Console
) -> int:
    """Every case in each of ``--modes``: one table, one chart, the baseline per mode."""
    reports = asyncio.run(_run_modes_with_progress(args, inputs, err))
    comparison = compare_modes(reports, inputs.baseline) if inputs.baseline else None
    if args.json:
        baseline_rows = [list(row) for row in comparison or []]
        print(json.dumps({**to_document(reports), "baseline": baseline_rows}, indent=2))
    else:
        print_comparison(reports, out, comparison)
    if args.save:
        from orgate.evaluation.html import write_eval_html

        json_path, md_path = save_comparison(reports, args.save, comparison)
        html = write_eval_html(reports, html_path(json_path))
        err.print(f"saved {json_path}, {md_path} and {html}", highlight=False)
    upstream_errors = sum(r.outcomes.get("upstream_error", 0) for r in reports)
    return _exit_code(upstream_errors, comparison, err)


def _eval_inputs(args: argparse.Namespace) -> _EvalInputs:
    """The cases, settings, target and baseline the arguments name; raises when one is unusable."""
    case_file = load_cases(args.cases)
    settings = load_settings(args.config)
    misbehave = MisbehaveSettings.parse(args.misbehave) if args.misbehave else case_file.misbehave
    if args.seed is not None:
        base = misbehave or getattr(settings.builtin, "misbehave", None) or MisbehaveSettings()
        misbehave = base.model_copy(update={"seed": args.seed})
    deployment, make_provider, rates = resolve_target(settings, args.model, misbehave)
    baseline = read_reports(args.baseline) if args.baseline else []
    modes = parse_modes(args.modes) if args.modes else []
    return _EvalInputs(case_file, settings, deployment, make_provider, rates, baseline, modes)


async def _run_with_progress(
    args: argparse.Namespace, inputs: _EvalInputs, err: Console
) -> tuple[list[RunResult], StructuredMetrics]:
    """Every case ``--runs`` times against the target, a progress bar on stderr."""
    provider = inputs.make_provider()
    try:
        with _progress(args, err) as progress:
            task = progress.add_task(args.model, total=len(inputs.case_file.cases) * args.runs)
            return await run_eval(
                inputs.case_file.cases,
                provider,
                inputs.deployment,
                inputs.settings.structured,
                runs=args.runs,
                concurrency=args.concurrency,
                on_result=lambda _: progress.advance(task),
            )
    finally:
        await provider.aclose()


async def _run_modes_with_progress(
    args: argparse.Namespace, inputs: _EvalInputs, err: Console
) -> list[EvalReport]:
    """Every case in every mode, a progress bar on stderr; the reports share one time."""
    provider = inputs.make_provider()
    cases = inputs.case_file.cases
    try:
        with _progress(args, err) as progress:
            total = len(cases) * args.runs * len(inputs.modes)
            task = progress.add_task(args.model, total=total)
            reports = await run_modes(
                inputs.modes,
                cases,
                provider,
                inputs.deployment,
                inputs.settings.structured,
                cases_file=str(args.cases),
                runs=args.runs,
                concurrency=args.concurrency,
                on_result=lambda _: progress.advance(task),
            )
    finally:
        await provider.aclose()
    now = time.time()
    for report in reports:  # one comparison: one point in time
        report.created_at = now
    return reports


def _progress(args: argparse.Namespace, err: Console) -> Progress:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("[bold]eval[/bold] {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=args.quiet,
    )


def _save_all(
    report: EvalReport,
    baseline: EvalReport | None,
    comparison: list[tuple[str, float, float, bool]] | None,
    path: str,
    err: Console,
) -> None:
    """The JSON, Markdown and HTML reports; the HTML one charts the baseline as the earlier run."""
    json_path, md_path = save_report(report, path, comparison)
    from orgate.evaluation.html import write_eval_html

    runs = [baseline, report] if baseline is not None else [report]
    html = write_eval_html(runs, html_path(json_path))
    err.print(f"saved {json_path}, {md_path} and {html}", highlight=False)


def _exit_code(
    upstream_errors: int,
    comparison: list[tuple[str, float, float, bool]] | Comparison | None,
    err: Console,
) -> int:
    """1 on a regression against the baseline, else 0; upstream failures are said apart."""
    if upstream_errors:
        err.print(
            f"{upstream_errors} request(s) failed upstream (not counted in the rates)",
            highlight=False,
        )
    if comparison is not None and any(row[-1] for row in comparison):
        err.print("regression against the baseline", style="red", highlight=False)
        return 1
    return 0
