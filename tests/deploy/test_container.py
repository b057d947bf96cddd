"""The Dockerfile and compose.yaml: what they name exists and means what they say, and the
image (built by scripts/container.sh, which sets ORGATE_TEST_CONTAINER_IMAGE) serves as a
non-root user on a read-only root filesystem with its data in a volume, passes its own health
check, logs JSON lines and stops cleanly.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest
import yaml

from orgate.cli import build_parser
from orgate.config import load_settings
from tests.server_process import REPO, START_TIMEOUT
from tests.support.ports import reserved_port

IMAGE = os.environ.get("ORGATE_TEST_CONTAINER_IMAGE")


def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per instruction, continuation lines joined."""
    lines: list[tuple[str, str]] = []
    pending = ""
    for raw in (REPO / "Dockerfile").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        pending += line.removesuffix("\\").strip() + " "
        if not line.endswith("\\"):
            word, _, rest = pending.strip().partition(" ")
            lines.append((word.upper(), rest.strip()))
            pending = ""
    return lines


def instruction(name: str) -> list[str]:
    return [rest for word, rest in dockerfile() if word == name]


def dockerfile_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for rest in instruction("ENV"):
        for pair in shlex.split(rest):
            key, _, value = pair.partition("=")
            env[key] = value
    return env


def compose() -> dict[str, object]:
    return yaml.safe_load((REPO / "compose.yaml").read_text())


def test_the_dockerfile_copies_files_that_exist_and_runs_a_real_command() -> None:
    for rest in instruction("COPY"):
        *sources, _target = rest.split()
        for source in sources:
            assert (REPO / source).exists(), source
    entry = json.loads(instruction("ENTRYPOINT")[0])
    assert entry[0] == "orgate" and build_parser().parse_args(entry[1:]).command == "serve"
    assert instruction("USER") == ["orgate"]
    env = dockerfile_env()
    volume = json.loads(instruction("VOLUME")[0])
    assert volume == [env["ORGATE_DATA_DIR"]]  # every file orgate writes lands in the volume
    assert instruction("HEALTHCHECK") and "/healthz" in instruction("HEALTHCHECK")[0]
    overrides = {k: v for k, v in env.items() if k.startswith("ORGATE_") and k != "ORGATE_DATA_DIR"}
    settings = load_settings(None, environ=overrides)
    assert (
        settings.warnings == []
        and settings.server.log_format == "json"
        and settings.server.port == 8080
    )


def test_compose_runs_this_image_with_postgresql_and_redis() -> None:
    services = compose()["services"]
    assert isinstance(services, dict) and set(services) == {"orgate", "postgres", "redis"}
    orgate = services["orgate"]
    assert (REPO / orgate["build"] / "Dockerfile").is_file()
    assert orgate["read_only"] is True
    mounts = {volume.split(":")[1] for volume in orgate["volumes"]}
    assert set(json.loads(instruction("VOLUME")[0])) <= mounts
    environment = {
        k: v.replace("${POSTGRES_PASSWORD:-orgate}", "pw")
        for k, v in orgate["environment"].items()
        if k.startswith("ORGATE_")
    }
    environment["ORGATE_API_KEY"] = "k"
    settings = load_settings(None, environ=environment)
    assert settings.warnings == []
    assert settings.store.url and settings.store.url.startswith(
        "postgresql://orgate:pw@postgres:5432/"
    )
    assert settings.ratelimit.redis_url == "redis://redis:6379/0"
    assert set(orgate["depends_on"]) == {"postgres", "redis"}
    for name in ("postgres", "redis"):
        assert services[name]["healthcheck"]["test"], name


needs_image = pytest.mark.skipif(
    IMAGE is None, reason="no image: scripts/container.sh builds one and runs these tests"
)


def podman(
    *args: str, check: bool = True, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["podman", *args], capture_output=True, text=True, check=check, timeout=timeout
    )


@pytest.fixture
def container() -> Iterator[tuple[str, int]]:
    """The image running as compose runs it (read-only root, a data volume), on a reserved port
    of the host's network (tests/support/ports.py: its health check reads the port from
    ORGATE_SERVER__PORT, so the server cannot pick one itself); with the test PostgreSQL as its
    store when ORGATE_TEST_PG_URL is set."""
    assert IMAGE is not None and shutil.which("podman")
    name = f"orgate-test-{uuid.uuid4().hex[:8]}"
    with reserved_port("0.0.0.0") as port:  # where the image listens (ORGATE_SERVER__HOST)
        env = ["-e", f"ORGATE_SERVER__PORT={port}", "-e", "ORGATE_API_KEY=test-key"]
        if os.environ.get("ORGATE_TEST_PG_URL"):
            env += ["-e", f"ORGATE_STORE__URL={os.environ['ORGATE_TEST_PG_URL']}"]
        podman("volume", "create", name)
        podman(
            "run",
            "-d",
            "--name",
            name,
            "--network",
            "host",
            "--read-only",
            "--tmpfs",
            "/tmp",
            "-v",
            f"{name}:/var/lib/orgate",
            *env,
            IMAGE,
        )
        try:
            yield name, port
        finally:
            podman("rm", "-f", name, check=False)
            podman("volume", "rm", "-f", name, check=False)


def wait_healthy(port: int, name: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert podman("inspect", "-f", "{{.State.Running}}", name).stdout.strip() == "true", podman(
            "logs", name
        ).stderr
        time.sleep(0.2)
    raise AssertionError(podman("logs", name, check=False).stderr)


@needs_image
def test_the_image_serves_as_a_non_root_user_on_a_read_only_root(
    container: tuple[str, int],
) -> None:
    name, port = container
    wait_healthy(port, name)
    reply = httpx.post(
        f"http://127.0.0.1:{port}/v1/responses",
        json={"model": "orgate/echo", "input": "hi", "store": True},
        headers={"Authorization": "Bearer test-key"},
        timeout=30,
    )
    assert reply.status_code == 200 and reply.json()["status"] == "completed", reply.text
    assert podman("exec", name, "id", "-un").stdout.strip() == "orgate"
    assert podman("healthcheck", "run", name, check=False).returncode == 0
    listing = podman(
        "exec",
        name,
        "stat",
        "-c",
        "%a %U %n",
        "/var/lib/orgate",
        *([] if os.environ.get("ORGATE_TEST_PG_URL") else ["/var/lib/orgate/orgate.db"]),
        "/var/lib/orgate/compaction.key",
    ).stdout.split("\n")
    modes = [line.split() for line in listing if line]
    assert modes[0][:2] == ["700", "orgate"] and all(
        m[:2] == ["600", "orgate"] for m in modes[1:]
    ), modes
    written = podman("exec", name, "touch", "/opt/orgate/x", check=False)
    assert written.returncode != 0 and "Read-only file system" in written.stderr
    podman("stop", "-t", "30", name)
    assert podman("inspect", "-f", "{{.State.ExitCode}}", name).stdout.strip() == "0"
    logs = podman("logs", name)
    lines = [line for line in (logs.stdout + logs.stderr).splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # JSON on every line
    assert any(r.get("event") == "start" for r in records), lines
