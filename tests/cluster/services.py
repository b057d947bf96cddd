"""What the nodes of the multi-node tests share: PostgreSQL, Redis and the load balancer.

Each runs on the host side, reachable from the nodes at the network's ``gateway`` address:

- ``PostgresCluster``: a cluster of the test's own (``.ci/postgres.sh`` with its own state
  directory), listening on the gateway address too; ``pause()`` / ``resume()`` stop and
  start its server (the data kept), ``remove()`` deletes it.
- ``RedisServer``: ``redis-server`` on the gateway address, no persistence, on a port reserved
  for it (tests/support/ports.py); ``stop()`` and ``start()`` again on the same port (empty).
- ``Balancer``: Debian's HAProxy running ``deploy/haproxy.cfg`` (the file the docs show), on
  a listening socket this process binds (port 0) and hands over (``bind fd@N``); its stats
  socket tells which nodes it takes for up.
- ``Nginx``: Debian's nginx running ``deploy/nginx.conf`` (the docs' other example), for the
  checks of what a balancer must pass on (WebSocket upgrades, unbuffered streams), on a port
  reserved for it.
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

from tests.server_process import REPO, START_TIMEOUT
from tests.support.ports import port_of, reservation

HAPROXY_TEMPLATE = REPO / "deploy" / "haproxy.cfg"


def listening(address: str, port: int) -> bool:
    try:
        socket.create_connection((address, port), timeout=1).close()
    except OSError:
        return False
    return True


def wait_for(what: str, ready: object, proc: subprocess.Popen[bytes] | None = None) -> None:
    """Poll ``ready()`` until it is true; fail at once when ``proc`` exits, else after
    START_TIMEOUT seconds (generous: a loaded machine starts things slowly)."""
    assert callable(ready)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what} exited with status {proc.returncode}")
        if ready():
            return
        time.sleep(0.1)
    raise RuntimeError(f"{what} was not ready after {START_TIMEOUT} s")


def stop_process(proc: subprocess.Popen[bytes] | None, timeout: float = 30) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


# --------------------------------------------------------------------------- PostgreSQL


class PostgresCluster:
    """A throwaway PostgreSQL cluster listening on 127.0.0.1 and ``address``."""

    def __init__(self, state_dir: Path, address: str, allow: str) -> None:
        self.state_dir = state_dir
        self.address = address
        self.allow = allow  # the network whose clients may connect (CIDR)
        self.local_url = ""  # postgresql://…@127.0.0.1:PORT/…

    def _script(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "ORGATE_PG_STATE_DIR": str(self.state_dir)}
        if self.address != "127.0.0.1":
            env |= {"ORGATE_PG_LISTEN": self.address, "ORGATE_PG_ALLOW": self.allow}
        return subprocess.run(
            ["bash", str(REPO / ".ci" / "postgres.sh"), *args],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=600,  # it may install PostgreSQL from Debian's packages first
        )

    def start(self) -> PostgresCluster:
        exported = self._script().stdout.strip()
        self.local_url = exported.partition("ORGATE_TEST_PG_URL=")[2]
        assert self.local_url.startswith("postgresql://"), exported
        return self

    @property
    def url(self) -> str:
        """The URL the nodes use: the same database at the address they reach."""
        return self.local_url.replace("@127.0.0.1:", f"@{self.address}:")

    def _pg_ctl(self, *args: str) -> None:
        bindir = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: p.parent.name)
        pg_ctl = [str(d / "pg_ctl") for d in bindir if (d / "pg_ctl").exists()]
        assert pg_ctl, "no pg_ctl under /usr/lib/postgresql"
        command = [pg_ctl[-1], "-D", str(self.state_dir / "data"), *args]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, capture_output=True, check=True, timeout=120)

    def pause(self) -> None:
        """Stop the server (fast: its sessions are cut at once), keeping its data. Not
        ``immediate``: this throwaway cluster runs with ``synchronous_commit = off``, so a crash
        would lose its last commits, which no production database does."""
        self._pg_ctl("-m", "fast", "stop")

    def resume(self) -> None:
        self._pg_ctl("-l", str(self.state_dir / "log"), "-w", "-t", "120", "start")

    def remove(self) -> None:
        self._script("stop")


# --------------------------------------------------------------------------- Redis


class RedisServer:
    """``redis-server`` on ``address``: the shared rate limits."""

    def __init__(self, address: str, workdir: Path) -> None:
        self.address = address
        self.workdir = workdir
        # kept while this object lives: a restart finds its port free
        self.reservation = reservation(address)
        self.port = port_of(self.reservation)
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://{self.address}:{self.port}/0"

    def start(self) -> RedisServer:
        binary = shutil.which("redis-server")
        assert binary, "no redis-server (scripts/test.sh installs Debian's)"
        log = (self.workdir / "redis.log").open("ab")
        self.proc = subprocess.Popen(
            [binary, "--bind", self.address, "--port", str(self.port)]
            + ["--save", "", "--appendonly", "no", "--protected-mode", "no"],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.workdir,
        )
        try:
            wait_for("redis-server", lambda: listening(self.address, self.port), self.proc)
        except RuntimeError as exc:
            log_text = (self.workdir / "redis.log").read_text(errors="replace")
            raise RuntimeError(f"{exc}\n{log_text}") from None
        return self

    def stop(self) -> None:
        stop_process(self.proc)

    def restart(self) -> None:
        """Start again on the same port, empty (as after a crash without persistence)."""
        self.stop()
        self.start()


# --------------------------------------------------------------------------- HAProxy


def render_haproxy(template: str, listen_fd: int, stats: Path, servers: list[str]) -> str:
    """``deploy/haproxy.cfg`` with its listening socket, stats socket and servers replaced:
    every other line is the file's own."""
    lines = template.splitlines()
    binds = [i for i, line in enumerate(lines) if line.strip().startswith("bind ")]
    stats_lines = [i for i, line in enumerate(lines) if line.strip().startswith("stats socket ")]
    server_lines = [i for i, line in enumerate(lines) if line.strip().startswith("server ")]
    assert len(binds) == 1 and len(stats_lines) == 1 and server_lines, "the template changed"
    lines[binds[0]] = f"    bind fd@{listen_fd}"
    lines[stats_lines[0]] = f"    stats socket {stats} mode 600 level admin"
    named = [f"    server orgate-{i} {address}" for i, address in enumerate(servers, 1)]
    lines[server_lines[0] : server_lines[-1] + 1] = named
    return "\n".join(lines) + "\n"


class Balancer:
    """HAProxy in front of ``servers`` (``host:port``), listening on 127.0.0.1 (port 0)."""

    def __init__(self, servers: list[str], workdir: Path) -> None:
        self.servers = servers
        self.workdir = workdir
        self.stats = workdir / "haproxy.sock"
        self.log_path = workdir / "haproxy.log"
        self.sock: socket.socket | None = None
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        assert self.sock is not None
        host, port = self.sock.getsockname()[:2]
        return f"http://{host}:{port}"

    def start(self) -> Balancer:
        binary = shutil.which("haproxy") or "/usr/sbin/haproxy"
        assert Path(binary).exists(), "no haproxy (scripts/test.sh installs Debian's)"
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(512)
        config = self.workdir / "haproxy.cfg"
        config.write_text(
            render_haproxy(
                HAPROXY_TEMPLATE.read_text(), self.sock.fileno(), self.stats, self.servers
            )
        )
        check = subprocess.run(
            [binary, "-c", "-f", str(config)],
            capture_output=True,
            text=True,
            check=False,
            pass_fds=(self.sock.fileno(),),
        )
        assert check.returncode == 0, check.stdout + check.stderr
        self.proc = subprocess.Popen(
            [binary, "-db", "-f", str(config)],
            stdout=self.log_path.open("ab"),
            stderr=subprocess.STDOUT,
            pass_fds=(self.sock.fileno(),),
        )
        wait_for("haproxy", lambda: self.states() is not None, self.proc)
        return self

    def states(self) -> dict[str, str] | None:
        """Server name → HAProxy's status of it (``UP``, ``DOWN``, ``UP 1/2``…); None while
        the stats socket does not answer."""
        try:
            with socket.socket(socket.AF_UNIX) as conn:
                conn.settimeout(10)
                conn.connect(str(self.stats))
                conn.sendall(b"show stat\n")
                data = b""
                while chunk := conn.recv(65536):
                    data += chunk
        except OSError:
            return None
        rows = csv.DictReader(io.StringIO(data.decode().lstrip("# ")))
        return {
            row["svname"]: row["status"]
            for row in rows
            if row.get("pxname") == "orgate" and row["svname"] not in ("BACKEND", "FRONTEND")
        }

    def output(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def stop(self) -> None:
        stop_process(self.proc)
        if self.sock is not None:
            self.sock.close()


# --------------------------------------------------------------------------- nginx

NGINX_TEMPLATE = REPO / "deploy" / "nginx.conf"


def render_nginx(template: str, listen: str, servers: list[str]) -> str:
    """``deploy/nginx.conf`` with its listen address and upstream servers replaced."""
    lines = template.splitlines()
    listens = [i for i, line in enumerate(lines) if line.strip().startswith("listen ")]
    server_lines = [i for i, line in enumerate(lines) if line.strip().startswith("server 10.")]
    assert len(listens) == 1 and server_lines, "the template changed"
    options = lines[server_lines[0]].split(None, 2)[2]  # max_fails=… fail_timeout=…;
    lines[listens[0]] = f"    listen {listen};"
    named = [f"    server {address} {options}" for address in servers]
    lines[server_lines[0] : server_lines[-1] + 1] = named
    return "\n".join(lines) + "\n"


class Nginx:
    """Debian's nginx running ``deploy/nginx.conf`` in front of ``servers``, on 127.0.0.1."""

    def __init__(self, servers: list[str], workdir: Path) -> None:
        self.servers = servers
        self.dir = workdir / "nginx"
        self.reservation = reservation("127.0.0.1")  # kept while this object lives
        self.port = port_of(self.reservation)
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _main_config(self) -> Path:
        """A whole nginx.conf around the part the docs show: paths of its own, in the foreground."""
        for name in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
            (self.dir / name).mkdir(parents=True, exist_ok=True)
            (self.dir / name).chmod(0o777)  # nginx's workers drop root
        self.dir.chmod(0o755)
        part = self.dir / "orgate.conf"
        part.write_text(
            render_nginx(NGINX_TEMPLATE.read_text(), f"127.0.0.1:{self.port}", self.servers)
        )
        main = self.dir / "nginx.conf"
        main.write_text(
            f"daemon off;\nworker_processes 1;\npid {self.dir}/nginx.pid;\n"
            f"error_log {self.dir}/error.log info;\nevents {{ worker_connections 1024; }}\n"
            f"http {{\n  access_log {self.dir}/access.log;\n"
            + "".join(f"  {n}_temp_path {self.dir}/{n};\n" for n in ("fastcgi", "uwsgi", "scgi"))
            + f"  client_body_temp_path {self.dir}/body;\n  proxy_temp_path {self.dir}/proxy;\n"
            f"  include {part};\n}}\n"
        )
        return main

    def start(self) -> Nginx:
        binary = shutil.which("nginx") or "/usr/sbin/nginx"
        assert Path(binary).exists(), "no nginx (scripts/test.sh installs Debian's)"
        config = self._main_config()
        check = subprocess.run(
            [binary, "-t", "-c", str(config), "-p", str(self.dir)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert check.returncode == 0, check.stderr
        self.proc = subprocess.Popen(
            [binary, "-c", str(config), "-p", str(self.dir)],
            stdout=subprocess.DEVNULL,
            stderr=(self.dir / "stderr.log").open("ab"),
        )
        try:
            wait_for("nginx", lambda: listening("127.0.0.1", self.port), self.proc)
        except RuntimeError as exc:
            log_text = (self.dir / "error.log").read_text(errors="replace")
            raise RuntimeError(f"{exc}\n{log_text}") from None
        return self

    def stop(self) -> None:
        stop_process(self.proc)  # SIGTERM: nginx's fast shutdown
        self.reservation.close()
