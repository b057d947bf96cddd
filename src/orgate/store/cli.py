"""``orgate store stats|prune|tenants|rename-tenant``: inspect,
trim and re-tenant the response store.

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
from pathlib import Path
from typing import Any

import orjson

from orgate.store import check_url, default_sqlite_path, describe_url, open_store, sqlite_path
from orgate.store.base import StoreError, StoreStats
from orgate.terminal import command, confirm, fail, is_terminal, table

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
    config_help = (
        "TOML config whose [store] url to use (default: $ORGATE_CONFIG, else the embedded default)"
    )

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
    prune.add_argument(
        "--dry-run", action="store_true", help="count what would be deleted, delete nothing"
    )
    prune.add_argument(
        "-y", "--yes", action="store_true", help="do not ask for confirmation on a terminal"
    )
    prune.set_defaults(func=run_prune)

    tenants = commands.add_parser(
        "tenants", help="list the tenants that hold data, with their response counts"
    )
    tenants.add_argument("--url", default=None, help=url_help)
    tenants.add_argument("--config", default=None, help=config_help)
    tenants.add_argument("--json", action="store_true", help="print JSON")
    tenants.set_defaults(func=run_tenants)

    rename = commands.add_parser(
        "rename-tenant",
        help="give one tenant's responses, items and sessions to a new tenant name (servers "
        "stopped)",
    )
    rename.add_argument("old", help="the tenant name the data is stored under")
    rename.add_argument("new", help="the tenant name to store it under (must hold no data)")
    rename.add_argument("--url", default=None, help=url_help)
    rename.add_argument("--config", default=None, help=config_help)
    rename.set_defaults(func=run_rename_tenant)


def _url(args: argparse.Namespace) -> str | None:
    """--url, then $ORGATE_STORE_URL; ``orgate`` (cli.py) fills ``--url`` from the configuration's
    ``[store] url`` (``--config`` / ``$ORGATE_CONFIG``, with ``ORGATE_STORE__URL``) when neither is
    set."""
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


async def _prune(
    url: str | None, older_than: float, *, dry_run: bool, ask: bool
) -> tuple[int, bool]:
    """(count, deleted): what is prunable now, and whether it was deleted (not on a dry run, nor
    when the person at the terminal said no)."""
    store = await open_store(url, heartbeat_interval=0)
    try:
        count = await store.count_prunable(older_than=older_than)
        if dry_run or count == 0:
            return count, False
        if ask and not await asyncio.to_thread(
            confirm, f"delete {count} response(s) from {describe_url(url)}?"
        ):
            return count, False
        return await store.prune(older_than=older_than), True
    finally:
        await store.close()


async def _on_store(url: str | None, operation: str, *args: Any) -> Any:
    store = await open_store(url, heartbeat_interval=0)
    try:
        return await getattr(store, operation)(*args)
    finally:
        await store.close()


@command
def run_tenants(args: argparse.Namespace) -> int:
    """``orgate store tenants``."""
    try:
        tenants: dict[str, int] = asyncio.run(_on_store(_existing(_url(args)), "tenants"))
    except (StoreError, ValueError) as exc:
        fail(str(exc))
    if args.json:
        sys.stdout.write(orjson.dumps(tenants, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        table(list(tenants.items()), ("TENANT", "RESPONSES"))
    return 0


@command
def run_rename_tenant(args: argparse.Namespace) -> int:
    """``orgate store rename-tenant OLD NEW``."""
    if not args.new.strip() or args.old == args.new:
        fail("NEW must be a non-empty name other than OLD", 2)
    url = _existing(_url(args))
    try:
        moved = asyncio.run(_on_store(url, "rename_tenant", args.old, args.new))
    except (StoreError, ValueError) as exc:
        fail(str(exc))
    print(
        f"tenant {args.old!r} is now {args.new!r}: {moved} response(s) moved in {describe_url(url)}"
    )
    return 0


def _existing(url: str | None) -> str | None:
    """The URL, once a SQLite store is known to exist: a command that reads or trims the store
    never creates one (a mistyped path would otherwise be an empty store, or a file in /)."""
    if url and url.startswith(("postgresql://", "postgres://")):
        return url
    check_url(url)
    path = sqlite_path(url) if url else default_sqlite_path()
    if path != ":memory:" and not Path(path).is_file():
        fail(f"no response store at {path} (it is created by `orgate serve`; --url names another)")
    return url


@command
def run_stats(args: argparse.Namespace) -> int:
    """``orgate store stats``."""
    try:
        stats = asyncio.run(_stats(_existing(_url(args))))
    except (StoreError, ValueError) as exc:
        fail(str(exc))
    if args.json:
        sys.stdout.write(orjson.dumps(stats, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        print(format_stats(stats))
    return 0


@command
def run_prune(args: argparse.Namespace) -> int:
    """``orgate store prune``: counts first; on a terminal asks before deleting
    (``--yes`` does not)."""
    ask = not args.yes and not args.dry_run and is_terminal(sys.stdin) and is_terminal(sys.stderr)
    try:
        url = _existing(_url(args))
        count, deleted = asyncio.run(_prune(url, args.older_than, dry_run=args.dry_run, ask=ask))
    except (StoreError, ValueError) as exc:
        fail(str(exc))
    where = describe_url(url)
    if deleted or count == 0:
        print(f"deleted {count} response(s) from {where}")
    elif args.dry_run:
        print(f"would delete {count} response(s) from {where} (dry run: nothing deleted)")
    else:
        print(f"nothing deleted ({count} response(s) would have been)")
        return 1
    return 0
