"""Black-box fault injection on the store's database while ``orgate serve`` runs under load.

What a client may see while the database fails (docs/store.md, "When the database fails"):
a 200 whose response is stored, a 200 whose response says ``"store": false`` (non-streaming:
also ``X-Orgate-Store-Error: store_unavailable``), a 503 ``store_unavailable`` in the spec's
error shape, or a 409 ``session_busy`` of ordinary concurrency; a stream always ends with its
terminal event and ``[DONE]``. Never a 500, a hang or a cut stream. Once the database is back
the server works without a restart: sessions are free again, background responses end.

PostgreSQL faults run on a private throwaway cluster (``initdb`` from the server packages
``.ci/postgres.sh`` installs; it can then be stopped, restarted and its backends killed
without disturbing other tests); they skip, like the other PostgreSQL tests, when
``ORGATE_TEST_PG_URL`` is unset. The disk-full case mounts a small tmpfs (root only).
``ORGATE_TEST_PYTHONPATH`` runs the servers from another source tree (e.g. the old code).
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import os
import shutil
import sqlite3
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson
import pytest

from tests.hardening.conftest import server_env
from tests.server_process import OrgateServer
from tests.store_e2e.helpers import PG_SKIP, PG_URL, TERMINAL, assert_error, calls_in_flight
from tests.support.ports import port_of, reservation
from tests.support.spec import check_sse, parse_sse, validate
from tests.support.waiting import PATIENCE, wait_until

STORE_ERROR = "x-orgate-store-error"
SLOW = "orgate:delay=40 one two three four five six"  # about a third of a second of answer


# --------------------------------------------------------------------------- a private PostgreSQL


def _pg_bindir() -> str | None:
    for path in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.access(f"{path}/initdb", os.X_OK) and os.access(f"{path}/pg_ctl", os.X_OK):
            return path
    return None


class Cluster:
    """A throwaway PostgreSQL cluster (trust auth, loopback, fsync off) that tests may stop and
    restart, on a port reserved for it while it exists (tests/support/ports.py: PostgreSQL binds
    it beside the reservation, again after each restart)."""

    def __init__(self, bindir: str) -> None:
        self.bindir = bindir
        self.dir = tempfile.mkdtemp(prefix="orgate-pgfault-")
        if os.getuid() == 0:
            shutil.chown(self.dir, "postgres")
        self.reservation = reservation()
        self.port = port_of(self.reservation)
        self.data = f"{self.dir}/data"
        self._pg(
            "initdb", "-D", self.data, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8"
        )
        with open(f"{self.data}/postgresql.conf", "a") as conf:
            conf.write(
                "listen_addresses = '127.0.0.1'\nport = "
                f"{self.port}\nunix_socket_directories = '{self.dir}'\n"
                "fsync = off\nsynchronous_commit = off\nfull_page_writes = "
                "off\nmax_connections = 100\n"
            )
        self.start()

    def _pg(self, tool: str, *args: str) -> None:
        command = [f"{self.bindir}/{tool}", *args]
        if os.getuid() == 0:  # initdb and postgres refuse to run as root
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, capture_output=True, timeout=60)

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        self._pg("pg_ctl", "-D", self.data, "-l", f"{self.dir}/log", "-w", "-t", "30", "start")

    def stop(self) -> None:
        self._pg("pg_ctl", "-D", self.data, "-m", "fast", "-w", "stop")

    def restart(self) -> None:
        self._pg("pg_ctl", "-D", self.data, "-l", f"{self.dir}/log", "-m", "fast", "-w", "restart")

    def sql(self, statement: str) -> Any:
        return asyncio.run(_fetchval(self.url, statement))

    def destroy(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self._pg("pg_ctl", "-D", self.data, "-m", "immediate", "stop")
        shutil.rmtree(self.dir, ignore_errors=True)
        self.reservation.close()


async def _fetchval(url: str, statement: str) -> Any:
    import asyncpg  # only needed (and installed) where PostgreSQL tests run

    conn = await asyncpg.connect(url)
    try:
        return await conn.fetchval(statement)
    finally:
        await conn.close()


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    if not PG_URL:
        pytest.skip(PG_SKIP)
    bindir = _pg_bindir()
    if bindir is None:
        pytest.skip("no PostgreSQL server binaries (run .ci/postgres.sh, which installs them)")
    running = Cluster(bindir)
    try:
        yield running
    finally:
        running.destroy()


@dataclass
class PgServer:
    server: OrgateServer
    cluster: Cluster
    app: str  # the application_name of the server's connections (to kill them)
    schema: str

    def kill_backends(self) -> int:
        return int(
            self.cluster.sql(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE "
                f"application_name = '{self.app}'"
            )
        )


@pytest.fixture(scope="module")
def pg(cluster: Cluster) -> Iterator[PgServer]:
    """An ``orgate serve`` on its own schema of the private cluster, shared by the module's tests
    (each test starts from a running database: recovering from the previous fault is part of it)."""
    tag = uuid.uuid4().hex[:10]
    schema, app = f"fault_{tag}", f"orgate_{tag}"
    cluster.sql(f"CREATE SCHEMA {schema}")
    url = f"{cluster.url}?search_path={schema}&application_name={app}"
    server = OrgateServer("", env=server_env({"ORGATE_STORE__URL": url})).start()
    try:
        yield PgServer(server, cluster, app, schema)
    finally:
        server.stop()


def _client(server: OrgateServer) -> httpx.Client:
    return httpx.Client(
        base_url=server.url, headers=server.headers(), timeout=httpx.Timeout(30, connect=5)
    )


# --------------------------------------------------------------------------- load and its outcomes


@dataclass
class Outcome:
    kind: str  # plain, prev, session, bg
    stream: bool
    status: int = 0
    body: dict[str, Any] | None = None  # a JSON answer, or a stream's terminal response
    raw: bytes = b""
    store_error: str | None = None
    failure: str | None = None  # a transport exception: a hang or a cut connection

    @property
    def response_id(self) -> str | None:
        return self.body.get("id") if self.body and "id" in self.body else None


@dataclass
class Load:
    server: OrgateServer
    seed: str
    sessions: list[str] = field(
        default_factory=lambda: [f"fault-{uuid.uuid4().hex[:8]}-{k}" for k in range(6)]
    )
    outcomes: list[Outcome] = field(default_factory=list)

    def one(self, client: httpx.Client, i: int) -> Outcome:
        kind = ("plain", "plain", "prev", "session", "bg")[i % 5]
        stream = kind != "bg" and i % 2 == 0
        out = Outcome(kind, stream)
        body: dict[str, Any] = {"model": "orgate/echo", "input": f"{SLOW} #{i}", "stream": stream}
        headers = {}
        if kind == "prev":
            body["previous_response_id"] = self.seed
        elif kind == "session":
            headers["X-Session-Id"] = self.sessions[i % len(self.sessions)]
        elif kind == "bg":
            body["background"] = True
        try:
            r = client.post("/v1/responses", json=body, headers=headers)
        except httpx.HTTPError as exc:
            out.failure = f"{type(exc).__name__}: {exc}"
            return out
        out.status, out.raw, out.store_error = r.status_code, r.content, r.headers.get(STORE_ERROR)
        if r.status_code == 200 and stream:
            frames = parse_sse(r.content)
            if frames and frames[-1][1] == "[DONE]" and len(frames) > 1:
                out.body = orjson.loads(frames[-2][1]).get("response")
        elif r.status_code == 200:
            out.body = r.json()
        return out

    def run(
        self,
        fault: Callable[[], None],
        n: int = 40,
        spacing: float = 0.03,
        fault_after: float = 0.4,
    ) -> list[Outcome]:
        with _client(self.server) as client, ThreadPoolExecutor(24) as pool:
            injector = threading.Timer(fault_after, fault)
            injector.start()
            futures = []
            for i in range(n):
                futures.append(pool.submit(self.one, client, i))
                time.sleep(spacing)
            self.outcomes = [f.result() for f in futures]
            injector.join()
        return self.outcomes


def check_outcomes(outcomes: list[Outcome]) -> None:
    """Every outcome is one a client can act on (see the module docstring)."""
    for out in outcomes:
        where = f"{out.kind} stream={out.stream}"
        assert out.failure is None, f"{where}: {out.failure}"
        if out.status != 200:
            assert out.status in (503, 409), f"{where}: {out.status} {out.raw[:300]!r}"
            error = assert_error(httpx.Response(out.status, content=out.raw), out.status)
            assert error["code"] == (
                "store_unavailable" if out.status == 503 else "session_busy"
            ), error
            if out.status == 503:
                assert (
                    "postgresql://" not in error["message"]
                    and "sqlite" not in error["message"].lower()
                ), error
            continue
        if out.stream:
            events = check_sse(out.raw)  # grammar, one terminal event, [DONE]
            assert events[-1]["type"] in ("response.completed", "response.failed"), (
                f"{where}: {events[-1]['type']}"
            )
            assert out.body is not None
        else:
            assert out.body is not None
            validate("ResponseResource", out.body)
            assert (out.store_error == "store_unavailable") == (out.body["store"] is False), (
                where,
                out.store_error,
                out.body["store"],
            )


def check_after(client: httpx.Client, outcomes: list[Outcome], deadline: float = PATIENCE) -> None:
    """Once the database is back: what was answered as stored is fetchable,
    background responses end."""
    for out in outcomes:
        if out.status != 200 or out.body is None or out.response_id is None:
            continue
        if out.body.get("store") is False:
            continue  # said so to the client: not stored
        _fetchable(client, out, deadline)


def _fetchable(client: httpx.Client, out: Outcome, deadline: float) -> None:
    """``out``'s response is fetchable (and ended, for a background one) within ``deadline``."""
    fetched: list[httpx.Response] = []

    def there() -> bool:
        fetched.append(r := client.get(f"/v1/responses/{out.response_id}"))
        return r.status_code == 200 and (out.kind != "bg" or r.json()["status"] in TERMINAL)

    assert wait_until(there, deadline, every=0.1), (
        f"{out.kind} {out.response_id}: {fetched[-1].status_code} {fetched[-1].text[:200]}"
    )


def session_turn_when_free(client: httpx.Client, session: str, deadline: float) -> httpx.Response:
    """A turn in ``session``, retried until it is answered 200 (its lease freed) before
    ``deadline``."""
    answers: list[httpx.Response] = []

    def answered() -> bool:
        answers.append(
            client.post(
                "/v1/responses",
                json={"model": "orgate/echo", "input": "after"},
                headers={"X-Session-Id": session},
            )
        )
        return answers[-1].status_code == 200

    assert wait_until(answered, max(0.0, deadline - time.monotonic()), every=0.2), (
        f"session {session} still refused: {answers[-1].status_code} {answers[-1].text[:200]}"
    )
    return answers[-1]


def check_recovered(client: httpx.Client, load: Load, within: float = PATIENCE) -> None:
    """New turns work and are stored, in every session used during the fault."""
    end = time.monotonic() + within
    for session in load.sessions:
        r = session_turn_when_free(client, session, end)
        assert r.headers.get(STORE_ERROR) is None, r.headers
    for stream in (False, True):
        r = client.post(
            "/v1/responses", json={"model": "orgate/echo", "input": "after", "stream": stream}
        )
        assert r.status_code == 200, r.text
        body = check_sse(r.content)[-1]["response"] if stream else r.json()
        assert (
            body["store"] is True and client.get(f"/v1/responses/{body['id']}").status_code == 200
        )


def _seed(server: OrgateServer) -> str:
    with _client(server) as client:
        r = client.post("/v1/responses", json={"model": "orgate/echo", "input": "seed"})
        assert r.status_code == 200, r.text
        return str(r.json()["id"])


def _kill_repeatedly(pg: PgServer, times: int = 8, every: float = 0.1) -> Callable[[], None]:
    def fault() -> None:
        for _ in range(times):
            pg.kill_backends()
            time.sleep(every)

    return fault


# --------------------------------------------------------------------------- PostgreSQL


def test_pg_backends_killed_then_server_restarted_under_load(pg: PgServer) -> None:
    """Backends killed again and again (``pg_terminate_backend``), then the server restarted, each
    while 40 requests (JSON, SSE, chains, sessions, background) run: every answer is clean and what
    was answered as stored is stored. A pooled connection whose backend died surfaced as asyncpg's
    ``InternalClientError`` (not translated: 500s, streams cut without a terminal event,
    background responses stuck ``in_progress``) or failed the request instead of being retried."""
    seed = _seed(pg.server)
    for name, fault in (("kill", _kill_repeatedly(pg)), ("restart", pg.cluster.restart)):
        load = Load(pg.server, seed)
        load.run(fault)
        check_outcomes(load.outcomes)
        with _client(pg.server) as client:
            check_after(client, load.outcomes)
            check_recovered(client, load)
        print(name, sorted((o.kind, o.status, (o.body or {}).get("store")) for o in load.outcomes))
    log = pg.server.output()
    assert "unhandled error" not in log and "SSE stream ended by" not in log, log[-3000:]


def test_pg_statement_cut_in_flight_is_retried_on_a_fresh_connection(pg: PgServer) -> None:
    """A save whose backend is killed while it runs is retried once on a new connection (it is an
    idempotent upsert): the answer is stored. It used to be lost ("could not store", GET 404)."""
    holder: dict[str, Any] = {}
    locked = threading.Event()
    release = threading.Event()

    async def hold_lock() -> None:
        import asyncpg

        conn = await asyncpg.connect(pg.cluster.url, server_settings={"search_path": pg.schema})
        try:
            async with conn.transaction():
                await conn.execute("LOCK TABLE responses IN SHARE MODE")  # inserts wait for it
                locked.set()
                while not release.is_set():
                    await asyncio.sleep(0.02)
        finally:
            await conn.close()

    locker = threading.Thread(target=lambda: asyncio.run(hold_lock()))
    locker.start()
    try:
        assert locked.wait(PATIENCE)
        with _client(pg.server) as client:
            poster = threading.Thread(
                target=lambda: holder.update(
                    r=client.post("/v1/responses", json={"model": "orgate/echo", "input": "cut me"})
                )
            )
            poster.start()
            waiting = (
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
                f"'{pg.app}' AND wait_event_type = 'Lock'"
            )
            assert wait_until(lambda: pg.cluster.sql(waiting)), "the save never reached the lock"
            assert pg.kill_backends() >= 1
            # the retry waits for the lock again
            assert wait_until(lambda: pg.cluster.sql(waiting) or not poster.is_alive())
            release.set()
            poster.join(PATIENCE)
            r = holder["r"]
            assert r.status_code == 200, r.text
            assert r.headers.get(STORE_ERROR) is None and r.json()["store"] is True
            assert client.get(f"/v1/responses/{r.json()['id']}").status_code == 200
    finally:
        release.set()
        locker.join(PATIENCE)


def test_pg_down_then_back(pg: PgServer) -> None:
    """PostgreSQL stopped for 3.5 s or more, then started again; orgate is not restarted.

    While it is down: a finished answer that cannot be stored is still returned, marked
    ``"store": false`` (+ ``X-Orgate-Store-Error``; it was returned as if stored); a background
    request is refused 503 (it answered 200 ``queued`` for a response that was never stored);
    continuations and GETs are 503 ``store_unavailable`` without the database URL in the message.
    Once it is back: a session whose turn was running during the outage is usable (its lease stayed
    taken for 10 minutes: 409), a background response that finished during the outage is stored
    ``completed`` (it stayed ``in_progress`` forever), and new turns are stored."""
    server = pg.server
    seed = _seed(server)
    session = f"fault-{uuid.uuid4().hex[:8]}"
    with _client(server) as client, ThreadPoolExecutor(8) as pool:
        # ~3 s: it ends while the database is down, however long stopping it takes here (the
        # outage lasts until this answer is in, and 3.5 s at least)
        slow = "orgate:delay=60 " + " ".join(f"w{i}" for i in range(50))
        in_session = pool.submit(
            client.post,
            "/v1/responses",
            json={"model": "orgate/echo", "input": slow},
            headers={"X-Session-Id": session},
        )
        background = client.post(
            "/v1/responses", json={"model": "orgate/echo", "input": slow, "background": True}
        )
        assert background.status_code == 200 and background.json()["status"] == "queued"
        # both answers are being written (their turns began, with the database up)
        assert wait_until(lambda: calls_in_flight(client, "orgate/echo") >= 2)
        pg.cluster.stop()
        down_at = time.monotonic()
        try:
            plain = pool.submit(
                client.post, "/v1/responses", json={"model": "orgate/echo", "input": "while down"}
            )
            streamed = pool.submit(
                client.post,
                "/v1/responses",
                json={"model": "orgate/echo", "input": "while down", "stream": True},
            )
            refused_bg = client.post(
                "/v1/responses",
                json={"model": "orgate/echo", "input": "bg while down", "background": True},
            )
            assert_error(refused_bg, 503, "store_unavailable")
            assert refused_bg.headers.get("retry-after") == "1"
            error = assert_error(
                client.post(
                    "/v1/responses",
                    json={"model": "orgate/echo", "input": "next", "previous_response_id": seed},
                ),
                503,
                "store_unavailable",
            )
            assert (
                "postgresql://" not in error["message"] and "127.0.0.1" not in error["message"]
            ), error
            assert_error(client.get(f"/v1/responses/{seed}"), 503, "store_unavailable")

            r = plain.result(timeout=PATIENCE)
            assert r.status_code == 200, r.text
            assert r.headers.get(STORE_ERROR) == "store_unavailable", dict(r.headers)
            assert r.json()["store"] is False and r.json()["status"] == "completed"
            unstored = r.json()["id"]
            s = streamed.result(timeout=PATIENCE)
            events = check_sse(s.content)
            assert (
                events[-1]["type"] == "response.completed"
                and events[-1]["response"]["store"] is False
            )
            r = in_session.result(timeout=PATIENCE)
            assert r.status_code == 200, r.text
            assert r.json()["store"] is False  # its save came after the outage began
        finally:
            time.sleep(max(0.0, 3.5 - (time.monotonic() - down_at)))
            pg.cluster.start()
        # The session is free again (its lease release is retried).
        session_turn_when_free(client, session, time.monotonic() + PATIENCE)
        # The background response finished during the outage; its save is retried until it lands.
        fetched: list[httpx.Response] = []

        def ended() -> bool:
            fetched.append(client.get(f"/v1/responses/{background.json()['id']}"))
            return fetched[-1].status_code == 200 and fetched[-1].json()["status"] in TERMINAL

        assert wait_until(ended, every=0.1), f"background response stuck: {fetched[-1].text[:300]}"
        assert fetched[-1].json()["status"] == "completed", fetched[-1].json()
        # What was answered "store": false is not stored; new turns are.
        assert_error(client.get(f"/v1/responses/{unstored}"), 404)
        created = client.post(
            "/v1/responses",
            json={"model": "orgate/echo", "input": "next", "previous_response_id": seed},
        )
        assert created.status_code == 200 and created.json()["store"] is True, created.text
        assert client.get(f"/v1/responses/{created.json()['id']}").status_code == 200


# --------------------------------------------------------------------------- SQLite


@dataclass
class SqliteServer:
    server: OrgateServer
    dir: str
    small: bool  # on a 16 MB tmpfs (root only): the disk can be filled


@pytest.fixture(scope="module")
def sq() -> Iterator[SqliteServer]:
    """An ``orgate serve`` on SQLite, on a small tmpfs when root can mount one."""
    path = tempfile.mkdtemp(prefix="orgate-sqfault-")
    small = (
        os.getuid() == 0
        and shutil.which("mount") is not None
        and subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", path], capture_output=True
        ).returncode
        == 0
    )
    server = OrgateServer(
        "", env=server_env({"ORGATE_STORE__URL": f"sqlite:///{path}/orgate.db"})
    ).start()
    try:
        yield SqliteServer(server, path, small)
    finally:
        server.stop()
        if small:
            subprocess.run(["umount", "-l", path], capture_output=True)
        shutil.rmtree(path, ignore_errors=True)


def test_sqlite_write_lock_held_then_disk_full(sq: SqliteServer) -> None:
    """Two faults on the SQLite file, orgate never restarted.

    1. Another process holds ``BEGIN EXCLUSIVE`` for 2.5 s under load: writes wait for it
       (``busy_timeout``), nothing fails, everything is stored (fine before this suite too).
    2. The disk fills up for 3 s under load, then space is freed (root only: a small tmpfs).
       Answers whose save failed say ``"store": false`` (they were returned as if stored),
       background requests are refused 503 or complete, and afterwards every session is
       usable again (a lease whose release failed stayed taken: 409 for 10 minutes) and new
       turns are stored."""
    db = f"{sq.dir}/orgate.db"
    server = sq.server
    seed = _seed(server)
    load = Load(server, seed)

    def hold_lock() -> None:
        conn = sqlite3.connect(db, isolation_level=None)
        conn.execute("BEGIN EXCLUSIVE")
        time.sleep(2.5)
        conn.execute("ROLLBACK")
        conn.close()

    load.run(hold_lock, n=30)
    check_outcomes(load.outcomes)
    assert all(o.status in (200, 409) for o in load.outcomes), [
        (o.kind, o.status) for o in load.outcomes
    ]
    assert not any(o.body and o.body.get("store") is False for o in load.outcomes)
    with _client(server) as client:
        check_after(client, load.outcomes)
        check_recovered(client, load)

    if not sq.small:
        pytest.skip(
            "filling a disk needs a small tmpfs, which only root can mount (the lock case passed)"
        )
    filler = os.path.join(sq.dir, "filler")
    load = Load(server, seed)

    def fill_disk() -> None:
        try:
            with open(filler, "wb") as f:
                while True:
                    f.write(b"\0" * 65536)
                    f.flush()
        except OSError:
            pass  # the disk is full
        time.sleep(3.0)
        os.unlink(filler)

    load.run(fill_disk, n=40)
    check_outcomes(load.outcomes)
    hit = [o for o in load.outcomes if o.status == 503 or (o.body and o.body.get("store") is False)]
    assert hit, "the full disk made no write fail: the fault did not happen"
    with _client(server) as client:
        check_after(client, load.outcomes)
        check_recovered(client, load)
