"""Start-up cost of the ``orgate`` command: ``--version``, each command's ``--help``, and
``orgate serve`` until it answers ``/healthz``.

Each is run ``--runs`` times as a fresh process; the table shows the median wall time and the
median CPU time (user + system) the process used. Wall time grows with the machine's load
(other processes share the cores); CPU time much less so, which makes it the figure to compare
across runs on a busy machine. The load average is printed with the table.

    .venv/bin/python bench/startup.py [--runs 7] [--orgate-bin .venv/bin/orgate] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

READY_DEADLINE = 120.0  # seconds: generous, a loaded machine may take many times the idle figure
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass
class Row:
    what: str
    wall_ms: float
    cpu_ms: float | None
    runs: int


def _commands() -> list[str]:
    """The top-level commands, read from the parser itself (a new command is measured too)."""
    from orgate.cli import build_parser

    parser = build_parser()
    for action in parser._actions:  # argparse keeps the sub-commands in this private list
        if isinstance(action, argparse._SubParsersAction):
            return list(action.choices)
    return []


def _env(scratch: str) -> dict[str, str]:
    """The embedded default configuration, a fresh data directory, and compiled-module caches
    as an installation has them (in ``scratch``: a run writes nothing into the source tree),
    even where the shell sets ``PYTHONDONTWRITEBYTECODE``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORGATE_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(Path(scratch, "pycache"))
    env["ORGATE_DATA_DIR"] = str(Path(scratch, "data"))
    env["ORGATE_API_KEY"] = "startup-bench-key"
    return env


def time_command(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one run of ``argv`` to its exit (output discarded)."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}")
    return wall, usage.ru_utime + usage.ru_stime


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _cpu_of(pid: int) -> float | None:
    """CPU seconds ``pid`` has used so far (Linux's /proc; None elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime


def time_serve(orgate: str, env: dict[str, str]) -> tuple[float, float | None]:
    """Wall seconds from starting ``orgate serve`` to its first ``/healthz`` answer, and the CPU
    seconds the server had used by then."""
    port = _free_port()
    argv = [orgate, "serve", "--host", "127.0.0.1", "--port", str(port)]
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    try:
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as reply:
                    reply.read()
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                if proc.poll() is not None:
                    raise SystemExit(
                        f"orgate serve exited {proc.returncode}: {proc.stderr.read().decode()}"
                    ) from None
                if time.perf_counter() - start > READY_DEADLINE:
                    raise SystemExit(
                        f"orgate serve did not answer /healthz in {READY_DEADLINE:.0f}s"
                    ) from None
                time.sleep(0.002)
        wall = time.perf_counter() - start
        return wall, _cpu_of(proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _row(what: str, samples: list[tuple[float, float | None]]) -> Row:
    cpus = [cpu for _wall, cpu in samples if cpu is not None]
    return Row(
        what=what,
        wall_ms=statistics.median(wall for wall, _cpu in samples) * 1000,
        cpu_ms=statistics.median(cpus) * 1000 if cpus else None,
        runs=len(samples),
    )


def measure(orgate: str, runs: int) -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="orgate-startup-") as scratch:
        env = _env(scratch)
        cases = [("orgate --version", [orgate, "--version"]), ("orgate --help", [orgate, "--help"])]
        cases += [(f"orgate {name} --help", [orgate, name, "--help"]) for name in _commands()]
        rows: list[Row] = []
        for what, argv in cases:
            time_command(argv, env)  # not counted: compiles the modules' caches, fills the OS's
            rows.append(_row(what, [time_command(argv, env) for _ in range(runs)]))
            print(f"  {what}: {rows[-1].wall_ms:.0f} ms", file=sys.stderr)
        time_serve(orgate, env)
        rows.append(_row("orgate serve → /healthz", [time_serve(orgate, env) for _ in range(runs)]))
        return rows


def table(rows: list[Row], load: tuple[float, float, float]) -> str:
    lines = [
        f"load average (1, 5, 15 min): {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on "
        f"{os.cpu_count()} cores",
        "wall time depends on the machine's load; CPU time (user + system of the "
        "process) much less",
        "",
        "| what | median wall | median CPU | runs |",
        "|---|---:|---:|---:|",
    ]
    for row in rows:
        cpu = f"{row.cpu_ms:.0f} ms" if row.cpu_ms is not None else "–"
        lines.append(f"| `{row.what}` | {row.wall_ms:.0f} ms | {cpu} | {row.runs} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="runs of each command (default 7)")
    parser.add_argument(
        "--orgate-bin",
        default=str(Path(sys.executable).with_name("orgate")),
        help="the orgate executable",
    )
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    rows = measure(args.orgate_bin, max(1, args.runs))
    load = os.getloadavg()
    print(table(rows, load))
    if args.json:
        report = {
            "load_before": load_before,
            "load_after": load,
            "cores": os.cpu_count(),
            "rows": [asdict(r) for r in rows],
        }
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
