"""Where orgate writes, black-box: one data directory, files created only by the feature that
needs them (owner-only), commands that read never create anything, and a bad path is one line
naming the key and the path. The real ``orgate`` runs in a subprocess with a clean environment.
"""

from __future__ import annotations

import asyncio
import os
import select
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from orgate.structured.review import NewReview, ReviewQueue
from tests.server_process import START_TIMEOUT, bound_port
from tests.support.waiting import wait_until


def clean_env(home: Path, extra: dict[str, str | None] | None = None) -> dict[str, str]:
    env: dict[str, str | None] = {
        k: v for k, v in os.environ.items() if not k.upper().startswith(("ORGATE_", "XDG_"))
    }
    env["HOME"] = str(home)
    env["ORGATE_API_KEY"] = "test-key"
    env.update(extra or {})
    return {k: v for k, v in env.items() if v is not None}


def run(
    cwd: Path,
    home: Path,
    *args: str,
    env: dict[str, str | None] | None = None,
    stdin: str | None = None,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orgate.cli", *args],
        cwd=cwd,
        env=clean_env(home, env),
        capture_output=True,
        text=True,
        input=stdin,
        timeout=60,
    )


def files_under(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def place(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(an empty working directory, an empty home)."""
    cwd, home = tmp_path / "cwd", tmp_path / "home"
    cwd.mkdir()
    home.mkdir()
    yield cwd, home


class Served:
    """``orgate serve`` in ``cwd`` on a port it picks (``--port 0``), its output kept outside
    ``cwd``."""

    def __init__(
        self, cwd: Path, home: Path, *args: str, env: dict[str, str | None] | None = None
    ) -> None:
        self.port = 0  # known once the server says where it listens
        self.log = Path(tempfile.mkstemp(prefix="serve-", suffix=".log", dir=home.parent)[1])
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "orgate.cli", "serve", "--port", "0", *args],
                cwd=cwd,
                env=clean_env(home, env),
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def wait_ready(self) -> None:
        assert wait_until(self._answers, START_TIMEOUT, every=0.05), (
            f"orgate did not start:\n{self.output()}"
        )

    def _answers(self) -> bool:
        assert self.proc.poll() is None, self.output()
        self.port = self.port or bound_port(self.output()) or 0
        if not self.port:
            return False
        try:
            return httpx.get(f"http://127.0.0.1:{self.port}/healthz", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)


def test_serve_writes_nothing_in_its_working_directory(place: tuple[Path, Path]) -> None:
    cwd, home = place
    server = Served(cwd, home)
    try:
        server.wait_ready()
    finally:
        server.stop()
    assert files_under(cwd) == [], server.output()
    data = home / ".local" / "share" / "orgate"
    assert (data / "orgate.db").is_file(), files_under(home)


def test_the_data_directory_and_its_files_are_owner_only(place: tuple[Path, Path]) -> None:
    cwd, home = place
    data = home / "var" / "orgate"
    server = Served(cwd, home, "--data-dir", str(data), env={"ORGATE_COMPACTION__SECRET": None})
    try:
        server.wait_ready()
        headers = {"Authorization": "Bearer test-key"}
        reply = httpx.post(
            f"http://127.0.0.1:{server.port}/v1/responses",
            json={"model": "orgate/echo", "input": "hi"},
            headers=headers,
            timeout=30,
        )
        assert reply.status_code == 200, reply.text
    finally:
        server.stop()
    assert files_under(cwd) == []
    assert mode(data) == 0o700 and mode(data.parent) == 0o700, files_under(home)
    written = [p for p in data.iterdir() if p.is_file()]
    assert {p.name for p in written} >= {"orgate.db", "compaction.key"}, written
    for path in written:
        assert mode(path) == 0o600, (path, oct(mode(path)))


def test_orgate_data_dir_variable_is_the_data_directory(place: tuple[Path, Path]) -> None:
    cwd, home = place
    result = run(cwd, home, "store", "stats", env={"ORGATE_DATA_DIR": str(home / "elsewhere")})
    assert result.returncode == 1
    assert f"{home / 'elsewhere' / 'orgate.db'}" in result.stderr, result.stderr


def test_the_review_queue_is_created_owner_only_when_first_used(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "review.db"
    queue = ReviewQueue(path)
    assert queue.list(None) == [] and queue.get("rev_x") is None
    assert not (tmp_path / "deep").exists(), "reading created the queue"
    queue.add(
        NewReview(
            model="m",
            format_name="f",
            mode="strict",
            stage="schema",
            errors=["e"],
            schema={},
            request={},
            attempts=[],
        )
    )
    assert mode(tmp_path / "deep") == 0o700 and mode(path) == 0o600
    assert len(queue.list()) == 1


def test_read_only_commands_create_nothing(place: tuple[Path, Path]) -> None:
    cwd, home = place
    result = run(cwd, home, "review", "list")
    assert result.returncode == 0 and "no entries" in result.stderr, result
    missing = home / "no" / "such" / "dir" / "x.db"
    result = run(cwd, home, "review", "list", "--db", str(missing))
    assert (
        result.returncode == 1
        and result.stderr.startswith("orgate: error: ")
        and str(missing) in result.stderr
    ), result
    for command in (["store", "stats"], ["store", "prune"], ["store", "prune", "--dry-run"]):
        result = run(cwd, home, *command, "--url", f"sqlite://{missing}")
        assert result.returncode == 1, result
        assert (
            result.stderr
            == f"orgate: error: no response store at {missing} (it is created by `orgate "
            "serve`; --url names another)\n"
        )
    result = run(cwd, home, "store", "stats")  # the default store
    assert result.returncode == 1 and "no response store at" in result.stderr
    assert files_under(cwd) == [] and files_under(home) == []


@pytest.mark.skipif(
    not Path("/proc/self").exists(), reason="needs /proc (a directory nothing can be created in)"
)
def test_a_bad_review_db_path_is_one_line_naming_the_key_and_the_path(
    place: tuple[Path, Path],
) -> None:
    cwd, home = place
    result = run(
        cwd,
        home,
        "serve",
        "--port",
        "0",  # refused before it listens
        # without a store the review file is the queue (with one, it is only imported)
        env={"ORGATE_STRUCTURED__REVIEW_DB": "/proc/nope/r.db", "ORGATE_STORE__ENABLED": "false"},
    )
    assert result.returncode == 1, result
    assert "Traceback" not in result.stderr and "Try it:" not in result.stdout
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith(
        "orgate: error: [structured] review_db = /proc/nope/r.db: cannot create it"
    ), result.stderr


def _seed_store(url: str) -> None:
    from orgate.store import open_store
    from tests.store.helpers import response, user

    async def seed() -> None:
        store = await open_store(url, heartbeat_interval=0)
        old = int(time.time()) - 30 * 86400
        for n in range(3):
            await store.save(
                response(f"resp_old{n}", created_at=old), tenant="t", input_items=[user("a")]
            )
        await store.save(
            response("resp_new", created_at=int(time.time())), tenant="t", input_items=[user("b")]
        )
        await store.close()

    asyncio.run(seed())


def _count(url: str) -> int:
    from orgate.store import open_store

    async def count() -> int:
        store = await open_store(url, heartbeat_interval=0)
        try:
            return (await store.stats()).responses
        finally:
            await store.close()

    return asyncio.run(count())


def test_prune_dry_run_counts_and_deletes_nothing(place: tuple[Path, Path]) -> None:
    cwd, home = place
    url = f"sqlite://{home / 'orgate.db'}"
    _seed_store(url)
    result = run(cwd, home, "store", "prune", "--dry-run", "--url", url)
    assert result.returncode == 0, result
    assert result.stdout.startswith("would delete 3 response(s)"), result.stdout
    assert _count(url) == 4
    result = run(cwd, home, "store", "prune", "--url", url)  # not a terminal: no question
    assert result.returncode == 0 and result.stdout.startswith("deleted 3 response(s)"), result
    assert _count(url) == 1


def _on_a_terminal(cwd: Path, home: Path, answer: bytes, *args: str) -> tuple[int, str]:
    """``orgate ARGS`` with stdin and stderr on a pseudo-terminal, ``answer`` typed once asked."""
    main, side = os.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "orgate.cli", *args],
        cwd=cwd,
        env=clean_env(home),
        stdin=side,
        stderr=side,
        stdout=subprocess.PIPE,
    )
    os.close(side)
    seen = b""
    deadline = time.monotonic() + 60
    while b"[y/N]" not in seen and time.monotonic() < deadline and proc.poll() is None:
        if select.select([main], [], [], 0.5)[0]:
            try:
                seen += os.read(main, 1024)
            except OSError:
                break
    if b"[y/N]" in seen:
        os.write(main, answer)
    out = proc.communicate(timeout=60)[0].decode()
    os.close(main)
    return proc.returncode, seen.decode(errors="replace") + out


def test_prune_on_a_terminal_shows_the_count_and_asks(place: tuple[Path, Path]) -> None:
    cwd, home = place
    url = f"sqlite://{home / 'orgate.db'}"
    _seed_store(url)
    status, output = _on_a_terminal(cwd, home, b"n\n", "store", "prune", "--url", url)
    assert "delete 3 response(s)" in output and "[y/N]" in output, output
    assert status == 1 and _count(url) == 4, output
    status, output = _on_a_terminal(cwd, home, b"y\n", "store", "prune", "--url", url)
    assert status == 0 and _count(url) == 1, output
    url = f"sqlite://{home / 'second.db'}"
    _seed_store(url)
    status, output = _on_a_terminal(cwd, home, b"", "store", "prune", "--yes", "--url", url)
    assert "[y/N]" not in output and status == 0 and _count(url) == 1, output
