"""What idle clients cost one ``orgate serve`` process: memory per open idle WebSocket and per
open idle stream, and whether new HTTP requests are still served while they are open.

Starts ``orgate serve`` (default configuration: the SQLite store in a scratch directory,
the WebSocket caps raised above ``--websockets``),
then measures its resident memory (VmRSS) before and after opening ``--websockets``
WebSocket connections (each has made one response, then sits idle), and after opening
``--streams`` SSE responses that stay open without output (the built-in model told to wait
ten minutes between two words). While they are open, ``--probe`` sequential
``POST /v1/responses`` on new connections measure the latency a new client sees.

Run: ``.venv/bin/python bench/idle_bench.py [--websockets 10000] [--streams 1000]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import websockets

REPO = Path(__file__).resolve().parents[1]
KEY = "idle-bench-key"
BODY = json.dumps({"model": "orgate/echo", "input": "hello", "store": False}).encode()
IDLE_STREAM = json.dumps(
    {
        "model": "orgate/echo",
        "input": "orgate:delay=600000 first second",
        "stream": True,
        "store": False,
    }
).encode()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


async def post(port: int, body: bytes) -> float:
    """One POST on a new connection; the seconds until the whole answer came back."""
    started = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = (
        f"POST /v1/responses HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: "
        "close\r\n\r\n"
    ).encode()
    writer.write(head + body)
    answer = await reader.read()
    writer.close()
    if b" 200 " not in answer.split(b"\r\n", 1)[0]:
        raise RuntimeError(f"probe failed: {answer[:200]!r}")
    return time.perf_counter() - started


async def probe(port: int, count: int) -> float:
    """p50 latency, in ms, of ``count`` sequential requests on new connections."""
    return statistics.median([await post(port, BODY) for _ in range(count)]) * 1000


async def open_websocket(port: int) -> websockets.ClientConnection:
    ws = await websockets.connect(
        f"ws://127.0.0.1:{port}/v1/responses",
        additional_headers={"Authorization": f"Bearer {KEY}"},
        open_timeout=120,
        ping_interval=None,
    )
    await ws.send(
        json.dumps(
            {"type": "response.create", "model": "orgate/echo", "input": "hi", "store": False}
        )
    )
    while json.loads(await ws.recv())["type"] != "response.completed":
        pass
    return ws


async def open_stream(port: int) -> asyncio.StreamWriter:
    """An SSE response that has sent its first events and then waits (the model is told to)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        (
            f"POST /v1/responses HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(IDLE_STREAM)}\r\n\r\n"
        ).encode()
        + IDLE_STREAM
    )
    seen = b""
    while b"response.output_text.delta" not in seen:
        chunk = await reader.read(65536)
        if not chunk:
            raise RuntimeError(f"stream closed: {seen[:300]!r}")
        seen += chunk
    return writer


async def in_batches(count: int, make, width: int = 100) -> list:
    opened: list = []
    while len(opened) < count:
        batch = min(width, count - len(opened))
        opened += await asyncio.gather(*(make() for _ in range(batch)))
    return opened


async def measure(args: argparse.Namespace, port: int, pid: int) -> dict[str, float]:
    out: dict[str, float] = {}
    await probe(port, 20)  # warm-up: lazy imports, pools
    warm = await open_websocket(port)
    await warm.close()
    await asyncio.sleep(1)
    out["rss_base"] = rss_mib(pid)
    out["p50_base"] = await probe(port, args.probe)
    streams = await in_batches(args.streams, lambda: open_stream(port))
    await asyncio.sleep(2)
    out["rss_streams"] = rss_mib(pid)
    out["p50_streams"] = await probe(port, args.probe)
    for writer in streams:
        writer.close()
    await asyncio.sleep(3)
    # Measured from here: memory the streams freed is reused before the heap grows again.
    out["rss_before_ws"] = rss_mib(pid)
    started = time.monotonic()
    sockets = await in_batches(args.websockets, lambda: open_websocket(port))
    out["ws_open_s"] = time.monotonic() - started
    await asyncio.sleep(2)
    out["rss_ws"] = rss_mib(pid)
    out["fds_ws"] = open_fds(pid)
    out["p50_ws"] = await probe(port, args.probe)
    out["cpu_idle_pct"] = await idle_cpu(pid, 5.0)
    for ws in sockets:
        await ws.close()
    return out


async def idle_cpu(pid: int, seconds: float) -> float:
    def ticks() -> int:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])

    before = ticks()
    await asyncio.sleep(seconds)
    return 100 * (ticks() - before) / os.sysconf("SC_CLK_TCK") / seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--websockets", type=int, default=10_000)
    parser.add_argument("--streams", type=int, default=1_000)
    parser.add_argument("--probe", type=int, default=30, help="requests timed on new connections")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    # the server keeps a quarter of its open-files limit from WebSockets (server/ws_limits.py)
    needed = max(args.websockets + args.streams + 200, (args.websockets + 1) * 4 // 3 + 2)
    if hard != resource.RLIM_INFINITY and hard < needed:
        print(
            f"idle_bench: the open-files hard limit ({hard}) is below {needed}: raise "
            "it (ulimit -Hn)",
            file=sys.stderr,
        )
        return 2
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    port = free_port()
    work = Path(tempfile.mkdtemp(prefix="orgate-idle-"))
    env = {
        **os.environ,
        "ORGATE_API_KEY": KEY,
        "ORGATE_STORE__URL": f"sqlite:///{work / 'orgate.db'}",
    }
    # one key opens them all: the per-key and per-process caps of [websocket] are raised above that
    caps = str(args.websockets + 1)
    env |= {
        "ORGATE_WEBSOCKET__MAX_CONNECTIONS": caps,
        "ORGATE_WEBSOCKET__MAX_CONNECTIONS_PER_KEY": caps,
    }
    log = (work / "server.log").open("wb")
    server = subprocess.Popen(
        [str(REPO / ".venv" / "bin" / "orgate"), "serve", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    print((work / "server.log").read_text(), file=sys.stderr)
                    return 1
                time.sleep(0.2)
        figures = asyncio.run(measure(args, port, server.pid))
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()
    per_ws = (figures["rss_ws"] - figures["rss_before_ws"]) * 1024 / args.websockets
    per_stream = (figures["rss_streams"] - figures["rss_base"]) * 1024 / args.streams
    print(
        "\n"
        "| figure | value |\n"
        "|---|---|\n"
        f"| RSS before | {figures['rss_base']:.1f} MiB |\n"
        f"| {args.streams:,} idle streams: RSS / per stream "
        f"| {figures['rss_streams']:.1f} MiB / **{per_stream:.1f} KiB** |\n"
        "| new request p50, before / with the streams open "
        f"| {figures['p50_base']:.2f} / {figures['p50_streams']:.2f} ms |\n"
        f"| RSS after the streams closed | {figures['rss_before_ws']:.1f} MiB |\n"
        f"| {args.websockets:,} idle WebSockets: RSS / per connection "
        f"| {figures['rss_ws']:.1f} MiB / **{per_ws:.1f} KiB** "
        f"(opened in {figures['ws_open_s']:.1f} s; {figures['fds_ws']:.0f} open fds) |\n"
        f"| CPU of the process while they are idle | {figures['cpu_idle_pct']:.1f}% of a core |\n"
        f"| new request p50 with the WebSockets open | {figures['p50_ws']:.2f} ms |\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
