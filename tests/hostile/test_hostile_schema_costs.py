"""Schemas hostile as a whole, against a real ``orgate serve``: each is refused with a 400 in
the spec's shape or answered within the output budget, while ``/healthz`` and another tenant's
plain requests keep being served, the server's memory stays small, and SIGTERM ends the
process within the drain time (plus its grace) — with one process and with ``--workers 2``,
also when a thread is stuck on the CPU, and without losing a response that can be kept.

The precise figures (``/healthz`` within 1 s, the other tenant within 2 s, 500 MB) are
measured by ``bench/hostile_schemas.py``; here the properties are asserted with bounds a
loaded machine cannot miss.
"""

from __future__ import annotations

import concurrent.futures
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import chat_model_config
from tests.fakes.openai_chat_upstream import FakeOpenAIChat
from tests.hardening.conftest import server_env
from tests.hostile.shapes import ANSWER_BOUND, SHAPES, Shape, upstream_answer
from tests.server_process import REPO, OrgateServer
from tests.support.waiting import wait_until

HOSTILE_KEY = "sk-hostile-tenant"
OTHER_KEY = "sk-other-tenant"
DRAIN = 2.0
#: Seconds from SIGTERM to exit that a loaded machine cannot miss, where the design promises
#: DRAIN + 5 (bench/hostile_schemas.py measures it): the exit is driven by timers (the drain, the
#: exit watchdog), which a loaded machine fires late by seconds, not by the 25 s of slack.
EXIT_WITHIN = DRAIN + 5 + 25
MEMORY = 500 * 1024 * 1024
WAIT = 120.0


def _config(upstream: str, extra: str = "") -> str:
    keys = (
        "[auth]\napi_keys = ["
        f'{{ name = "hostile", key = "{HOSTILE_KEY}" }}, '
        f'{{ name = "other", key = "{OTHER_KEY}" }}]\n'
    )
    return f"[server]\ndrain_timeout = {DRAIN:g}\n" + keys + extra + chat_model_config(upstream)


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeOpenAIChat]:
    with FakeOpenAIChat.start_in_thread(handler=upstream_answer) as fake:
        yield fake


def _start(upstream: FakeOpenAIChat, *args: str, extra: str = "", **env: str) -> OrgateServer:
    server = OrgateServer(
        _config(upstream.base_url, extra), api_key=OTHER_KEY, env=server_env(env), args=args
    )
    return server.start()


def _send(url: str, body: dict[str, Any], key: str = HOSTILE_KEY) -> httpx.Response | str:
    try:
        with httpx.Client(headers={"Authorization": f"Bearer {key}"}, timeout=WAIT) as client:
            return client.post(f"{url}/v1/responses", json=body)
    except httpx.HTTPError as exc:
        return repr(exc)


def _problem(name: str, shape: Shape, answer: httpx.Response | str) -> str | None:
    """Why an answer is not what the shape must get (None when it is)."""
    if isinstance(answer, str):
        return f"{name}: no answer ({answer})"
    error = answer.json().get("error") if answer.status_code != 200 else None
    if shape.refused is not None:
        got = (answer.status_code, (error or {}).get("code"), str((error or {}).get("param")))
        if got[:2] != shape.refused[:2] or not got[2].startswith(shape.refused[2]):
            return f"{name}: {got} instead of {shape.refused}: {answer.text[:300]}"
        if set(error) != {"message", "type", "param", "code"}:
            return f"{name}: not the spec's error shape: {error}"
        return None
    if answer.status_code >= 500 and (error or {}).get("type") != "model_error":
        return f"{name}: server error {answer.text[:300]}"
    if answer.status_code not in (200, 400) and answer.status_code < 500:
        return f"{name}: HTTP {answer.status_code} {answer.text[:300]}"
    if len(answer.content) > ANSWER_BOUND:
        return f"{name}: an answer of {len(answer.content)} bytes"
    return None


def _rss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


@dataclass
class _Others:
    """Another tenant's traffic and ``/healthz``, back to back, while the hostile ones run."""

    url: str
    stop: threading.Event = field(default_factory=threading.Event)
    served: dict[str, list[float]] = field(default_factory=lambda: {"healthz": [], "other": []})
    failures: list[str] = field(default_factory=list)
    peak_rss: int = 0

    def run(self, pid: int) -> None:
        headers = {"Authorization": f"Bearer {OTHER_KEY}"}
        body = {"model": "orgate/echo", "input": "a plain request"}
        with httpx.Client(base_url=self.url, headers=headers, timeout=WAIT) as client:
            while not self.stop.is_set():
                self.peak_rss = max(self.peak_rss, _rss(pid))
                for kind in ("healthz", "other"):
                    try:
                        answer = (
                            client.get("/healthz")
                            if kind == "healthz"
                            else client.post("/v1/responses", json=body)
                        )
                    except httpx.HTTPError as exc:
                        self.failures.append(f"{kind}: {exc!r}")
                        continue
                    if answer.status_code != 200:
                        self.failures.append(f"{kind}: HTTP {answer.status_code}")
                    self.served[kind].append(time.monotonic())


def test_hostile_schemas_are_refused_or_bounded_while_other_tenants_are_served(
    upstream: FakeOpenAIChat,
) -> None:
    server = _start(upstream)
    try:
        assert server.proc is not None
        others = _Others(server.url)
        watcher = threading.Thread(target=others.run, args=(server.proc.pid,))
        watcher.start()
        try:
            start = time.monotonic()
            with concurrent.futures.ThreadPoolExecutor(2 * len(SHAPES)) as pool:
                futures = {
                    pool.submit(_send, server.url, shape.body): name
                    for name in SHAPES
                    for shape in (SHAPES[name], SHAPES[name])
                }
                answers = {futures[f]: f.result() for f in concurrent.futures.as_completed(futures)}
            last_answer = time.monotonic()
        finally:
            others.stop.set()
            watcher.join()
        problems = [_problem(name, SHAPES[name], answers[name]) for name in SHAPES]
        assert not [p for p in problems if p], "\n".join(p for p in problems if p)
        assert not others.failures, others.failures[:5]
        for kind, times in others.served.items():
            assert [t for t in times if start <= t <= last_answer], f"no {kind} while hostile ran"
        assert 0 < others.peak_rss < MEMORY, others.peak_rss
    finally:
        server.kill()


def _in_flight(upstream: FakeOpenAIChat, seen: int) -> None:
    """Until the fake upstream has been asked again (the upstream shapes are being served)."""
    assert wait_until(lambda: len(upstream.requests) > seen, WAIT)


@pytest.mark.parametrize("workers", [1, 2])
def test_sigterm_during_hostile_schemas_ends_the_process_within_the_drain_time(
    upstream: FakeOpenAIChat, workers: int
) -> None:
    server = _start(upstream, *(("--workers", str(workers)) if workers > 1 else ()))
    pool = concurrent.futures.ThreadPoolExecutor(len(SHAPES))
    try:
        seen = len(upstream.requests)
        for shape in SHAPES.values():
            pool.submit(_send, server.url, shape.body)
        _in_flight(upstream, seen)
        assert server.proc is not None
        start = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        status = server.proc.wait(EXIT_WITHIN)
        assert time.monotonic() - start < EXIT_WITHIN
        assert status >= 0, f"killed by a signal ({status}):\n{server.output()[-3000:]}"
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        server.kill()


SPIN = """
[structured.formats.spin]
semantic = ["tests.hostile.spin_check:forever"]
"""
#: A value long enough that its checks run off the event loop: the semantic check in a thread.
LONG_VALUE = {
    "type": "object",
    "properties": {"note": {"type": "string", "minLength": 70_000}},
    "required": ["note"],
}


def _stored(
    upstream: FakeOpenAIChat, workdir: Path, response_ids: list[str]
) -> dict[str, dict[str, Any]]:
    """The stored responses, read by a new server on the same store (the first one has exited)."""
    with (
        OrgateServer(_config(upstream.base_url), api_key=OTHER_KEY, workdir=str(workdir)) as again,
        httpx.Client(base_url=again.url, headers=again.headers(), timeout=WAIT) as client,
    ):
        return {rid: client.get(f"/v1/responses/{rid}").json() for rid in response_ids}


@pytest.mark.parametrize("workers", [1, 2])
def test_a_thread_stuck_on_the_cpu_does_not_hold_the_shutdown_nor_lose_a_response(
    upstream: FakeOpenAIChat, tmp_path: Path, workers: int
) -> None:
    """An operator's semantic check that never returns keeps a thread at 100% CPU: Python can
    neither stop it nor exit while it runs. SIGTERM still ends the process within the drain
    time (plus its grace), and a background response under way is stored as stopped by the
    server, not left in progress."""
    marks = tmp_path / "spinning"
    marks.mkdir()
    server = OrgateServer(
        _config(upstream.base_url, SPIN),
        api_key=OTHER_KEY,
        env=server_env({"PYTHONPATH": str(REPO), "ORGATE_TEST_SPIN_MARKS": str(marks)}),
        workdir=str(tmp_path),
        args=("--workers", str(workers)) if workers > 1 else (),
    ).start()
    pool = concurrent.futures.ThreadPoolExecutor(4)
    try:
        headers = {"Authorization": f"Bearer {OTHER_KEY}"}
        with httpx.Client(base_url=server.url, headers=headers, timeout=WAIT) as client:
            slow = "orgate:delay=300 " + " ".join(f"w{i}" for i in range(100))  # ~30 s
            started = client.post(
                "/v1/responses", json={"model": "orgate/echo", "input": slow, "background": True}
            )
            background = started.json()["id"]
            spin = {
                "model": "orgate/echo",
                "input": "stuck",
                "text": {"format": {"type": "json_schema", "name": "spin", "schema": LONG_VALUE}},
            }
            stuck = [pool.submit(_send, server.url, spin, OTHER_KEY) for _ in range(workers)]
            assert wait_until(
                lambda: client.get(f"/v1/responses/{background}").json()["status"] != "queued",
                WAIT,
            )
        # the semantic checks are spinning (each left its mark first)
        assert wait_until(lambda: len(list(marks.iterdir())) >= workers, WAIT)
        assert server.proc is not None
        start = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        status = server.proc.wait(EXIT_WITHIN)
        assert time.monotonic() - start < EXIT_WITHIN
        assert status == 0, server.output()[-3000:]
        assert "did not drain in time" not in server.output()  # each worker ended itself
        for future in stuck:
            answer = future.result(WAIT)
            assert not isinstance(answer, str) and answer.status_code == 503, answer.text
            assert answer.json()["error"]["code"] == "server_shutdown"
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        server.kill()
    stored = _stored(upstream, tmp_path, [background])[background]
    assert stored["status"] == "failed" and stored["error"]["code"] == "server_shutdown", stored
