"""The start-up surface, black-box: `orgate serve` errors, environment overrides,
the banner's examples."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from orgate.config import ConfigError, load_settings, resolve_api_keys
from tests.server_process import REPO, OrgateServer

MODEL = (
    '[[models]]\nname = "m"\nprovider = "openai-chat"\nbase_url = '
    '"http://127.0.0.1:9/v1"\napi_key = "env:ORGATE_AUDIT_UNSET"\n'
)


def _serve(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `orgate serve` expecting it to refuse to start (it never gets to listen)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ORGATE_")}
    environ.update({"ORGATE_STORE__URL": f"sqlite:///{tmp_path / 'orgate.db'}", **(env or {})})
    return subprocess.run(
        [sys.executable, "-m", "orgate.cli", "serve", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=environ,
        timeout=30,
    )


def _refused(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr


# --- an unreadable config file is a message, not a traceback --------------------------------------


def test_a_directory_as_config_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    _refused(_serve(tmp_path, "--config", "conf"), "orgate: ", "is a directory")


def test_a_config_file_that_is_not_utf8_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "bin.toml").write_bytes(b"\xff\xfe[server]\n")
    _refused(_serve(tmp_path, "--config", "bin.toml"), "not valid TOML", "UTF-8")


def test_an_unreadable_config_file_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "orgate.toml"
    path.write_text("[server]\n")

    def denied(self: Path, *args: object, **kwargs: object) -> str:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_text", denied)
    with pytest.raises(ConfigError, match="cannot read config file .*permission denied"):
        load_settings(path, environ={})


# --- --port / --host are validated like [server] --------------------------------------------------


@pytest.mark.parametrize("port", ["70000", "-1"])
def test_an_out_of_range_port_on_the_command_line_is_refused(tmp_path: Path, port: str) -> None:
    _refused(_serve(tmp_path, f"--port={port}"), "--port", port)


# --- a configured model may not take a built-in model's name -------------------------------------


def test_a_configured_model_named_like_a_builtin_one_is_refused(tmp_path: Path) -> None:
    (tmp_path / "orgate.toml").write_text(
        '[[models]]\nname = "orgate/echo"\nprovider = "openai-chat"\nbase_url = "http://x/v1"\n'
    )
    _refused(_serve(tmp_path, "--config", "orgate.toml"), "'orgate/echo'", "built-in")
    # with the built-in models switched off, the name is free
    settings = load_settings(tmp_path / "orgate.toml", environ={"ORGATE_BUILTIN__ENABLED": "false"})
    assert [m.name for m in settings.models] == ["orgate/echo"]


# --- environment overrides ------------------------------------------------------------------------


def test_an_environment_error_names_the_variable(tmp_path: Path) -> None:
    _refused(_serve(tmp_path, env={"ORGATE_SERVR__PORT": "9000"}), "ORGATE_SERVR__PORT")
    _refused(
        _serve(tmp_path, env={"ORGATE_SERVER__PORT": "99999"}), "server.port", "ORGATE_SERVER__PORT"
    )


def test_numeric_environment_values_of_string_keys_are_kept_as_strings(tmp_path: Path) -> None:
    secret = "1234567890123456789012345678901234567890"
    settings = load_settings(
        None, environ={"ORGATE_COMPACTION__SECRET": secret, "ORGATE_SESSIONS__HEADER": "2024-01-01"}
    )
    assert settings.compaction.secret == secret
    assert settings.sessions.header == "2024-01-01"  # TOML would read a date
    settings = load_settings(None, environ={"ORGATE_AUTH__API_KEYS": "123456"})
    assert settings.auth.api_keys == ["123456"]


def test_a_list_of_keys_from_the_environment(tmp_path: Path) -> None:
    # several keys are tables with names (a plain key's tenant would be its position)
    raw = '[{"name": "a", "key": "k1"}, {"name": "b", "key": "k2"}]'
    settings = load_settings(None, environ={"ORGATE_AUTH__API_KEYS": raw})
    keys = {key.secret: key.tenant for key in resolve_api_keys(settings, environ={})}
    assert keys == {b"k1": "a", b"k2": "b"}
    for raw in ('["k1", "k2"]', "k1,k2", "k1, k2"):
        with pytest.raises(ConfigError, match="plain key is accepted only as the only entry"):
            load_settings(None, environ={"ORGATE_AUTH__API_KEYS": raw})


def test_a_model_entry_is_overridden_by_its_index(tmp_path: Path) -> None:
    path = tmp_path / "orgate.toml"
    path.write_text(MODEL)
    settings = load_settings(
        path,
        environ={
            "ORGATE_MODELS__0__API_KEY": "sk-x",
            "ORGATE_MODELS__0__CAPABILITIES__TOOLS": "false",
        },
    )
    assert len(settings.models) == 1
    assert settings.models[0].name == "m" and settings.models[0].api_key == "sk-x"
    assert settings.models[0].capabilities.tools is False
    with pytest.raises(ConfigError, match="ORGATE_MODELS__1__API_KEY"):
        load_settings(path, environ={"ORGATE_MODELS__1__API_KEY": "sk-x"})
    with pytest.raises(ConfigError, match="ORGATE_MODELS__0__API_KEY"):
        load_settings(None, environ={"ORGATE_MODELS__0__API_KEY": "sk-x"})


def test_a_model_override_serves(tmp_path: Path) -> None:
    # the file's api_key names an unset variable; the environment override replaces it
    (tmp_path / "orgate.toml").write_text(MODEL)
    _refused(_serve(tmp_path, "--config", "orgate.toml"), "ORGATE_AUDIT_UNSET")
    with OrgateServer(MODEL, env={"ORGATE_MODELS__0__API_KEY": "sk-x"}) as running:
        import httpx

        listed = httpx.get(f"{running.base_url}/models", headers=running.headers()).json()
        assert {"m", "orgate/echo"} <= {entry["id"] for entry in listed["data"]}


# --- the banner's examples work when pasted -------------------------------------------------------


def _sdk_example(output: str) -> str:
    match = re.search(r"^\s*python -c '(.+)'$", output, re.MULTILINE)
    assert match, output
    return match.group(1)


def test_the_banners_sdk_example_works_with_a_key_from_the_environment() -> None:
    with OrgateServer("", api_key="sk-from-env") as running:
        code = _sdk_example(running.output())
        assert "$ORGATE_API_KEY" not in code  # single quotes: the shell would not expand it
        env = {**os.environ, "ORGATE_API_KEY": "sk-from-env"}
        result = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            cwd=REPO,
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == "Hello!"


def test_the_banner_url_of_an_ipv6_address_is_bracketed() -> None:
    from orgate.cli import _banner_url

    settings = load_settings(
        None, environ={"ORGATE_SERVER__HOST": "::1", "ORGATE_SERVER__PORT": "9000"}
    )
    assert _banner_url(settings) == "http://[::1]:9000"
    settings = load_settings(
        None, environ={"ORGATE_SERVER__PUBLIC_URL": "https://llm.example.com/"}
    )
    assert _banner_url(settings) == "https://llm.example.com"
