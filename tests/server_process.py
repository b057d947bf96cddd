"""Run a real ``orgate serve`` in a subprocess for end-to-end tests.

``OrgateServer(config_toml, env)`` writes the config to a temp dir, starts the
server with ``--port 0`` (it binds a free loopback port itself and says which in its
``listening on`` line: no port is handed over, so none can be taken meanwhile), waits for
``/healthz`` and exposes ``port``, ``url``, ``base_url`` (``.../v1``) and ``api_key``.
``stop()`` sends SIGTERM, ``kill()`` SIGKILL; ``output()`` returns what the server printed.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx

from tests.support.waiting import wait_until

REPO = Path(__file__).resolve().parents[1]


# How long a server may take to answer /healthz. Generous on purpose: on a loaded 2-core machine
# a cold start (imports, store migration) can take far longer than on an idle one, and a start
# that fails outright is reported at once through the process's exit, not by this deadline.
START_TIMEOUT = float(os.environ.get("ORGATE_TEST_START_TIMEOUT", "120"))


#: Where ``orgate serve`` says its address: the log line (text or JSON), else the banner's URL.
_LISTENING = re.compile(
    r"listening on (?:\[[0-9a-fA-F:.]+\]|[0-9.]+):(\d+)|URL: +https?://[^\s/]+:(\d+)/"
)


def bound_port(output: str) -> int | None:
    """The port ``orgate serve`` says it listens on, in what it printed (None before it says)."""
    found = _LISTENING.search(output)
    return int(found.group(1) or found.group(2)) if found else None


class OrgateServer:
    def __init__(
        self,
        config: str = "",
        *,
        api_key: str = "test-key",
        env: dict[str, str] | None = None,
        workdir: str | None = None,
        args: tuple[str, ...] = (),
    ) -> None:
        self.dir = Path(workdir or tempfile.mkdtemp(prefix="orgate-test-"))
        self.port = 0  # known once the server says where it listens
        self.api_key = api_key
        self.args = args  # more `orgate serve` arguments (e.g. --workers 2)
        self.config_path = self.dir / "orgate.toml"
        self.config_path.write_text(config)
        self.log_path = self.dir / "server.log"
        self.env = {**os.environ, "ORGATE_API_KEY": api_key, **(env or {})}
        self.env.setdefault("ORGATE_STORE__URL", f"sqlite:///{self.dir / 'orgate.db'}")
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def start(self, timeout: float = START_TIMEOUT) -> OrgateServer:
        log = self.log_path.open("ab")
        printed_before = log.tell()  # a server started again appends to the same log
        self.port = 0
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "orgate.cli",
                "serve",
                "--config",
                str(self.config_path),
                "--port",
                "0",
                *self.args,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self.env,
            cwd=self.dir,
        )
        if wait_until(lambda: self._answers(printed_before), timeout, every=0.05):
            return self
        self.kill()
        raise RuntimeError(f"orgate did not start in {timeout}s:\n{self.output()}")

    def _answers(self, printed_before: int) -> bool:
        """True once the server said its port and answers ``/healthz`` there; raises when it
        exited instead."""
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise RuntimeError(f"orgate exited with {self.proc.returncode}:\n{self.output()}")
        if not self.port:
            printed = self.log_path.read_bytes()[printed_before:].decode(errors="replace")
            self.port = bound_port(printed) or 0
            if not self.port:
                return False
        try:
            return httpx.get(f"{self.url}/healthz", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    def output(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def stop(self, timeout: float = 15.0) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}

    def __enter__(self) -> OrgateServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
