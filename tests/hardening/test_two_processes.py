"""Two orgate processes on one PostgreSQL: what one stores the other serves (docs/deployment.md)."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.hardening.conftest import server_env, sse_events
from tests.server_process import OrgateServer

PG_URL = os.environ.get("ORGATE_TEST_PG_URL")
pytestmark = pytest.mark.skipif(
    not PG_URL, reason='ORGATE_TEST_PG_URL is unset: run `eval "$(bash .ci/postgres.sh)"` first'
)


@pytest.fixture(scope="module")
def pair() -> Iterator[tuple[OrgateServer, OrgateServer]]:
    assert PG_URL is not None
    env = server_env({"ORGATE_STORE__URL": PG_URL})
    with OrgateServer("", env=env) as one, OrgateServer("", env=env) as two:
        yield one, two


def _client(server: OrgateServer) -> httpx.Client:
    return httpx.Client(base_url=server.base_url, headers=server.headers(), timeout=30)


def test_stored_on_one_served_by_the_other(pair: tuple[OrgateServer, OrgateServer]) -> None:
    one, two = pair
    with _client(one) as a, _client(two) as b:
        first = a.post(
            "/responses", json={"model": "orgate/echo", "input": "remember: blue"}
        ).json()
        assert b.get(f"/responses/{first['id']}").json()["output"] == first["output"]
        # continue the conversation on the other process
        second = b.post(
            "/responses",
            json={"model": "orgate/echo", "input": "and then", "previous_response_id": first["id"]},
        )
        assert second.status_code == 200, second.text
        items = a.get(
            f"/responses/{second.json()['id']}/input_items", params={"order": "asc"}
        ).json()
        assert "and then" in str(items["data"][-1]["content"])
        # a stream on one, replayed from the other
        streamed = sse_events(
            a.post(
                "/responses", json={"model": "orgate/echo", "input": "s t r", "stream": True}
            ).text
        )
        replay = b.get(f"/responses/{streamed[-1]['response']['id']}", params={"stream": "true"})
        assert [e["type"] for e in sse_events(replay.text)] == [e["type"] for e in streamed]
        # deleted on one, gone on both
        assert b.delete(f"/responses/{first['id']}").status_code == 200
        assert a.get(f"/responses/{first['id']}").status_code == 404


def test_load_balanced_traffic(pair: tuple[OrgateServer, OrgateServer]) -> None:
    """Requests spread over both processes (like a round-robin balancer):
    every response is fetchable from both."""
    servers = list(pair)

    def one_turn(i: int) -> tuple[str, str]:
        with _client(random.choice(servers)) as client:
            res = client.post(
                "/responses",
                json={"model": "orgate/echo", "input": f"turn {i}", "stream": i % 2 == 0},
            )
            assert res.status_code == 200
            body = sse_events(res.text)[-1]["response"] if i % 2 == 0 else res.json()
            return body["id"], body["output"][0]["content"][0]["text"]

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(one_turn, range(60)))
    for server in servers:
        with _client(server) as client:
            for response_id, text in results:
                stored = client.get(f"/responses/{response_id}").json()
                assert (
                    stored["status"] == "completed"
                    and stored["output"][0]["content"][0]["text"] == text
                )
