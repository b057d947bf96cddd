"""The same orgate app under two HTTP servers: uvicorn (httptools, what ``orgate serve`` runs)
and granian (a Rust HTTP server, ASGI interface), measured with the method of
``perf_table.py`` (gateway pinned to one core, CPU per request of the process tree,
interleaved rounds). Store off, ``openai-chat`` to the nginx fake upstream.

granian is not a dependency: ``.venv/bin/pip install granian`` first. Under granian the
app loses what ``server/http_protocol.py`` adds to uvicorn (a bounded, timed request head
with spec-shaped errors), so this prices the server alone.

Run: ``.venv/bin/python bench/server_ab.py [--rounds 3]``
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import perf_table as pt  # noqa: E402
import run_gateway_bench as gb  # noqa: E402


def create() -> object:
    """The app factory granian imports (``bench.server_ab:create``)."""
    from orgate.config import load_settings
    from orgate.gateway import create_app

    return create_app(load_settings(os.environ["ORGATE_CONFIG"]))


def start_granian(pm: gb.ProcessManager, nginx: int, extra: list[str]) -> gb.Leg:
    port = gb.free_port()
    config = gb.WORK_DIR / "granian.toml"
    config.write_text(pt.orgate_toml(port, nginx, None))
    granian = str(gb.REPO_DIR / ".venv" / "bin" / "granian")
    argv = [
        "taskset",
        "-c",
        str(pt.GATEWAY_CORE),
        granian,
        "--interface",
        "asgi",
        "--loop",
        "uvloop",
        "--workers",
        "1",
        "--runtime-threads",
        "1",
        "--no-access-log",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *extra,
        "--factory",
        "server_ab:create",
    ]
    env = {**os.environ, "ORGATE_CONFIG": str(config), "PYTHONPATH": str(gb.BENCH_DIR)}
    proc = pm.spawn("granian", argv, env=env, cwd=gb.BENCH_DIR)
    gb.wait_port(port, proc, 240)
    leg = gb.Leg("granian", gb.responses_targets(port, f"Bearer {gb.API_KEY}"), proc)
    for mode in gb.MODES:
        gb.validate(leg, mode, attempts=60)
    return leg


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--conns", type=int, default=16)
    parser.add_argument("--duration", type=float, default=6.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--granian-args", default="", help="more granian options, e.g. '--runtime-mode st'"
    )
    args = parser.parse_args()
    gb.WORK_DIR.mkdir(exist_ok=True)
    (gb.WORK_DIR / "logs").mkdir(exist_ok=True)
    os.sched_setaffinity(0, {pt.LOAD_CORE})
    pm = gb.ProcessManager(gb.WORK_DIR / "logs")
    running: list = []
    try:
        nginx_proc, nginx_port = gb.start_nginx(pm, 1)
        nginx_pids = gb.process_tree(nginx_proc.pid)
        legs = [
            pt.start_orgate(
                pm, "uvicorn", nginx_port, store_db=None, workers=1, cores=str(pt.GATEWAY_CORE)
            ),
            start_granian(pm, nginx_port, args.granian_args.split()),
        ]
        for round_ in range(args.rounds):
            for mode in gb.MODES:
                for leg in legs:
                    result = pt.measure(leg, mode, args.conns, args, nginx_pids, running)
                    print(
                        f"round {round_ + 1} {leg.name:8} {mode:9} c={args.conns} "
                        f"{result.rps:8.1f} req/s "
                        f"{result.server_cpu_us_per_req or 0:7.0f} µs CPU/req  foreign "
                        f"CPU {result.foreign_cpu_pct}%",
                        flush=True,
                    )
    finally:
        pm.stop_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
