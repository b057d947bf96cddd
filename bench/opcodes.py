"""Where a request's Python work goes: bytecodes executed per request, by function and by file.

``bench/instructions.py`` counts a leg's CPU instructions per request; this says which
functions execute them. It drives the same in-process app (the nginx fake upstream,
16 concurrent requests, after a warm-up) with a ``sys.settrace`` opcode tracer on, and
prints the opcodes per request of each file and of the busiest functions (exclusive:
a function's own bytecodes, not its callees'). C code (orjson, pydantic-core, uvloop)
executes no bytecodes and is not seen; in orgate's hot path one bytecode costs ~85
instructions on average, so the counts are a map of the Python work, not its weight in C.
Tracing slows the run ~30×: a few hundred requests are enough (the counts are exact).

Run: ``.venv/bin/python bench/opcodes.py --leg orgate --mode nonstream --requests 320``
(needs ``nginx``).
"""

from __future__ import annotations

import argparse
import sys
import threading
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

import instructions  # noqa: E402 - a script beside this one
import run_gateway_bench as gateway  # noqa: E402


class OpcodeTracer:
    """Counts executed bytecodes per code object while active (a context manager)."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, int, str]] = Counter()

    def _local(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event == "opcode":
            code = frame.f_code
            self.counts[(code.co_filename, code.co_firstlineno, code.co_qualname)] += 1
        return self._local

    def _global(self, frame: FrameType, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        frame.f_trace_lines = False
        return self._local

    def __enter__(self) -> OpcodeTracer:
        threading.settrace(self._global)
        sys.settrace(self._global)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.settrace(None)
        threading.settrace(None)  # type: ignore[arg-type]


def _short(filename: str) -> str:
    for marker in ("site-packages/", "/src/"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return filename


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--leg", choices=instructions.LEGS, default="orgate")
    parser.add_argument("--mode", choices=("nonstream", "stream"), default="nonstream")
    parser.add_argument(
        "--requests", type=int, default=320, help="measured requests (a multiple of 16)"
    )
    parser.add_argument("--top", type=int, default=40, help="how many functions to list")
    args = parser.parse_args()
    gateway.WORK_DIR.mkdir(parents=True, exist_ok=True)
    (gateway.WORK_DIR / "logs").mkdir(exist_ok=True)
    pm = gateway.ProcessManager(gateway.WORK_DIR / "logs")
    tracer = OpcodeTracer()
    try:
        _, nginx = gateway.start_nginx(pm, 1)
        import uvloop

        uvloop.run(instructions._drive(args.leg, args.mode, args.requests, nginx, measured=tracer))
    finally:
        pm.stop_all()
    n = args.requests
    total = sum(tracer.counts.values())
    by_file: Counter[str] = Counter()
    for (filename, _, _), count in tracer.counts.items():
        by_file[_short(filename)] += count
    print(f"{args.leg} {args.mode}: {total / n:,.0f} opcodes per request\n\nby file:")
    for filename, count in by_file.most_common(25):
        print(f"  {count / n:8,.0f}  {filename}")
    print("\nby function (own bytecodes):")
    for (filename, line, name), count in tracer.counts.most_common(args.top):
        print(f"  {count / n:8,.0f}  {_short(filename)}:{line} {name}")


if __name__ == "__main__":
    main()
