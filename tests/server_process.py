"""Run a real ``orgate serve`` in a subprocess for end-to-end tests.

``OrgateServer(config_toml, env)`` writes the config to a temp dir, starts the
server on a free loopback port, waits for ``/healthz`` and exposes ``url``,
``base_url`` (``.../v1``) and ``api_key``. ``stop()`` sends SIGTERM,
``kill()`` SIGKILL; ``output()`` returns what the server printed.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]


# How long a server may take to answer /healthz. Generous on purpose: on a loaded 2-core machine
# a cold start (imports, store migration) can take far longer than on an idle one, and a start
# that fails outright is reported at once through the process's exit, not by this deadline.
START_TIMEOUT = float(os.environ.get("ORGATE_TEST_START_TIMEOUT", "120"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class OrgateServer:
    def __init__(
        self,
        config: str = "",
        *,
        api_key: str = "test-key",
        env: dict[str, str] | None = None,
        port: int | None = None,
        workdir: str | None = None,
        args: tuple[str, ...] = (),
    ) -> None:
        self.dir = Path(workdir or tempfile.mkdtemp(prefix="orgate-test-"))
        self.port = port or free_port()
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
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "orgate.cli",
                "serve",
                "--config",
                str(self.config_path),
                "--port",
                str(self.port),
                *self.args,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self.env,
            cwd=self.dir,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"orgate exited with {self.proc.returncode}:\n{self.output()}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=0.5).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"orgate did not start in {timeout}s:\n{self.output()}")

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
