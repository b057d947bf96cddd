"""``orgate schema check|strictify FILE`` and ``orgate review list|show|resolve``.

``register(subparsers)`` adds both commands to the main argparse parser; each
sub-command sets ``func`` (``args.func(args) -> int`` is the exit code).

- ``schema check FILE``: every strict-mode violation with its JSON path; exit 1 if any.
- ``schema strictify FILE``: a strict-compatible equivalent on stdout (exit 0), or
  why there is none (stderr, exit 1). ``FILE`` may be a bare schema or a
  ``text.format``-like object with a ``schema`` key; ``-`` reads stdin.
- ``review list [--all|--status S] [--tenant T] [--json]``, ``review show ID [--tenant T]``,
  ``review resolve ID (--value JSON | --discard) [--note TEXT] [--force] [--tenant T]``:
  every tenant's entries, or only tenant ``T``'s (``--tenant ""``:
  entries from before tenants were recorded);
  the queue in the response store ``orgate serve`` would use (``[store] url`` of the config: the
  ``review_db`` hook, ``orgate.cli`` reads it), or, with ``--db FILE`` or the store disabled, the
  review file (``[structured] review_db``, else ``review.db`` in the data directory). An explicit
  ``--db`` that does not exist is an error; nothing is created (a store that does not exist yet
  holds no entries).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import functools
import json
import sqlite3
import sys
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from orgate.terminal import command, fail, table

if TYPE_CHECKING:
    from orgate.structured.review import Reviews

# Each command imports what it runs when it runs: building the parser (and `--help`) loads
# none of the safety net, the configuration or the providers.

#: Where the configured review queue is: ("store", the store's URL, None for the default
#: SQLite file) or ("file", the review file's path).
ReviewSource = tuple[str, str | None]
ReviewDbHook = Callable[[argparse.Namespace], ReviewSource]
T = TypeVar("T")


def _read_schema(path: str) -> Any:
    text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8-sig")
    text = text.removeprefix("\ufeff")  # a byte order mark from stdin
    data = json.loads(text)
    if isinstance(data, dict) and isinstance(data.get("schema"), dict) and "type" not in data:
        return data["schema"]  # a text.format object: {"type": "json_schema", "name", "schema"}
    if (
        isinstance(data, dict)
        and data.get("type") == "json_schema"
        and isinstance(data.get("schema"), dict)
    ):
        return data["schema"]
    return data


def _load(args: argparse.Namespace) -> Any:
    try:
        return _read_schema(args.file)
    except OSError as exc:
        fail(f"cannot read {args.file}: {exc.strerror or exc}", 2)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        fail(f"{args.file}: not valid JSON: {exc}", 2)


@command
def cmd_schema_check(args: argparse.Namespace) -> int:
    from orgate.structured.strict import check

    schema = _load(args)
    violations = check(schema)
    if args.json:
        print(
            json.dumps(
                [
                    {"path": v.path, "rule": v.rule, "message": v.message, "fixable": v.fixable}
                    for v in violations
                ],
                indent=2,
            )
        )
    else:
        for v in violations:
            print(v)
        if not violations:
            print("strict-compatible: no violations")
        else:
            fixable = sum(v.fixable for v in violations)
            print(
                f"{len(violations)} violation(s), {fixable} fixable by `orgate schema strictify`",
                file=sys.stderr,
            )
    return 1 if violations else 0


@command
def cmd_schema_strictify(args: argparse.Namespace) -> int:
    """The schema with every fixable violation fixed, on stdout even when some cannot be fixed
    (those are listed on stderr, exit 1): a redirect never leaves an empty file."""
    from orgate.structured.strict import strictify

    result = strictify(_load(args))
    print(json.dumps(result.partial, indent=2, ensure_ascii=False))
    if args.verbose:
        for change in result.changes:
            print(f"changed: {change}", file=sys.stderr)
    if result.schema is None:
        blockers = result.blockers
        lines = [f"  {v.path}: {v.message}" for v in blockers]
        fail(
            f"fixed {len(result.changes)} violation(s); {len(blockers)} cannot be "
            "fixed, so the schema "
            "written is still not strict-compatible (orgate sends such a schema non-strict and "
            "validates every output against it):\n" + "\n".join(lines)
        )
    return 0


def _source(args: argparse.Namespace) -> ReviewSource:
    if args.db is not None:
        return "file", args.db
    hook: ReviewDbHook | None = getattr(args, "_review_db_hook", None)
    if hook is not None:
        return hook(args)
    from orgate.structured.settings import StructuredSettings

    return "file", StructuredSettings().review_path()


def _on_queue(
    args: argparse.Namespace, work: Callable[[Reviews], Coroutine[Any, Any, T]]
) -> T | None:
    """``work`` on the configured queue; None (nothing done) when its store does not exist."""
    from orgate.structured.review import FileReviews, ReviewQueue

    kind, where = _source(args)
    if kind == "file":
        assert where is not None
        queue = ReviewQueue(where)
        if args.db is not None and not queue.exists():
            # a named queue that is not there is a mistyped path, not an empty queue
            fail(f"no review queue at {where} (--db names a file that does not exist)")
        return asyncio.run(work(FileReviews(queue)))
    return asyncio.run(_on_store(where, work))


async def _on_store(url: str | None, work: Callable[[Reviews], Awaitable[T]]) -> T | None:
    from orgate.store import default_sqlite_path, open_store, sqlite_path
    from orgate.structured.review_store import StoreReviews

    if not (url or "").startswith(("postgresql://", "postgres://")):
        path = sqlite_path(url) if url else default_sqlite_path()
        if path != ":memory:" and not Path(path).is_file():
            return None  # `orgate serve` creates it: until then it holds no entry
    store = await open_store(url, heartbeat_interval=0)
    try:
        return await work(StoreReviews(store))
    finally:
        await store.close()


def _queue_errors(
    handler: Callable[[argparse.Namespace], int],
) -> Callable[[argparse.Namespace], int]:
    """A queue that cannot be read (not a database, unreadable) is one line, not a traceback."""

    @functools.wraps(handler)
    def run(args: argparse.Namespace) -> int:
        from orgate.store import StoreError

        try:
            return handler(args)
        except (OSError, sqlite3.Error, StoreError) as exc:
            where = args.db or "the configured review queue"
            fail(f"cannot open the review queue {where}: {getattr(exc, 'strerror', None) or exc}")

    return run


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.datetime.fromtimestamp(ts, tz=datetime.UTC).strftime("%Y-%m-%d %H:%M:%SZ")


@command
@_queue_errors
def cmd_review_list(args: argparse.Namespace) -> int:
    status = None if args.all else args.status

    async def listing(queue: Reviews) -> list[Any]:
        return await queue.list(status, limit=args.limit, tenant=args.tenant)

    items = _on_queue(args, listing) or []
    if args.json:
        print(json.dumps([i.to_dict() for i in items], indent=2, ensure_ascii=False))
        return 0
    if not items:
        print("no entries", file=sys.stderr)
        return 0
    rows = [
        (
            i.id,
            _when(i.created_at),
            i.status,
            i.tenant or "-",
            i.model,
            i.format_name,
            i.stage,
            i.errors[0] if i.errors else "",
        )
        for i in items
    ]
    table(rows, ("ID", "CREATED", "STATUS", "TENANT", "MODEL", "FORMAT", "STAGE", "FIRST ERROR"))
    return 0


@command
@_queue_errors
def cmd_review_show(args: argparse.Namespace) -> int:
    async def one(queue: Reviews) -> Any:
        return await queue.get(args.id, tenant=args.tenant)

    item = _on_queue(args, one)
    if item is None:
        fail(f"no review entry {args.id}")
    print(json.dumps(item.to_dict(), indent=2, ensure_ascii=False))
    return 0


@command
@_queue_errors
def cmd_review_resolve(args: argparse.Namespace) -> int:
    from orgate.structured.review import ReviewError

    value = None
    if not args.discard:
        try:
            value = json.loads(args.value)
        except json.JSONDecodeError as exc:
            fail(f"--value is not JSON: {exc}", 2)

    async def close(queue: Reviews) -> Any:
        if args.discard:
            return await queue.discard(args.id, note=args.note, tenant=args.tenant)
        return await queue.resolve(
            args.id, value, note=args.note, force=args.force, tenant=args.tenant
        )

    try:
        item = _on_queue(args, close)
    except ReviewError as exc:
        fail(str(exc))
    if item is None:
        fail(f"no review entry {args.id}")
    print(f"{item.id}: {item.status}")
    return 0


def register(subparsers: Any, *, review_db: ReviewDbHook | None = None) -> None:
    """Add ``schema`` and ``review`` to the main parser's sub-commands.

    ``review_db(args)`` says where the configured queue is (``orgate.cli`` reads the config):
    the response store, or the review file when the store is disabled; ``--db`` always wins.
    """
    schema = subparsers.add_parser(
        "schema", help="check or strictify a JSON Schema for strict mode"
    )
    schema_sub = schema.add_subparsers(dest="schema_command", required=True)
    p = schema_sub.add_parser("check", help="list every strict-mode violation (exit 1 if any)")
    p.add_argument("file", help="schema file (JSON), or - for stdin")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_schema_check)
    p = schema_sub.add_parser("strictify", help="print a strict-compatible equivalent")
    p.add_argument("file", help="schema file (JSON), or - for stdin")
    p.add_argument("-v", "--verbose", action="store_true", help="list the changes made (stderr)")
    p.set_defaults(func=cmd_schema_strictify)

    review = subparsers.add_parser("review", help="the structured-output review queue")
    review_sub = review.add_subparsers(dest="review_command", required=True)

    def common(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--db",
            help="a review file (an earlier orgate's, or a server's without a store); default:"
            " the queue in the configured response store",
        )
        parser.add_argument(
            "--tenant",
            default=None,
            help="only this tenant's entries (default: every tenant's; \"\" for entries "
            "older than tenants in the queue)",
        )
        parser.set_defaults(_review_db_hook=review_db)

    p = review_sub.add_parser("list", help="list entries (pending by default)")
    common(p)
    p.add_argument(
        "--status",
        choices=["pending", "resolved", "discarded"],
        default="pending",
        help="entries with this status (default pending)",
    )
    p.add_argument("--all", action="store_true", help="every status")
    p.add_argument("--limit", type=int, default=100, help="at most this many entries (default 100)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_review_list)
    p = review_sub.add_parser("show", help="show one entry")
    common(p)
    p.add_argument("id", help="the entry's id (rev_...)")
    p.set_defaults(func=cmd_review_show)
    p = review_sub.add_parser("resolve", help="resolve an entry with a value, or discard it")
    common(p)
    p.add_argument("id", help="the entry's id (rev_...)")
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument(
        "--value", help="the corrected JSON value (validated against the stored schema)"
    )
    group.add_argument("--discard", action="store_true", help="close the entry without a value")
    p.add_argument("--note", help="a note stored with the resolution")
    p.add_argument(
        "--force", action="store_true", help="accept a value that does not match the schema"
    )
    p.set_defaults(func=cmd_review_resolve)


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry (``python -m orgate.structured.cli``) until the main CLI wires
    ``register``."""
    parser = argparse.ArgumentParser(prog="orgate")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
