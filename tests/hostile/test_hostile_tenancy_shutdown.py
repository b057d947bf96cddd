"""Tenancy and shutdown, replayed against a real ``orgate serve``: a key's tenant is the name
the configuration gives it, the review queue is per tenant, and SIGTERM lets background and
WebSocket responses finish (or stores them as stopped by the server)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.server_process import REPO

LITERAL = "sk-hostile-literal-never-printed"


def _serve(tmp_path: Path, config: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``orgate serve`` with ``config``: expected to stop before it listens (a configuration error)."""
    path = tmp_path / "orgate.toml"
    path.write_text(config)
    return subprocess.run(
        [sys.executable, "-m", "orgate.cli", "serve", "--config", str(path), "--port", "0"],
        capture_output=True, text=True, timeout=120, cwd=REPO,
        env={"PATH": "/usr/bin:/bin", "ORGATE_STORE__URL": f"sqlite:///{tmp_path / 'orgate.db'}", **(env or {})},
    )


def _refused(result: subprocess.CompletedProcess[str], *fragments: str) -> str:
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert "Traceback" not in output, output
    for fragment in fragments:
        assert fragment in result.stderr, output
    assert LITERAL not in output and "sk-team" not in output, output
    return result.stderr


# --- tenancy that cannot be configured wrong ---------------------------------------------------


def test_unnamed_keys_stop_start_up_naming_the_entry(tmp_path: Path) -> None:
    config = f'[auth]\napi_keys = [{{ key = "{LITERAL}" }}, {{ key = "env:TEAM_B" }}]\n'
    _refused(_serve(tmp_path, config, {"TEAM_B": "sk-team-b"}), "auth.api_keys", "[0] (a literal key) needs a `name`", "[1] (env:TEAM_B) needs a `name`")


def test_plain_keys_among_several_stop_start_up_in_any_order(tmp_path: Path) -> None:
    # a plain key's tenant was its position: reordering the list swapped two tenants' data
    env = {"TEAM_A": "sk-team-a", "TEAM_B": "sk-team-b"}
    for order in ('"env:TEAM_A", "env:TEAM_B"', '"env:TEAM_B", "env:TEAM_A"'):
        _refused(_serve(tmp_path, f"[auth]\napi_keys = [{order}]\n", env), "a plain key is accepted only as the only entry")


def test_a_name_used_twice_stops_start_up(tmp_path: Path) -> None:
    config = f'[auth]\napi_keys = [{{ name = "a", key = "{LITERAL}" }}, {{ name = "a", key = "env:TEAM_B" }}]\n'
    _refused(_serve(tmp_path, config, {"TEAM_B": "sk-team-b"}), "[1] (name 'a'): the name is already auth.api_keys[0]'s")
