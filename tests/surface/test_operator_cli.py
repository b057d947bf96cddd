"""The command line as an operator meets it, black-box: machine-readable JSON logs, upstream
failures in the log, ``init`` / ``config check``, one error format, tables for people and tabs
for pipes, help on every option, shell completion, integers as integers.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import select
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from orgate.cli import build_parser
from orgate.terminal import table
from tests.server_process import REPO, START_TIMEOUT, OrgateServer, bound_port
from tests.support.ports import closed_port, listening_socket, port_of
from tests.support.waiting import wait_until
from tests.surface.test_files_and_permissions import clean_env

SECRET = "sk-literal-not-to-be-printed"


def orgate(
    tmp_path: Path, *args: str, env: dict[str, str | None] | None = None
) -> subprocess.CompletedProcess[str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "orgate.cli", *args],
        cwd=tmp_path,
        env=clean_env(home, env),
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def dead_port() -> Iterator[int]:
    """A loopback port where connections are refused, for as long as the test runs."""
    with closed_port() as port:
        yield port


def dead_port_model(port: int, name: str = "dead") -> str:
    return (
        f'[[models]]\nname = "{name}"\nprovider = "openai-chat"\nbase_url = '
        f'"http://127.0.0.1:{port}/v1"\n'
    )


# --- logs ----------------------------------------------------------------------------------------


def test_json_logs_are_json_on_every_line_and_upstream_failures_are_logged(
    tmp_path: Path, dead_port: int
) -> None:
    server = OrgateServer(dead_port_model(dead_port), workdir=str(tmp_path))
    log_path = tmp_path / "out.log"
    with log_path.open("wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "orgate.cli",
                "serve",
                "--config",
                str(server.config_path),
                "--port",
                "0",
                "--log-format",
                "json",
            ],
            cwd=tmp_path,
            env=server.env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )

    def answers() -> bool:
        assert proc.poll() is None, log_path.read_text()
        port = bound_port(log_path.read_text(errors="replace"))
        try:
            return bool(port) and httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200
        except httpx.HTTPError:
            return False

    try:
        assert wait_until(answers, START_TIMEOUT), log_path.read_text()
        port = bound_port(log_path.read_text())
        reply = httpx.post(
            f"http://127.0.0.1:{port}/v1/responses",
            json={"model": "dead", "input": "hi"},
            headers=server.headers(),
            timeout=60,
        )
        assert reply.status_code >= 500, reply.text
        request_id = reply.headers["x-request-id"]
    finally:
        proc.terminate()
        proc.wait(30)
    lines = [line for line in log_path.read_text().splitlines() if line.strip()]
    records = []
    for line in lines:
        records.append(json.loads(line))  # every line, the banner's place included, is JSON
    start = [r for r in records if r.get("event") == "start"]
    assert (
        len(start) == 1
        and start[0]["url"] == f"http://127.0.0.1:{port}/v1"
        and "dead" in start[0]["models"]
    ), records
    failures = [r for r in records if r.get("event") == "upstream_error"]
    assert failures, records
    failure = failures[0]
    assert (
        failure["level"] == "warning"
        and failure["model"] == "dead"
        and failure["deployment"] == "dead"
    ), failure
    assert failure["request_id"] == request_id and failure["status"] == reply.status_code, failure


def test_log_level_and_format_flags_override_the_configuration(tmp_path: Path) -> None:
    with socket_busy() as port:
        result = orgate(
            tmp_path, "serve", "--port", str(port), "--log-format", "json", "--log-level", "warning"
        )
    assert result.returncode == 1
    lines = [
        json.loads(line) for line in (result.stdout + result.stderr).splitlines() if line.strip()
    ]
    assert lines and all(r["level"] in ("warning", "error") for r in lines), lines
    assert (
        lines[-1]["event"] == "start_refused"
        and f"cannot listen on 127.0.0.1:{port}" in lines[-1]["msg"]
    )
    result = orgate(tmp_path, "serve", "--log-level", "loud")
    assert (
        result.returncode == 2
        and "--log-level" in result.stderr
        and "invalid choice" in result.stderr
    )


@contextlib.contextmanager
def socket_busy() -> Iterator[int]:
    """A loopback port something else listens on."""
    with listening_socket() as sock:
        yield port_of(sock)


def test_an_upstream_failure_is_a_warning_in_the_text_log(tmp_path: Path, dead_port: int) -> None:
    with OrgateServer(dead_port_model(dead_port, "gone")) as server:
        reply = httpx.post(
            f"{server.base_url}/responses",
            json={"model": "gone", "input": "hi"},
            headers=server.headers(),
            timeout=60,
        )
        request_id = reply.headers["x-request-id"]
    warnings = [
        line for line in server.output().splitlines() if " WARNING orgate.upstream: " in line
    ]
    assert (
        warnings
        and "upstream gone failed" in warnings[0]
        and f"request_id={request_id}" in warnings[0]
    ), server.output()
    assert (
        "model=gone" in warnings[0]
        and "deployment=gone" in warnings[0]
        and f"failed: {reply.status_code} " in warnings[0]
    )


def test_chat_completions_off_answers_404_with_how_to_turn_it_on(tmp_path: Path) -> None:
    with OrgateServer("") as server:
        reply = httpx.post(
            f"{server.base_url}/chat/completions",
            json={"model": "orgate/echo", "messages": []},
            headers=server.headers(),
            timeout=30,
        )
    assert reply.status_code == 404
    message = reply.json()["error"]["message"]
    assert (
        "chat_completions = { enabled = true }" in message
        and "ORGATE_ENDPOINTS__CHAT_COMPLETIONS__ENABLED" in message
    )


def test_the_chat_start_up_warning_does_not_deny_logprobs() -> None:
    from orgate.legacy_chat import STARTUP_WARNING

    assert "logprobs" not in STARTUP_WARNING  # they are translated (docs/chat-completions.md)


# --- init and config check -----------------------------------------------------------------------


def test_init_writes_a_config_that_checks_and_serves(tmp_path: Path) -> None:
    result = orgate(tmp_path, "init", "--provider", "openai", "--provider", "anthropic")
    assert result.returncode == 0, result
    path = tmp_path / "orgate.toml"
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    text = path.read_text()
    assert (
        text.startswith("# orgate configuration")
        and 'api_key = "env:OPENAI_API_KEY"' in text
        and "claude" in text
    )
    again = orgate(tmp_path, "init")
    assert (
        again.returncode == 1
        and again.stderr.startswith("orgate: error: ")
        and "--force" in again.stderr
    )
    check = orgate(
        tmp_path,
        "config",
        "check",
        str(path),
        env={"OPENAI_API_KEY": "sk-from-env", "ANTHROPIC_API_KEY": "x"},
    )
    assert check.returncode == 0, check
    resolved = json.loads(check.stdout)
    assert [m["name"] for m in resolved["models"]] == ["gpt-4o-mini", "claude-sonnet"]
    assert "is valid" in check.stderr and "warning" not in check.stderr


def test_config_check_masks_secrets_and_warns_on_literal_ones(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text(
        f'[auth]\napi_keys = [{{ name = "a", key = "{SECRET}" }}, {{ name = "b", key = '
        f'"env:ORGATE_API_KEY" }}]\n'
        f'[store]\nurl = "postgresql://app:{SECRET}@db/orgate"\n'
        '[[models]]\nname = "m"\nprovider = "openai-chat"\nbase_url = '
        f'"http://127.0.0.1:9/v1"\napi_key = "{SECRET}"\n'
    )
    result = orgate(tmp_path, "config", "check", str(config))
    assert result.returncode == 0, result
    assert SECRET not in result.stdout + result.stderr
    for where in ("auth.api_keys[0].key", "store.url", "models[0].api_key"):
        assert f"orgate: warning: {where} in {config} is a literal secret" in result.stderr, (
            result.stderr
        )
    resolved = json.loads(result.stdout)
    assert (
        resolved["models"][0]["api_key"] == "***"
        and resolved["store"]["url"] == "postgresql://app:***@db/orgate"
    )
    assert [k["key"] for k in resolved["auth"]["api_keys"]] == ["***", "env:ORGATE_API_KEY"]


def test_config_check_reports_an_invalid_file_like_serve(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text("[server]\nprot = 1\n")
    result = orgate(tmp_path, "config", "check", str(config))
    assert result.returncode == 2 and result.stderr.startswith(
        "orgate: error: invalid configuration in"
    )
    assert "did you mean `port`?" in result.stderr
    result = orgate(tmp_path, "config", "check", str(config), env={"ORGATE_CONFIG": None})
    unset = tmp_path / "u.toml"
    unset.write_text(
        '[[models]]\nname = "m"\nprovider = "openai-chat"\nbase_url = '
        '"http://x/v1"\napi_key = "env:ORGATE_TEST_UNSET_KEY"\n'
    )
    result = orgate(tmp_path, "config", "check", str(unset))
    assert result.returncode == 2 and "ORGATE_TEST_UNSET_KEY" in result.stderr, result


def test_serve_warns_about_a_literal_secret_at_start_up(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text(
        '[[models]]\nname = "m"\nprovider = "openai-chat"\nbase_url = '
        f'"http://127.0.0.1:9/v1"\napi_key = "{SECRET}"\n'
    )
    with socket_busy() as port:
        result = orgate(tmp_path, "serve", "--config", str(config), "--port", str(port))
    assert f"orgate: warning: models[0].api_key in {config} is a literal secret" in result.stderr, (
        result.stderr
    )
    assert SECRET not in result.stderr + result.stdout


# --- one error format, tables, help, completion ---------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["schema", "check", "missing.json"],
        ["schema", "strictify", "missing.json"],
        ["eval", "missing.yaml", "--model", "orgate/flaky"],
        [
            "eval",
            str(REPO / "examples" / "eval" / "cases.yaml"),
            "--model",
            "orgate/flaky",
            "--misbehave",
            "truncate=2",
        ],
        ["review", "show", "rev_missing"],
        ["store", "stats", "--url", "sqlite:///nowhere/x.db"],
        ["gate", "missing.json"],
        ["config", "check", "missing.toml"],
        ["serve", "--config", "missing.toml"],
    ],
    ids=lambda a: " ".join(a[:2]),
)
def test_every_command_reports_errors_in_one_format(tmp_path: Path, args: list[str]) -> None:
    result = orgate(tmp_path, *args)
    assert result.returncode in (1, 2), result
    assert result.stderr.startswith("orgate: error: "), result.stderr
    assert (
        "Traceback" not in result.stderr
        and "pydantic" not in result.stderr
        and "https://" not in result.stderr
    )


def test_a_bad_misbehave_value_is_one_plain_line(tmp_path: Path) -> None:
    cases = str(REPO / "examples" / "eval" / "cases.yaml")
    result = orgate(tmp_path, "eval", cases, "--model", "orgate/flaky", "--misbehave", "truncate=2")
    assert (
        result.stderr
        == "orgate: error: --misbehave 'truncate=2': truncate: Input should be less than "
        "or equal to 1\n"
    )
    result = orgate(
        tmp_path, "eval", cases, "--model", "orgate/flaky", "--misbehave", "truncate=often"
    )
    assert (
        result.stderr
        == "orgate: error: --misbehave 'truncate=often': truncate must be a number from 0 to 1\n"
    )


def test_eval_json_counts_are_integers(tmp_path: Path) -> None:
    result = orgate(
        tmp_path,
        "eval",
        str(REPO / "examples" / "eval" / "cases.yaml"),
        "--model",
        "orgate/flaky",
        "--json",
        "-q",
    )
    assert result.returncode in (0, 1), result
    counts = json.loads(result.stdout)["report"]["counts"]
    assert counts and all(type(value) is int for value in counts.values()), counts


def test_strictify_writes_what_it_fixed_and_reports_the_rest(tmp_path: Path) -> None:
    schema = tmp_path / "s.json"
    schema.write_text(
        json.dumps(
            {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "array"}}}
        )
    )
    strict = tmp_path / "strict.json"
    with strict.open("w") as out:
        result = subprocess.run(
            [sys.executable, "-m", "orgate.cli", "schema", "strictify", str(schema)],
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
            env=clean_env(tmp_path),
        )
    assert result.returncode == 1
    written = json.loads(strict.read_text())
    assert written["additionalProperties"] is False and written["required"] == ["a", "b"]
    assert result.stderr.startswith("orgate: error: fixed ") and "/properties/b" in result.stderr


def _every_option(
    parser: argparse.ArgumentParser, path: str = "orgate"
) -> list[tuple[str, argparse.Action]]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found += _every_option(child, f"{path} {name}")
        elif not isinstance(action, argparse._HelpAction):
            found.append((path, action))
    return found


def test_every_option_and_argument_has_help() -> None:
    missing = [
        f"{path} {'/'.join(a.option_strings) or a.dest}"
        for path, a in _every_option(build_parser())
        if not a.help
    ]
    assert missing == []


def test_tables_are_aligned_on_a_terminal_and_tab_separated_in_a_pipe() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    rows = [("rev_1", "pending", "gpt"), ("rev_22", "resolved", "claude-sonnet")]
    tty = Tty()
    table(rows, ("ID", "STATUS", "MODEL"), tty)
    assert tty.getvalue().splitlines() == [
        "ID      STATUS    MODEL",
        "rev_1   pending   gpt",
        "rev_22  resolved  claude-sonnet",
    ]
    pipe = io.StringIO()
    table(rows, ("ID", "STATUS", "MODEL"), pipe)
    assert pipe.getvalue() == "rev_1\tpending\tgpt\nrev_22\tresolved\tclaude-sonnet\n"


def _on_a_terminal(tmp_path: Path, *args: str) -> str:
    main, side = os.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "orgate.cli", *args],
        cwd=tmp_path,
        env=clean_env(tmp_path),
        stdout=side,
        stderr=side,
    )
    os.close(side)
    seen = b""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if select.select([main], [], [], 0.5)[0]:
            try:
                chunk = os.read(main, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    proc.wait(30)
    os.close(main)
    return seen.decode(errors="replace").replace("\r\n", "\n")


def test_gate_rows_are_aligned_on_a_terminal(tmp_path: Path) -> None:
    items = tmp_path / "items.json"
    items.write_text(
        json.dumps(
            [
                {"type": "message", "id": "m1", "role": "user", "content": "hi"},
                {
                    "type": "function_call",
                    "id": "fc_long_id",
                    "call_id": "c1",
                    "name": "f",
                    "arguments": "{}",
                },
            ]
        )
    )
    shown = _on_a_terminal(tmp_path, "gate", str(items))
    rows = [line for line in shown.splitlines() if line.startswith(("index", "0 ", "1 "))]
    assert len(rows) == 3 and "\t" not in shown, shown
    plain = [
        line.replace("\x1b[32m", "").replace("\x1b[2m", "").replace("\x1b[0m", "") for line in rows
    ]
    assert (
        len({line.index("call_id") if i == 0 else None for i, line in enumerate(plain)} - {None})
        == 1
    )
    assert plain[0].index("call_id") == plain[2].index("c1"), plain
    piped = orgate(tmp_path, "gate", str(items))
    assert piped.stdout.splitlines()[1].split("\t")[:3] == ["0", "m1", "-"]


def test_review_list_has_a_header_on_a_terminal(tmp_path: Path) -> None:
    from orgate.structured.review import NewReview, ReviewQueue

    db = tmp_path / "r.db"
    ReviewQueue(db).add(
        NewReview(
            model="m",
            format_name="f",
            mode="strict",
            stage="schema",
            errors=["bad"],
            schema={},
            request={},
            attempts=[],
        )
    )
    shown = _on_a_terminal(tmp_path, "review", "list", "--db", str(db))
    assert shown.splitlines()[0].split() == [
        "ID",
        "CREATED",
        "STATUS",
        "TENANT",
        "MODEL",
        "FORMAT",
        "STAGE",
        "FIRST",
        "ERROR",
    ], shown
    piped = orgate(tmp_path, "review", "list", "--db", str(db))
    assert len(piped.stdout.splitlines()) == 1 and piped.stdout.count("\t") == 7


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_completion_completes_commands_and_options(tmp_path: Path) -> None:
    script = orgate(tmp_path, "completion", "bash")
    assert script.returncode == 0, script
    (tmp_path / "c.bash").write_text(script.stdout)

    def complete(*words: str) -> list[str]:
        line = " ".join(f"'{w}'" for w in ("orgate", *words))
        probe = (
            f"source {tmp_path / 'c.bash'}; COMP_WORDS=({line}); COMP_CWORD={len(words)}; "
            f'_orgate; printf "%s\\n" "${{COMPREPLY[@]}}"'
        )
        return subprocess.run(
            ["bash", "-c", probe], capture_output=True, text=True, check=True
        ).stdout.split()

    assert complete("st") == ["store"]
    assert complete("store", "p") == ["prune"]
    assert set(complete("store", "prune", "--")) >= {"--dry-run", "--yes", "--older-than", "--url"}
    assert "--log-format" in complete("serve", "--log-")
    assert set(complete("completion", "")) >= {"bash", "zsh", "fish"}
    for shell in ("zsh", "fish"):
        other = orgate(tmp_path, "completion", shell)
        assert other.returncode == 0 and "serve" in other.stdout
