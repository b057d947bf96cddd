"""What every ``orgate`` command prints outside its results: one error and warning format
(``orgate: error: …`` on stderr), tables that are aligned on a terminal and tab-separated
when piped, and the yes/no question a destructive command asks on a terminal.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn, TextIO

PROG = "orgate"


def error(message: str) -> None:
    """``orgate: error: MESSAGE`` on stderr (one line per line of the message)."""
    print(f"{PROG}: error: {message}", file=sys.stderr)


def warning(message: str) -> None:
    print(f"{PROG}: warning: {message}", file=sys.stderr)


class CommandError(Exception):
    """A command cannot go on: ``main`` prints the message in the one error format and exits
    with ``status`` (1 for a failure, 2 for bad usage or configuration)."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


def fail(message: str, status: int = 1) -> NoReturn:
    raise CommandError(message, status)


def command(handler: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """A command's handler that may ``fail(...)``: the error is printed in the one format and
    becomes the exit status (for callers of the handler itself, as for ``orgate``'s ``main``)."""

    @functools.wraps(handler)
    def run(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except CommandError as exc:
            error(str(exc))
            return exc.status

    return run


def is_terminal(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def table(
    rows: Sequence[Sequence[object]], header: Sequence[str], stream: TextIO | None = None
) -> None:
    """``rows`` under ``header``: columns aligned for a person on a terminal, one tab-separated
    line per row (no header) for a program reading a pipe."""
    out = stream or sys.stdout
    cells = [["" if cell is None else str(cell) for cell in row] for row in rows]
    if not is_terminal(out):
        for row in cells:
            out.write("\t".join(cell.replace("\t", " ").replace("\n", " ") for cell in row) + "\n")
        return
    lines = [list(header), *cells]
    widths = [max(len(line[i]) for line in lines if i < len(line)) for i in range(len(header))]
    for line in lines:
        padded = [cell.ljust(widths[i]) for i, cell in enumerate(line[:-1])] + line[-1:]
        out.write("  ".join(padded).rstrip() + "\n")


def confirm(question: str) -> bool:
    """Ask ``question [y/N]`` on stderr (stdout may be a pipe); anything but y/yes (or end of
    input) is no."""
    sys.stderr.write(f"{question} [y/N] ")
    sys.stderr.flush()
    answer = sys.stdin.readline()
    return answer.strip().lower() in ("y", "yes")
