"""Soak test (not CI): many concurrent streaming clients against one ``orgate serve`` for minutes.

It starts a fake OpenAI-compatible upstream (``tests/fakes``, in its own
process) and one orgate process (SQLite store in a temp dir, or
``--store-url``), then runs ``--clients`` concurrent clients for
``--duration`` seconds; each client loops: one streamed ``/v1/responses``
request, alternating the built-in model (``orgate/echo``) and the fake
upstream (``fake-chat``). While it runs it samples the server's VmRSS and
open file descriptors (``/proc/PID``). Afterwards it fetches every response id
a client saw and compares the stored response with the one the client got in
``response.completed``.

Pass criteria (exit 1 otherwise): zero non-2xx answers and transport errors,
zero lost or differing stored responses, and memory and fds flat after
warm-up (the median of the last third of the samples may not exceed the median
of the first third after warm-up by more than ``--rss-slack`` MiB /
``--fd-slack`` fds; the fd count moves with client and upstream connections).

Run: ``.venv/bin/python bench/soak.py --duration 300 --clients 200``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.server_process import OrgateServer  # noqa: E402

KEY = "soak-key"


@dataclass
class Tally:
    ok: int = 0
    non_2xx: dict[int, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    bad_streams: int = 0
    seen: dict[str, dict[str, Any]] = field(
        default_factory=dict
    )  # response id -> completed response
    latencies: list[float] = field(default_factory=list)
    first_event: list[float] = field(default_factory=list)


def _fake_upstream_main() -> None:
    """``soak.py _fake``: run the fake upstream in this process and print its port."""
    from tests.fakes.openai_chat_upstream import FakeOpenAIChat

    async def run() -> None:
        fake = FakeOpenAIChat()
        await fake.start()
        print(fake.port, flush=True)
        while True:
            await asyncio.sleep(3600)

    try:
        import uvloop

        uvloop.run(run())
    except ImportError:
        asyncio.run(run())


def _proc_stats(pid: int) -> tuple[float, int]:
    rss = 0.0
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) / 1024
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


async def _client(
    n: int, session: aiohttp.ClientSession, url: str, deadline: float, tally: Tally
) -> None:
    i = 0
    while time.monotonic() < deadline:
        i += 1
        model = "orgate/echo" if (n + i) % 2 else "fake-chat"
        words = " ".join(f"w{n}-{i}-{k}" for k in range(random.randint(3, 30)))
        body = {"model": model, "input": f"soak {words}", "stream": True}
        started = time.perf_counter()
        try:
            async with session.post(
                url, data=orjson.dumps(body), headers={"Content-Type": "application/json"}
            ) as res:
                if res.status != 200:
                    tally.non_2xx[res.status] = tally.non_2xx.get(res.status, 0) + 1
                    await res.read()
                    continue
                first: float | None = None
                completed: dict[str, Any] | None = None
                done = False
                last_seq = -1
                buffer = b""
                async for chunk in res.content.iter_any():
                    if first is None:
                        first = time.perf_counter() - started
                    buffer += chunk
                    while b"\n\n" in buffer:
                        frame, buffer = buffer.split(b"\n\n", 1)
                        data = frame.split(b"data: ", 1)[1] if b"data: " in frame else b""
                        if data == b"[DONE]":
                            done = True
                            continue
                        event = orjson.loads(data)
                        if event["sequence_number"] <= last_seq:
                            tally.bad_streams += 1
                        last_seq = event["sequence_number"]
                        if event["type"] == "response.completed":
                            completed = event["response"]
                if not done or completed is None:
                    tally.bad_streams += 1
                    continue
                tally.ok += 1
                tally.seen[completed["id"]] = completed
                tally.latencies.append(time.perf_counter() - started)
                tally.first_event.append(first or 0.0)
        except (TimeoutError, aiohttp.ClientError, ValueError, KeyError, IndexError) as exc:
            name = type(exc).__name__
            tally.errors[name] = tally.errors.get(name, 0) + 1


async def _sampler(
    pid: int, deadline: float, every: float, samples: list[tuple[float, float, int]]
) -> None:
    started = time.monotonic()
    while time.monotonic() < deadline:
        rss, fds = _proc_stats(pid)
        samples.append((time.monotonic() - started, rss, fds))
        await asyncio.sleep(every)


async def _verify(base: str, seen: dict[str, dict[str, Any]]) -> tuple[int, int, list[str]]:
    lost = 0
    differ = 0
    examples: list[str] = []
    semaphore = asyncio.Semaphore(64)
    connector = aiohttp.TCPConnector(limit=64)
    async with aiohttp.ClientSession(
        connector=connector, headers={"Authorization": f"Bearer {KEY}"}
    ) as session:

        async def check(response_id: str, expected: dict[str, Any]) -> None:
            nonlocal lost, differ
            async with semaphore, session.get(f"{base}/v1/responses/{response_id}") as res:
                if res.status != 200:
                    lost += 1
                    if len(examples) < 5:
                        examples.append(f"{response_id}: HTTP {res.status}")
                    return
                stored = orjson.loads(await res.read())
                if stored != expected:
                    differ += 1
                    if len(examples) < 5:
                        keys = sorted(
                            k
                            for k in set(stored) | set(expected)
                            if stored.get(k) != expected.get(k)
                        )
                        examples.append(f"{response_id}: differs in {keys}")

        await asyncio.gather(*(check(rid, resp) for rid, resp in seen.items()))
    return lost, differ, examples


def _percentile(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


async def _run(args: argparse.Namespace, server: OrgateServer) -> int:
    assert server.proc is not None
    pid = server.proc.pid
    tally = Tally()
    samples: list[tuple[float, float, int]] = []
    connector = aiohttp.TCPConnector(limit=0, force_close=False)
    timeout = aiohttp.ClientTimeout(total=60)
    started = time.monotonic()
    deadline = started + args.duration
    async with aiohttp.ClientSession(
        connector=connector, timeout=timeout, headers={"Authorization": f"Bearer {KEY}"}
    ) as session:
        sampler = asyncio.create_task(_sampler(pid, deadline, args.sample_every, samples))
        await asyncio.gather(
            *(
                _client(n, session, f"{server.url}/v1/responses", deadline, tally)
                for n in range(args.clients)
            )
        )
        await sampler
    elapsed = time.monotonic() - started
    rss_end, fds_end = _proc_stats(pid)
    lost, differ, examples = await _verify(server.url, tally.seen)

    warm = [s for s in samples if s[0] >= args.duration * args.warmup]
    third = max(1, len(warm) // 3)
    early, late = warm[:third], warm[-third:]
    rss_early = statistics.median(s[1] for s in early) if early else 0.0
    rss_late = statistics.median(s[1] for s in late) if late else 0.0
    fds_early = statistics.median(s[2] for s in early) if early else 0
    fds_late = statistics.median(s[2] for s in late) if late else 0
    requests = (
        tally.ok + sum(tally.non_2xx.values()) + sum(tally.errors.values()) + tally.bad_streams
    )

    print(
        f"\norgate soak: {args.clients} streaming clients, {elapsed:.0f} s, models "
        "orgate/echo + fake-chat (openai-chat)"
    )
    print(
        f"  requests        {requests}  ({requests / elapsed:.0f}/s), completed streams {tally.ok}"
    )
    print(f"  non-2xx         {sum(tally.non_2xx.values())} {tally.non_2xx or ''}")
    print(f"  transport errs  {sum(tally.errors.values())} {tally.errors or ''}")
    print(
        f"  bad streams     {tally.bad_streams}  (no [DONE], no response.completed, or "
        "sequence_number not increasing)"
    )
    print(
        f"  latency         p50 {_percentile(tally.latencies, 50) * 1000:.1f} ms  p99 "
        f"{_percentile(tally.latencies, 99) * 1000:.1f} ms  (whole stream)"
    )
    print(
        f"  first chunk     p50 {_percentile(tally.first_event, 50) * 1000:.1f} ms  "
        f"p99 {_percentile(tally.first_event, 99) * 1000:.1f} ms"
    )
    print(
        f"  stored          {len(tally.seen)} checked, {lost} lost, {differ} differ "
        f"{examples or ''}"
    )
    print(
        f"  VmRSS (MiB)     median after warm-up {rss_early:.1f}, last third "
        f"{rss_late:.1f}; end {rss_end:.1f}, max "
        f"{max((s[1] for s in samples), default=0):.1f}"
    )
    print(
        f"  open fds        median after warm-up {fds_early:.0f}, last third "
        f"{fds_late:.0f}; end {fds_end}, max {max((s[2] for s in samples), default=0)}"
    )
    ok = (
        not tally.non_2xx
        and not tally.errors
        and not tally.bad_streams
        and not lost
        and not differ
        and rss_late - rss_early <= args.rss_slack
        and fds_late - fds_early <= args.fd_slack
    )
    print("  verdict         " + ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "_fake":
        _fake_upstream_main()
        return 0
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--duration", type=float, default=300.0, help="seconds of load (default 300)"
    )
    parser.add_argument(
        "--clients", type=int, default=200, help="concurrent streaming clients (default 200)"
    )
    parser.add_argument(
        "--warmup",
        type=float,
        default=0.2,
        help="fraction of the run ignored for the memory/fd trend",
    )
    parser.add_argument("--sample-every", type=float, default=2.0)
    parser.add_argument(
        "--rss-slack", type=float, default=16.0, help="MiB the RSS may grow after warm-up"
    )
    parser.add_argument(
        "--fd-slack",
        type=int,
        default=32,
        help="fds the median may grow after warm-up (connections churn)",
    )
    parser.add_argument("--store-url", help="store URL (default: SQLite in a temp dir)")
    args = parser.parse_args()

    fake = subprocess.Popen([sys.executable, __file__, "_fake"], stdout=subprocess.PIPE, cwd=REPO)
    assert fake.stdout is not None
    port = int(fake.stdout.readline())
    workdir = tempfile.mkdtemp(prefix="orgate-soak-")
    config = (
        '[server]\naccess_log = false\n\n[[models]]\nname = "fake-chat"\nprovider = "openai-chat"\n'
        f'base_url = "http://127.0.0.1:{port}/v1"\napi_key = '
        '"upstream-secret"\nupstream_model = "fake-model"\nread_timeout = 30\n'
    )
    env = {"ORGATE_STORE__URL": args.store_url} if args.store_url else {}
    server = OrgateServer(config, api_key=KEY, env=env, workdir=workdir)
    server.start()
    try:
        try:
            import uvloop

            return uvloop.run(_run(args, server))
        except ImportError:
            return asyncio.run(_run(args, server))
    finally:
        server.stop()
        fake.terminate()
        fake.wait(10)


if __name__ == "__main__":
    sys.exit(main())
