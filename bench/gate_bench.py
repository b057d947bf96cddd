"""Throughput of ``orgate gate`` on a typical JSON Lines log.

Generates a log of N lines (default 100,000) — a mix of messages, completed
calls that pass, calls that fail each check, provider-namespaced items and
function_call_outputs — plus a tools file, then measures items/s of the CLI
path in-process (``run_gate``, output to /dev/null, text and --json) and as a
subprocess (``python -m orgate.gate.cli gate LOG --tools TOOLS --json``,
interpreter start-up included). Target: >= 50,000 items/s on one core.

    .venv/bin/python bench/gate_bench.py [--lines 100000] [--repeat 3] [--backend rust|python]
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import orjson

from orgate.gate import schemas
from orgate.gate.cli import main as cli_main

TARGET = 50_000

TOOLS = [
    {
        "type": "function",
        "name": "get_latest_sales_report",
        "parameters": {
            "type": "object",
            "properties": {
                "region": {"enum": ["apac", "emea", "amer"]},
                "limit": {"type": "integer", "minimum": 1},
            },
            "required": ["region"],
            "additionalProperties": False,
        },
    },
    {
        "type": "function",
        "name": "search_docs",
        "parameters": {
            "type": "object",
            "$defs": {
                "filter": {
                    "type": "object",
                    "properties": {"field": {"type": "string"}, "value": {}},
                }
            },
            "properties": {
                "query": {"type": "string", "minLength": 1},
                "filters": {"type": "array", "items": {"$ref": "#/$defs/filter"}},
                "top_k": {"type": "integer", "minimum": 1, "maximum": 50},
            },
            "required": ["query"],
        },
    },
    {
        "type": "function",
        "name": "send_email",
        "parameters": {
            "type": "object",
            "properties": {
                "to": {"type": "string", "pattern": "^[^@]+@[^@]+$"},
                "subject": {"type": "string"},
                "body": {"type": "string"},
                "cc": {
                    "oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]
                },
            },
            "required": ["to", "subject", "body"],
            "additionalProperties": False,
        },
    },
    {"type": "function", "name": "now", "parameters": None},
]


def _call(i: int, name: str, args: object, status: str = "completed") -> dict[str, object]:
    arguments = args if not isinstance(args, dict | list) else orjson.dumps(args).decode()
    return {
        "type": "function_call",
        "id": f"fc_{i}",
        "call_id": f"call_{i}",
        "name": name,
        "arguments": arguments,
        "status": status,
    }


def make_line(i: int, rng: random.Random) -> dict[str, object]:
    r = rng.random()
    text = "Here is the sales report you asked for. " * rng.randint(1, 6)
    if r < 0.35:
        return {
            "type": "message",
            "id": f"msg_{i}",
            "role": rng.choice(["user", "assistant"]),
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }
    if r < 0.45:
        return {
            "type": "function_call_output",
            "call_id": f"call_{i - 1}",
            "output": '{"rows": 12, "total": 3411.5}',
        }
    if r < 0.50:
        return {"type": "openai:web_search_call", "id": f"ws_{i}", "status": "completed"}
    if r < 0.60:
        return _call(
            i,
            "get_latest_sales_report",
            {"region": rng.choice(["apac", "emea", "amer"]), "limit": 10},
        )
    if r < 0.70:
        return _call(
            i,
            "search_docs",
            {"query": "q3 revenue", "filters": [{"field": "year", "value": 2026}], "top_k": 5},
        )
    if r < 0.78:
        return _call(
            i, "send_email", {"to": "a@b.c", "subject": "report", "body": text, "cc": ["x@y.z"]}
        )
    if r < 0.80:
        return _call(i, "now", {})
    # failures, one per check
    if r < 0.84:
        return _call(i, "get_latest_sales_report", {"region": "global"})
    if r < 0.86:
        return _call(i, "search_docs", {"query": "q3"}, status="in_progress")
    if r < 0.88:
        return _call(i, "search_docs", '{"query": "q3 rev')
    if r < 0.90:
        c = _call(i, "search_docs", {})
        c["arguments"] = {"query": "q3"}
        return c
    if r < 0.92:
        return _call(i, "delete_everything", {"really": True})
    if r < 0.96:
        return _call(i, "search_docs", {"query": "", "top_k": 99, "filters": "none"})
    return {
        "type": "reasoning",
        "id": f"rs_{i}",
        "summary": [{"type": "summary_text", "text": text}],
    }


def generate(path: Path, lines: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    with path.open("wb") as f:
        for i in range(lines):
            f.write(orjson.dumps(make_line(i, rng)) + b"\n")


def in_process(log: Path, tools: Path, extra: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one in-process run."""
    with open(os.devnull, "w") as devnull:
        saved = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = devnull
        try:
            t0, c0 = time.perf_counter(), time.process_time()
            cli_main(["gate", str(log), "--tools", str(tools), "--no-progress", *extra])
            return time.perf_counter() - t0, time.process_time() - c0
        finally:
            sys.stdout, sys.stderr = saved


def subprocess_run(log: Path, tools: Path) -> tuple[float, float]:
    """(wall seconds, child CPU seconds) of one subprocess run, interpreter start-up included."""
    cmd = [sys.executable, "-m", "orgate.gate.cli", "gate", str(log), "--tools", str(tools)]
    cmd += ["--json", "--quiet"]
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--backend",
        choices=schemas.BACKENDS,
        default=schemas.DEFAULT_BACKEND,
        help="schema validator for the in-process runs (the subprocess always uses the default)",
    )
    args = parser.parse_args()
    schemas.DEFAULT_CACHE = schemas.SchemaCache(backend=args.backend)
    with tempfile.TemporaryDirectory() as tmp:
        log, tools = Path(tmp) / "log.jsonl", Path(tmp) / "tools.json"
        generate(log, args.lines)
        tools.write_bytes(orjson.dumps(TOOLS))
        size = log.stat().st_size
        print(f"log: {args.lines} lines, {size / 1e6:.1f} MB, schema backend: {args.backend}")
        results: dict[str, tuple[float, float]] = {}
        runs: list[tuple[str, Callable[[], tuple[float, float]]]] = [
            ("in-process text", lambda: in_process(log, tools, [])),
            ("in-process --json", lambda: in_process(log, tools, ["--json", "--quiet"])),
        ]
        if args.backend == schemas.DEFAULT_BACKEND:
            runs.append(("subprocess --json", lambda: subprocess_run(log, tools)))
        for label, run in runs:
            timings = [run() for _ in range(args.repeat)]
            wall = min(t[0] for t in timings)
            cpu = min(t[1] for t in timings)
            results[label] = (args.lines / wall, args.lines / cpu)
        ok = True
        print(f"{'':<22} {'wall items/s':>14} {'CPU items/s':>14}   (target {TARGET:,} per core)")
        for label, (wall_rate, cpu_rate) in results.items():
            flag = "ok" if cpu_rate >= TARGET else "BELOW TARGET"
            ok = ok and cpu_rate >= TARGET
            print(f"{label:<22} {wall_rate:>14,.0f} {cpu_rate:>14,.0f}   {flag}")
        print(
            "(CPU items/s = items per second of CPU time: the one-core figure, robust "
            "to a busy machine)"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
