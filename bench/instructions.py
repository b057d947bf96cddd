"""CPU instructions per request, in process: the floor, a minimal translator, orgate.

Wall-clock ratios on a shared machine move by ±10 points between runs of one
hour (docs/performance.md). This counts instructions instead: each leg's ASGI
app is driven in process (no uvicorn, no wrk; 16 concurrent requests) against
the nginx fake upstream of ``run_gateway_bench.py``, under ``valgrind
--tool=cachegrind``, twice (``--requests``, e.g. 320 and 1,120 requests); the
difference of the two totals divided by the difference of the request counts
is the cost of one request, start-up and warm-up cancelled out. With a fixed
``PYTHONHASHSEED`` two runs agree to ~0.1%, however busy the machine is: every request
takes the path of a fast answer (the disconnect watcher, which starts only after 0.25 s
of wall clock, never does), so valgrind's slowness decides nothing. What it
does not see: the kernel (sockets, the HTTP server's parsing is left out too),
which is the same for every leg.

Legs: ``floor`` (``passthrough.py``), ``minimal`` (``minimal_translator.py``,
non-stream only), ``orgate`` (``create_app`` with the gateway benchmark's config,
store off). Every driver applies ``orgate serve``'s garbage-collector settings
after its warm-up.

Run: ``.venv/bin/python bench/instructions.py`` (needs ``valgrind`` and ``nginx``;
about two minutes).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

import run_gateway_bench as gateway  # noqa: E402 - a script beside this one
from cachegrind import instructions_of  # noqa: E402

LEGS = ("floor", "minimal", "orgate")
CONCURRENCY = 16
WARMUP = 200
NEVER_WATCHED = 1e9  # seconds: see _app


def _app(leg: str, mode: str, nginx: int) -> tuple[Any, str, bytes]:
    """The leg's ASGI app, the path it is posted to and the request body."""
    stream = mode == "stream"
    if leg == "floor":
        from passthrough import PassThrough

        path = "/sse/v1/chat/completions" if stream else "/plain/v1/chat/completions"
        body = (
            gateway.FIXTURES / ("chat_request_stream.json" if stream else "chat_request.json")
        ).read_bytes()
        return PassThrough(f"http://127.0.0.1:{nginx}"), path, body
    body = (
        gateway.FIXTURES / ("responses_request_stream.json" if stream else "responses_request.json")
    ).read_bytes()
    if leg == "minimal":
        from minimal_translator import MinimalTranslator

        return (
            MinimalTranslator(
                f"http://127.0.0.1:{nginx}/plain/v1/chat/completions", gateway.API_KEY
            ),
            "/v1/responses",
            body,
        )
    from orgate.config import load_settings
    from orgate.gateway import create_app
    from orgate.server import disconnect

    # A request is watched for a disconnect once it has run 0.25 s of wall clock: under
    # valgrind (tens of times slower) how many cross that line depends on the machine's load,
    # which the count must not. Every request here takes the path of a fast answer (no watcher).
    disconnect.DisconnectWatch.__init__.__defaults__ = (NEVER_WATCHED,)

    config = gateway.WORK_DIR / "instructions-orgate.toml"
    config.write_text(gateway.ORGATE_TOML.format(port=0, key=gateway.API_KEY, nginx=nginx))
    return create_app(load_settings(str(config))), "/v1/responses", body


async def _drive(leg: str, mode: str, requests: int, nginx: int, measured: Any = None) -> None:
    """Post ``requests`` requests to the leg's app after a warm-up (``measured``: a context
    manager around the measured part, e.g. ``bench/opcodes.py``'s tracer)."""
    app, path, body = _app(leg, mode, nginx)
    startup: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    await startup.put({"type": "lifespan.startup"})
    started = asyncio.Event()

    async def lifespan_send(message: dict[str, Any]) -> None:
        if message["type"] == "lifespan.startup.complete":
            started.set()

    lifespan = asyncio.create_task(
        app({"type": "lifespan", "asgi": {"version": "3.0"}}, startup.get, lifespan_send)
    )
    await started.wait()
    headers = [
        (b"host", b"127.0.0.1"),
        (b"content-type", b"application/json"),
        (b"authorization", f"Bearer {gateway.API_KEY}".encode()),
        (b"content-length", str(len(body)).encode()),
    ]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8080),
    }
    never = asyncio.Event()

    async def one() -> None:
        sent = False
        status = 0

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await never.wait()  # the client stays connected
            raise AssertionError

        async def send(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]

        await app(dict(scope), receive, send)
        if status != 200:
            raise SystemExit(f"{leg} answered {status}")

    async def worker(count: int) -> None:
        for _ in range(count):
            await one()

    await worker(WARMUP)
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 20, 20)  # what `orgate serve` sets
    if measured is None:
        await asyncio.gather(*(worker(requests // CONCURRENCY) for _ in range(CONCURRENCY)))
    else:
        with measured:
            await asyncio.gather(*(worker(requests // CONCURRENCY) for _ in range(CONCURRENCY)))
    await startup.put({"type": "lifespan.shutdown"})
    await lifespan


def _count(leg: str, mode: str, requests: int, nginx: int) -> int:
    """Instructions of one driver run (all threads)."""
    driver = [
        __file__,
        "--drive",
        leg,
        "--mode",
        mode,
        "--requests",
        str(requests),
        "--nginx",
        str(nginx),
    ]
    return instructions_of(driver, f"{leg} {mode}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--legs", default=",".join(LEGS))
    parser.add_argument("--modes", default="nonstream,stream")
    parser.add_argument(
        "--requests", default="320,1120", help="the two run lengths (multiples of 16)"
    )
    parser.add_argument("--drive", choices=LEGS, help=argparse.SUPPRESS)
    parser.add_argument("--mode", default="nonstream", help=argparse.SUPPRESS)
    parser.add_argument("--nginx", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.drive:
        import uvloop

        uvloop.run(_drive(args.drive, args.mode, int(args.requests), args.nginx))
        return
    short, long = (int(n) for n in args.requests.split(","))
    gateway.WORK_DIR.mkdir(parents=True, exist_ok=True)
    (gateway.WORK_DIR / "logs").mkdir(exist_ok=True)
    pm = gateway.ProcessManager(gateway.WORK_DIR / "logs")
    try:
        _, nginx = gateway.start_nginx(pm, 1)
        results: dict[tuple[str, str], float] = {}
        for mode in args.modes.split(","):
            for leg in args.legs.split(","):
                if leg == "minimal" and mode == "stream":
                    continue
                per_request = (_count(leg, mode, long, nginx) - _count(leg, mode, short, nginx)) / (
                    long - short
                )
                results[(leg, mode)] = per_request
                floor = results.get(("floor", mode))
                ratio = (
                    f"  floor/{leg} {floor / per_request:6.1%}" if floor and leg != "floor" else ""
                )
                print(
                    f"{mode:9} {leg:8} {per_request / 1e6:7.3f} M instructions / request{ratio}",
                    flush=True,
                )
    finally:
        pm.stop_all()


if __name__ == "__main__":
    main()
