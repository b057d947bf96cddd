"""The ``orgate gate`` and ``orgate diff`` subcommands.

``register(subparsers)`` adds both to an ``argparse`` sub-parser set; each
parser's ``handler`` (and ``func``) default is its handler, ``handler(args) -> exit status``.
Runnable alone: ``python -m orgate.gate.cli gate FILE`` / ``... diff LEFT RIGHT``.

Exit status: ``gate`` 0 when every ``function_call`` item is ``ok``, 1 when
any is not (other item types never fail the run), 2 on unreadable input or
tools; ``diff`` 0 on ``ok``, 1 on ``block``, 2 on unreadable input.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Sequence
from typing import IO, Any

import orjson

from orgate.gate.checks import check
from orgate.gate.diff import DiffResult, as_items, container_items, diff
from orgate.gate.reader import InputError, JsonSource, read_all, read_document
from orgate.gate.tools import ToolCatalog, ToolsError, load_tools
from orgate.gate.verdict import CODES, Code

_dumps = orjson.dumps
_FLUSH_EVERY = 2048
_PROGRESS_EVERY = 4096
_COLOURS = {
    Code.OK.value: "32",
    Code.NOT_FUNCTION_CALL.value: "2",
    Code.NAMESPACED.value: "33",
    Code.HOSTED_CALL.value: "33",
}


def _binary(stream: IO[Any]) -> Any:
    return getattr(stream, "buffer", stream)


def _isatty(stream: IO[Any]) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _silence_stdout(stdout: IO[Any]) -> None:
    """After a broken pipe, point stdout at /dev/null so the exit-time flush stays quiet."""
    if stdout is sys.stdout:
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass


def _error(stderr: IO[str], message: str) -> int:
    stderr.write(f"orgate: error: {message}\n")
    stderr.flush()
    return 2


class ResponseTools:
    """Catalogues of stored responses' ``tools``, cached by the list's canonical bytes."""

    def __init__(self) -> None:
        self._cache: dict[bytes, ToolCatalog] = {}

    def get(self, tools: list[Any]) -> ToolCatalog:
        key = _dumps(tools, option=orjson.OPT_SORT_KEYS)
        catalog = self._cache.get(key)
        if catalog is None:
            if len(self._cache) > 256:
                self._cache.clear()
            catalog = self._cache[key] = load_tools(tools)
        return catalog


def items_and_tools(
    value: Any, cli_tools: ToolCatalog | None, response_tools: ResponseTools
) -> tuple[Sequence[Any], Any]:
    """The items one input value holds and the tools to check them against.

    A stored response, a page of items or a request body gives its items, checked against
    its own ``tools`` unless ``cli_tools`` (``--tools``) is given; a list gives its elements;
    anything else is one item. Raises ``ToolsError`` for a document's invalid ``tools``.
    """
    if (
        value.__class__ is dict
        and ("type" not in value or "output" in value)
        and (container := container_items(value)) is not None
    ):
        if cli_tools is None and isinstance(value.get("tools"), list):
            return container, response_tools.get(value["tools"])
        return container, cli_tools
    if isinstance(value, list):
        return value, cli_tools
    return (value,), cli_tools


def _one_line(text: str) -> str:
    return text.replace("\r\n", " ").replace("\n", " ").replace("\r", " ")


def _aligned(lines: list[str], colour: bool) -> list[str]:
    """Tab-separated rows as aligned columns for a person at a terminal (a pipe gets the tabs);
    the code column coloured. Aligned per written batch: the output stays a stream."""
    rows = [line.split("\t") for line in lines]
    widths = [max((len(row[i]) for row in rows if len(row) > 5), default=0) for i in range(5)]
    out: list[str] = []
    for row in rows:
        if len(row) <= 5:  # the trailing "" that ends the batch
            out.append("\t".join(row))
            continue
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row[:5])]
        if colour and row[0] != "index":
            cells[4] = f"\x1b[{_COLOURS.get(row[4], '31')}m{cells[4]}\x1b[0m"
        out.append("  ".join([*cells, row[5]]))
    return out


def _summary_rows(counts: dict[str, int]) -> list[tuple[str, int]]:
    return [(code.value, counts[code.value]) for code in CODES if counts.get(code.value)]


def _write_summary(
    stream: IO[str], counts: dict[str, int], total: int, calls: int, failing: int, rich: bool
) -> None:
    if rich:
        # rich is imported only when a terminal will show it (it costs start-up time).
        from rich.console import Console
        from rich.table import Table

        table = Table(title=f"{total} items, {calls} function calls, {failing} not ok")
        table.add_column("code")
        table.add_column("items", justify="right")
        for code, n in _summary_rows(counts):
            table.add_row(code, str(n))
        Console(file=stream).print(table)
        return
    lines = [f"summary: {total} items, {calls} function calls, {failing} not ok"]
    lines += [f"  {code:<18} {n}" for code, n in _summary_rows(counts)]
    stream.write("\n".join(lines) + "\n")
    stream.flush()


def _progress(stderr: IO[str]) -> Any:
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    return Progress(
        TextColumn("gate {task.fields[items]} items"),
        BarColumn(),
        TimeRemainingColumn(),
        console=Console(file=stderr),
        transient=True,
    )


def _is_call(typ: Any) -> bool:
    """Whether an item of this type counts among the calls (the ones that can fail the run)."""
    return typ in ("function_call", "custom_tool_call")


def _json_record(index: int, v: Any, typ: Any, code: str) -> str:
    """One item's verdict as a JSON Lines record."""
    errors = v.errors
    return _dumps(
        {
            "index": index,
            "id": v.id,
            "call_id": v.call_id,
            "name": v.name,
            "type": typ if typ.__class__ is str else None,
            "code": code,
            "message": v.message,
            "errors": [{"path": e.path, "message": e.message, "keyword": e.keyword} for e in errors]
            if errors
            else [],
        }
    ).decode()


def _text_record(index: int, v: Any, code: str) -> str:
    """One item's verdict as a tab-separated row: six columns on one line,
    whatever the fields hold."""
    detail = f"{v.errors[0].path}: {v.errors[0].message}" if v.errors else v.message
    line = f"{index}\t{v.id or '-'}\t{v.call_id or '-'}\t{v.name or '-'}\t{code}\t{detail}"
    if line.count("\t") != 5:  # a tab inside a field would shift the columns
        fields = (v.id or "-", v.call_id or "-", v.name or "-", code, detail)
        line = "\t".join([str(index), *(f.replace("\t", " ") for f in fields)])
    if "\n" in line or "\r" in line:
        line = _one_line(line)
    return line


class _Records:
    """The verdict records, written in batches: as text (aligned and coloured at a terminal) or
    JSON.

    Records are buffered as str and encoded once per batch: keeping thousands of freshly
    dumped bytes objects alive costs far more in allocator churn (see bench/gate_bench.py).
    """

    def __init__(self, out: Any, *, as_json: bool, tty: bool) -> None:
        self.out = out
        self.as_json = as_json
        self._align = tty and not as_json
        self._colour = self._align
        self.buf: list[str] = [] if as_json else ["index\tid\tcall_id\tname\tcode\tdetail"]

    def write_batch(self) -> None:
        """Write what is buffered (a no-op when nothing is)."""
        buf = self.buf
        if not buf:
            return
        buf.append("")
        self.out.write(
            "\n".join(_aligned(buf, self._colour) if self._align else buf).encode(
                "utf-8", "replace"
            )
        )
        buf.clear()


class _Tally:
    """What the run saw: items by code, calls, calls not ok."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.items = 0
        self.calls = 0
        self.failing = 0

    def status(self) -> int:
        """The exit status: 1 when a call is not ok."""
        return 1 if self.failing else 0


def _cli_tools(args: argparse.Namespace) -> ToolCatalog | None:
    """The ``--tools`` catalogue (None without the option); raises ``InputError`` /
    ``ToolsError``."""
    return load_tools(read_document(args.tools)) if args.tools else None


def _start_progress(args: argparse.Namespace, stderr: IO[str], tty_out: bool) -> tuple[Any, Any]:
    """A progress bar and its task, or ``(None, None)``: a bar only when stderr is a terminal
    and stdout is not (it would interleave with the items)."""
    if not _isatty(stderr) or tty_out or args.no_progress:
        return None, None
    progress = _progress(stderr)
    progress.start()
    return progress, progress.add_task("gate", total=None, items=0)


def _check_all(
    source: JsonSource,
    cli_tools: ToolCatalog | None,
    records: _Records,
    tally: _Tally,
    progress: Any,
    task: Any,
) -> None:
    """Check every item of ``source``, buffering one record per item and counting the codes.

    The per-item loop is the hot path of the >= 50,000 items/s target (see bench/gate_bench.py).
    Raises ``InputError`` (``ToolsError`` of a document's ``tools`` with its place in the input).
    """
    response_tools = ResponseTools()
    counts = tally.counts
    buf = records.buf
    as_json = records.as_json
    index = tally.items
    try:
        for value in source.values():
            try:
                items, tools = items_and_tools(value, cli_tools, response_tools)
            except ToolsError as exc:
                where = f"line {source.lineno}" if source.lineno > 1 else "the document"
                raise InputError(f"{source.name}: {where}: invalid tools: {exc}") from None
            for item in items:
                v = check(item, tools)
                # The code's plain str value: hashing and serialising an Enum member is slower.
                code = v.code._value_
                counts[code] = counts.get(code, 0) + 1
                typ = item.get("type") if isinstance(item, dict) else None
                if _is_call(typ):
                    tally.calls += 1
                    if code != "ok":
                        tally.failing += 1
                buf.append(
                    _json_record(index, v, typ, code) if as_json else _text_record(index, v, code)
                )
                index += 1
                if len(buf) >= _FLUSH_EVERY:
                    records.write_batch()
                if progress is not None and index % _PROGRESS_EVERY == 0:
                    progress.update(task, total=source.size, completed=source.consumed, items=index)
    finally:
        tally.items = index


def run_gate(
    args: argparse.Namespace, stdout: IO[Any] | None = None, stderr: IO[str] | None = None
) -> int:
    """Handler of ``orgate gate``."""
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    try:
        cli_tools = _cli_tools(args)
    except (InputError, ToolsError) as exc:
        return _error(stderr, f"tools {args.tools}: {exc}")
    source = JsonSource(args.file)
    stdout.flush()  # records go to the binary layer; keep anything printed before in order
    tty_out = _isatty(stdout)
    records = _Records(_binary(stdout), as_json=bool(args.json), tty=tty_out)
    tally = _Tally()
    progress, task = _start_progress(args, stderr, tty_out)
    # The loop creates no reference cycles (parsed JSON, verdicts), so the cyclic
    # collector only costs time here: it is paused for the run and restored after.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        _check_all(source, cli_tools, records, tally, progress, task)
        records.write_batch()
        records.out.flush()
    except (InputError, ToolsError) as exc:
        if tally.items:
            records.write_batch()
        records.out.flush()
        return _error(stderr, str(exc))
    except BrokenPipeError:  # e.g. `orgate gate log.jsonl | head`
        _silence_stdout(stdout)
        return tally.status()
    finally:
        if gc_was_enabled:
            gc.enable()
        if progress is not None:
            progress.stop()
    _report_summary(args, stdout, stderr, tally, tty_out)
    return tally.status()


def _report_summary(
    args: argparse.Namespace, stdout: IO[str], stderr: IO[str], tally: _Tally, tty_out: bool
) -> None:
    """The summary: after the text records on stdout, or on stderr beside JSON records
    (unless ``--quiet``)."""
    if not args.json:
        _write_summary(stdout, tally.counts, tally.items, tally.calls, tally.failing, tty_out)
    elif not args.quiet:
        _write_summary(
            stderr, tally.counts, tally.items, tally.calls, tally.failing, _isatty(stderr)
        )


def _diff_items(path: str) -> list[Any]:
    items: list[Any] = []
    for value in read_all(path):
        items.extend(as_items(value))
    return items


def _write_diff_text(stream: IO[str], result: DiffResult, rich: bool) -> None:
    rows = [
        (
            d.kind,
            "-" if d.left is None else str(d.left),
            "-" if d.right is None else str(d.right),
            "yes" if d.blocking else "",
            orjson.dumps(d.detail, default=str).decode(),
        )
        for d in result.differences
    ]
    if rich:
        from rich.console import Console
        from rich.table import Table

        table = Table(title=f"verdict: {result.verdict} ({len(rows)} differences)")
        for col in ("kind", "left", "right", "blocking", "detail"):
            table.add_column(col, overflow="fold")
        for row in rows:
            table.add_row(*row)
        Console(file=stream).print(table)
        return
    lines = ["kind\tleft\tright\tblocking\tdetail"] + ["\t".join(r) for r in rows]
    lines.append(f"verdict: {result.verdict} ({len(rows)} differences)")
    stream.write("\n".join(lines) + "\n")
    stream.flush()


def run_diff(
    args: argparse.Namespace, stdout: IO[Any] | None = None, stderr: IO[str] | None = None
) -> int:
    """Handler of ``orgate diff``."""
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    if args.left == "-" and args.right == "-":
        return _error(stderr, "only one of LEFT and RIGHT can be '-'")
    try:
        left = _diff_items(args.left)
        right = _diff_items(args.right)
    except InputError as exc:
        return _error(stderr, str(exc))
    result = diff(left, right)
    try:
        if args.json:
            out = _binary(stdout)
            out.write(orjson.dumps(result.to_dict(), default=str) + b"\n")
            out.flush()
        else:
            _write_diff_text(stdout, result, _isatty(stdout))
    except BrokenPipeError:
        _silence_stdout(stdout)
    return 1 if result.blocked else 0


def add_gate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file",
        metavar="FILE",
        help="an item, an array of items, a stored response, or a JSON Lines log; '-' for stdin",
    )
    parser.add_argument(
        "--tools", metavar="TOOLS.json", help="tool definitions (overrides a response's own tools)"
    )
    parser.add_argument(
        "--json", action="store_true", help="JSON Lines on stdout, one object per item"
    )
    parser.add_argument(
        "--quiet", "-q", action="store_true", help="with --json: no summary on stderr"
    )
    parser.add_argument("--no-progress", action="store_true", help="never show a progress bar")


def add_diff_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "left", metavar="LEFT", help="item / trajectory / response / JSON Lines ('-' for stdin)"
    )
    parser.add_argument(
        "right", metavar="RIGHT", help="the same, as produced by the other provider"
    )
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")


def register(subparsers: Any) -> None:
    """Add ``gate`` and ``diff`` to an argparse sub-parser set (``parser.add_subparsers()``).

    Each parser's defaults set both ``func`` and ``handler`` to its handler, so
    dispatch with ``return args.handler(args)`` (or ``args.func(args)``).
    """
    gate = subparsers.add_parser(
        "gate",
        help="check which logged items may be replayed (the replay gate)",
        description="Check logged items: exit 0 if every function_call is ok, 1 if not, 2 on "
        "unreadable input.",
    )
    add_gate_arguments(gate)
    gate.set_defaults(func=run_gate, handler=run_gate)
    d = subparsers.add_parser(
        "diff",
        help="compare the same trajectory from two providers",
        description="Compare two trajectories: exit 0 on ok, 1 on block, 2 on unreadable input.",
    )
    add_diff_arguments(d)
    d.set_defaults(func=run_diff, handler=run_diff)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="orgate")
    sub = parser.add_subparsers(dest="command", required=True)
    register(sub)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
