"""Benchmark: what the response store costs. A script, not a test.

Four measurements, each repeated ``--repeats`` times (legs interleaved) and
reported as the median, because the machine is noisy:

1. Throughput, store on vs off: ``orgate serve`` with the built-in model
   ``orgate/echo`` and ``[store] enabled = false`` (off), SQLite (on) and, with
   ``--pg-url`` or ``$ORGATE_TEST_PG_URL``, PostgreSQL (on, a fresh schema),
   driven by ``wrk`` POSTing ``{"model":"orgate/echo","input":...}`` for
   ``--duration`` seconds at each of ``--conns`` connections, with the server
   process's CPU time over each run (ms per request, and cores used). The cost of
   persistence is the ratio store-on / store-off requests/s; the bar is
   ≥ 0.75 on SQLite with one worker (storing costs at most 25 %).
2. The chain curve: server CPU time (``/proc/PID/stat`` utime + stime) and
   wall time per request for a turn continuing a chain of 1, 10 and 100 turns
   (``previous_response_id``), over ``--chain-requests`` sequential requests.
3. Database round trips per turn (``context`` + ``save``) at the same depths,
   counted in-process with the store's ``query_count`` (SQLite: statements;
   PostgreSQL: round trips), the way ``tests/store/test_responses.py`` does.
4. In-process cost of ``save`` alone (no HTTP): ``--save-count`` saves of an
   echo-sized response from 1, 16 and 64 concurrent tasks, with the CPU time of
   the event loop's thread and of the whole process per save; and the same for a
   streamed response, saved twice (in progress, then final).

Usage::

    # SQLite vs off (+ PostgreSQL if $ORGATE_TEST_PG_URL)
    .venv/bin/python bench/store_bench.py
    .venv/bin/python bench/store_bench.py --duration 5 --repeats 3 --pg-url postgresql://...

It prints a Markdown table for docs/performance.md (``--json FILE`` saves the raw figures).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from run_gateway_bench import (  # bench/ is this script's directory
    ProcessManager,
    free_port,
    start_nginx,
)

KEY = "bench-store-key"
BODY = {
    "model": "orgate/echo",
    "input": "The quick brown fox jumps over the lazy dog, twelve words in all.",
}
DEPTHS = (1, 10, 100)

LUA = r"""
-- POST one JSON body with a bearer key; print one machine-readable line at the end.
local body, auth
function init(args)
   body = args[1]
   auth = args[2]
   wrk.method = "POST"
   wrk.body = body
   wrk.headers["Content-Type"] = "application/json"
   wrk.headers["Authorization"] = auth
end
function done(summary, latency, requests)
   local e = summary.errors
   io.write(string.format("STORE_BENCH %d %d %d %d %d %d\n", summary.requests, summary.duration,
      e.status, e.connect + e.read + e.write + e.timeout,
      latency:percentile(50), latency:percentile(99)))
end
"""


# --------------------------------------------------------------------------- servers


@dataclass
class Server:
    """One ``orgate serve`` process (own process group) on a free port."""

    name: str
    config: str
    store_url: str | None
    workdir: Path
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> Server:
        config = self.workdir / f"{self.name}.toml"
        config.write_text(self.config)
        env = {**os.environ, "ORGATE_API_KEY": KEY}
        env.pop("ORGATE_STORE__URL", None)
        if self.store_url:
            env["ORGATE_STORE__URL"] = self.store_url
        log = (self.workdir / f"{self.name}.log").open("ab")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "orgate.cli",
                "serve",
                "--config",
                str(config),
                "--port",
                str(self.port),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=self.workdir,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"{self.name}: orgate exited with {self.proc.returncode}; see {log.name}"
                )
            try:
                if httpx.get(f"{self.url}/healthz", timeout=0.5).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"{self.name}: orgate did not start in {timeout}s")

    def cpu_seconds(self) -> float:
        """utime + stime of the server process (all its threads), from /proc."""
        assert self.proc is not None
        stat = Path(f"/proc/{self.proc.pid}/stat").read_text()
        fields = stat.rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


#: Set by ``--upstream``: the port of the nginx fake Chat Completions upstream.
UPSTREAM_PORT: int | None = None


def config_for(store: bool) -> str:
    text = '[server]\nlog_level = "warning"\n\n'
    if not store:
        text += "[store]\nenabled = false\n"
    if UPSTREAM_PORT is not None:
        text += f"""
[[models]]
name = "bench-model"
provider = "openai-chat"
base_url = "http://127.0.0.1:{UPSTREAM_PORT}/plain/v1"
api_key = "x"
upstream_model = "gpt-4o-mini"
"""
    return text


async def _pg(url: str, statement: str) -> None:
    import asyncpg  # optional dependency: only for the PostgreSQL leg

    conn = await asyncpg.connect(url)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


def with_search_path(url: str, schema: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}search_path={schema}"


@contextmanager
def pg_schema(url: str) -> Iterator[str]:
    """A fresh schema on the PostgreSQL database, dropped afterwards; yields the store URL."""
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    asyncio.run(_pg(url, f"CREATE SCHEMA {schema}"))
    try:
        yield with_search_path(url, schema)
    finally:
        asyncio.run(_pg(url, f"DROP SCHEMA {schema} CASCADE"))


# --------------------------------------------------------------------------- throughput


@dataclass
class WrkResult:
    requests: int
    seconds: float
    status_errors: int
    socket_errors: int
    p50_ms: float
    p99_ms: float
    cpu_seconds: float = 0.0  # server process CPU (user + system) during the run

    @property
    def cpu_ms_per_request(self) -> float:
        return self.cpu_seconds * 1000 / self.requests if self.requests else 0.0

    @property
    def cpu_share(self) -> float:
        """Server CPU use during the run, in cores (1.0 = one core busy all the time)."""
        return self.cpu_seconds / self.seconds if self.seconds else 0.0

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


def run_wrk(url: str, lua: Path, conns: int, seconds: float, threads: int) -> WrkResult:
    cmd = [
        "wrk",
        f"-t{min(threads, conns)}",
        f"-c{conns}",
        f"-d{max(1, round(seconds))}s",
        "--timeout",
        "20s",
        "-s",
        str(lua),
        f"{url}/v1/responses",
        "--",
        json.dumps(BODY),
        f"Bearer {KEY}",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(
            f"wrk failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}"
        )
    out = done.stdout
    line = next(line for line in out.splitlines() if line.startswith("STORE_BENCH "))
    requests, duration_us, status, sock, p50, p99 = (int(x) for x in line.split()[1:])
    return WrkResult(requests, duration_us / 1e6, status, sock, p50 / 1000, p99 / 1000)


def throughput(
    servers: list[Server], lua: Path, conns: list[int], seconds: float, repeats: int, threads: int
) -> dict[str, dict[int, list[WrkResult]]]:
    results: dict[str, dict[int, list[WrkResult]]] = {
        s.name: {c: [] for c in conns} for s in servers
    }
    for server in servers:  # warm-up: imports, JIT-free caches, SQLite pages
        run_wrk(server.url, lua, 16, 2, threads)
    for c in conns:
        for r in range(repeats):
            for server in servers if r % 2 == 0 else servers[::-1]:
                cpu0 = server.cpu_seconds()
                result = run_wrk(server.url, lua, c, seconds, threads)
                result.cpu_seconds = server.cpu_seconds() - cpu0
                results[server.name][c].append(result)
                print(
                    f"  {server.name:<10} c={c:<3} run {r + 1}: {result.rps:8.1f} req/s  "
                    f"p50 {result.p50_ms:6.1f} ms  "
                    f"cpu {result.cpu_ms_per_request:5.2f} ms/req "
                    f"({result.cpu_share:.2f} cores)  errors "
                    f"{result.status_errors}+{result.socket_errors}",
                    file=sys.stderr,
                )
    return results


# --------------------------------------------------------------------------- chain curve


def build_chain(client: httpx.Client, turns: int) -> list[str]:
    ids: list[str] = []
    previous = None
    for t in range(turns):
        r = client.post(
            "/v1/responses",
            json={
                "model": "orgate/echo",
                "input": f"turn {t} of the chain",
                "previous_response_id": previous,
            },
        )
        r.raise_for_status()
        previous = r.json()["id"]
        ids.append(previous)
    return ids


def chain_curve(server: Server, requests: int, repeats: int) -> dict[int, dict[str, list[float]]]:
    """CPU and wall ms per request for a turn continuing the response at each depth."""
    curve: dict[int, dict[str, list[float]]] = {d: {"cpu_ms": [], "wall_ms": []} for d in DEPTHS}
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=30
    ) as client:
        ids = build_chain(client, max(DEPTHS))
        for _ in range(repeats):
            for depth in DEPTHS:
                parent = ids[depth - 1]
                body = {
                    "model": "orgate/echo",
                    "input": "one more turn",
                    "previous_response_id": parent,
                }
                client.post("/v1/responses", json=body).raise_for_status()  # warm
                cpu0, wall0 = server.cpu_seconds(), time.perf_counter()
                for _ in range(requests):
                    client.post("/v1/responses", json=body).raise_for_status()
                curve[depth]["cpu_ms"].append((server.cpu_seconds() - cpu0) * 1000 / requests)
                curve[depth]["wall_ms"].append((time.perf_counter() - wall0) * 1000 / requests)
    return curve


# --------------------------------------------------------------------------- round trips


async def round_trips(url: str) -> dict[int, tuple[int, int]]:
    """(context, save) query_count deltas of a turn continuing a chain at each depth."""
    from orgate.store import open_store

    store = await open_store(url)
    costs: dict[int, tuple[int, int]] = {}
    try:
        previous: str | None = None
        for n in range(1, max(DEPTHS) + 2):
            rid = f"resp_bench_{uuid.uuid4().hex}"
            response = {
                "id": rid,
                "object": "response",
                "created_at": int(time.time()),
                "status": "completed",
                "model": "orgate/echo",
                "output": [
                    {
                        "id": f"msg_{uuid.uuid4().hex}",
                        "type": "message",
                        "role": "assistant",
                        "status": "completed",
                        "content": [
                            {"type": "output_text", "text": f"answer {n}", "annotations": []}
                        ],
                    }
                ],
            }
            before = store.query_count
            if previous is not None:
                assert await store.context(previous, "bench") is not None
            after_context = store.query_count
            await store.save(
                response,
                tenant="bench",
                input_items=[{"type": "message", "role": "user", "content": f"q {n}"}],
                previous_response_id=previous,
            )
            if n - 1 in DEPTHS:  # this turn continues a chain of n - 1 turns
                costs[n - 1] = (after_context - before, store.query_count - after_context)
            previous = rid
    finally:
        await store.close()
    return costs


# --------------------------------------------------------------------------- save cost

SAVE_CONCURRENCY = (1, 16, 64)


async def save_cost(url: str, count: int, *, streamed: bool = False) -> dict[int, dict[str, float]]:
    """Per response at each concurrency: wall µs, loop-thread CPU µs, process CPU µs, statements.

    ``streamed``: each response is saved twice, as a streamed one with the store on is — in
    progress before its first event leaves, then final before its terminal event does."""
    from orgate.store import open_store

    text = BODY["input"]
    inputs = [{"type": "message", "role": "user", "content": text}]
    request = {"model": "orgate/echo", "upstream_model": "echo", "stream": False}
    out: dict[int, dict[str, float]] = {}
    store = await open_store(url, heartbeat_interval=0)
    try:
        for conc in SAVE_CONCURRENCY:
            n = count if conc > 1 else max(1, count // 4)
            bodies = iter(
                {
                    "id": f"resp_{uuid.uuid4().hex}",
                    "object": "response",
                    "created_at": int(time.time()),
                    "status": "completed",
                    "model": "orgate/echo",
                    "error": None,
                    "output": [
                        {
                            "id": f"msg_{uuid.uuid4().hex}",
                            "type": "message",
                            "role": "assistant",
                            "status": "completed",
                            "content": [{"type": "output_text", "text": text, "annotations": []}],
                        }
                    ],
                    "usage": {"input_tokens": 12, "output_tokens": 12, "total_tokens": 24},
                }
                for _ in range(n)
            )

            async def saver(bodies=bodies) -> None:  # noqa: ANN001 - one shared iterator
                for body in bodies:
                    if streamed:
                        await store.save(
                            {**body, "status": "in_progress", "output": [], "usage": None},
                            tenant="bench",
                            input_items=inputs,
                            deployment="orgate/echo",
                            request=request,
                        )
                    await store.save(
                        body,
                        tenant="bench",
                        input_items=inputs,
                        deployment="orgate/echo",
                        request=request,
                    )

            q0 = store.query_count
            wall0, cpu0, thread0 = time.perf_counter(), time.process_time(), time.thread_time()
            await asyncio.gather(*(saver() for _ in range(conc)))
            wall, cpu, thread = (
                time.perf_counter() - wall0,
                time.process_time() - cpu0,
                time.thread_time() - thread0,
            )
            out[conc] = {
                "wall_us": wall * 1e6 / n,
                "loop_cpu_us": thread * 1e6 / n,
                "process_cpu_us": cpu * 1e6 / n,
                "statements": (store.query_count - q0) / n,
            }
    finally:
        await store.close()
    return out


def start_upstream(stack: ExitStack) -> None:
    """nginx serving canned Chat Completions bodies (``run_gateway_bench``'s upstream)."""
    global UPSTREAM_PORT
    manager = ProcessManager(Path(tempfile.mkdtemp(prefix="orgate-store-bench-nginx-")))
    stack.callback(manager.stop_all)
    _, UPSTREAM_PORT = start_nginx(manager, workers=1)
    BODY["model"] = "bench-model"


# --------------------------------------------------------------------------- report


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def report(
    tp: dict[str, dict[int, list[WrkResult]]],
    curves: dict[str, dict[int, dict[str, list[float]]]],
    trips: dict[str, dict[int, tuple[int, int]]],
    args: argparse.Namespace,
    saves: dict[str, dict[int, dict[str, float]]] | None = None,
) -> str:
    upstream = (
        "openai-chat → nginx fake upstream" if args.upstream else "built-in model `orgate/echo`"
    )
    lines = [
        f"Store benchmark — {upstream}, "
        f"one worker, wrk {args.duration:g} s × {args.repeats} runs per cell, median "
        f"(`{' '.join(sys.argv)}`)",
        "",
    ]
    if tp:
        lines += [
            "| store | conns | req/s (median) | p50 ms | p99 ms | server CPU ms / req "
            "| server CPU (cores) | vs store off |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for name, by_conns in tp.items():
            for c, runs in by_conns.items():
                rps = median([r.rps for r in runs])
                off = median([r.rps for r in tp["off"][c]]) if "off" in tp else float("nan")
                errors = sum(r.status_errors + r.socket_errors for r in runs)
                note = f" ({errors} errors)" if errors else ""
                cpu = median([r.cpu_ms_per_request for r in runs])
                share = median([r.cpu_share for r in runs])
                p50, p99 = median([r.p50_ms for r in runs]), median([r.p99_ms for r in runs])
                lines.append(
                    f"| {name} | {c} | {rps:.0f}{note} | {p50:.1f} | {p99:.1f} | "
                    f"{cpu:.2f} | {share:.2f} | {rps / off:.2f} |"
                )
        if "off" in tp and "sqlite" in tp:
            worst = min(
                median([r.rps for r in tp["sqlite"][c]]) / median([r.rps for r in tp["off"][c]])
                for c in tp["off"]
            )
            verdict = "PASS" if worst >= 0.75 else "FAIL"
            lines += [
                "",
                "Bar (SQLite store-on ≥ 0.75 × store-off req/s): worst ratio "
                f"{worst:.2f} → **{verdict}**",
            ]
    if curves:
        lines += [
            "",
            "| store | chain depth | server CPU ms / turn | wall ms / turn (1 connection) |",
            "|---|---|---|---|",
        ]
        for name, curve in curves.items():
            for depth, values in curve.items():
                lines.append(
                    f"| {name} | {depth} | {median(values['cpu_ms']):.2f} | "
                    f"{median(values['wall_ms']):.2f} |"
                )
    if trips:
        lines += [
            "",
            "| store | chain depth | `context` round trips | `save` round trips |",
            "|---|---|---|---|",
        ]
        for name, costs in trips.items():
            for depth, (ctx, save) in sorted(costs.items()):
                lines.append(f"| {name} | {depth} | {ctx} | {save} |")
        lines.append("")
        lines.append(
            "Round trips counted in-process with `ResponseStore.query_count` (SQLite: "
            "statements, excluding BEGIN/COMMIT, which a batch of concurrent writes "
            "shares; PostgreSQL: server round trips)."
        )
    if saves:
        lines += [
            "",
            "| store | concurrent saves | wall µs / response | event-loop thread CPU "
            "µs / response | process CPU µs / response | statements / response |",
            "|---|---|---|---|---|---|",
        ]
        for name, by_conc in saves.items():
            for conc, v in by_conc.items():
                lines.append(
                    f"| {name} | {conc} | {v['wall_us']:.0f} | {v['loop_cpu_us']:.0f} "
                    f"| {v['process_cpu_us']:.0f} | {v['statements']:.1f} |"
                )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--duration", type=float, default=10, help="seconds per wrk run (default 10)"
    )
    parser.add_argument("--conns", default="16,64", help="connection counts (default 16,64)")
    parser.add_argument(
        "--repeats", type=int, default=3, help="runs per cell; the median is reported (default 3)"
    )
    parser.add_argument("--threads", type=int, default=2, help="wrk threads (default 2)")
    parser.add_argument(
        "--pg-url",
        default=os.environ.get("ORGATE_TEST_PG_URL"),
        help="PostgreSQL URL (default $ORGATE_TEST_PG_URL)",
    )
    parser.add_argument(
        "--chain-requests",
        type=int,
        default=40,
        help="requests per chain-depth measurement (default 40)",
    )
    parser.add_argument(
        "--skip", default="", help="comma list of parts to skip: throughput,chain,trips,save"
    )
    parser.add_argument(
        "--save-count",
        type=int,
        default=4000,
        help="saves per concurrency in the save part (default 4000)",
    )
    parser.add_argument(
        "--upstream",
        action="store_true",
        help="throughput through the openai-chat provider to an nginx fake upstream "
        "(the gateway's real path, as in run_gateway_bench.py) instead of the built-in model",
    )
    parser.add_argument("--json", help="also write the raw figures to this file")
    args = parser.parse_args(argv)
    if shutil.which("wrk") is None and "throughput" not in args.skip:
        parser.error("wrk is not installed (apt-get install wrk), or pass --skip throughput")
    conns = [int(c) for c in args.conns.split(",")]
    skip = set(filter(None, args.skip.split(",")))

    workdir = Path(tempfile.mkdtemp(prefix="orgate-store-bench-"))
    lua = workdir / "post.lua"
    lua.write_text(LUA)
    servers: list[Server] = []
    with ExitStack() as stack:
        if args.upstream:
            start_upstream(stack)
        pg_store = stack.enter_context(pg_schema(args.pg_url)) if args.pg_url else None
        stack.callback(lambda: [server.stop() for server in servers])
        servers.append(Server("off", config_for(False), None, workdir).start())
        servers.append(
            Server("sqlite", config_for(True), f"sqlite://{workdir}/bench.db", workdir).start()
        )
        if pg_store:
            servers.append(Server("postgresql", config_for(True), pg_store, workdir).start())
        tp = (
            {}
            if "throughput" in skip
            else throughput(servers, lua, conns, args.duration, args.repeats, args.threads)
        )
        curves = (
            {}
            if "chain" in skip
            else {
                s.name: chain_curve(s, args.chain_requests, args.repeats)
                for s in servers
                if s.name != "off"
            }
        )
        trips: dict[str, dict[int, tuple[int, int]]] = {}
        if "trips" not in skip:
            trips["sqlite"] = asyncio.run(round_trips(f"sqlite://{workdir}/trips.db"))
            if args.pg_url:
                with pg_schema(args.pg_url) as url:
                    trips["postgresql"] = asyncio.run(round_trips(url))
        saves: dict[str, dict[int, dict[str, float]]] = {}
        if "save" not in skip:
            saves["sqlite"] = asyncio.run(
                save_cost(f"sqlite://{workdir}/saves.db", args.save_count)
            )
            saves["sqlite, streamed (in progress + final)"] = asyncio.run(
                save_cost(f"sqlite://{workdir}/saves-streamed.db", args.save_count, streamed=True)
            )
            if args.pg_url:
                with pg_schema(args.pg_url) as url:
                    saves["postgresql"] = asyncio.run(save_cost(url, args.save_count))
                with pg_schema(args.pg_url) as url:
                    saves["postgresql, streamed (in progress + final)"] = asyncio.run(
                        save_cost(url, args.save_count, streamed=True)
                    )
    print(report(tp, curves, trips, args, saves))
    if args.json:
        raw = {
            "throughput": {
                n: {c: [{**r.__dict__, "rps": r.rps} for r in runs] for c, runs in by.items()}
                for n, by in tp.items()
            },
            "chain": curves,
            "round_trips": trips,
            "save_cost": saves,
        }
        Path(args.json).write_text(json.dumps(raw, indent=2))
    shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
