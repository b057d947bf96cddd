"""The parser of ``orgate eval``; the command (``evaluation.command``) is imported when it runs,
so building the parser imports neither the configuration nor the providers."""

from __future__ import annotations

import argparse


def _cmd_eval(args: argparse.Namespace) -> int:
    from orgate.evaluation.command import cmd_eval

    return int(cmd_eval(args))


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    """Add ``eval`` to the main parser's sub-commands."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "eval", help="measure the structured-output safety net on a case file (in-process)"
    )
    p.add_argument("cases", help="YAML or JSONL case file")
    p.add_argument(
        "--model", required=True, help="a configured model, or orgate/echo, orgate/flaky"
    )
    p.add_argument("--runs", type=int, default=1, help="runs per case (default 1)")
    p.add_argument(
        "--config", help="TOML config ([structured], models); default: $ORGATE_CONFIG or embedded"
    )
    p.add_argument("--baseline", help="an earlier --save JSON report to compare with")
    p.add_argument(
        "--save",
        help="write the JSON report here, and a Markdown summary and an HTML report with charts"
        " next to it",
    )
    p.add_argument(
        "--misbehave",
        help="orgate/flaky rates, e.g."
        " truncate=0.1,wrong_type=0.15,extra_key=0.05,missing_key=0.1,seed=7",
    )
    p.add_argument("--seed", type=int, help="orgate/flaky seed (overrides the file's or config's)")
    p.add_argument("--concurrency", type=int, default=1, help="requests in flight (default 1)")
    p.add_argument(
        "--modes",
        help="compare modes side by side: 'all', or some of prompt, json_object, constrained, "
        "constrained+semantic (comma-separated)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "-v", "--verbose", action="store_true", help="log every attempt (logger orgate.structured)"
    )
    p.set_defaults(func=_cmd_eval)
    return p
