"""The performance table of docs/performance.md: what a request costs in orgate, and how
throughput grows with workers.

Method (one run, one machine):

- an nginx upstream serves canned Chat Completions bodies (JSON, and a 21-chunk SSE
  stream); nginx and wrk run pinned to one core, each single-process gateway to the other;
- legs, measured back to back per cell and repeated ``--rounds`` times (interleaved, so
  that a shared machine's load hits every leg alike): ``direct`` (wrk → nginx), orgate
  with its default configuration (the SQLite store on), orgate with the store off, and
  LiteLLM (``/v1/responses`` bridged onto Chat Completions) when
  ``bench/.work/litellm-venv`` exists (``bench/run_gateway_bench.py`` installs it);
- per cell: requests/s at ``--conns`` connections, the CPU time of the gateway's process
  tree per completed request (steadier than req/s on a busy machine), and the p50
  latency at one connection, reported as the time added over ``direct``;
- workers: orgate (default configuration) with ``--workers 1`` and ``--workers 2``,
  unpinned, on every core with nginx and wrk, interleaved rounds; the ratio of req/s.

Every cell keeps the best of its rounds (the least disturbed). With ``--write-docs``
the tables replace the block between the markers in docs/performance.md.

Run: ``.venv/bin/python bench/perf_table.py [--rounds 3] [--write-docs]``
(needs ``wrk`` and ``nginx``: ``apt-get install -y wrk nginx``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import run_gateway_bench as gb  # noqa: E402 - the shared machinery of the gateway benchmark

DOCS = gb.REPO_DIR / "docs" / "performance.md"
BEGIN = "<!-- perf_table: begin (written by bench/perf_table.py) -->"
END = "<!-- perf_table: end -->"
GATEWAY_CORE, LOAD_CORE = 0, 1

STORE_ON = """
[store]
enabled = true
url = "sqlite:///{db}"
"""


@dataclass
class Cell:
    rps: float
    cpu_ms: float | None
    p50_ms: float


def orgate_toml(port: int, nginx: int, store_db: Path | None) -> str:
    text = gb.ORGATE_TOML.format(port=port, key=gb.API_KEY, nginx=nginx)
    if store_db is None:
        return text
    head, _, tail = text.partition("[store]\nenabled = false   # the store-off baseline\n")
    return head + STORE_ON.format(db=store_db) + tail


def start_orgate(
    pm: gb.ProcessManager, name: str, nginx: int, *, store_db: Path | None, workers: int, cores: str
) -> gb.Leg:
    port = gb.free_port()
    config = gb.WORK_DIR / f"{name}.toml"
    config.write_text(orgate_toml(port, nginx, store_db))
    orgate = str(gb.REPO_DIR / ".venv" / "bin" / "orgate")
    argv = [
        "taskset",
        "-c",
        cores,
        orgate,
        "serve",
        "--config",
        str(config),
        "--port",
        str(port),
        "--workers",
        str(workers),
    ]
    proc = pm.spawn(name, argv, cwd=gb.REPO_DIR)
    gb.wait_port(port, proc, 240)
    leg = gb.Leg(name, gb.responses_targets(port, f"Bearer {gb.API_KEY}"), proc)
    for mode in gb.MODES:
        gb.validate(leg, mode, attempts=60)  # every worker is up once a few answers came back
    return leg


def measure(
    leg: gb.Leg,
    mode: str,
    conns: int,
    args: argparse.Namespace,
    nginx_pids: list[int],
    running: list,
) -> gb.Result:
    opts = gb.WrkOptions(threads=args.threads, timeout_s=20)
    result = gb.measure(
        leg, mode, conns, args.duration, args.warmup, 1000.0, nginx_pids, opts, running, 60.0
    )
    if not result.valid:
        raise gb.BenchError(
            f"{leg.name}/{mode}/c={conns}: {result.non_2xx} non-2xx, errors {result.socket_errors}"
        )
    return result


def best(cells: list[gb.Result]) -> gb.Result:
    return max(cells, key=lambda r: r.rps)


def run(args: argparse.Namespace) -> str:
    gb.WORK_DIR.mkdir(exist_ok=True)
    (gb.WORK_DIR / "logs").mkdir(exist_ok=True)
    os.sched_setaffinity(0, {LOAD_CORE})  # nginx and wrk (children of this script) share this core
    pm = gb.ProcessManager(gb.WORK_DIR / "logs")
    running: list = []
    store_dir = Path(tempfile.mkdtemp(prefix="perf-store-", dir=gb.WORK_DIR))
    try:
        nginx_proc, nginx_port = gb.start_nginx(pm, 1)
        nginx_pids = gb.process_tree(nginx_proc.pid)
        legs = [gb.direct_leg(nginx_proc, nginx_port)]
        legs.append(
            start_orgate(
                pm,
                "orgate-default",
                nginx_port,
                store_db=store_dir / "one.db",
                workers=1,
                cores=str(GATEWAY_CORE),
            )
        )
        legs.append(
            start_orgate(
                pm,
                "orgate-store-off",
                nginx_port,
                store_db=None,
                workers=1,
                cores=str(GATEWAY_CORE),
            )
        )
        if (gb.LITELLM_VENV / "bin" / "litellm").exists() and not args.no_litellm:
            litellm = gb.start_litellm(pm, nginx_port, False, "openai/gpt-4o-mini")
            os.sched_setaffinity(litellm.proc.pid, {GATEWAY_CORE}) if litellm.proc else None
            legs.append(litellm)
        results: dict[tuple[str, str, int], list[gb.Result]] = {}
        for round_ in range(args.rounds):
            for mode in gb.MODES:
                for conns in (1, args.conns):
                    for leg in legs:
                        if leg.name == "litellm" and conns == 1 and round_ > 0:
                            continue
                        result = measure(leg, mode, conns, args, nginx_pids, running)
                        results.setdefault((leg.name, mode, conns), []).append(result)
                        print(
                            f"round {round_ + 1} {leg.name:18} {mode:9} c={conns:<3} "
                            f"{result.rps:9.1f} req/s "
                            f"{result.server_cpu_us_per_req or 0:8.0f} µs CPU/req  p50 "
                            f"{result.p50_ms:.2f} ms  "
                            f"foreign CPU {result.foreign_cpu_pct}%",
                            flush=True,
                        )
        for leg in legs[1:]:
            pm.stop(leg.proc) if leg.proc else None
        scaling = workers_scaling(pm, nginx_port, nginx_pids, args, store_dir, running)
        return tables(results, scaling, args)
    finally:
        for popen in running:
            with contextlib.suppress(ProcessLookupError):
                popen.kill()
        pm.stop_all()


def workers_scaling(
    pm: gb.ProcessManager,
    nginx: int,
    nginx_pids: list[int],
    args: argparse.Namespace,
    store_dir: Path,
    running: list,
) -> dict[int, list[gb.Result]]:
    """orgate (default configuration) with 1 and 2 workers on every core, interleaved."""
    every = ",".join(
        str(core) for core in sorted(os.sched_getaffinity(os.getppid()) | {GATEWAY_CORE, LOAD_CORE})
    )
    os.sched_setaffinity(0, {GATEWAY_CORE, LOAD_CORE})  # nginx keeps its core; wrk may use both
    legs = {
        n: start_orgate(
            pm,
            f"orgate-workers-{n}",
            nginx,
            store_db=store_dir / f"w{n}.db",
            workers=n,
            cores=every,
        )
        for n in (1, 2)
    }
    out: dict[int, list[gb.Result]] = {1: [], 2: []}
    for round_ in range(args.rounds):
        for n, leg in legs.items():
            result = measure(leg, "nonstream", args.scaling_conns, args, nginx_pids, running)
            out[n].append(result)
            print(
                f"round {round_ + 1} workers={n} non-stream c={args.scaling_conns} "
                f"{result.rps:9.1f} req/s "
                f"{result.server_cpu_us_per_req or 0:8.0f} µs CPU/req  foreign CPU "
                f"{result.foreign_cpu_pct}%",
                flush=True,
            )
    return out


def tables(
    results: dict[tuple[str, str, int], list[gb.Result]],
    scaling: dict[int, list[gb.Result]],
    args: argparse.Namespace,
) -> str:
    def cell(leg: str, mode: str) -> str:
        runs = results.get((leg, mode, args.conns))
        if not runs:
            return "—"
        top = best(runs)
        cpu = f"{top.server_cpu_us_per_req / 1000:.2f} ms" if top.server_cpu_us_per_req else "—"
        return f"{top.rps:,.0f} req/s, {cpu} CPU/request"

    def added(leg: str, mode: str) -> str:
        mine, direct = results.get((leg, mode, 1)), results.get(("direct", mode, 1))
        if not mine or not direct:
            return "—"
        return f"+{min(r.p50_ms for r in mine) - min(r.p50_ms for r in direct):.2f} ms"

    names = {
        "orgate-default": "orgate, default config (SQLite store on)",
        "orgate-store-off": "orgate, store off",
        "litellm": "LiteLLM (/v1/responses bridge)",
        "direct": "direct to nginx",
    }
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    foreign = [r.foreign_cpu_pct or 0 for runs in results.values() for r in runs]
    lines = [
        BEGIN,
        f"Measured {when}, `bench/perf_table.py --rounds {args.rounds} --conns "
        f"{args.conns} --duration {args.duration:g}`; "
        f"best of {args.rounds} interleaved rounds per cell; other tenants of the machine used "
        f"{min(foreign):.0f}–{max(foreign):.0f}% of a core during the runs.",
        "",
        "| | non-stream | stream (21 text chunks) |",
        "|---|---|---|",
    ]
    for leg in ("orgate-default", "orgate-store-off", "litellm", "direct"):
        if any(key[0] == leg for key in results):
            lines.append(
                f"| {names[leg]}, {args.conns} connections | {cell(leg, 'nonstream')} "
                f"| {cell(leg, 'stream')} |"
            )
    for leg in ("orgate-default", "orgate-store-off"):
        lines.append(
            f"| {names[leg]}: p50 added at one connection | {added(leg, 'nonstream')} "
            f"| {added(leg, 'stream')} |"
        )
    one, two = best(scaling[1]), best(scaling[2])
    ratios = [b.rps / a.rps for a, b in zip(scaling[1], scaling[2], strict=True)]
    lines += [
        "",
        f"Workers (default config, non-stream, {args.scaling_conns} connections, nginx "
        "and wrk on the same 2 cores):",
        "",
        "| | req/s (best) | CPU/request | 2 workers / 1, per round |",
        "|---|---|---|---|",
        f"| `--workers 1` | {one.rps:,.0f} | {one.server_cpu_us_per_req / 1000:.2f} ms | |",
        f"| `--workers 2` | {two.rps:,.0f} | {two.server_cpu_us_per_req / 1000:.2f} ms "
        f"| {', '.join(f'{r:.2f}×' for r in ratios)} |",
        END,
    ]
    return "\n".join(lines)


def write_docs(block: str) -> None:
    text = DOCS.read_text()
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + block + rest.split(END, 1)[1]
    else:
        raise SystemExit(f"{DOCS} has no {BEGIN!r} … {END!r} block to replace")
    DOCS.write_text(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--conns", type=int, default=16)
    parser.add_argument("--scaling-conns", type=int, default=32)
    parser.add_argument("--duration", type=float, default=8.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--threads", type=int, default=1, help="wrk threads (it has one core)")
    parser.add_argument("--no-litellm", action="store_true")
    parser.add_argument(
        "--write-docs", action="store_true", help="replace the table block in docs/performance.md"
    )
    args = parser.parse_args(argv)
    for tool in ("wrk", "nginx", "taskset"):
        if subprocess.run(["which", tool], capture_output=True).returncode != 0:
            print(
                f"perf_table: {tool} is missing (apt-get install -y wrk nginx util-linux)",
                file=sys.stderr,
            )
            return 2
    block = run(args)
    print("\n" + block)
    if args.write_docs:
        write_docs(block)
    return 0


if __name__ == "__main__":
    sys.exit(main())
