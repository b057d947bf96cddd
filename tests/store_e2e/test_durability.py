"""Durability across SIGKILL: what a client saw complete survives; interrupted work is recovered
as failed, except a background response, which the next process runs again."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.server_process import OrgateServer
from tests.store_e2e.helpers import assert_error, create, poll, text_of, uid
from tests.support.spec import validate

CONFIG = '[auth]\napi_keys = [{ name = "a", key = "key-a" }]\n'


@pytest.fixture
def first() -> Iterator[OrgateServer]:
    server = OrgateServer(CONFIG, api_key="key-a").start()
    try:
        yield server
    finally:
        server.kill()


def restart(killed: OrgateServer) -> OrgateServer:
    """A new process on the same SQLite file (same workdir, so the same ORGATE_STORE__URL)."""
    return OrgateServer(CONFIG, api_key="key-a", workdir=str(killed.dir)).start()


def client(server: OrgateServer) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers=server.headers(), timeout=30)


def test_acknowledged_responses_survive_sigkill(first: OrgateServer) -> None:
    with client(first) as c:
        plain = create(c, input=f"durable {uid()}")
        chained = create(c, input="durable two", previous_response_id=plain["id"])
        with c.stream(
            "POST",
            "/v1/responses",
            json={"model": "orgate/echo", "input": "streamed durable", "stream": True},
        ) as r:
            for line in r.iter_lines():
                if line.startswith("data:") and '"response.completed"' in line:
                    streamed_id = line.split('"id":"resp_', 1)[1].split('"', 1)[0]
                    first.kill()  # the moment the terminal event arrived
                    break
    second = restart(first)
    try:
        with client(second) as c:
            for expected in (plain, chained):
                got = c.get(f"/v1/responses/{expected['id']}")
                assert got.status_code == 200, got.text
                assert got.json() == expected
            streamed = c.get(f"/v1/responses/resp_{streamed_id}").json()
            validate("ResponseResource", streamed)
            assert streamed["status"] == "completed" and text_of(streamed) == "streamed durable"
            cont = create(c, input="after restart", previous_response_id=chained["id"])
            assert cont["previous_response_id"] == chained["id"]
    finally:
        second.kill()


def test_kill_mid_stream_then_recover(first: OrgateServer) -> None:
    session = {"X-Session-Id": f"s-{uid()}"}
    slow = {
        "model": "orgate/echo",
        "input": "orgate:delay=300 " + " ".join(f"k{i}" for i in range(30)),
        "stream": True,
    }
    with client(first) as c:
        done = create(c, input="done before the crash", headers=session)
        background = create(c, input=slow["input"], background=True)
        with c.stream("POST", "/v1/responses", json=slow, headers=session) as r:
            rid = None
            deltas = 0
            for line in r.iter_lines():
                if rid is None and line.startswith("data:") and '"response.created"' in line:
                    rid = "resp_" + line.split('"id":"resp_', 1)[1].split('"', 1)[0]
                if '"response.output_text.delta"' in line:
                    deltas += 1
                    if deltas == 3:
                        first.kill()
                        break
    assert rid is not None
    second = restart(first)
    try:
        with client(second) as c:
            # Other responses read and continue normally.
            assert c.get(f"/v1/responses/{done['id']}").json() == done
            cont = create(c, input="continue", previous_response_id=done["id"])
            assert cont["status"] == "completed" and cont["previous_response_id"] == done["id"]
            assert_error(c.get("/v1/responses/resp_nope"), 404, "not_found")
            # The dead process's session lease was freed at start-up: no 409.
            r = c.post(
                "/v1/responses",
                json={"model": "orgate/echo", "input": "next turn"},
                headers=session,
            )
            assert r.status_code == 200, r.text
            # The interrupted background response (nobody saw any of its output) is taken over
            # by the new process, its predecessor being gone, and run again to its end.
            recovered = poll(c, background["id"], timeout=120)
            assert recovered["status"] == "completed", recovered
            assert text_of(recovered) == slow["input"]
            # The interrupted foreground stream is fetchable, and failed too.
            got = c.get(f"/v1/responses/{rid}")
            assert got.status_code == 200, (
                f"a response whose stream had started must be fetchable after a crash: {got.text}"
            )
            validate("ResponseResource", got.json())
            assert got.json()["status"] == "failed"
    finally:
        second.kill()
