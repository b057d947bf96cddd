"""Tenancy and shutdown, replayed against a real ``orgate serve``: a key's tenant is the name
the configuration gives it, the review queue is per tenant, and SIGTERM lets background and
WebSocket responses finish (or stores them as stopped by the server)."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from tests.server_process import REPO, OrgateServer
from tests.support.waiting import wait_until

LITERAL = "sk-hostile-literal-never-printed"


def _serve(
    tmp_path: Path, config: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``orgate serve`` with ``config``: expected to stop before it listens
    (a configuration error)."""
    path = tmp_path / "orgate.toml"
    path.write_text(config)
    return subprocess.run(
        [sys.executable, "-m", "orgate.cli", "serve", "--config", str(path), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={
            "PATH": "/usr/bin:/bin",
            "ORGATE_STORE__URL": f"sqlite:///{tmp_path / 'orgate.db'}",
            **(env or {}),
        },
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
    _refused(
        _serve(tmp_path, config, {"TEAM_B": "sk-team-b"}),
        "auth.api_keys",
        "[0] (a literal key) needs a `name`",
        "[1] (env:TEAM_B) needs a `name`",
    )


def test_plain_keys_among_several_stop_start_up_in_any_order(tmp_path: Path) -> None:
    # a plain key's tenant was its position: reordering the list swapped two tenants' data
    env = {"TEAM_A": "sk-team-a", "TEAM_B": "sk-team-b"}
    for order in ('"env:TEAM_A", "env:TEAM_B"', '"env:TEAM_B", "env:TEAM_A"'):
        _refused(
            _serve(tmp_path, f"[auth]\napi_keys = [{order}]\n", env),
            "a plain key is accepted only as the only entry",
        )


def test_a_name_used_twice_stops_start_up(tmp_path: Path) -> None:
    config = (
        f'[auth]\napi_keys = [{{ name = "a", key = "{LITERAL}" }}, {{ name = "a", key = '
        f'"env:TEAM_B" }}]\n'
    )
    _refused(
        _serve(tmp_path, config, {"TEAM_B": "sk-team-b"}),
        "[1] (name 'a'): the name is already auth.api_keys[0]'s",
    )


# --- the review queue is per tenant ------------------------------------------------------------

SCHEMA = {
    "type": "object",
    "properties": {"sku": {"type": "string"}},
    "required": ["sku"],
    "additionalProperties": False,
}

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
    """A request whose every attempt breaks its schema (orgate/flaky truncates):
    queued for review."""
    body = {
        "model": "orgate/flaky",
        "input": "a product",
        "text": {"format": {"type": "json_schema", "name": "product", "schema": SCHEMA}},
    }
    answer = client.post("/v1/responses", json=body)
    assert answer.headers.get("x-orgate-structured-outcome") == "review", answer.text
    return answer.headers["x-orgate-review-id"]


def test_a_tenant_cannot_list_read_resolve_or_discard_another_tenants_entry(
    review_server: OrgateServer,
) -> None:
    with _client(review_server, "sk-tenant-a") as a, _client(review_server, "sk-tenant-b") as b:
        entry = _review_entry(a)
        assert entry in {item["id"] for item in a.get("/v1/orgate/review").json()["data"]}
        listed = b.get("/v1/orgate/review", params={"status": "all"})
        assert listed.status_code == 200 and entry not in {
            item["id"] for item in listed.json()["data"]
        }
        assert all(item["tenant"] == "b" for item in listed.json()["data"])
        read = b.get(f"/v1/orgate/review/{entry}")
        assert read.status_code == 404 and read.json()["error"]["code"] == "not_found"
        assert "a product" not in read.text and "sku" not in read.text
        for attempt in ({"value": {"sku": "X"}}, {"discard": True}):
            refused = b.post(f"/v1/orgate/review/{entry}/resolve", json=attempt)
            assert refused.status_code == 404 and refused.json()["error"]["code"] == "not_found", (
                refused.text
            )
        mine = a.get(f"/v1/orgate/review/{entry}").json()
        assert mine["status"] == "pending" and mine["tenant"] == "a" and mine["resolution"] is None
        # the owner's own discard still works: b's attempts changed nothing
        assert (
            a.post(f"/v1/orgate/review/{entry}/resolve", json={"discard": True}).json()["status"]
            == "discarded"
        )


def test_an_admin_key_sees_and_resolves_every_tenants_entries(review_server: OrgateServer) -> None:
    with (
        _client(review_server, "sk-tenant-a") as a,
        _client(review_server, "sk-tenant-b") as b,
        _client(review_server, "sk-ops") as ops,
    ):
        first, second = _review_entry(a), _review_entry(b)
        tenants = {
            item["id"]: item["tenant"] for item in ops.get("/v1/orgate/review").json()["data"]
        }
        assert tenants[first] == "a" and tenants[second] == "b"
        assert ops.get(f"/v1/orgate/review/{second}").json()["tenant"] == "b"
        resolved = ops.post(f"/v1/orgate/review/{second}/resolve", json={"value": {"sku": "B1"}})
        assert resolved.status_code == 200 and resolved.json()["status"] == "resolved"
        assert b.get(f"/v1/orgate/review/{second}").json()["resolution"] == {"sku": "B1"}


def test_the_review_cli_shows_and_filters_tenants(review_server: OrgateServer) -> None:
    with _client(review_server, "sk-tenant-a") as a:
        entry = _review_entry(a)

    def review(*argv: str) -> subprocess.CompletedProcess[str]:
        """``orgate review`` as the server is configured: the queue in its store."""
        return subprocess.run(
            [sys.executable, "-m", "orgate.cli", "review", *argv],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=review_server.dir,
            env={**review_server.env, "ORGATE_CONFIG": str(review_server.config_path)},
        )

    listed = review("list", "--tenant", "a")
    assert listed.returncode == 0 and entry in listed.stdout and "\ta\t" in listed.stdout, (
        listed.stdout + listed.stderr
    )
    assert entry not in review("list", "--tenant", "b").stdout
    assert review("show", entry, "--tenant", "b").returncode == 1


# --- SIGTERM lets background and WebSocket responses finish ------------------------------------


def _slow(words: int, delay_ms: int) -> str:
    """A prompt the built-in model echoes one word per ``delay_ms`` (docs/builtin-model.md)."""
    return f"orgate:delay={delay_ms} " + " ".join(f"w{i}" for i in range(words))


def _drained(server: OrgateServer, within: float) -> int:
    """SIGTERM, then the exit status (the drain must end by itself within ``within`` seconds)."""
    assert server.proc is not None
    server.proc.send_signal(signal.SIGTERM)
    return server.proc.wait(within)


def _stored(workdir: Path, response_ids: list[str]) -> dict[str, dict[str, Any]]:
    """The stored responses, read by a new server on the same store (the first one has exited)."""
    with (
        OrgateServer("", workdir=str(workdir)) as again,
        httpx.Client(base_url=again.url, headers=again.headers(), timeout=30) as client,
    ):
        return {rid: client.get(f"/v1/responses/{rid}").json() for rid in response_ids}


def _start_background(client: httpx.Client, prompt: str) -> str:
    answer = client.post(
        "/v1/responses", json={"model": "orgate/echo", "input": prompt, "background": True}
    )
    assert answer.status_code == 200 and answer.json()["status"] in ("queued", "in_progress"), (
        answer.text
    )
    return str(answer.json()["id"])


def _wait_running(client: httpx.Client, response_ids: list[str]) -> None:
    """Until no response is still queued (each one's upstream call started),
    however slow the machine."""
    assert wait_until(
        lambda: all(
            client.get(f"/v1/responses/{rid}").json()["status"] != "queued" for rid in response_ids
        ),
        every=0.05,
    )


def test_background_responses_finish_within_the_drain_time(tmp_path: Path) -> None:
    server = OrgateServer("[server]\ndrain_timeout = 5\n", workdir=str(tmp_path)).start()
    try:
        with httpx.Client(base_url=server.url, headers=server.headers(), timeout=30) as client:
            ids = [_start_background(client, _slow(10, 300)) for _ in range(5)]  # ~3 s each
            _wait_running(client, ids)
        assert _drained(server, 60) == 0
    finally:
        server.kill()
    stored = _stored(tmp_path, ids)
    assert [stored[rid]["status"] for rid in ids] == ["completed"] * 5, stored
    assert all(stored[rid]["output"][0]["content"][0]["text"].endswith("w9") for rid in ids)


def test_a_background_response_past_the_drain_time_is_stored_as_stopped_by_the_server(
    tmp_path: Path,
) -> None:
    server = OrgateServer("[server]\ndrain_timeout = 1\n", workdir=str(tmp_path)).start()
    frames: list[str] = []
    try:
        with httpx.Client(base_url=server.url, headers=server.headers(), timeout=60) as client:
            rid = _start_background(client, _slow(60, 500))  # ~30 s
            _wait_running(client, [rid])
            with client.stream("GET", f"/v1/responses/{rid}", params={"stream": "true"}) as replay:
                lines = replay.iter_lines()
                frames.append(next(lines))  # subscribed: the stream is live
                assert _drained(server, 60) == 0
                frames.extend(lines)
    finally:
        server.kill()
    events = [orjson.loads(line[6:]) for line in frames if line.startswith("data: {")]
    assert [event["type"] for event in events[-2:]] == ["error", "response.failed"], events[-3:]
    assert events[-1]["response"]["error"]["code"] == "server_shutdown"
    stored = _stored(tmp_path, [rid])[rid]
    assert stored["status"] == "failed" and stored["error"]["code"] == "server_shutdown", stored


async def _ws_at_sigterm(
    server: OrgateServer, prompt: str
) -> tuple[str, list[dict[str, Any]], int | None, int]:
    """A WebSocket response under way (its first delta received) at SIGTERM: its id, every event
    after the signal until the server closed the socket, the close code, and the exit status."""
    async with connect(
        server.url.replace("http", "ws") + "/v1/responses",
        additional_headers=server.headers(),
        proxy=None,
    ) as ws:
        await ws.send(
            orjson.dumps(
                {"type": "response.create", "model": "orgate/echo", "input": prompt}
            ).decode()
        )
        response_id = ""
        while True:
            event = orjson.loads(await ws.recv())
            if event["type"] == "response.created":
                response_id = event["response"]["id"]
            if event["type"] == "response.output_text.delta":
                break
        assert server.proc is not None
        server.proc.send_signal(signal.SIGTERM)
        events: list[dict[str, Any]] = []
        code = None
        try:
            while True:
                events.append(orjson.loads(await ws.recv()))
        except ConnectionClosed as closed:
            code = closed.rcvd.code if closed.rcvd else None
    status = await asyncio.to_thread(server.proc.wait, 60)
    return response_id, events, code, status


async def test_a_websocket_response_finishes_within_the_drain_time(tmp_path: Path) -> None:
    server = OrgateServer("[server]\ndrain_timeout = 5\n", workdir=str(tmp_path)).start()
    try:
        response_id, events, code, status = await _ws_at_sigterm(server, _slow(10, 300))  # ~3 s
    finally:
        server.kill()
    assert status == 0
    assert events[-1]["type"] == "response.completed", events[-3:]
    assert events[-1]["response"]["output"][0]["content"][0]["text"].endswith("w9")
    assert code == 1012  # service restart: after the terminal event, not instead of it
    assert (await asyncio.to_thread(_stored, tmp_path, [response_id]))[response_id][
        "status"
    ] == "completed"


async def test_a_websocket_response_past_the_drain_time_gets_a_terminal_event(
    tmp_path: Path,
) -> None:
    server = OrgateServer("[server]\ndrain_timeout = 1\n", workdir=str(tmp_path)).start()
    try:
        response_id, events, code, status = await _ws_at_sigterm(server, _slow(60, 500))  # ~30 s
    finally:
        server.kill()
    assert status == 0
    assert [event["type"] for event in events[-2:]] == ["error", "response.failed"], events[-3:]
    assert events[-1]["response"]["error"]["code"] == "server_shutdown"
    assert code == 1012
    stored = (await asyncio.to_thread(_stored, tmp_path, [response_id]))[response_id]
    assert stored["status"] == "failed" and stored["error"]["code"] == "server_shutdown", stored


def test_data_of_a_renamed_tenant_is_reported_and_moved(tmp_path: Path) -> None:
    """An upgrade that renames a tenant (here: a key named `old-name`, now the single plain key,
    tenant
    `default`) hides its data; start-up says so, and `orgate store rename-tenant` brings it back."""
    keyed = '[auth]\napi_keys = [{ name = "old-name", key = "sk-tenant-a" }]\n'
    for run in ("one", "two", "three"):
        (tmp_path / run).mkdir()
    with OrgateServer(keyed, api_key="sk-tenant-a", workdir=str(tmp_path / "one")) as first:
        store = first.env["ORGATE_STORE__URL"]
        with httpx.Client(base_url=first.url, headers=first.headers(), timeout=30) as client:
            rid = client.post(
                "/v1/responses", json={"model": "orgate/echo", "input": "kept"}
            ).json()["id"]
    env = {"ORGATE_STORE__URL": store}
    plain = '[auth]\napi_keys = ["env:ORGATE_API_KEY"]\n'
    with OrgateServer(
        plain, api_key="sk-tenant-a", env=env, workdir=str(tmp_path / "two")
    ) as second:
        with httpx.Client(base_url=second.url, headers=second.headers(), timeout=30) as client:
            assert client.get(f"/v1/responses/{rid}").status_code == 404
        assert wait_until(lambda: "rename-tenant" in second.output())
        assert "tenant(s) 'old-name', which no configured API key has" in second.output()
    moved = subprocess.run(
        [
            sys.executable,
            "-m",
            "orgate.cli",
            "store",
            "rename-tenant",
            "old-name",
            "default",
            "--url",
            store,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert moved.returncode == 0 and "1 response(s) moved" in moved.stdout, (
        moved.stdout + moved.stderr
    )
    with OrgateServer(
        plain, api_key="sk-tenant-a", env=env, workdir=str(tmp_path / "three")
    ) as third:
        with httpx.Client(base_url=third.url, headers=third.headers(), timeout=30) as client:
            assert (
                client.get(f"/v1/responses/{rid}").json()["output"][0]["content"][0]["text"]
                == "kept"
            )
        assert "no configured API key has" not in third.output()
