"""Hostile schemas against a real ``orgate serve``: what each costs the others, in figures.

For every shape of ``tests/hostile/shapes.py`` (schemas hostile as a whole) and of
``tests/hostile/test_hostile_schemas.py`` (each keyword hostile on its own), one tenant sends
``--copies`` of it at once while this script measures, until they are all answered:

- the slowest ``/healthz`` (polled back to back, bar: 1 s),
- the slowest plain request of another tenant (``orgate/echo``, back to back, bar: 2 s),
- the peak resident memory of the server process, and of its whole process tree (the
  schema work processes included), sampled every 20 ms (bar: 500 MB),
- each hostile answer: status, code, size (bar: a 4xx, or an answer within the output
  budget — the safety net's own 500 ``model_error`` counts as one).

Then, with every shape in flight at once, SIGTERM: the seconds until the process exits
(bar: ``drain_timeout`` + 5 s), on one process and with ``--workers 2``.

    .venv/bin/python bench/hostile_schemas.py [--only a,b] [--copies 3] [--drain 8]
        [--memory-cap-mb 4096] [--skip-sigterm] [--json FILE]

``--memory-cap-mb`` puts an address-space limit on the server (``prlimit``), so that a
tree without the bounds cannot take the machine down: a server past it fails its requests
(and the row says so) instead of swapping. Exit status 1 when a bar is missed.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.conftest import chat_model_config  # noqa: E402
from tests.fakes.openai_chat_upstream import FakeOpenAIChat  # noqa: E402
from tests.hostile.shapes import ANSWER_BOUND, SHAPES, upstream_answer  # noqa: E402
from tests.hostile.test_hostile_schemas import HOSTILE  # noqa: E402
from tests.server_process import OrgateServer  # noqa: E402

HEALTHZ_BAR = 1.0
OTHER_BAR = 2.0
MEMORY_BAR = 500 * 1024 * 1024
EXIT_MARGIN = 5.0
HOSTILE_KEY = "sk-bench-hostile"
OTHER_KEY = "sk-bench-other"


def _config(upstream: str, drain: float) -> str:
    keys = (
        "[auth]\napi_keys = ["
        f'{{ name = "hostile", key = "{HOSTILE_KEY}" }}, '
        f'{{ name = "other", key = "{OTHER_KEY}" }}]\n'
    )
    return f"[server]\ndrain_timeout = {drain:g}\n" + keys + chat_model_config(upstream)


def _cases() -> dict[str, tuple[dict[str, Any], tuple[int, str, str] | None]]:
    cases = {name: (shape.body, shape.refused) for name, shape in SHAPES.items()}
    for name, (body, expected) in HOSTILE.items():
        cases[f"keyword_{name}"] = (body, expected)
    return cases


# --- memory -------------------------------------------------------------------------------


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (the fork server and the schema work processes)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        current = todo.pop()
        out.append(current)
        todo.extend(children.get(current, []))
    return out


@dataclass
class Peak:
    server: int = 0
    tree: int = 0


def _sample_memory(pid: int, stop: threading.Event, peak: Peak) -> None:
    while not stop.is_set():
        peak.server = max(peak.server, _rss(pid))
        peak.tree = max(peak.tree, sum(_rss(p) for p in _tree(pid)))
        time.sleep(0.02)


# --- probes -------------------------------------------------------------------------------


@dataclass
class Probes:
    healthz: float = 0.0
    other: float = 0.0
    healthz_count: int = 0
    other_count: int = 0
    failures: list[str] = field(default_factory=list)


def _probe(url: str, path: str, stop: threading.Event, probes: Probes, kind: str) -> None:
    headers = {"Authorization": f"Bearer {OTHER_KEY}"}
    with httpx.Client(base_url=url, headers=headers, timeout=60) as client:
        while not stop.is_set():
            start = time.monotonic()
            try:
                if kind == "healthz":
                    status = client.get(path).status_code
                else:
                    body = {"model": "orgate/echo", "input": "hello from another tenant"}
                    status = client.post(path, json=body).status_code
            except httpx.HTTPError as exc:
                probes.failures.append(f"{kind}: {exc!r}")
                continue
            took = time.monotonic() - start
            if kind == "healthz":
                probes.healthz, probes.healthz_count = (
                    max(probes.healthz, took),
                    probes.healthz_count + 1,
                )
            else:
                probes.other, probes.other_count = max(probes.other, took), probes.other_count + 1
            if status != 200:
                probes.failures.append(f"{kind}: HTTP {status}")


# --- one shape ----------------------------------------------------------------------------


@dataclass
class Row:
    name: str
    outcome: str
    seconds: float
    size: int
    healthz: float
    other: float
    rss_mb: float
    tree_mb: float
    ok: bool
    why: str = ""


def _send(url: str, body: dict[str, Any]) -> tuple[float, httpx.Response | str]:
    start = time.monotonic()
    headers = {"Authorization": f"Bearer {HOSTILE_KEY}"}
    try:
        with httpx.Client(headers=headers, timeout=300) as client:
            return time.monotonic() - start, client.post(f"{url}/v1/responses", json=body)
    except httpx.HTTPError as exc:
        return time.monotonic() - start, repr(exc)


def _judge(
    answer: httpx.Response | str, expected: tuple[int, str, str] | None
) -> tuple[str, int, str]:
    """(outcome shown, body size, why it misses the bar or "")."""
    if isinstance(answer, str):
        return "no answer", 0, answer[:120]
    size = len(answer.content)
    error = (
        (answer.json().get("error") or {})
        if answer.headers.get("content-type", "").startswith("application/json")
        else {}
    )
    shown = f"{answer.status_code} {error.get('code') or ''}".strip()
    if expected is not None:
        got = (answer.status_code, error.get("code"), str(error.get("param")))
        if got[:2] != expected[:2] or not got[2].startswith(expected[2]):
            return shown, size, f"expected {expected}, got {got}"
        return shown, size, ""
    if 400 <= answer.status_code < 500:
        return shown, size, ""
    if answer.status_code >= 500 and error.get("type") != "model_error":
        return shown, size, f"server error {answer.text[:200]}"
    if size > ANSWER_BOUND:
        return shown, size, f"answer of {size} bytes, past the output budget"
    return shown, size, ""


def measure(url: str, pid: int, name: str, body: dict[str, Any], expected: Any, copies: int) -> Row:
    stop = threading.Event()
    probes, peak = Probes(), Peak()
    watchers = [
        threading.Thread(target=_sample_memory, args=(pid, stop, peak)),
        threading.Thread(target=_probe, args=(url, "/healthz", stop, probes, "healthz")),
        threading.Thread(target=_probe, args=(url, "/v1/responses", stop, probes, "other")),
    ]
    for watcher in watchers:
        watcher.start()
    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(copies) as pool:
        answers = list(pool.map(lambda _: _send(url, body), range(copies)))
    seconds = time.monotonic() - start
    stop.set()
    for watcher in watchers:
        watcher.join()
    outcome, size, why = _judge(answers[0][1], expected)
    for _, answer in answers[1:]:
        why = why or _judge(answer, expected)[2]
    if probes.healthz > HEALTHZ_BAR:
        why = why or f"/healthz took {probes.healthz:.2f} s"
    if probes.other > OTHER_BAR:
        why = why or f"the other tenant waited {probes.other:.2f} s"
    if peak.server > MEMORY_BAR:
        why = why or f"the server took {peak.server / 2**20:.0f} MB"
    if probes.failures:
        why = why or f"probe failures: {probes.failures[:2]}"
    return Row(
        name,
        outcome,
        seconds,
        size,
        probes.healthz,
        probes.other,
        peak.server / 2**20,
        peak.tree / 2**20,
        not why,
        why,
    )


# --- SIGTERM ------------------------------------------------------------------------------


@dataclass
class Stop:
    workers: int
    seconds: float
    status: int | None
    bound: float
    ok: bool


def sigterm_round(
    upstream: str, drain: float, workers: int, cap: int | None, cases: dict[str, Any]
) -> Stop:
    """Every shape in flight (its answers never awaited), then SIGTERM: seconds to exit."""
    server = _server(upstream, drain, cap, ("--workers", str(workers)) if workers > 1 else ())
    try:
        pool = concurrent.futures.ThreadPoolExecutor(len(cases))
        for body, _ in cases.values():
            pool.submit(_send, server.url, body)
        time.sleep(1.0)  # under way: generation, validation, upstream calls
        assert server.proc is not None
        start = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        try:
            status: int | None = server.proc.wait(drain + 60)
        except subprocess.TimeoutExpired:
            status = None
        seconds = time.monotonic() - start
        pool.shutdown(wait=False, cancel_futures=True)
    finally:
        server.kill()
    bound = drain + EXIT_MARGIN
    return Stop(workers, seconds, status, bound, status is not None and seconds <= bound)


def _server(
    upstream: str, drain: float, cap: int | None, args: tuple[str, ...] = ()
) -> OrgateServer:
    override = os.environ.get("ORGATE_TEST_PYTHONPATH")
    env = {"PYTHONPATH": override} if override else {}
    server = OrgateServer(_config(upstream, drain), api_key=OTHER_KEY, env=env, args=args)
    server.start()
    if cap and server.proc is not None:
        # What the server starts from now on inherits the limit too.
        limit = str(cap * 1024 * 1024)
        subprocess.run(["prlimit", f"--as={limit}:", "--pid", str(server.proc.pid)], check=True)
    return server


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="comma-separated shape names")
    parser.add_argument("--copies", type=int, default=3, help="concurrent copies of a shape")
    parser.add_argument("--drain", type=float, default=8.0, help="[server] drain_timeout")
    parser.add_argument("--memory-cap-mb", type=int, default=0, help="address-space cap")
    parser.add_argument("--skip-sigterm", action="store_true")
    parser.add_argument("--json", default="", help="write the rows to this file")
    args = parser.parse_args()
    cases = _cases()
    if args.only:
        cases = {name: cases[name] for name in args.only.split(",")}
    rows: list[Row] = []
    stops: list[Stop] = []
    with FakeOpenAIChat.start_in_thread(handler=upstream_answer) as fake:
        server = _server(fake.base_url, args.drain, args.memory_cap_mb or None)
        try:
            assert server.proc is not None
            for name, (body, expected) in cases.items():
                row = measure(server.url, server.proc.pid, name, body, expected, args.copies)
                rows.append(row)
                print(_line(row), flush=True)
        finally:
            server.stop(args.drain + 30)
        if not args.skip_sigterm:
            for workers in (1, 2):
                stop = sigterm_round(
                    fake.base_url, args.drain, workers, args.memory_cap_mb or None, cases
                )
                stops.append(stop)
                print(
                    f"SIGTERM with {stop.workers} worker(s): exited in {stop.seconds:.2f} s "
                    f"(status {stop.status}; bar {stop.bound:g} s) {'ok' if stop.ok else 'MISSED'}",
                    flush=True,
                )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {"rows": [asdict(r) for r in rows], "sigterm": [asdict(s) for s in stops]}, indent=2
            )
        )
    missed = [r for r in rows if not r.ok] + [s for s in stops if not s.ok]
    print(f"{len(rows) - sum(not r.ok for r in rows)}/{len(rows)} shapes within every bar")
    return 1 if missed else 0


def _line(row: Row) -> str:
    return (
        f"{row.name:38} {row.outcome:28} {row.seconds:7.2f}s {row.size:>9}B "
        f"healthz {row.healthz:5.2f}s other {row.other:5.2f}s "
        f"rss {row.rss_mb:6.0f}MB tree {row.tree_mb:6.0f}MB "
        f"{'ok' if row.ok else 'MISSED: ' + row.why}"
    )


if __name__ == "__main__":
    sys.exit(main())
