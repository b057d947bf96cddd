"""One ``orgate serve`` node on a host of the multi-node tests (``hosts.Host``).

``Node(host, config, env, workdir).start()`` runs the server on its host (its namespace, its
hostname), listening on the host's address, with a data directory of its own as a separate
machine would have; it returns once ``/healthz`` answers. In a namespace the address is the
node's own and the port is ``PORT``; on a loopback address the first start takes a port the
server picks itself (``--port 0``, read from its JSON ``start`` event). A node started again
(after ``stop()``, SIGTERM: a drain, or ``kill()``, SIGKILL: the machine lost) listens where it
did, so the load balancer finds it there.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.cluster.hosts import Host
from tests.server_process import START_TIMEOUT

#: The port of a node in a network namespace of its own, as on a machine of its own.
PORT = 8080


class Node:
    def __init__(self, host: Host, config: Path, env: dict[str, str], workdir: Path) -> None:
        self.host = host
        self.config = config
        self.env = env
        self.dir = workdir / host.name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.dir / "server.log"
        self.port = PORT if host.netns else 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def name(self) -> str:
        return self.host.name

    @property
    def url(self) -> str:
        return f"http://{self.host.address}:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    @property
    def address(self) -> str:
        """``host:port``, as the load balancer names it."""
        return f"{self.host.address}:{self.port}"

    def start(self) -> Node:
        argv = [sys.executable, "-m", "orgate.cli", "serve", "--config", str(self.config)]
        argv += ["--host", self.host.address, "--port", str(self.port), "--log-format", "json"]
        argv += ["--data-dir", str(self.dir / "data")]
        self.proc = subprocess.Popen(
            self.host.command(argv),
            stdout=self.log_path.open("ab"),
            stderr=subprocess.STDOUT,
            env={**os.environ, **self.env},
            cwd=self.dir,
        )
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"{self.name} exited with {self.proc.returncode}:\n{self.output()}"
                )
            if self.port or self._read_port():
                try:
                    if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                        return self
                except httpx.HTTPError:
                    pass
            time.sleep(0.1)
        self.kill()
        raise RuntimeError(f"{self.name} did not start in {START_TIMEOUT} s:\n{self.output()}")

    def _read_port(self) -> bool:
        """The port of the first start on ``--port 0``, from the server's ``start`` event."""
        for event in self.events():
            if event.get("event") == "start":
                self.port = int(str(event["url"]).rsplit(":", 1)[1].split("/", 1)[0])
                return True
        return False

    def events(self) -> list[dict[str, object]]:
        """The server's JSON log lines so far."""
        found = []
        for line in self.output().splitlines():
            if line.startswith("{"):
                try:
                    found.append(json.loads(line))
                except ValueError:
                    continue
        return found

    def output(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: no drain, no store closed, nothing more said to anyone."""
        if self.alive:
            assert self.proc is not None
            self.proc.kill()
            self.proc.wait()

    def stop(self, timeout: float = 60) -> None:
        """SIGTERM (a drain); SIGKILL after ``timeout``."""
        if not self.alive:
            return
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
