"""What a turn costs as a conversation grows: a 100-turn ``previous_response_id`` chain and a
100-turn session, on SQLite and (with ``ORGATE_TEST_PG_URL`` or ``--pg URL``) PostgreSQL.

Starts ``orgate serve`` (the built-in ``orgate/echo`` model, so the gateway is all there is
to measure) and plays each conversation turn by turn on one connection, recording the
server's CPU time (``/proc/<pid>/task/*/schedstat``, every thread) and the wall time of each turn.
Prints the mean of the first and the last ``--window`` turns, and their ratio.

Run: ``.venv/bin/python bench/conversation_bench.py [--turns 100] [--pg URL]``
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
KEY = "conversation-bench-key"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """CPU time of every thread of ``pid``, in nanoseconds' resolution (``schedstat``: the
    clock ticks of ``/proc/<pid>/stat`` are 10 ms, longer than a turn)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError, ValueError, IndexError):  # a thread that ended meanwhile
            total += int((task / "schedstat").read_text().split()[0])
    return total / 1e9


def start(store_url: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {**os.environ, "ORGATE_API_KEY": KEY, "ORGATE_STORE__URL": store_url}
    proc = subprocess.Popen(
        [str(REPO / ".venv" / "bin" / "orgate"), "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"orgate exited with {proc.returncode}")
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("orgate did not start")


def play(client: httpx.Client, pid: int, turns: int, *, session: bool) -> list[tuple[float, float]]:
    """(CPU ms, wall ms) of each turn of one conversation."""
    headers = {"X-Session-Id": f"bench-{uuid.uuid4().hex}"} if session else {}
    previous = None
    costs = []
    for turn in range(turns):
        body: dict[str, object] = {
            "model": "orgate/echo",
            "input": f"turn {turn} of the conversation",
        }
        if not session:
            body["previous_response_id"] = previous
        cpu0, wall0 = cpu_seconds(pid), time.perf_counter()
        response = client.post("/v1/responses", json=body, headers=headers)
        costs.append(((cpu_seconds(pid) - cpu0) * 1000, (time.perf_counter() - wall0) * 1000))
        response.raise_for_status()
        previous = response.json()["id"]
    return costs


def summary(costs: list[tuple[float, float]], window: int) -> str:
    def mean(part: list[tuple[float, float]], i: int) -> float:
        return sum(c[i] for c in part) / len(part)

    first, last = costs[:window], costs[-window:]
    cpu1, cpu2, wall1, wall2 = mean(first, 0), mean(last, 0), mean(first, 1), mean(last, 1)
    return f"{cpu1:.2f} → {cpu2:.2f} ms CPU ({cpu2 / cpu1:.2f}×) | {wall1:.2f} → {wall2:.2f} ms wall ({wall2 / wall1:.2f}×)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--window", type=int, default=10, help="turns averaged at each end")
    parser.add_argument("--repeats", type=int, default=3, help="conversations of each kind")
    parser.add_argument(
        "--pg",
        default=os.environ.get("ORGATE_TEST_PG_URL"),
        help="a PostgreSQL URL (else SQLite only)",
    )
    args = parser.parse_args()
    stores = {
        "SQLite": f"sqlite:///{Path(tempfile.mkdtemp(prefix='conversation-bench-')) / 'orgate.db'}"
    }
    if args.pg:
        stores["PostgreSQL"] = args.pg
    print(
        f"| store | conversation | turns 1–{args.window} → {args.turns - args.window + 1}–{args.turns} |"
    )
    print("|---|---|---|")
    for name, url in stores.items():
        proc, base = start(url)
        try:
            with httpx.Client(
                base_url=base, headers={"Authorization": f"Bearer {KEY}"}, timeout=60
            ) as client:
                play(client, proc.pid, 5, session=False)  # warm-up
                for kind, session in (("previous_response_id chain", False), ("session", True)):
                    costs = [
                        play(client, proc.pid, args.turns, session=session)
                        for _ in range(args.repeats)
                    ]
                    # per turn: the median over the repeats, so one disturbed turn does not count
                    merged = [
                        sorted(run[i] for run in costs)[len(costs) // 2] for i in range(args.turns)
                    ]
                    print(f"| {name} | {kind} | {summary(merged, args.window)} |", flush=True)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
