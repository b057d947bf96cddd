"""orgate's fixed surface, black-box: its configuration and its command line, run as a platform
engineer would run them (the real ``orgate`` in a subprocess, a clean environment).

Every refused start-up is one short message on stderr naming the key, file or variable, a
non-zero status and no traceback. Tests that expect ``serve`` to refuse pass ``--port`` of a
port that is busy, so that a server that wrongly accepts the configuration stops at once
instead of serving. ``ORGATE_TEST_PYTHONPATH`` runs the subprocesses on another source tree
(e.g. the previous commit's, to see a test fail there).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.server_process import REPO, START_TIMEOUT

SECRET = "hunter2-not-to-be-printed"


def _environ(tmp_path: Path, extra: dict[str, str | None] | None = None) -> dict[str, str]:
    env: dict[str, str | None] = {
        k: v for k, v in os.environ.items() if not k.upper().startswith("ORGATE_")
    }
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")  # the default store and compaction key
    env["ORGATE_STORE__URL"] = f"sqlite:///{tmp_path / 'orgate.db'}"
    override = os.environ.get("ORGATE_TEST_PYTHONPATH")
    if override:
        env["PYTHONPATH"] = override
    env.update(extra or {})
    return {k: v for k, v in env.items() if v is not None}  # None: unset


def orgate(
    tmp_path: Path,
    *args: str,
    env: dict[str, str | None] | None = None,
    stdin: bytes | None = None,
    timeout: float = START_TIMEOUT,
) -> subprocess.CompletedProcess[str]:
    """Run ``orgate ARGS`` in ``tmp_path`` and return its result (text)."""
    result = subprocess.run(
        [sys.executable, "-m", "orgate.cli", *args],
        input=stdin,
        capture_output=True,
        cwd=tmp_path,
        env=_environ(tmp_path, env),
        timeout=timeout,
    )
    return subprocess.CompletedProcess(
        result.args,
        result.returncode,
        result.stdout.decode(errors="replace"),
        result.stderr.decode(errors="replace"),
    )


def _write(tmp_path: Path, name: str, text: str | bytes) -> str:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return str(path)


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A loopback port something else listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def refused(result: subprocess.CompletedProcess[str], status: int, *fragments: str) -> str:
    """The start-up was refused: ``status``, the fragments on stderr, no traceback, no banner."""
    output = result.stdout + result.stderr
    assert result.returncode == status, output
    assert "Traceback" not in output, output
    assert "Try it:" not in result.stdout, output  # no banner for a server that does not start
    for fragment in fragments:
        assert fragment in result.stderr, output
    return result.stderr


def serve_refused(
    tmp_path: Path, config: str, busy_port: int, *, env: dict[str, str | None] | None = None
) -> subprocess.CompletedProcess[str]:
    path = _write(tmp_path, "orgate.toml", config)
    return orgate(tmp_path, "serve", "--config", path, "--port", str(busy_port), env=env)


# --- configuration errors -------------------------------------------------------------------------


def test_a_bad_store_url_scheme_is_a_configuration_error(tmp_path: Path, busy_port: int) -> None:
    result = serve_refused(
        tmp_path,
        '[store]\nurl = "mysql://app:hunter2-not-to-be-printed@db/orgate"\n',
        busy_port,
        env={"ORGATE_STORE__URL": None},
    )
    stderr = refused(result, 2, "store.url", "'mysql'", "postgresql://")
    assert SECRET not in stderr


def test_a_store_url_from_an_unset_variable_is_refused(tmp_path: Path, busy_port: int) -> None:
    result = serve_refused(
        tmp_path,
        '[store]\nurl = "env:ORGATE_AUDIT_STORE"\n',
        busy_port,
        env={"ORGATE_STORE__URL": None},
    )
    refused(result, 2, "store.url", "ORGATE_AUDIT_STORE", "not set")
    assert not list(tmp_path.glob("env:*")), "a SQLite file named after the reference was created"


def test_an_unwritable_sqlite_store_is_one_line_before_the_banner(
    tmp_path: Path, busy_port: int
) -> None:
    (tmp_path / "a-file").write_text("")
    result = serve_refused(
        tmp_path,
        "",
        busy_port,
        env={"ORGATE_STORE__URL": f"sqlite:///{tmp_path / 'a-file' / 'orgate.db'}"},
    )
    refused(result, 1, "cannot open the response store", "a-file")


def test_an_unreachable_postgresql_store_is_quick_and_hides_the_password(
    tmp_path: Path, busy_port: int
) -> None:
    started = time.monotonic()
    result = serve_refused(
        tmp_path,
        "",
        busy_port,
        env={"ORGATE_STORE__URL": f"postgresql://orgate:{SECRET}@127.0.0.1:1/orgate"},
    )
    stderr = refused(result, 1, "cannot open the response store", "127.0.0.1:1")
    assert SECRET not in result.stdout + stderr
    # Quick: refused at once, not after retries or a connect timeout. Generous, as the whole
    # start (Python, imports) takes a few seconds on an idle machine and may take a minute on
    # a loaded one, while a retry loop would run into this bound.
    assert time.monotonic() - started < 90


@pytest.mark.skipif(
    not Path("/proc/self").exists(), reason="needs /proc (a directory nothing can be created in)"
)
def test_an_uncreatable_compaction_key_file_is_a_clear_error(
    tmp_path: Path, busy_port: int
) -> None:
    config = (
        "[store]\nenabled = false\n[compaction]\nkey_file = "
        '"/proc/orgate-audit-nope/compaction.key"\n'
    )
    refused(
        serve_refused(tmp_path, config, busy_port),
        2,
        "compaction.key_file /proc/orgate-audit-nope/compaction.key",
        "cannot create it",
    )


def test_a_port_in_use_is_one_line_and_no_banner(tmp_path: Path, busy_port: int) -> None:
    result = orgate(tmp_path, "serve", "--port", str(busy_port))
    refused(result, 1, f"cannot listen on 127.0.0.1:{busy_port}", "in use")


def test_an_unknown_host_is_one_line(tmp_path: Path) -> None:
    result = orgate(tmp_path, "serve", "--host", "no-such-host.invalid", "--port", "1")
    refused(result, 1, "cannot listen on no-such-host.invalid:1", "cannot resolve")


@pytest.mark.parametrize(
    ("config", "env", "fragments"),
    [
        ("[server]\nport = true\n", {}, ["server.port", "not a boolean"]),
        (
            "",
            {"ORGATE_LIMITS__MAX_TOOLS": "true"},
            ["limits.max_tools", "not a boolean", "ORGATE_LIMITS__MAX_TOOLS"],
        ),
        ("[structured]\nretries = false\n", {}, ["structured.retries", "not a boolean"]),
    ],
    ids=["file", "environment", "structured"],
)
def test_a_boolean_is_not_a_number(
    tmp_path: Path, busy_port: int, config: str, env: dict[str, str | None], fragments: list[str]
) -> None:
    refused(serve_refused(tmp_path, config, busy_port, env=env), 2, *fragments)


def test_an_unknown_key_is_refused_with_the_closest_known_one(
    tmp_path: Path, busy_port: int
) -> None:
    stderr = refused(
        serve_refused(tmp_path, "[server]\nprot = 9000\n", busy_port),
        2,
        "orgate.toml",
        "server.prot",
        "unknown key",
        "did you mean `port`?",
    )
    assert "Extra inputs" not in stderr
    refused(
        serve_refused(tmp_path, "", busy_port, env={"ORGATE_SERVER__PROT": "1"}),
        2,
        "server.prot",
        "did you mean `port`?",
        "ORGATE_SERVER__PROT",
    )
    refused(
        serve_refused(
            tmp_path, '[[models]]\nname = "m"\nprovider = "builtin"\ncapabilites = {}\n', busy_port
        ),
        2,
        "models.0.capabilites",
        "did you mean `capabilities`?",
    )


def test_an_api_key_table_error_names_the_entry_without_pydantic_internals(
    tmp_path: Path, busy_port: int
) -> None:
    stderr = refused(
        serve_refused(
            tmp_path, '[auth]\napi_keys = [{ name = "a", key = "k", bogus = 1 }]\n', busy_port
        ),
        2,
        "auth.api_keys.0.bogus: unknown key",
    )
    assert "function-after" not in stderr and ".str:" not in stderr, stderr
    stderr = refused(
        serve_refused(tmp_path, "[auth]\napi_keys = [1]\n", busy_port),
        2,
        "auth.api_keys.0: expected a string or a table",
    )
    assert "function-after" not in stderr, stderr


def test_an_invalid_sha256_key_digest_is_refused(tmp_path: Path, busy_port: int) -> None:
    refused(
        serve_refused(
            tmp_path, '[auth]\napi_keys = [{ name = "a", sha256 = "not-hex" }]\n', busy_port
        ),
        2,
        "auth.api_keys.0",
        "sha256",
        "64 hexadecimal digits",
    )


def test_an_api_key_from_an_unset_variable_is_refused(tmp_path: Path, busy_port: int) -> None:
    config = (
        '[auth]\napi_keys = [{ name = "a", key = "env:ORGATE_AUDIT_TEAM_KEY" }, { name = '
        '"b", key = "env:ORGATE_AUDIT_TEAM_B" }]\n'
    )
    refused(
        serve_refused(tmp_path, config, busy_port, env={"ORGATE_AUDIT_TEAM_B": SECRET}),
        2,
        "auth.api_keys[0]",
        "ORGATE_AUDIT_TEAM_KEY",
        "not set",
    )
    stderr = refused(
        serve_refused(tmp_path, config, busy_port, env={"ORGATE_AUDIT_TEAM_KEY": SECRET}),
        2,
        "auth.api_keys[1]",
        "ORGATE_AUDIT_TEAM_B",
    )
    assert SECRET not in stderr


def test_an_unset_orgate_api_key_reference_still_means_a_generated_key(
    tmp_path: Path, busy_port: int
) -> None:
    # the documented default: `api_keys = ["env:ORGATE_API_KEY"]` without the variable starts
    # (here: up to the busy port)
    result = serve_refused(tmp_path, '[auth]\napi_keys = ["env:ORGATE_API_KEY"]\n', busy_port)
    assert "ORGATE_API_KEY" not in result.stderr, result.stderr
    assert f"cannot listen on 127.0.0.1:{busy_port}" in result.stderr


@pytest.mark.parametrize(
    ("config", "env", "fragments"),
    [
        ("[store]\nttl_days = -1\n", {}, ["store.ttl_days", "greater than 0"]),
        (
            '[[models]]\nname = "m"\nprovider = "openai-chat"\nbase_url = "api.openai.com/v1"\n',
            {},
            ["models.0.base_url", "http://"],
        ),
        ('[[models]]\nname = ""\nprovider = "builtin"\n', {}, ["models.0.name"]),
        (
            "",
            {"ORGATE_SERVER__HOST": ""},
            ["server.host", "must not be empty", "ORGATE_SERVER__HOST"],
        ),
        (
            '[ratelimit]\nredis_url = "env:ORGATE_AUDIT_REDIS"\n',
            {},
            ["ratelimit.redis_url", "ORGATE_AUDIT_REDIS", "not set"],
        ),
    ],
    ids=[
        "negative-ttl",
        "base-url-without-scheme",
        "empty-model-name",
        "empty-host",
        "redis-url-unset",
    ],
)
def test_values_that_would_misbehave_at_run_time_are_refused(
    tmp_path: Path, busy_port: int, config: str, env: dict[str, str | None], fragments: list[str]
) -> None:
    refused(serve_refused(tmp_path, config, busy_port, env=env), 2, *fragments)


def test_a_mistyped_override_variable_is_warned_about(tmp_path: Path, busy_port: int) -> None:
    result = serve_refused(
        tmp_path,
        "",
        busy_port,
        env={
            "ORGATE_SERVER_PORT": "9000",
            "ORGATE_STORE_URL": "x",
            "ORGATE_COMPACTION_SECRET": "y" * 32,
        },
    )
    assert (
        "warning: environment variable ORGATE_SERVER_PORT is not a configuration "
        "override (did you mean ORGATE_SERVER__PORT?)" in result.stderr
    ), result.stderr
    assert (
        "ORGATE_STORE_URL" not in result.stderr and "ORGATE_COMPACTION_SECRET" not in result.stderr
    ), result.stderr


def test_the_override_prefix_is_case_insensitive(tmp_path: Path, busy_port: int) -> None:
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        wanted = other.getsockname()[1]
        path = _write(tmp_path, "orgate.toml", "")
        result = orgate(
            tmp_path,
            "serve",
            "--config",
            path,
            env={"orgate_server__port": str(wanted), "ORGATE_SERVER__PORT": None},
        )
    assert f"cannot listen on 127.0.0.1:{wanted}" in result.stderr, result.stdout + result.stderr


def test_fine_configuration_errors_stay_fine(tmp_path: Path, busy_port: int) -> None:
    """What was already right, pinned: the missing file, TOML syntax with its position, unknown
    provider, duplicate names, a model without base_url, an unset model key (never its value)."""
    refused(
        orgate(tmp_path, "serve", "--config", str(tmp_path / "nope.toml")),
        2,
        "config file not found",
        "nope.toml",
    )
    refused(
        serve_refused(tmp_path, "[server\nport = 1\n", busy_port),
        2,
        "not valid TOML",
        "line 1, column",
    )
    refused(
        serve_refused(
            tmp_path,
            '[[models]]\nname = "m"\nprovider = "opnai"\nbase_url = "http://x"\n',
            busy_port,
        ),
        2,
        "models.0.provider",
        "unknown provider 'opnai'",
    )
    refused(
        serve_refused(tmp_path, '[[models]]\nname = "m"\nprovider = "openai-chat"\n', busy_port),
        2,
        "needs base_url",
    )
    refused(
        serve_refused(
            tmp_path,
            '[[models]]\nname = "m"\nprovider = "builtin"\n[[models]]\nname = '
            '"m"\nprovider = "builtin"\n',
            busy_port,
        ),
        2,
        "'m' is configured twice",
    )
    model = (
        '[[models]]\nname = "m"\nprovider = "openai-chat"\nbase_url = '
        '"http://127.0.0.1:9/v1"\napi_key = "env:ORGATE_AUDIT_MODEL_KEY"\n'
    )
    refused(
        serve_refused(tmp_path, model, busy_port),
        2,
        "models[0] (m): api_key",
        "ORGATE_AUDIT_MODEL_KEY is not set",
    )
    refused(orgate(tmp_path, "serve", "--port", "65536"), 2, "--port 65536")


# --- the running server: port 0, the banner's examples, an env:NAME store, SIGINT -----------------


def _start(
    tmp_path: Path, *args: str, env: dict[str, str | None] | None = None
) -> tuple[subprocess.Popen[bytes], Path]:
    log = tmp_path / "server.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "orgate.cli", "serve", *args],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        cwd=tmp_path,
        env=_environ(tmp_path, env),
    )
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        if proc.poll() is not None:
            raise AssertionError(f"orgate exited with {proc.returncode}:\n{text}")
        if "Application startup complete" in text:
            return proc, log
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"orgate did not start:\n{log.read_text(errors='replace')}")


def _stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> int:
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        return proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def test_port_zero_the_banner_examples_and_sigint(tmp_path: Path) -> None:
    """No config, no key: the banner shows the port really taken and a generated key; its curl
    and SDK examples work when pasted; Ctrl-C exits 0."""
    proc, log = _start(tmp_path, "--port", "0")
    try:
        banner = log.read_text()
        url = re.search(r"URL:\s+(http://127\.0\.0\.1:(\d+))/v1", banner)
        assert url and url.group(2) != "0", banner
        assert httpx.get(f"{url.group(1)}/healthz", timeout=5).json() == {"status": "ok"}
        key = re.search(r"API key:\s+(sk-orgate-\S+)\s+\(generated", banner)
        assert key, banner
        models = httpx.get(
            f"{url.group(1)}/v1/models",
            headers={"Authorization": f"Bearer {key.group(1)}"},
            timeout=5,
        ).json()
        assert {"orgate/echo", "orgate/flaky"} <= {m["id"] for m in models["data"]}
        curl = re.search(r"^  (curl .+?)\n\n", banner, re.MULTILINE | re.DOTALL)
        assert curl, banner
        if shutil.which("curl"):
            pasted = subprocess.run(
                ["bash", "-c", curl.group(1) + " -sS"], capture_output=True, text=True, timeout=30
            )
            assert (
                pasted.returncode == 0
                and json.loads(pasted.stdout)["output"][0]["content"][0]["text"] == "Hello!"
            ), pasted
        sdk = re.search(r"^\s*python -c '(.+)'$", banner, re.MULTILINE)
        assert sdk, banner
        pasted = subprocess.run(
            [sys.executable, "-c", sdk.group(1)],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=REPO,
        )
        assert pasted.returncode == 0 and pasted.stdout.strip() == "Hello!", pasted.stderr
    finally:
        status = _stop(proc, signal.SIGINT)
    assert status == 0, log.read_text()
    assert "Traceback" not in log.read_text()


def test_a_store_url_from_the_environment_is_the_store_used(tmp_path: Path) -> None:
    """``[store] url = "env:NAME"`` (docs/deployment.md) opens the database the variable names;
    ``orgate store stats --config`` reads the same one. SIGTERM exits 0."""
    db = tmp_path / "real.db"
    config = _write(tmp_path, "orgate.toml", '[store]\nurl = "env:ORGATE_AUDIT_STORE_URL"\n')
    env = {
        "ORGATE_AUDIT_STORE_URL": f"sqlite:///{db}",
        "ORGATE_STORE__URL": None,
        "ORGATE_API_KEY": "k",
    }
    proc, log = _start(tmp_path, "--config", config, "--port", "0", env=env)
    try:
        url = re.search(r"URL:\s+(http://127\.0\.0\.1:\d+)/v1", log.read_text())
        assert url, log.read_text()
        created = httpx.post(
            f"{url.group(1)}/v1/responses",
            headers={"Authorization": "Bearer k"},
            json={"model": "orgate/echo", "input": "hi"},
            timeout=10,
        )
        assert created.status_code == 200, created.text
        stats = orgate(tmp_path, "store", "stats", "--config", config, "--json", env=env)
        assert stats.returncode == 0, stats.stderr
        report = json.loads(stats.stdout)
        assert report["responses"] == 1 and report["location"].endswith("real.db"), report
    finally:
        status = _stop(proc)
    assert status == 0, log.read_text()
    assert db.exists() and not list(tmp_path.glob("env:*"))


async def _create_store(url: str) -> None:
    from orgate.store import open_store

    store = await open_store(url, heartbeat_interval=0)
    await store.close()


def test_store_commands_follow_the_configuration(tmp_path: Path) -> None:
    """``orgate store`` without --url looks where ``serve`` would ($ORGATE_CONFIG, --config)."""
    config = _write(
        tmp_path, "orgate.toml", f'[store]\nurl = "sqlite:///{tmp_path / "configured.db"}"\n'
    )
    env = {"ORGATE_STORE__URL": None, "ORGATE_CONFIG": config}
    result = orgate(tmp_path, "store", "stats", "--json", env=env)
    refused(result, 1, "no response store at", "configured.db")  # reading creates nothing
    assert not (tmp_path / "configured.db").exists()
    asyncio.run(_create_store(f"sqlite:///{tmp_path / 'configured.db'}"))
    result = orgate(tmp_path, "store", "stats", "--json", env=env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["location"].endswith("configured.db")
    result = orgate(tmp_path, "store", "prune", "--older-than", "1d", env=env)
    assert result.returncode == 0 and "configured.db" in result.stdout, (
        result.stdout + result.stderr
    )
    bad = _write(tmp_path, "bad.toml", "[store]\nurll = 1\n")
    result = orgate(tmp_path, "store", "stats", "--config", bad)
    refused(result, 2, "store.urll", "unknown key")
    result = orgate(tmp_path, "store", "stats", "--url", "mysql://x")
    refused(result, 1, "unsupported store URL scheme")


@pytest.mark.skipif(
    not os.environ.get("ORGATE_TEST_PG_URL"),
    reason='ORGATE_TEST_PG_URL is unset: run `eval "$(.ci/postgres.sh)"` to test PostgreSQL',
)
def test_store_commands_on_postgresql_with_the_server_running(tmp_path: Path) -> None:
    pg = os.environ["ORGATE_TEST_PG_URL"]
    env = {"ORGATE_STORE__URL": pg, "ORGATE_API_KEY": "k"}
    proc, log = _start(tmp_path, "--port", "0", env=env)
    try:
        url = re.search(r"URL:\s+(http://127\.0\.0\.1:\d+)/v1", log.read_text())
        assert url
        assert (
            httpx.post(
                f"{url.group(1)}/v1/responses",
                headers={"Authorization": "Bearer k"},
                json={"model": "orgate/echo", "input": "hi"},
                timeout=10,
            ).status_code
            == 200
        )
        stats = orgate(tmp_path, "store", "stats", "--json", env=env)
        assert stats.returncode == 0, stats.stderr
        report = json.loads(stats.stdout)
        assert report["backend"] == "postgresql" and report["responses"] >= 1
        password = re.search(r"://[^:/]+:([^@]+)@", pg)
        if password:
            assert f":{password.group(1)}@" not in stats.stdout and ":***@" in report["location"], (
                report
            )
        pruned = orgate(tmp_path, "store", "prune", "--older-than", "52w", env=env)
        assert pruned.returncode == 0 and "deleted" in pruned.stdout, pruned.stderr
    finally:
        assert _stop(proc) == 0


# --- the other commands ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    ["", "serve", "gate", "diff", "store prune", "schema strictify", "review resolve", "eval"],
)
def test_every_command_has_help(tmp_path: Path, command: str) -> None:
    result = orgate(tmp_path, *command.split(), "--help")
    assert result.returncode == 0 and result.stdout.startswith("usage: orgate"), result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["bogus"],
        ["gate"],
        ["gate", "a", "b"],
        ["store", "prune", "--older-than", "7x"],
        ["review", "list", "--limit", "x"],
        ["eval", "x.yaml"],
    ],
)
def test_wrong_arguments_are_usage_errors(tmp_path: Path, args: list[str]) -> None:
    result = orgate(tmp_path, *args)
    assert (
        result.returncode == 2 and "usage:" in result.stderr and "Traceback" not in result.stderr
    ), result.stderr


CALL = {
    "type": "function_call",
    "call_id": "c1",
    "name": "f",
    "arguments": "{}",
    "status": "completed",
}
TOOLS = [
    {
        "type": "function",
        "name": "f",
        "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
    }
]


def test_gate_and_schema_accept_a_byte_order_mark_and_crlf(tmp_path: Path) -> None:
    tools = _write(tmp_path, "tools.json", json.dumps(TOOLS))
    log = _write(
        tmp_path,
        "log.jsonl",
        b"\xef\xbb\xbf"
        + json.dumps(CALL).encode()
        + b"\r\n"
        + json.dumps({"type": "function_call_output", "call_id": "c1", "output": "x"}).encode()
        + b"\r\n",
    )
    result = orgate(tmp_path, "gate", log, "--tools", tools, "--json", "-q")
    assert result.returncode == 0, result.stderr
    assert [json.loads(line)["code"] for line in result.stdout.splitlines()] == [
        "ok",
        "not_function_call",
    ]
    schema = _write(
        tmp_path, "schema.json", b"\xef\xbb\xbf" + json.dumps(TOOLS[0]["parameters"]).encode()
    )
    result = orgate(tmp_path, "schema", "check", schema)
    assert result.returncode == 0 and "no violations" in result.stdout, result.stderr
    result = orgate(
        tmp_path,
        "schema",
        "check",
        "-",
        stdin=b"\xef\xbb\xbf" + json.dumps(TOOLS[0]["parameters"]).encode(),
    )
    assert result.returncode == 0, result.stderr


def test_gate_exit_statuses_and_json_output(tmp_path: Path) -> None:
    tools = _write(tmp_path, "tools.json", json.dumps(TOOLS))
    bad_call = {**CALL, "call_id": "c2", "arguments": "{oops"}
    log = _write(
        tmp_path, "log.jsonl", "\n".join(json.dumps(item) for item in (CALL, bad_call)) + "\n"
    )
    result = orgate(tmp_path, "gate", log, "--tools", tools, "--json", "-q")
    assert result.returncode == 1 and result.stderr == ""
    assert [json.loads(line)["code"] for line in result.stdout.splitlines()] == [
        "ok",
        "arguments_parse",
    ]
    result = orgate(tmp_path, "diff", log, log, "--json")
    assert result.returncode == 0 and json.loads(result.stdout)["verdict"] == "ok"
    empty = _write(tmp_path, "empty.jsonl", "")
    assert orgate(tmp_path, "gate", empty).returncode == 0
    for missing in (
        ["gate", str(tmp_path / "nope.jsonl")],
        ["gate", log, "--tools", str(tmp_path / "nope.json")],
        ["diff", log, str(tmp_path / "nope.json")],
    ):
        result = orgate(tmp_path, *missing)
        assert (
            result.returncode == 2
            and "cannot read" in result.stderr
            and "Traceback" not in result.stderr
        ), result.stderr


def test_a_malformed_json_lines_line_is_named_by_its_line_number(tmp_path: Path) -> None:
    log = _write(
        tmp_path, "log.jsonl", json.dumps(CALL) + '\n{"type": "message"\n' + json.dumps(CALL) + "\n"
    )
    result = orgate(tmp_path, "gate", log)
    assert result.returncode == 2 and "log.jsonl:2: invalid JSON" in result.stderr, result.stderr
    assert "line 2 column" not in result.stderr, (
        result.stderr
    )  # orjson's position inside the line, not the file's
    cases = _write(tmp_path, "cases.jsonl", '{"name": "a"}\n{oops\n')
    result = orgate(tmp_path, "eval", cases, "--model", "orgate/echo", "-q")
    assert result.returncode == 2 and "cases.jsonl: line 2: invalid JSON" in result.stderr, (
        result.stderr
    )
    assert result.stderr.count("\n") == 1, result.stderr  # one line, not wrapped at 80 columns


def test_gate_streams_a_huge_line(tmp_path: Path) -> None:
    call = {**CALL, "arguments": json.dumps({"blob": "x" * 8_000_000})}
    tools = [
        {
            "type": "function",
            "name": "f",
            "parameters": {"type": "object", "properties": {"blob": {"type": "string"}}},
        }
    ]
    log = _write(tmp_path, "huge.jsonl", json.dumps(call) + "\n")
    result = orgate(
        tmp_path,
        "gate",
        log,
        "--tools",
        _write(tmp_path, "tools.json", json.dumps(tools)),
        "--json",
        "-q",
    )
    assert result.returncode == 0 and json.loads(result.stdout)["code"] == "ok", result.stderr


def test_review_with_an_unopenable_queue_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    result = orgate(tmp_path, "review", "list", "--db", str(tmp_path / "a-file" / "review.db"))
    assert (
        result.returncode == 1
        and "no review queue at" in result.stderr
        and "Traceback" not in result.stderr
    ), result.stderr
    (tmp_path / "not-a-db").write_text("hello, I am text\n" * 100)
    result = orgate(tmp_path, "review", "list", "--db", str(tmp_path / "not-a-db"))
    assert (
        result.returncode == 1
        and "cannot open the review queue" in result.stderr
        and "Traceback" not in result.stderr
    ), result.stderr
    result = orgate(tmp_path, "review", "list", "--db", str(tmp_path / "review.db"), "--json")
    assert (
        result.returncode == 1 and "no review queue at" in result.stderr
    )  # a mistyped --db is not an empty queue
    assert not (tmp_path / "review.db").exists()
    result = orgate(
        tmp_path, "review", "list", "--json", env={"XDG_DATA_HOME": str(tmp_path / "data")}
    )
    assert (
        result.returncode == 0 and json.loads(result.stdout) == []
    )  # the default queue, not created yet
    assert not (tmp_path / "data").exists()
