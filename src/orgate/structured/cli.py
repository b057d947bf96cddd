"""``orgate schema check|strictify FILE``, ``orgate review list|show|resolve`` and ``orgate eval``.

``register(subparsers)`` adds both commands to the main argparse parser; each
sub-command sets ``func`` (``args.func(args) -> int`` is the exit code).

- ``schema check FILE``: every strict-mode violation with its JSON path; exit 1 if any.
- ``schema strictify FILE``: a strict-compatible equivalent on stdout (exit 0), or
  why there is none (stderr, exit 1). ``FILE`` may be a bare schema or a
  ``text.format``-like object with a ``schema`` key; ``-`` reads stdin.
- ``review list [--all|--status S] [--tenant T] [--json]``, ``review show ID [--tenant T]``,
  ``review resolve ID (--value JSON | --discard) [--note TEXT] [--force] [--tenant T]``:
  every tenant's entries, or only tenant ``T``'s (``--tenant ""``: entries from before tenants were recorded);
  the queue at ``--db``, else the configured ``[structured] review_db``
  (the ``review_db`` hook: ``orgate.cli`` reads it from the config), else ``orgate-review.db``.
- ``eval CASES --model M [--runs N] [--baseline FILE] [--save FILE]``: see
  ``orgate.structured.eval``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from orgate.structured.eval import add_parser as add_eval_parser
from orgate.structured.review import ReviewError, ReviewQueue
from orgate.structured.settings import StructuredSettings
from orgate.structured.strict import check, strictify

ReviewDbHook = Callable[[argparse.Namespace], str | None]


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


def _load(args: argparse.Namespace) -> Any | None:
    try:
        return _read_schema(args.file)
    except OSError as exc:
        print(f"orgate schema: cannot read {args.file}: {exc.strerror or exc}", file=sys.stderr)
        return None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        print(f"orgate schema: {args.file}: not valid JSON: {exc}", file=sys.stderr)
        return None


def cmd_schema_check(args: argparse.Namespace) -> int:
    schema = _load(args)
    if schema is None:
        return 2
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


def cmd_schema_strictify(args: argparse.Namespace) -> int:
    schema = _load(args)
    if schema is None:
        return 2
    result = strictify(schema)
    if result.schema is None:
        print("no strict-compatible equivalent:", file=sys.stderr)
        for v in result.blockers:
            print(f"  {v.path}: {v.message}", file=sys.stderr)
        print(
            "orgate sends this schema non-strict and validates every output against it.",
            file=sys.stderr,
        )
        return 1
    print(json.dumps(result.schema, indent=2, ensure_ascii=False))
    if args.verbose:
        for change in result.changes:
            print(f"changed: {change}", file=sys.stderr)
    return 0


def _queue(args: argparse.Namespace) -> ReviewQueue:
    path = args.db
    hook: ReviewDbHook | None = getattr(args, "_review_db_hook", None)
    if path is None and hook is not None:
        path = hook(args)
    path = path or StructuredSettings().review_db
    try:
        return ReviewQueue(path)
    except (OSError, sqlite3.Error) as exc:
        print(f"orgate review: cannot open the review queue {path}: {getattr(exc, 'strerror', None) or exc}", file=sys.stderr)
        raise SystemExit(1) from None


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.datetime.fromtimestamp(ts, tz=datetime.UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def cmd_review_list(args: argparse.Namespace) -> int:
    status = None if args.all else args.status
    items = _queue(args).list(status, limit=args.limit, tenant=args.tenant)
    if args.json:
        print(json.dumps([i.to_dict() for i in items], indent=2, ensure_ascii=False))
        return 0
    if not items:
        print("no entries")
    for i in items:
        first = i.errors[0] if i.errors else ""
        print(
            f"{i.id}  {_when(i.created_at)}  {i.status:<9}  {i.tenant or '-':<12}  {i.model}  {i.format_name}  {i.stage}: {first}"
        )
    return 0


def cmd_review_show(args: argparse.Namespace) -> int:
    item = _queue(args).get(args.id, tenant=args.tenant)
    if item is None:
        print(f"no review entry {args.id}", file=sys.stderr)
        return 1
    print(json.dumps(item.to_dict(), indent=2, ensure_ascii=False))
    return 0


def cmd_review_resolve(args: argparse.Namespace) -> int:
    queue = _queue(args)
    try:
        if args.discard:
            item = queue.discard(args.id, note=args.note, tenant=args.tenant)
        else:
            try:
                value = json.loads(args.value)
            except json.JSONDecodeError as exc:
                print(f"--value is not JSON: {exc}", file=sys.stderr)
                return 2
            item = queue.resolve(args.id, value, note=args.note, force=args.force, tenant=args.tenant)
    except ReviewError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    print(f"{item.id}: {item.status}")
    return 0


def register(subparsers: Any, *, review_db: ReviewDbHook | None = None) -> None:
    """Add ``schema``, ``review`` and ``eval`` to the main parser's sub-commands.

    ``review_db(args)`` may return the configured ``[structured] review_db``
    (``orgate.cli`` reads it with its config loader); ``--db`` always wins.
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
            "--db", help="review queue SQLite file (default: [structured] review_db)"
        )
        parser.add_argument(
            "--tenant", default=None, help="only this tenant's entries (default: every tenant's; \"\" for entries older than tenants in the queue)"
        )
        parser.set_defaults(_review_db_hook=review_db)

    p = review_sub.add_parser("list", help="list entries (pending by default)")
    common(p)
    p.add_argument("--status", choices=["pending", "resolved", "discarded"], default="pending")
    p.add_argument("--all", action="store_true", help="every status")
    p.add_argument("--limit", type=int, default=100)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_review_list)
    p = review_sub.add_parser("show", help="show one entry")
    common(p)
    p.add_argument("id")
    p.set_defaults(func=cmd_review_show)
    p = review_sub.add_parser("resolve", help="resolve an entry with a value, or discard it")
    common(p)
    p.add_argument("id")
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument(
        "--value", help="the corrected JSON value (validated against the stored schema)"
    )
    group.add_argument("--discard", action="store_true")
    p.add_argument("--note", help="a note stored with the resolution")
    p.add_argument(
        "--force", action="store_true", help="accept a value that does not match the schema"
    )
    p.set_defaults(func=cmd_review_resolve)

    add_eval_parser(subparsers)


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry (``python -m orgate.structured.cli``) until the main CLI wires ``register``."""
    parser = argparse.ArgumentParser(prog="orgate")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
