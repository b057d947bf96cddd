"""Tenancy and shutdown, replayed against a real ``orgate serve``: a key's tenant is the name
the configuration gives it, the review queue is per tenant, and SIGTERM lets background and
WebSocket responses finish (or stores them as stopped by the server)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.server_process import REPO, OrgateServer

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


# --- the review queue is per tenant ------------------------------------------------------------

SCHEMA = {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"], "additionalProperties": False}

REVIEW_CONFIG = """
[auth]
api_keys = [
  { name = "a", key = "sk-tenant-a" },
  { name = "b", key = "sk-tenant-b" },
  { name = "ops", key = "sk-ops", admin = true },
]

[builtin]
misbehave = { truncate = 1.0, wrong_type = 0.0, extra_key = 0.0, missing_key = 0.0, seed = 7 }

[structured]
review_db = "REVIEW_DB"

[structured.formats.product]
on_exhaustion = "review"
"""


@pytest.fixture(scope="module")
def review_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OrgateServer]:
    workdir = tmp_path_factory.mktemp("hostile-review")
    config = REVIEW_CONFIG.replace("REVIEW_DB", str(workdir / "review.db"))
    with OrgateServer(config, api_key="sk-tenant-a", workdir=str(workdir)) as server:
        yield server


def _client(server: OrgateServer, key: str) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=60)


def _review_entry(client: httpx.Client) -> str:
    """A request whose every attempt breaks its schema (orgate/flaky truncates): queued for review."""
    body = {"model": "orgate/flaky", "input": "a product", "text": {"format": {"type": "json_schema", "name": "product", "schema": SCHEMA}}}
    answer = client.post("/v1/responses", json=body)
    assert answer.headers.get("x-orgate-structured-outcome") == "review", answer.text
    return answer.headers["x-orgate-review-id"]


def test_a_tenant_cannot_list_read_resolve_or_discard_another_tenants_entry(review_server: OrgateServer) -> None:
    with _client(review_server, "sk-tenant-a") as a, _client(review_server, "sk-tenant-b") as b:
        entry = _review_entry(a)
        assert entry in {item["id"] for item in a.get("/v1/orgate/review").json()["data"]}
        listed = b.get("/v1/orgate/review", params={"status": "all"})
        assert listed.status_code == 200 and entry not in {item["id"] for item in listed.json()["data"]}
        assert all(item["tenant"] == "b" for item in listed.json()["data"])
        read = b.get(f"/v1/orgate/review/{entry}")
        assert read.status_code == 404 and read.json()["error"]["code"] == "not_found"
        assert "a product" not in read.text and "sku" not in read.text
        for attempt in ({"value": {"sku": "X"}}, {"discard": True}):
            refused = b.post(f"/v1/orgate/review/{entry}/resolve", json=attempt)
            assert refused.status_code == 404 and refused.json()["error"]["code"] == "not_found", refused.text
        mine = a.get(f"/v1/orgate/review/{entry}").json()
        assert mine["status"] == "pending" and mine["tenant"] == "a" and mine["resolution"] is None
        # the owner's own discard still works: b's attempts changed nothing
        assert a.post(f"/v1/orgate/review/{entry}/resolve", json={"discard": True}).json()["status"] == "discarded"


def test_an_admin_key_sees_and_resolves_every_tenants_entries(review_server: OrgateServer) -> None:
    with _client(review_server, "sk-tenant-a") as a, _client(review_server, "sk-tenant-b") as b, _client(review_server, "sk-ops") as ops:
        first, second = _review_entry(a), _review_entry(b)
        tenants = {item["id"]: item["tenant"] for item in ops.get("/v1/orgate/review").json()["data"]}
        assert tenants[first] == "a" and tenants[second] == "b"
        assert ops.get(f"/v1/orgate/review/{second}").json()["tenant"] == "b"
        resolved = ops.post(f"/v1/orgate/review/{second}/resolve", json={"value": {"sku": "B1"}})
        assert resolved.status_code == 200 and resolved.json()["status"] == "resolved"
        assert b.get(f"/v1/orgate/review/{second}").json()["resolution"] == {"sku": "B1"}


def test_the_review_cli_shows_and_filters_tenants(review_server: OrgateServer) -> None:
    with _client(review_server, "sk-tenant-a") as a:
        entry = _review_entry(a)
    db = str(review_server.dir / "review.db")

    def review(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "orgate.cli", "review", *argv, "--db", db], capture_output=True, text=True, timeout=120, cwd=REPO)

    listed = review("list", "--tenant", "a")
    assert listed.returncode == 0 and entry in listed.stdout and "  a  " in listed.stdout, listed.stdout + listed.stderr
    assert entry not in review("list", "--tenant", "b").stdout
    assert review("show", entry, "--tenant", "b").returncode == 1
