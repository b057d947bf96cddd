"""``orgate store stats|prune``: inspect and trim the response store.

``register(subparsers)`` adds the ``store`` command to orgate's argparse tree. Each
leaf sets ``func``: a callable taking the parsed ``argparse.Namespace`` and returning
the process exit code.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
import time
from typing import Any

import orjson

from orgate.store import describe_url, open_store
from orgate.store.base import StoreError, StoreStats

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
URL_ENV = "ORGATE_STORE_URL"


def parse_duration(text: str) -> float:
    """``"7d"``, ``"12h"``, ``"30m"``, ``"45s"``, ``"2w"`` or plain seconds → seconds."""
    match = _DURATION.match(text)
    if match is None:
        raise argparse.ArgumentTypeError(
            f"invalid duration {text!r}: use a number with s, m, h, d or w (e.g. 7d)"
        )
    return float(match.group(1)) * _UNITS[match.group(2) or "s"]


def register(subparsers: Any) -> None:
    """Add ``store stats`` and ``store prune`` to an ``add_subparsers()`` object."""
    store = subparsers.add_parser("store", help="inspect and prune the response store")
    commands = store.add_subparsers(dest="store_command", required=True, metavar="COMMAND")
    url_help = (
        f"store URL (sqlite:///path or postgresql://...; default ${URL_ENV}, "
        "else the configuration's [store] url, else the default SQLite file)"
    )
    config_help = "TOML config whose [store] url to use (default: $ORGATE_CONFIG, else the embedded default)"

    stats = commands.add_parser("stats", help="count stored responses, items and sessions")
    stats.add_argument("--url", default=None, help=url_help)
    stats.add_argument("--config", default=None, help=config_help)
    stats.add_argument("--json", action="store_true", help="print JSON")
    stats.set_defaults(func=run_stats)

    prune = commands.add_parser("prune", help="delete old and expired responses")
    prune.add_argument("--url", default=None, help=url_help)
    prune.add_argument("--config", default=None, help=config_help)
    prune.add_argument(
        "--older-than",
        type=parse_duration,
        default=parse_duration("7d"),
        metavar="DURATION",
        help="delete responses created before this long ago (default 7d)",
    )
    prune.set_defaults(func=run_prune)


def _url(args: argparse.Namespace) -> str | None:
    """--url, then $ORGATE_STORE_URL; ``orgate`` (cli.py) fills ``--url`` from the configuration's
    ``[store] url`` (``--config`` / ``$ORGATE_CONFIG``, with ``ORGATE_STORE__URL``) when neither is set."""
    return args.url or os.environ.get(URL_ENV) or None


def _stamp(value: float | None) -> str:
    if value is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(value)) + "Z"


def format_stats(stats: StoreStats) -> str:
    """Human-readable ``store stats`` output."""
    lines = [
        f"backend:        {stats.backend} ({stats.location})",
        f"schema version: {stats.schema_version}",
        f"responses:      {stats.responses}",
    ]
    lines += [f"  {status:<13} {n}" for status, n in sorted(stats.by_status.items())]
    lines += [
        f"items:          {stats.items}",
        f"sessions:       {stats.sessions}",
        f"event streams:  {stats.events}",
        f"oldest:         {_stamp(stats.oldest_created_at)}",
        f"newest:         {_stamp(stats.newest_created_at)}",
    ]
    lines += [f"{key + ':':<15} {value}" for key, value in stats.extra.items()]
    return "\n".join(lines)


async def _stats(url: str | None) -> StoreStats:
    store = await open_store(url, heartbeat_interval=0)
    try:
        return await store.stats()
    finally:
        await store.close()


async def _prune(url: str | None, older_than: float) -> int:
    store = await open_store(url, heartbeat_interval=0)
    try:
        return await store.prune(older_than=older_than)
    finally:
        await store.close()


def run_stats(args: argparse.Namespace) -> int:
    """``orgate store stats``."""
    url = _url(args)
    try:
        stats = asyncio.run(_stats(url))
    except (StoreError, ValueError) as exc:
        print(f"orgate store stats: {exc}", file=sys.stderr)
        return 1
    if args.json:
        sys.stdout.write(orjson.dumps(stats, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        print(format_stats(stats))
    return 0


def run_prune(args: argparse.Namespace) -> int:
    """``orgate store prune``."""
    url = _url(args)
    try:
        count = asyncio.run(_prune(url, args.older_than))
    except (StoreError, ValueError) as exc:
        print(f"orgate store prune: {exc}", file=sys.stderr)
        return 1
    print(f"deleted {count} response(s) from {describe_url(url)}")
    return 0
