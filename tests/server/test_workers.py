"""``orgate serve --workers 2`` as a real process tree: both workers serve one port, one
``/metrics`` counts every worker, rate limits and session turns hold across workers, a
killed worker is replaced and its in-flight response failed, SIGHUP reloads without
dropping a stream, SIGTERM drains.

Which worker holds a connection is read from ``/proc`` (the server-side socket whose peer
is the client's port), so every check knows it spans both workers.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.server_process import OrgateServer

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="workers and /proc: Linux"),
    pytest.mark.timeout(600),
]

CONFIG = """
[auth]
api_keys = [
  { name = "main", key = "env:ORGATE_API_KEY" },
  { name = "limited", key = "env:LIMITED_KEY", rpm = 6 },
]
"""
LIMITED = "limited-key-0123456789"
SLOW = "orgate:delay=300 " + " ".join(f"w{i}" for i in range(30))  # about 9 s of stream


def deadline_loop(seconds: float = 120.0, step: float = 0.2) -> Iterator[None]:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        yield
        time.sleep(step)
    raise AssertionError(f"not within {seconds} s")


def worker_pids(supervisor: int) -> set[int]:
    pids = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == supervisor:
                pids.add(int(entry.name))
    return pids


def running(pid: int) -> bool:
    """Not exited (a zombie waiting for whoever adopted it to reap it has exited)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    try:
        for fd in fd_dir.iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    except OSError:
        pass
    return inodes


def pid_serving(client_port: int, server_port: int, pids: set[int]) -> int | None:
    """The worker holding the server side of the connection from ``client_port``."""
    wanted = None
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, remote, inode = fields[1], fields[2], fields[9]
            if (
                int(local.rsplit(":", 1)[1], 16) == server_port
                and int(remote.rsplit(":", 1)[1], 16) == client_port
            ):
                wanted = inode
    if wanted is None:
        return None
    return next((pid for pid in pids if wanted in _socket_inodes(pid)), None)


class Conn:
    """One keep-alive HTTP connection, and the worker that accepted it."""

    def __init__(
        self, server: OrgateServer, key: str | None = None, source: str = "127.0.0.1"
    ) -> None:
        self.server = server
        self.key = key or server.api_key
        self.http = http.client.HTTPConnection(
            "127.0.0.1", server.port, timeout=60, source_address=(source, 0)
        )
        self.request("GET", "/healthz")  # accepted and served: the worker holds it now
        self.pid = None
        # The workers are listed on each try: during a reload the connection may be held by a
        # worker that started after the first look.
        for _ in deadline_loop():
            self.pid = pid_serving(
                self.http.sock.getsockname()[1], server.port, worker_pids(server.proc.pid)
            )
            if self.pid is not None:
                break

    def request(
        self,
        method: str,
        path: str,
        body: dict | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, bytes]:
        self.send(method, path, body, headers)
        response = self.http.getresponse()
        return response.status, response.read()

    def send(
        self,
        method: str,
        path: str,
        body: dict | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        all_headers = {
            "Authorization": f"Bearer {self.key}",
            "Content-Type": "application/json",
            **(headers or {}),
        }
        self.http.request(
            method, path, body=json.dumps(body) if body is not None else None, headers=all_headers
        )

    def create(self, **body: object) -> tuple[int, dict]:
        status, raw = self.request("POST", "/v1/responses", {"model": "orgate/echo", **body})
        return status, json.loads(raw)

    def close(self) -> None:
        self.http.close()


def one_on_each(
    server: OrgateServer, count: int = 2, key: str | None = None, source: str = "127.0.0.1"
) -> dict[int, Conn]:
    """Open connections (from the address ``source``) until ``count`` workers hold one each."""
    found: dict[int, Conn] = {}
    spare: list[Conn] = []
    for _ in deadline_loop(60, step=0):
        conn = Conn(server, key, source)
        if conn.pid is not None and conn.pid not in found:
            found[conn.pid] = conn
        else:
            spare.append(conn)
        if len(found) == count:
            break
    for conn in spare:
        conn.close()
    return found


def requests_total(server: OrgateServer, status: str) -> float:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    total = 0.0
    for line in text.splitlines():
        if (
            line.startswith("orgate_http_requests_total{")
            and 'route="/v1/responses"' in line
            and f'status="{status}"' in line
        ):
            total += float(line.rsplit(" ", 1)[1])
    return total


def _server(tmp: Path) -> OrgateServer:
    return OrgateServer(
        CONFIG, env={"LIMITED_KEY": LIMITED}, args=("--workers", "2"), workdir=str(tmp)
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OrgateServer]:
    with _server(tmp_path_factory.mktemp("workers")) as running:
        yield running


def test_both_workers_serve_and_metrics_count_both(server: OrgateServer) -> None:
    conns = list(one_on_each(server).values())
    assert len({conn.pid for conn in conns}) == 2
    before = None
    for _ in deadline_loop():
        now = requests_total(server, "200")
        if now == before:
            break  # every worker's snapshot is current
        before = now
        time.sleep(1.5)
    for conn in conns:
        for _ in range(3):
            status, body = conn.create(input="hello")
            assert status == 200, body
    for _ in deadline_loop():
        if requests_total(server, "200") == before + 6:
            break
    for conn in conns:
        conn.close()


def test_rate_limit_is_shared_by_the_workers(server: OrgateServer) -> None:
    conns = list(one_on_each(server, key=LIMITED).values())
    started = time.monotonic()
    statuses = []
    for _ in range(
        5
    ):  # 10 calls, half on each worker: one bucket of 6 admits 6 (a bucket per worker, 10)
        for conn in conns:
            statuses.append(conn.create(input="limited")[0])
    refilled = int((time.monotonic() - started) * 6 / 60)
    assert statuses.count(200) <= 6 + refilled, statuses
    assert statuses.count(200) >= 6, statuses
    assert set(statuses) == {200, 429}
    for conn in conns:
        conn.close()


def test_a_session_turn_is_busy_on_the_other_worker(server: OrgateServer) -> None:
    first, second = one_on_each(server).values()
    session = {"X-Session-Id": f"workers-{time.monotonic_ns()}"}
    first.send(
        "POST", "/v1/responses", {"model": "orgate/echo", "input": SLOW, "stream": True}, session
    )
    stream = first.http.getresponse()
    assert stream.status == 200
    assert stream.readline().startswith(b"event:")  # the turn has begun
    status, raw = second.request(
        "POST", "/v1/responses", {"model": "orgate/echo", "input": "me too"}, session
    )
    assert status == 409 and json.loads(raw)["error"]["code"] == "session_busy", raw
    assert b"response.completed" in stream.read()
    first.close()
    second.close()
    after = Conn(server)  # (an idle keep-alive connection is closed after a few seconds)
    status, raw = after.request(
        "POST", "/v1/responses", {"model": "orgate/echo", "input": "after"}, session
    )
    assert status == 200, raw
    after.close()


def test_a_killed_worker_is_replaced_and_its_background_response_taken_over(
    tmp_path: Path,
) -> None:
    """A worker SIGKILLed while running a background response nobody saw any output of: it is
    replaced, and another worker (its pid gone, at once) runs the response again to its end."""
    with _server(tmp_path) as server:
        conns = one_on_each(server)
        victim, survivor = conns.values()
        status, started = victim.create(input=SLOW, background=True)
        assert status == 200 and started["status"] in ("queued", "in_progress"), started
        os.kill(victim.pid, signal.SIGKILL)
        assert survivor.create(input="still here")[0] == 200  # the other worker serves on
        for _ in deadline_loop():
            pids = worker_pids(server.proc.pid)
            if len(pids) == 2 and victim.pid not in pids:
                break
        for _ in deadline_loop():
            status, raw = survivor.request("GET", f"/v1/responses/{started['id']}")
            if json.loads(raw)["status"] == "completed":
                break
        new = one_on_each(server)  # the replacement serves too
        assert set(new) == worker_pids(server.proc.pid)
        for conn in (*new.values(), survivor):
            conn.close()
        assert "exited unexpectedly (signal SIGKILL)" in server.output()
        # The supervisor killed outright: its workers drain and exit, leaving no orphans.
        workers = worker_pids(server.proc.pid)
        server.kill()
        for _ in deadline_loop():
            if not any(running(pid) for pid in workers):
                break


def test_sighup_reloads_without_dropping_and_sigterm_drains(tmp_path: Path) -> None:
    server = _server(tmp_path).start()
    try:
        old = worker_pids(server.proc.pid)
        conn = next(iter(one_on_each(server, count=1).values()))
        conn.send("POST", "/v1/responses", {"model": "orgate/echo", "input": SLOW, "stream": True})
        stream = conn.http.getresponse()
        assert stream.status == 200
        server.config_path.write_text(
            CONFIG + '\n[[models]]\nname = "added-by-reload"\nprovider = '
            '"openai-chat"\nbase_url = "http://127.0.0.1:9/v1"\n'
        )
        server.proc.send_signal(signal.SIGHUP)
        for _ in deadline_loop():
            # A plain request, not a Conn: during the reload an old, draining worker may answer it
            # and close the connection, so there is no worker left holding it to look up.
            probe = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
            try:
                probe.request(
                    "GET", "/v1/models", headers={"Authorization": f"Bearer {server.api_key}"}
                )
                raw = probe.getresponse().read()
            except OSError:
                continue  # a connection reset while the workers change: ask again
            finally:
                probe.close()
            if b"added-by-reload" in raw:
                break
        # The stream begun on an old worker ends normally: the old worker drained it.
        assert b"response.completed" in stream.read()
        for _ in deadline_loop():
            if not old & worker_pids(server.proc.pid):
                break
        # SIGTERM: a stream in flight finishes, then everything exits 0.
        conn = Conn(server)
        conn.send("POST", "/v1/responses", {"model": "orgate/echo", "input": SLOW, "stream": True})
        stream = conn.http.getresponse()
        assert stream.readline().startswith(b"event:")
        server.proc.send_signal(signal.SIGTERM)
        for _ in deadline_loop(60):  # new connections are refused while the stream drains
            try:
                socket.create_connection(("127.0.0.1", server.port), timeout=5).close()
            except ConnectionRefusedError:
                break
        # refused by the draining supervisor, not by one that had already exited
        assert server.proc.poll() is None, "no refusal while the stream drained"
        assert b"response.completed" in stream.read()
        assert server.proc.wait(60) == 0
    finally:
        server.kill()
