"""Durable background responses across processes sharing one SQLite store (``orgate serve``
twice): followed live through a process that does not run them, and taken over when the one
that runs them is SIGKILLed (run again when nobody saw their output, failed when someone did).
The multi-node tier (tests/cluster) does the same across machines, through PostgreSQL."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from tests.mcp.servers import Running, tools_server
from tests.server_process import START_TIMEOUT, OrgateServer
from tests.store_e2e.helpers import poll, text_of
from tests.support.spec import check_sse
from tests.support.waiting import wait_until

CONFIG = """
[auth]
api_keys = [{ name = "a", key = "key-a" }]

[store]
background_lease_seconds = 3
"""


@pytest.fixture
def pair() -> Iterator[tuple[OrgateServer, OrgateServer]]:
    """Two processes on one store: ``first`` may be killed by the test."""
    first = OrgateServer(CONFIG, api_key="key-a").start()
    shared = {"ORGATE_STORE__URL": first.env["ORGATE_STORE__URL"]}
    try:
        second = OrgateServer(CONFIG, api_key="key-a", env=shared).start()
    except BaseException:
        first.kill()
        raise
    try:
        yield first, second
    finally:
        first.kill()
        second.kill()


def _client(server: OrgateServer) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers=server.headers(), timeout=60)


def _first_event(reply: httpx.Response) -> dict[str, object]:
    line = next(line for line in reply.iter_lines() if line.startswith("data: "))
    return dict(orjson.loads(line[6:]))


def test_a_running_background_stream_is_followed_through_another_process(
    pair: tuple[OrgateServer, OrgateServer],
) -> None:
    first, second = pair
    words = "orgate:delay=100 " + " ".join(f"f{i}" for i in range(20))
    body = {"model": "orgate/echo", "input": words, "background": True, "stream": True}
    with _client(first) as a, _client(second) as b:
        with a.stream("POST", "/v1/responses", json=body) as started:
            response_id = str(dict(_first_event(started)["response"])["id"])  # type: ignore[call-overload]
            followed = b.get(f"/v1/responses/{response_id}", params={"stream": "true"})
        assert followed.status_code == 200, followed.text
        events = check_sse(followed.content)
        assert events[-1]["type"] == "response.completed"
        assert text_of(events[-1]["response"]) == words
        numbers = [event["sequence_number"] for event in events]
        assert numbers == list(range(len(events))), "every event once, in order"
        replay = check_sse(a.get(f"/v1/responses/{response_id}", params={"stream": "true"}).content)
        assert [e["type"] for e in events] == [e["type"] for e in replay]
        # resumed after a sequence number, through the other process too
        later = b.get(
            f"/v1/responses/{response_id}", params={"stream": "true", "starting_after": 5}
        )
        resumed = [
            orjson.loads(line[6:])["sequence_number"]
            for line in later.text.split("\n")
            if line.startswith("data: ") and line != "data: [DONE]"
        ]
        assert resumed == numbers[6:]


def test_a_killed_processs_background_responses_are_taken_over(
    pair: tuple[OrgateServer, OrgateServer],
) -> None:
    """SIGKILLed while running two background responses: the one nobody saw any output of is
    run again by the other process and completes once; the one whose stream a client was
    reading is failed, saying why, not run again."""
    first, second = pair
    unseen = "orgate:delay=200 " + " ".join(f"u{i}" for i in range(15))
    seen = "orgate:delay=200 " + " ".join(f"s{i}" for i in range(15))
    with _client(first) as a, _client(second) as b:
        quiet = a.post(
            "/v1/responses", json={"model": "orgate/echo", "input": unseen, "background": True}
        ).json()
        streamed = {"model": "orgate/echo", "input": seen, "background": True, "stream": True}
        with a.stream("POST", "/v1/responses", json=streamed) as reply:
            watched = None
            for line in reply.iter_lines():
                if not line.startswith("data: "):
                    continue
                event = orjson.loads(line[6:])
                watched = watched or event["response"]["id"]
                if event["type"] == "response.output_text.delta":
                    break  # some of its output reached this client
            assert poll(a, quiet["id"], until=("in_progress",))["status"] == "in_progress"
            first.kill()
        done = poll(b, quiet["id"], timeout=120)
        assert done["status"] == "completed" and text_of(done) == unseen
        failed = poll(b, watched, timeout=120)
        assert failed["status"] == "failed", failed
        assert "reached a client" in failed["error"]["message"]
        assert failed["error"]["code"] == "server_error"
        assert "taken over" in second.output() or "running it again" in second.output()


def test_a_background_response_whose_mcp_call_had_started_is_not_run_again(
    tmp_path: Path,
) -> None:
    """Killed while its MCP call runs (recorded in the store before the call): the process
    that takes it over fails it rather than call the tool a second time."""
    tools = Running(tools_server()).start()
    config = CONFIG + (
        f'\n[[mcp_servers]]\nlabel = "tools"\nurl = "{tools.url}"\n'
        'allowed_tools = ["slow"]\nrequire_approval = "never"\n'
    )
    store = f"sqlite:///{tmp_path / 'orgate.db'}"
    env = {"ORGATE_STORE__URL": store}
    first = OrgateServer(config, api_key="key-a", env=env).start()
    second = None
    try:
        second = OrgateServer(config, api_key="key-a", env=env).start()
        with _client(first) as a, _client(second) as b:
            made = a.post(
                "/v1/responses",
                json={
                    "model": "orgate/echo",
                    "input": "wait a little",
                    "tools": [
                        {"type": "mcp", "server_label": "tools", "require_approval": "never"}
                    ],
                    "tool_choice": "required",
                    "background": True,
                },
            ).json()
            assert wait_until(
                lambda: _effects_recorded(tmp_path / "orgate.db", made["id"]), START_TIMEOUT, 0.01
            ), "the call was never recorded"
            first.kill()  # the tool may be running now: it must not run twice
            failed = poll(b, made["id"], timeout=120)
        assert failed["status"] == "failed", failed
        assert "side effects" in failed["error"]["message"], failed["error"]
    finally:
        first.kill()
        if second is not None:
            second.kill()
        tools.stop()


def _effects_recorded(path: Path, response_id: str) -> bool:
    with sqlite3.connect(path) as conn:
        row = conn.execute(
            "SELECT effects_at FROM background_jobs WHERE response_id = ?", (response_id,)
        ).fetchone()
    return row is not None and row[0] is not None
