"""Gateway benchmark: orgate against the physical limit, a Python floor and LiteLLM.

One run starts a fake upstream (nginx serving canned Chat Completions JSON and
SSE bodies, path-routed: ``/plain/v1/chat/completions`` answers JSON,
``/sse/v1/chat/completions`` answers an SSE stream) and measures, with wrk as
the load generator, one leg at a time (never two under load at once):

``direct``   client → nginx (the physical limit of this machine);
``floor``    client → ``bench/passthrough.py`` → nginx: uvicorn + uvloop +
             httptools + a pooled aiohttp session forwarding bytes, parsing
             nothing (the floor of what a Python gateway can do at all);
``orgate``   client → ``orgate serve`` (one process, openai-chat provider,
             store off) ``/v1/responses`` → nginx;
``litellm``  client → LiteLLM proxy ``/v1/responses`` (one worker, no
             database, separate virtualenv in ``bench/.work/litellm-venv``)
             → nginx.

Each leg runs non-stream and stream, at 1 connection (for latency) and at
each ``--conns`` value (for throughput). All servers are started (and
validated) first and stay up; the runs go cell by cell (mode, connections,
round), each cell running the legs back to back, so that the runs a ratio
compares are close in time on a machine whose other load varies. It prints requests/s, p50/p99
latency, non-2xx and socket error counts, server CPU use, the ratios
orgate/floor and orgate/LiteLLM, the p50 latency each gateway adds over
direct at one connection, and the peak RSS (VmHWM) of each server process.
A measurement with any non-2xx response or socket error is invalid and
makes the script exit 1.

Run: ``.venv/bin/python bench/run_gateway_bench.py [--legs ...] [--json out.json]``
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import math
import os
import platform
import resource
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, TextIO

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
WORK_DIR = BENCH_DIR / ".work"
FIXTURES = BENCH_DIR / "fixtures"
LUA_SCRIPT = BENCH_DIR / "lua" / "post.lua"
LITELLM_VENV = WORK_DIR / "litellm-venv"

LEGS = ("direct", "floor", "orgate", "litellm")
MODES = ("nonstream", "stream")
API_KEY = "bench-key"
CLK_TCK = os.sysconf("SC_CLK_TCK")

# The bar the issue sets for orgate.
BAR_X_LITELLM = 25.0
BAR_FLOOR_FRACTION = {"nonstream": 0.50, "stream": 0.35}
BAR_ADDED_P50_MS = 1.0
BAR_RSS_MB = 150.0


# ---------------------------------------------------------------- processes


@dataclass
class Proc:
    """A server process this script started, in its own session (process group)."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pid(self) -> int:
        return self.popen.pid


class ProcessManager:
    """Starts servers in their own process groups and stops every one of them."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.procs: list[Proc] = []

    def spawn(
        self, name: str, argv: list[str], env: dict[str, str] | None = None, cwd: Path | None = None
    ) -> Proc:
        log_path = self.log_dir / f"{name}.log"
        log = log_path.open("wb")
        popen = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
        log.close()
        proc = Proc(name, popen, log_path)
        self.procs.append(proc)
        return proc

    def stop(self, proc: Proc, timeout: float = 8.0) -> None:
        """SIGTERM the process group, SIGKILL it if it does not exit in time."""
        if proc in self.procs:
            self.procs.remove(proc)
        if proc.popen.poll() is not None:
            return
        pgid = proc.pid  # start_new_session: the group id is the leader's pid
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
        try:
            proc.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
            proc.popen.wait(5)
        # Children that outlived the leader (e.g. uvicorn workers) share its group.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)

    def stop_all(self) -> None:
        for proc in reversed(list(self.procs)):
            self.stop(proc)


def tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, proc: Proc, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.popen.poll() is not None:
            raise BenchError(
                f"{proc.name} exited with code {proc.popen.returncode} before listening; "
                f"log {proc.log_path}:\n{tail(proc.log_path)}"
            )
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.1)
    raise BenchError(
        f"{proc.name} did not listen on {port} within {timeout:.0f}s; "
        f"log {proc.log_path}:\n{tail(proc.log_path)}"
    )


def process_tree(pid: int) -> list[int]:
    """``pid`` and all its descendants (read from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def cpu_seconds(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime + stime
    return total / CLK_TCK


def status_kb(pid: int, key: str) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return "?"


# ---------------------------------------------------------------- legs


class BenchError(RuntimeError):
    """A leg could not be set up or validated."""


class LegSkipped(RuntimeError):
    """A leg cannot run on this machine (the reason is printed, the run goes on)."""


@dataclass
class Target:
    """What wrk hits for one leg and mode."""

    url: str
    body_file: Path
    authorization: str = ""


@dataclass
class Leg:
    """A running server under test (or nginx itself for ``direct``)."""

    name: str
    targets: dict[str, Target]
    proc: Proc | None = None  # the process whose tree is measured (CPU, RSS)


@dataclass
class Result:
    """One wrk measurement."""

    leg: str
    mode: str
    conns: int
    duration_s: float
    requests: int
    rps: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    non_2xx: int
    socket_errors: dict[str, int]
    server_cpu_pct: float | None = None
    server_cpu_us_per_req: float | None = None
    wrk_cpu_pct: float | None = None
    # CPU used on this machine during the run by processes outside the benchmark
    # (other users of a shared machine), in % of one core: a noisy-run indicator.
    foreign_cpu_pct: float | None = None
    round: int = 1

    @property
    def valid(self) -> bool:
        return self.non_2xx == 0 and not any(self.socket_errors.values()) and self.requests > 0


@dataclass
class LegInfo:
    """Per-leg facts gathered besides the wrk results."""

    status: str = "ok"  # ok | skipped | failed
    message: str = ""
    peak_rss_mb: float | None = None
    rss_by_process: list[dict[str, Any]] = field(default_factory=list)


NGINX_HEAD = """\
worker_processes {workers};
daemon off;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
user root;
events {{ worker_connections 8192; }}
http {{
    access_log off;
    client_body_temp_path {dir}/tmp/body;
    proxy_temp_path {dir}/tmp/proxy;
    fastcgi_temp_path {dir}/tmp/fastcgi;
    uwsgi_temp_path {dir}/tmp/uwsgi;
    scgi_temp_path {dir}/tmp/scgi;
    sendfile on;
    tcp_nodelay on;
    keepalive_requests 100000000;
    keepalive_timeout 600s;
    open_file_cache max=16 inactive=600s;
    open_file_cache_valid 600s;
    etag off;
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        server_tokens off;
        # Static files cannot answer POST (405): re-serve them as 200.
"""

NGINX_TAIL = """\
        location / {
            default_type application/json;
            return 404
                '{"error":{"message":"no such path in the bench upstream","type":"not_found"}}';
        }
    }
}
"""


def nginx_location(path: str, ctype: str, file: Path, *, no_cache: bool = False) -> str:
    """An nginx ``location`` answering every request to ``path`` with ``file``."""
    cache = "            add_header Cache-Control no-cache;\n" if no_cache else ""
    return (
        f"        location = {path} {{\n"
        "            types { }\n"
        f"            default_type {ctype};\n"
        f"{cache}"
        f"            alias {file};\n"
        "            error_page 405 =200 $uri;\n"
        "        }\n"
    )


def serve_static(
    pm: ProcessManager, name: str, ndir: Path, locations: str, workers: int = 1
) -> tuple[Proc, int]:
    """nginx on a free loopback port serving ``locations`` (from ``nginx_location``), else 404."""
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(nginx).exists():
        raise BenchError("nginx not found: apt-get install -y nginx")
    for sub in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (ndir / "tmp" / sub).mkdir(parents=True, exist_ok=True)
    port = free_port()
    conf = ndir / "nginx.conf"
    conf.write_text(
        NGINX_HEAD.format(workers=workers, dir=ndir, port=port) + locations + NGINX_TAIL
    )
    argv = [nginx, "-e", str(ndir / "error.log"), "-p", str(ndir), "-c", str(conf)]
    proc = pm.spawn(name, argv)
    wait_port(port, proc, 10)
    return proc, port


def start_nginx(pm: ProcessManager, workers: int) -> tuple[Proc, int]:
    """The fake Chat Completions upstream: ``/plain/…`` answers JSON, ``/sse/…`` SSE."""
    locations = nginx_location(
        "/plain/v1/chat/completions", "application/json", FIXTURES / "chat_completion.json"
    ) + nginx_location(
        "/sse/v1/chat/completions",
        "text/event-stream",
        FIXTURES / "chat_completion.sse",
        no_cache=True,
    )
    return serve_static(pm, "nginx", WORK_DIR / "nginx", locations, workers)


def direct_leg(nginx_proc: Proc, nginx_port: int) -> Leg:
    base = f"http://127.0.0.1:{nginx_port}"
    return Leg(
        "direct",
        {
            "nonstream": Target(
                f"{base}/plain/v1/chat/completions", FIXTURES / "chat_request.json"
            ),
            "stream": Target(
                f"{base}/sse/v1/chat/completions", FIXTURES / "chat_request_stream.json"
            ),
        },
        nginx_proc,
    )


def start_floor(pm: ProcessManager, nginx_port: int) -> Leg:
    port = free_port()
    argv = [
        sys.executable,
        str(BENCH_DIR / "passthrough.py"),
        "--upstream",
        f"http://127.0.0.1:{nginx_port}",
        "--port",
        str(port),
    ]
    proc = pm.spawn("floor", argv)
    wait_port(port, proc, 20)
    base = f"http://127.0.0.1:{port}"
    return Leg(
        "floor",
        {
            "nonstream": Target(
                f"{base}/plain/v1/chat/completions", FIXTURES / "chat_request.json"
            ),
            "stream": Target(
                f"{base}/sse/v1/chat/completions", FIXTURES / "chat_request_stream.json"
            ),
        },
        proc,
    )


ORGATE_TOML = """\
# Written by bench/run_gateway_bench.py; rewritten on every run.
[server]
host = "127.0.0.1"
port = {port}

[auth]
api_keys = ["{key}"]

[store]
enabled = false   # the store-off baseline

[[models]]
name = "bench-model"
provider = "openai-chat"
base_url = "http://127.0.0.1:{nginx}/plain/v1"
api_key = "x"
upstream_model = "gpt-4o-mini"

[[models]]
name = "bench-model-sse"
provider = "openai-chat"
base_url = "http://127.0.0.1:{nginx}/sse/v1"
api_key = "x"
upstream_model = "gpt-4o-mini"
"""


def responses_targets(port: int, authorization: str) -> dict[str, Target]:
    url = f"http://127.0.0.1:{port}/v1/responses"
    return {
        "nonstream": Target(url, FIXTURES / "responses_request.json", authorization),
        "stream": Target(url, FIXTURES / "responses_request_stream.json", authorization),
    }


def start_orgate(pm: ProcessManager, nginx_port: int, orgate_bin: Path) -> Leg:
    if not orgate_bin.exists():
        raise LegSkipped(f"{orgate_bin} does not exist (pip install -e . in the repo venv)")
    probe = subprocess.run(
        [str(orgate_bin), "serve", "--help"], capture_output=True, text=True, timeout=60
    )
    if probe.returncode != 0:
        detail = (probe.stderr or probe.stdout).strip().splitlines()
        raise LegSkipped(
            f"`orgate serve --help` failed (exit {probe.returncode}): "
            f"{detail[-1] if detail else 'no output'}"
        )
    port = free_port()
    config = WORK_DIR / "orgate.toml"
    config.write_text(ORGATE_TOML.format(port=port, key=API_KEY, nginx=nginx_port))
    argv = [str(orgate_bin), "serve", "--config", str(config), "--port", str(port)]
    proc = pm.spawn("orgate", argv, cwd=REPO_DIR)
    wait_port(port, proc, 60)
    return Leg("orgate", responses_targets(port, f"Bearer {API_KEY}"), proc)


LITELLM_YAML = """\
# Written by bench/run_gateway_bench.py; rewritten on every run.
model_list:
  - model_name: bench-model
    litellm_params:
      model: {model}
      api_base: http://127.0.0.1:{nginx}/plain/v1
      api_key: x
      use_chat_completions_api: true  # bridge /v1/responses onto chat completions
  - model_name: bench-model-sse
    litellm_params:
      model: {model}
      api_base: http://127.0.0.1:{nginx}/sse/v1
      api_key: x
      use_chat_completions_api: true
litellm_settings:
  telemetry: false
  callbacks: []
  success_callback: []
  failure_callback: []
  turn_off_message_logging: true
  drop_params: true
  request_timeout: 60
general_settings:
  master_key: {master_key}  # required to boot; auth without a database is a key compare
"""


def ensure_litellm(install: bool) -> Path:
    litellm_bin = LITELLM_VENV / "bin" / "litellm"
    if litellm_bin.exists():
        return litellm_bin
    if not install:
        raise LegSkipped(f"{litellm_bin} missing and --no-install given")
    print(
        f"installing litellm[proxy] into {LITELLM_VENV} (takes minutes, done once)...", flush=True
    )
    log = WORK_DIR / "logs" / "litellm-install.log"
    with log.open("w") as out:
        steps = [
            ["python3", "-m", "venv", str(LITELLM_VENV)],
            [str(LITELLM_VENV / "bin" / "pip"), "install", "litellm[proxy]"],
        ]
        for step in steps:
            if subprocess.run(step, stdout=out, stderr=subprocess.STDOUT).returncode != 0:
                raise LegSkipped(f"installing LiteLLM failed, see {log}:\n{tail(log, 10)}")
    if not litellm_bin.exists():
        raise LegSkipped(f"LiteLLM installed but {litellm_bin} is missing")
    return litellm_bin


def start_litellm(pm: ProcessManager, nginx_port: int, install: bool, model: str) -> Leg:
    litellm_bin = ensure_litellm(install)
    port = free_port()
    config = WORK_DIR / "litellm.yaml"
    master_key = "sk-" + secrets.token_hex(32)
    config.write_text(LITELLM_YAML.format(nginx=nginx_port, model=model, master_key=master_key))
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "LITELLM_MASTER_KEY", "REDIS_HOST", "REDIS_URL")
    }
    env.update(
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        LITELLM_TELEMETRY="False",
        LITELLM_LOG="ERROR",
        LITELLM_MODE="PRODUCTION",
        DISABLE_ADMIN_UI="True",
        NO_DOCS="True",
        OPENAI_API_KEY="x",
        HF_HUB_OFFLINE="1",
        TIKTOKEN_CACHE_DIR=str(WORK_DIR / "tiktoken-cache"),
        VIRTUAL_ENV=str(LITELLM_VENV),
        PATH=f"{LITELLM_VENV / 'bin'}:{os.environ.get('PATH', '')}",
    )
    argv = [
        str(litellm_bin),
        "--config",
        str(config),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--num_workers",
        "1",
    ]
    proc = pm.spawn("litellm", argv, env=env, cwd=WORK_DIR)
    wait_port(port, proc, 180)
    return Leg("litellm", responses_targets(port, f"Bearer {master_key}"), proc)


# ---------------------------------------------------------------- validation and load


def one_request(target: Target, timeout: float = 30.0) -> tuple[int, str, bytes]:
    host, _, rest = target.url.removeprefix("http://").partition("/")
    hostname, _, port = host.partition(":")
    conn = http.client.HTTPConnection(hostname, int(port), timeout=timeout)
    try:
        headers = {"Content-Type": "application/json"}
        if target.authorization:
            headers["Authorization"] = target.authorization
        conn.request("POST", "/" + rest, body=target.body_file.read_bytes(), headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.getheader("Content-Type", ""), resp.read()
    finally:
        conn.close()


def validate(leg: Leg, mode: str, attempts: int = 1) -> str:
    """Send one request and check it is a 200 of the expected kind; return a short note."""
    target = leg.targets[mode]
    last = ""
    for attempt in range(attempts):
        try:
            status, ctype, body = one_request(target)
        except OSError as exc:
            last = f"{type(exc).__name__}: {exc}"
        else:
            if status == 200:
                break
            last = f"HTTP {status} {ctype}: {body[:400]!r}"
        if attempt + 1 < attempts:
            time.sleep(1.0)
    else:
        raise BenchError(f"{leg.name}/{mode}: validation request failed: {last}")
    if mode == "stream":
        if not ctype.startswith("text/event-stream"):
            raise BenchError(f"{leg.name}/stream: Content-Type {ctype!r}, want text/event-stream")
        events = body.count(b"\n\n")
        done = body.rstrip().endswith(b"data: [DONE]")
        note = (
            f"{len(body)} B, {events} SSE events, {'ends' if done else 'does NOT end'} with [DONE]"
        )
        if not done and leg.name in ("direct", "floor", "orgate"):
            raise BenchError(
                f"{leg.name}/stream: stream does not end with data: [DONE]: {body[-200:]!r}"
            )
        return note
    if not ctype.startswith("application/json"):
        raise BenchError(f"{leg.name}/nonstream: Content-Type {ctype!r}, want application/json")
    doc = json.loads(body)
    kind = doc.get("object", "?")
    text = ""
    if kind == "response":
        for item in doc.get("output", []):
            for part in item.get("content", []) or []:
                text += part.get("text", "")
    return f"{len(body)} B, object={kind}" + (f", text={text[:30]!r}" if text else "")


@dataclass
class WrkOptions:
    """How wrk runs: threads (capped at conns) and the per-request timeout in seconds."""

    threads: int
    timeout_s: int


def run_wrk(
    target: Target,
    conns: int,
    duration: float,
    timeout_s: int,
    opts: WrkOptions,
    running: list[subprocess.Popen[str]],
) -> dict[str, Any]:
    threads = max(1, min(opts.threads, conns))
    argv = [
        "wrk",
        "-t",
        str(threads),
        "-c",
        str(conns),
        "-d",
        f"{max(1, round(duration))}s",
        "--timeout",
        f"{timeout_s}s",
        "--latency",
        "-s",
        str(LUA_SCRIPT),
        target.url,
        "--",
        str(target.body_file),
        target.authorization,
    ]
    popen = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    running.append(popen)
    try:
        out, _ = popen.communicate(timeout=duration + timeout_s + 30)
    finally:
        running.remove(popen)
        if popen.poll() is None:
            popen.kill()
            popen.wait()
    for line in out.splitlines():
        if line.startswith("BENCH_RESULT "):
            return dict(json.loads(line.removeprefix("BENCH_RESULT ")))
    raise BenchError(f"wrk printed no result (exit {popen.returncode}):\n{out[-2000:]}")


def machine_busy_seconds() -> float:
    """CPU seconds spent busy on all cores since boot (from /proc/stat)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / CLK_TCK


def children_cpu_seconds() -> float:
    """CPU seconds of reaped children (wrk runs) of this process."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def drain(pids: list[int], max_wait: float) -> None:
    """Wait until the server is idle: a slow gateway keeps serving requests a stopped
    wrk abandoned, which would steal CPU from the next run."""
    deadline = time.monotonic() + max_wait
    prev = cpu_seconds(pids)
    while time.monotonic() < deadline:
        time.sleep(0.25)
        now = cpu_seconds(pids)
        if now - prev < 0.25 * 0.05:  # under 5% of a core
            return
        prev = now


def measure(
    leg: Leg,
    mode: str,
    conns: int,
    duration: float,
    warmup: float,
    rate_hint: float,
    nginx_pids: list[int],
    opts: WrkOptions,
    running: list[subprocess.Popen[str]],
    max_duration: float,
) -> Result:
    """Warm up, then one measured wrk run of ``leg``/``mode`` at ``conns`` connections.

    ``rate_hint`` (requests/s the leg reached so far) stretches the run for slow legs, so
    every connection completes several requests (a 10 s run of a 5 req/s gateway at 64
    connections would otherwise complete none), and raises wrk's timeout above the
    expected latency.
    """
    target = leg.targets[mode]
    expected_latency = conns / rate_hint if rate_hint > 0 else 0.0
    duration = min(max(duration, 5 * expected_latency), max(duration, max_duration))
    timeout_s = max(opts.timeout_s, math.ceil(5 * expected_latency))
    pids = process_tree(leg.proc.pid) if leg.proc else []
    extra = [p for p in nginx_pids if p not in pids]
    drain_wait = min(2 * expected_latency + 2, 90)
    if warmup > 0:
        run_wrk(target, conns, warmup, timeout_s, opts, running)
        drain(pids, drain_wait)
    cpu0, other0 = cpu_seconds(pids), cpu_seconds(extra)
    busy0, wrk0, t0 = machine_busy_seconds(), children_cpu_seconds(), time.monotonic()
    raw = run_wrk(target, conns, duration, timeout_s, opts, running)
    cpu1, other1 = cpu_seconds(pids), cpu_seconds(extra)
    busy1, wrk1, t1 = machine_busy_seconds(), children_cpu_seconds(), time.monotonic()
    drain(pids, drain_wait)
    seconds = raw["duration_us"] / 1e6
    lat = raw["latency_us"]
    requests = int(raw["requests"])
    errors = dict(raw["errors"])
    non_2xx = int(errors.pop("status"))
    cpu = cpu1 - cpu0
    elapsed = t1 - t0
    foreign = (busy1 - busy0) - cpu - (other1 - other0) - (wrk1 - wrk0)
    return Result(
        leg=leg.name,
        mode=mode,
        conns=conns,
        duration_s=round(seconds, 2),
        requests=requests,
        rps=round(requests / seconds, 1) if seconds else 0.0,
        p50_ms=lat["p50"] / 1000,
        p90_ms=lat["p90"] / 1000,
        p99_ms=lat["p99"] / 1000,
        max_ms=lat["max"] / 1000,
        non_2xx=non_2xx,
        socket_errors=errors,
        server_cpu_pct=round(100 * cpu / elapsed, 1) if pids else None,
        server_cpu_us_per_req=round(cpu * 1e6 / requests, 1) if pids and requests else None,
        wrk_cpu_pct=round(100 * (wrk1 - wrk0) / elapsed, 1),
        foreign_cpu_pct=round(max(0.0, 100 * foreign / elapsed), 1),
    )


def peak_rss(proc: Proc) -> tuple[float | None, list[dict[str, Any]]]:
    rows = []
    for pid in process_tree(proc.pid):
        hwm = status_kb(pid, "VmHWM")
        if hwm is not None:
            rows.append(
                {
                    "pid": pid,
                    "cmd": cmdline(pid)[:120],
                    "vmhwm_mb": round(hwm / 1024, 1),
                    "vmrss_mb": round((status_kb(pid, "VmRSS") or 0) / 1024, 1),
                }
            )
    peak = max((r["vmhwm_mb"] for r in rows), default=None)
    return peak, rows


# ---------------------------------------------------------------- report


def fmt(value: float | None, spec: str = ".1f") -> str:
    return "-" if value is None else format(value, spec)


def find(results: list[Result], leg: str, mode: str, conns: int) -> Result | None:
    """The best valid run of a cell: highest req/s (lowest p50 at one connection)."""
    runs = [r for r in results if (r.leg, r.mode, r.conns) == (leg, mode, conns) and r.valid]
    if not runs:
        return None
    if conns == 1:
        return min(runs, key=lambda r: r.p50_ms)
    return max(runs, key=lambda r: r.rps)


def report(
    results: list[Result], infos: dict[str, LegInfo], conns_list: list[int], out: TextIO
) -> dict[str, Any]:
    w = out.write
    w("\n" + "=" * 114 + "\n")
    header = (
        f"{'rnd':>3} {'leg':<8} {'mode':<9} {'conns':>5} {'req/s':>10} {'p50 ms':>8} {'p99 ms':>8} "
        f"{'max ms':>8} {'non2xx':>6} {'sockerr':>7} {'srv cpu%':>8} {'cpu us/req':>10} "
        f"{'wrk cpu%':>8} {'foreign%':>8}\n"
    )
    w(header)
    w("-" * (len(header) - 1) + "\n")
    for r in results:
        w(
            f"{r.round:>3} {r.leg:<8} {r.mode:<9} {r.conns:>5} {r.rps:>10.1f} "
            f"{r.p50_ms:>8.2f} {r.p99_ms:>8.2f} "
            f"{r.max_ms:>8.1f} {r.non_2xx:>6} {sum(r.socket_errors.values()):>7} "
            f"{fmt(r.server_cpu_pct):>8} {fmt(r.server_cpu_us_per_req):>10} "
            f"{fmt(r.wrk_cpu_pct):>8} {fmt(r.foreign_cpu_pct):>8}"
            f"{'' if r.valid else '  INVALID'}\n"
        )
    for leg, info in infos.items():
        if info.status != "ok":
            w(f"{leg}: {info.status.upper()}: {info.message}\n")

    summary: dict[str, Any] = {"ratios": [], "added_p50_ms": {}, "peak_rss_mb": {}, "bar": []}
    w("\nratios (req/s; each cell's best valid run)\n")
    for mode in MODES:
        for c in conns_list:
            d, f, o, lt = (find(results, leg, mode, c) for leg in LEGS)
            row = {
                "mode": mode,
                "conns": c,
                "floor_over_direct": f.rps / d.rps if f and d else None,
                "orgate_over_floor": o.rps / f.rps if o and f else None,
                "orgate_over_direct": o.rps / d.rps if o and d else None,
                "orgate_over_litellm": o.rps / lt.rps if o and lt else None,
                # The same ratios from server CPU per request: less sensitive to other
                # load on a shared machine than req/s (a CPU-bound server's req/s is
                # about 1e6 / cpu_us_per_req when it has a core to itself).
                "orgate_over_floor_cpu": cpu_ratio(f, o),
                "orgate_over_litellm_cpu": cpu_ratio(lt, o),
            }
            summary["ratios"].append(row)
            w(
                f"  {mode:<9} c={c:<3} floor/direct {fmt(pct(row['floor_over_direct'])):>6}%   "
                f"orgate/floor {fmt(pct(row['orgate_over_floor'])):>6}%   "
                f"orgate/direct {fmt(pct(row['orgate_over_direct'])):>6}%   "
                f"orgate/LiteLLM {fmt(row['orgate_over_litellm'], '.1f')}x   "
                f"by CPU/req: orgate/floor {fmt(pct(row['orgate_over_floor_cpu'])):>6}%  "
                f"orgate/LiteLLM {fmt(row['orgate_over_litellm_cpu'], '.1f')}x\n"
            )
    w("\np50 latency added over direct at 1 connection (ms)\n")
    for mode in MODES:
        d = find(results, "direct", mode, 1)
        added = {}
        for leg in LEGS[1:]:
            r = find(results, leg, mode, 1)
            added[leg] = round(r.p50_ms - d.p50_ms, 3) if r and d else None
        summary["added_p50_ms"][mode] = added
        w(
            f"  {mode:<9} "
            + "   ".join(f"{leg} {fmt(v, '+.3f')}" for leg, v in added.items())
            + "\n"
        )
    w("\npeak RSS under load (VmHWM, largest process of the leg's tree, MB)\n")
    for leg, info in infos.items():
        summary["peak_rss_mb"][leg] = info.peak_rss_mb
        procs = ", ".join(f"pid {p['pid']} {p['vmhwm_mb']}" for p in info.rss_by_process)
        w(f"  {leg:<8} {fmt(info.peak_rss_mb):>7}   ({procs or 'not measured'})\n")

    w("\nthe bar for orgate\n")
    bar = summary["bar"]
    for mode in MODES:
        for c in conns_list:
            row = next(r for r in summary["ratios"] if (r["mode"], r["conns"]) == (mode, c))
            x = row["orgate_over_litellm"]
            bar.append(
                check(
                    f"{mode} c={c}: orgate >= {BAR_X_LITELLM:.0f}x LiteLLM",
                    x,
                    x is not None and x >= BAR_X_LITELLM,
                    f"{fmt(x)}x",
                )
            )
            fl = row["orgate_over_floor"]
            want = BAR_FLOOR_FRACTION[mode]
            bar.append(
                check(
                    f"{mode} c={c}: orgate >= {want:.0%} of floor",
                    fl,
                    fl is not None and fl >= want,
                    f"{fmt(pct(fl))}%",
                )
            )
    for mode in MODES:
        a = summary["added_p50_ms"][mode].get("orgate")
        bar.append(
            check(
                f"{mode}: p50 added at 1 conn <= {BAR_ADDED_P50_MS} ms",
                a,
                a is not None and a <= BAR_ADDED_P50_MS,
                f"{fmt(a, '.3f')} ms",
            )
        )
    rss = summary["peak_rss_mb"].get("orgate")
    bar.append(
        check(
            f"peak RSS <= {BAR_RSS_MB:.0f} MB",
            rss,
            rss is not None and rss <= BAR_RSS_MB,
            f"{fmt(rss)} MB",
        )
    )
    for b in bar:
        w(f"  [{b['verdict']:<4}] {b['what']}: {b['value']}\n")
    return summary


def cpu_ratio(base: Result | None, other: Result | None) -> float | None:
    """base's server CPU per request over other's: how many times cheaper ``other`` is."""
    if base is None or other is None:
        return None
    if not base.server_cpu_us_per_req or not other.server_cpu_us_per_req:
        return None
    return base.server_cpu_us_per_req / other.server_cpu_us_per_req


def pct(x: float | None) -> float | None:
    return None if x is None else 100 * x


def check(what: str, value: Any, ok: bool, shown: str) -> dict[str, Any]:
    verdict = "n/a" if value is None else ("PASS" if ok else "FAIL")
    return {"what": what, "verdict": verdict, "value": shown}


# ---------------------------------------------------------------- main


@dataclass
class Bench:
    """Runs the legs: starts every server, then measures cell by cell, leg after leg.

    All servers stay up for the whole run but only one is ever under load. The order
    is cell-major (mode, connection count, round, then leg), so that the runs a ratio
    compares are taken minutes apart at most, under the same neighbours' load.
    """

    args: argparse.Namespace
    pm: ProcessManager
    nginx_proc: Proc
    nginx_port: int
    opts: WrkOptions
    running_wrk: list[subprocess.Popen[str]]
    modes: list[str]
    all_conns: list[int]
    infos: dict[str, LegInfo]
    results: list[Result]
    legs: dict[str, Leg] = field(default_factory=dict)
    hints: dict[tuple[str, str], float] = field(default_factory=dict)

    def start(self, name: str) -> Leg:
        if name == "direct":
            return direct_leg(self.nginx_proc, self.nginx_port)
        if name == "floor":
            return start_floor(self.pm, self.nginx_port)
        if name == "orgate":
            return start_orgate(self.pm, self.nginx_port, self.args.orgate_bin)
        return start_litellm(
            self.pm, self.nginx_port, not self.args.no_install, self.args.litellm_model
        )

    def start_all(self, names: list[str]) -> None:
        """Start and validate each leg; a leg that cannot run is recorded and left out."""
        for name in names:
            leg: Leg | None = None
            try:
                leg = self.start(name)
                for mode in self.modes:
                    t = time.monotonic()
                    note = validate(leg, mode, attempts=30 if name == "litellm" else 5)
                    self.hints[(name, mode)] = 1 / max(time.monotonic() - t, 1e-6)
                    print(f"[{name}] {mode} ok: {note}", flush=True)
                self.legs[name] = leg
            except (LegSkipped, BenchError) as exc:
                self.fail(name, leg, exc)

    def fail(self, name: str, leg: Leg | None, exc: Exception) -> None:
        info = self.infos[name]
        info.status = "skipped" if isinstance(exc, LegSkipped) else "failed"
        info.message = str(exc)
        print(f"[{name}] {info.status.upper()}: {exc}", flush=True)
        if leg is not None and leg.proc is not None and name != "direct":
            if info.status == "failed":
                print(f"[{name}] log tail ({leg.proc.log_path}):\n{tail(leg.proc.log_path)}")
            self.pm.stop(leg.proc)
        self.legs.pop(name, None)

    def run_cells(self, rounds: int) -> None:
        args = self.args
        nginx_pids = process_tree(self.nginx_proc.pid)
        for mode in self.modes:
            for c in self.all_conns:
                for rnd in range(1, rounds + 1):
                    for name, leg in list(self.legs.items()):
                        try:
                            r = measure(
                                leg,
                                mode,
                                c,
                                args.latency_duration if c == 1 else args.duration,
                                args.warmup,
                                self.hints[(name, mode)],
                                nginx_pids,
                                self.opts,
                                self.running_wrk,
                                args.max_duration,
                            )
                        except BenchError as exc:
                            self.fail(name, leg, exc)
                            continue
                        r.round = rnd
                        self.hints[(name, mode)] = max(self.hints[(name, mode)], r.rps)
                        self.results.append(r)
                        print(
                            f"[{name}] {mode:<9} c={c:<3} {r.rps:>9.1f} req/s  "
                            f"p50 {r.p50_ms:.2f} ms  p99 {r.p99_ms:.2f} ms  "
                            f"non2xx {r.non_2xx}  sockerr {sum(r.socket_errors.values())}  "
                            f"{r.duration_s:.0f}s  foreign cpu {fmt(r.foreign_cpu_pct, '.0f')}%"
                            f"{'' if r.valid else '  INVALID'}"
                            f"{f'  (round {rnd})' if rounds > 1 else ''}",
                            flush=True,
                        )

    def record_rss(self) -> None:
        """Peak RSS of each server, read once all its load is done (VmHWM is a peak)."""
        for name, leg in self.legs.items():
            if leg.proc is not None and name != "direct":
                info = self.infos[name]
                info.peak_rss_mb, info.rss_by_process = peak_rss(leg.proc)


def parse_list(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--legs", default=",".join(LEGS), help=f"comma list of {','.join(LEGS)}")
    p.add_argument("--modes", default=",".join(MODES), help="comma list of nonstream,stream")
    p.add_argument("--conns", default="16,64", help="connection counts for throughput runs")
    p.add_argument("--duration", type=float, default=10.0, help="seconds per measured run")
    p.add_argument("--warmup", type=float, default=2.0, help="seconds of warm-up before each run")
    p.add_argument(
        "--latency-duration",
        type=float,
        default=5.0,
        help="seconds of the 1-connection latency run (0 skips it)",
    )
    p.add_argument(
        "--max-duration",
        type=float,
        default=60.0,
        help="cap on a run stretched for a slow leg (so each connection completes requests)",
    )
    p.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="measure each cell this many times, legs interleaved; ratios use each cell's "
        "best run "
        "(on a shared, noisy machine 2-3 rounds tame other users' load)",
    )
    p.add_argument("--threads", type=int, default=2, help="wrk threads (capped at conns)")
    p.add_argument("--timeout", type=int, default=20, help="wrk per-request timeout, s")
    p.add_argument("--nginx-workers", type=int, default=1)
    p.add_argument("--orgate-bin", type=Path, default=REPO_DIR / ".venv" / "bin" / "orgate")
    p.add_argument(
        "--litellm-model",
        default="openai/gpt-4o-mini",
        help="LiteLLM model string routed to the fake upstream",
    )
    p.add_argument("--no-install", action="store_true", help="do not install LiteLLM if missing")
    p.add_argument("--json", type=Path, help="write all results to this JSON file")
    p.add_argument(
        "--report-from",
        type=Path,
        metavar="JSON",
        help="measure nothing: print the report of a file written by --json",
    )
    return p


def report_saved(path: Path) -> int:
    """Print the report of a results file written by ``--json``."""
    doc = json.loads(path.read_text())
    names = {f.name for f in fields(Result)}
    results = [Result(**{k: v for k, v in r.items() if k in names}) for r in doc["results"]]
    infos = {k: LegInfo(**v) for k, v in doc["legs"].items()}
    conns = [int(c) for c in parse_list(doc["meta"]["args"]["conns"])]
    print(f"results of {doc['meta']['started']} ({path})")
    report(results, infos, conns, sys.stdout)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.report_from:
        return report_saved(args.report_from)
    legs = parse_list(args.legs)
    modes = parse_list(args.modes)
    conns_list = [int(c) for c in parse_list(args.conns)]
    for name in legs:
        if name not in LEGS:
            raise SystemExit(f"unknown leg {name!r}; choose from {', '.join(LEGS)}")
    for mode in modes:
        if mode not in MODES:
            raise SystemExit(f"unknown mode {mode!r}; choose from {', '.join(MODES)}")
    if not shutil.which("wrk"):
        raise SystemExit("wrk not found: apt-get install -y wrk")
    all_conns = ([1] if args.latency_duration > 0 else []) + [c for c in conns_list if c != 1]
    (WORK_DIR / "logs").mkdir(parents=True, exist_ok=True)

    pm = ProcessManager(WORK_DIR / "logs")
    running_wrk: list[subprocess.Popen[str]] = []

    def on_term(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, on_term)
    signal.signal(signal.SIGINT, on_term)  # also when started with SIGINT ignored (`cmd &`)
    results: list[Result] = []
    infos: dict[str, LegInfo] = {}
    opts = WrkOptions(args.threads, args.timeout)
    started = time.time()
    print(
        f"orgate gateway bench: legs={legs} modes={modes} conns={all_conns} "
        f"duration={args.duration}s warmup={args.warmup}s nproc={os.cpu_count()} "
        f"loadavg={os.getloadavg()[0]:.2f}",
        flush=True,
    )
    interrupted = False
    bench: Bench | None = None
    try:
        nginx_proc, nginx_port = start_nginx(pm, args.nginx_workers)
        print(f"nginx upstream on 127.0.0.1:{nginx_port} (pid {nginx_proc.pid})", flush=True)
        for name in legs:
            infos[name] = LegInfo()
        bench = Bench(
            args, pm, nginx_proc, nginx_port, opts, running_wrk, modes, all_conns, infos, results
        )
        bench.start_all(legs)
        bench.run_cells(args.rounds)
    except KeyboardInterrupt:
        interrupted = True
        print("\ninterrupted: stopping everything", file=sys.stderr, flush=True)
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        infos.setdefault("nginx", LegInfo("failed", str(exc)))
    finally:
        for popen in list(running_wrk):
            with contextlib.suppress(OSError):
                popen.kill()
        if bench is not None:
            bench.record_rss()
        pm.stop_all()

    summary = report(results, infos, conns_list, sys.stdout)
    if args.json:
        doc = {
            "meta": {
                "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
                "seconds": round(time.time() - started, 1),
                "host": platform.node(),
                "nproc": os.cpu_count(),
                "python": platform.python_version(),
                "args": {k: str(v) for k, v in vars(args).items()},
                "interrupted": interrupted,
            },
            "legs": {k: asdict(v) for k, v in infos.items()},
            "results": [asdict(r) | {"valid": r.valid} for r in results],
            "summary": summary,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
        print(f"\nresults written to {args.json}")
    invalid = [r for r in results if not r.valid]
    if invalid:
        print(
            f"\n{len(invalid)} measurement(s) INVALID (non-2xx or socket errors)", file=sys.stderr
        )
    failed = [k for k, v in infos.items() if v.status == "failed"]
    return 1 if interrupted or invalid or failed else 0


if __name__ == "__main__":
    sys.exit(main())
