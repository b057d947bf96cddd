"""``orgate store stats|prune|tenants|rename-tenant``: inspect, trim and re-tenant the response store.

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

    tenants = commands.add_parser("tenants", help="list the tenants that hold data, with their response counts")
    tenants.add_argument("--url", default=None, help=url_help)
    tenants.add_argument("--config", default=None, help=config_help)
    tenants.add_argument("--json", action="store_true", help="print JSON")
    tenants.set_defaults(func=run_tenants)

    rename = commands.add_parser(
        "rename-tenant",
        help="give one tenant's responses, items and sessions to a new tenant name (servers stopped)",
    )
    rename.add_argument("old", help="the tenant name the data is stored under")
    rename.add_argument("new", help="the tenant name to store it under (must hold no data)")
    rename.add_argument("--url", default=None, help=url_help)
    rename.add_argument("--config", default=None, help=config_help)
    rename.set_defaults(func=run_rename_tenant)


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


async def _on_store(url: str | None, operation: str, *args: Any) -> Any:
    store = await open_store(url, heartbeat_interval=0)
    try:
        return await getattr(store, operation)(*args)
    finally:
        await store.close()


def run_tenants(args: argparse.Namespace) -> int:
    """``orgate store tenants``."""
    try:
        tenants: dict[str, int] = asyncio.run(_on_store(_url(args), "tenants"))
    except (StoreError, ValueError) as exc:
        print(f"orgate store tenants: {exc}", file=sys.stderr)
        return 1
    if args.json:
        sys.stdout.write(orjson.dumps(tenants, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        for tenant, count in tenants.items():
            print(f"{tenant}\t{count} response(s)")
    return 0


def run_rename_tenant(args: argparse.Namespace) -> int:
    """``orgate store rename-tenant OLD NEW``."""
    if not args.new.strip() or args.old == args.new:
        print("orgate store rename-tenant: NEW must be a non-empty name other than OLD", file=sys.stderr)
        return 2
    url = _url(args)
    try:
        moved = asyncio.run(_on_store(url, "rename_tenant", args.old, args.new))
    except (StoreError, ValueError) as exc:
        print(f"orgate store rename-tenant: {exc}", file=sys.stderr)
        return 1
    print(f"tenant {args.old!r} is now {args.new!r}: {moved} response(s) moved in {describe_url(url)}")
    return 0


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
