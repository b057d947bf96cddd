"""``orgate models probe MODEL [--config FILE] [--write] [--json] [--skip NAMES]``.

Probes the configured model's upstream (its first deployment, for a routed model) with a few
tiny requests (``checks.probe``) and prints what it supports, the mode orgate will use for a
JSON schema and why, and the configuration keys the findings give; ``--write`` puts those
keys into the model's ``[[models]]`` table of the configuration file. Exit status: 0, 2 on a
bad model, configuration or file.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orgate import terminal
from orgate.config import ConfigError, deployments, load_settings
from orgate.neutral import Deployment
from orgate.probe.checks import probe
from orgate.probe.report import ProbeReport
from orgate.probe.write import WriteError, write_keys
from orgate.providers import ProviderRegistry

if TYPE_CHECKING:
    from rich.console import Console

SKIPPABLE = ("tools", "dialects", "json_object", "reasoning", "context")


def register(subparsers: Any) -> None:
    models = subparsers.add_parser("models", help="what a configured model's upstream can do")
    sub = models.add_subparsers(dest="models_command", required=True, metavar="COMMAND")
    p = sub.add_parser(
        "probe",
        help="probe a configured model with a few tiny requests (each costs a few tokens)",
    )
    p.add_argument("model", help="a configured model name")
    p.add_argument("--config", help="TOML config; default: $ORGATE_CONFIG or embedded")
    p.add_argument(
        "--write",
        action="store_true",
        help="write the findings into the model's [[models]] table of the config file",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument(
        "--skip", default="", help=f"probes to leave out, comma-separated: {', '.join(SKIPPABLE)}"
    )
    p.set_defaults(func=cmd_probe)


def cmd_probe(args: argparse.Namespace) -> int:
    from rich.console import Console

    err = Console(stderr=True, soft_wrap=True)
    skip = frozenset(s.strip() for s in args.skip.split(",") if s.strip())
    unknown = skip - set(SKIPPABLE)
    if unknown:
        terminal.error(f"--skip: unknown probe(s) {', '.join(sorted(unknown))}")
        return 2
    try:
        settings = load_settings(args.config)
        deployment = deployments(settings).get(args.model)
    except ConfigError as exc:
        terminal.error(str(exc))
        return 2
    if deployment is None or deployment.provider == "builtin":
        terminal.error(f"{args.model!r} is not a configured upstream model")
        return 2
    report = asyncio.run(run_probe(deployment, skip, err))
    caps = deployment.capabilities
    if args.json:
        print(json.dumps(report.to_dict(caps), indent=2))
    else:
        print_report(report, deployment, Console(width=max(100, Console().width)))
    if args.write:
        return _write(args, report, deployment, err)
    return 0


async def run_probe(deployment: Deployment, skip: frozenset[str], err: Console) -> ProbeReport:
    registry = ProviderRegistry()
    try:
        provider = registry(deployment)
        session = registry.pool.session(deployment)
        return await probe(
            deployment,
            provider,
            session,
            skip=skip,
            on_step=lambda name: err.print(f"probing {name}…", highlight=False),
        )
    finally:
        await registry.aclose()


def print_report(report: ProbeReport, deployment: Deployment, console: Console) -> None:
    from rich.table import Table

    caps = deployment.capabilities
    console.print(
        f"{report.model}: {report.provider} at {report.base_url} ({report.upstream_model})",
        highlight=False,
    )
    server = report.server or "not identified"
    console.print(f"server: {server} ({report.server_evidence or 'not asked'})", highlight=False)
    context = report.context_window or "unknown"
    console.print(f"context window: {context} ({report.context_evidence})", highlight=False)
    table = Table()
    for column in ("probe", "verdict", "seconds", "detail"):
        table.add_column(column, overflow="fold")
    for finding in report.findings:
        table.add_row(finding.name, finding.verdict, f"{finding.seconds:.1f}", finding.detail)
    console.print(table)
    mode, why = report.mode(caps)
    console.print(f"JSON schemas go as: {mode} — {why}", highlight=False)
    then, then_why = report.mode(report.with_suggestions(caps))
    if then != mode:
        console.print(f"with the findings written: {then} — {then_why}", highlight=False)
    console.print("configuration the findings give (--write puts it in the file):")
    for key, value in report.suggested(caps).items():
        console.print(f"  {key} = {json.dumps(value)}", highlight=False)


def _write(
    args: argparse.Namespace, report: ProbeReport, deployment: Deployment, err: Console
) -> int:
    path = args.config or os.environ.get("ORGATE_CONFIG")
    if not path:
        terminal.error("--write needs the configuration file: --config FILE or $ORGATE_CONFIG")
        return 2
    try:
        written = write_keys(Path(path), args.model, report.suggested(deployment.capabilities))
    except (OSError, WriteError) as exc:
        terminal.error(f"{path}: {exc}")
        return 2
    err.print(f"wrote to {path} ({args.model}): " + "; ".join(written), highlight=False)
    return 0
