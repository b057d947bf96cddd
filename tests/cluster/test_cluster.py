"""Three nodes, one gateway: what a client of any node, or of the balancer, sees the same.

Each test addresses the nodes themselves (``node-1`` makes something, ``node-2`` or ``node-3``
is asked about it) or the load balancer, with every node up: the store, the review queue,
background responses (cancelled and followed through another node), MCP approvals, console
sessions, the console's overview and node list, the balancers, a drain, rate limits, and
PostgreSQL and Redis gone and back.
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import openai
import orjson
import pytest

from tests.cluster.clients import burst as send_burst
from tests.cluster.clients import (
    console,
    output_text,
    poll,
    queue_for_review,
    sse_events,
    with_cookie_of,
)
from tests.cluster.conftest import KEYS, LIMITED_RPM, Cluster
from tests.cluster.load import Ledger, lanes, start_lanes, until
from tests.cluster.services import HAPROXY_TEMPLATE, NGINX_TEMPLATE
from tests.server_process import REPO

pytestmark = pytest.mark.timeout(900)  # one worker runs the tier: tests/support/scheduling.py


@pytest.fixture
def nodes(cluster: Cluster) -> Cluster:
    """The cluster, with every node up (the node-loss tests, which kill two, run last)."""
    cluster.require_all_nodes()
    return cluster


def _ids(reply: httpx.Response) -> set[str]:
    assert reply.status_code == 200, reply.text
    return {entry["id"] for entry in reply.json()["data"]}


# --------------------------------------------------------------------------- the set-up itself


@pytest.mark.parametrize("config", [HAPROXY_TEMPLATE, NGINX_TEMPLATE], ids=lambda p: p.name)
def test_the_docs_show_the_balancer_configurations_the_tests_run(config: Path) -> None:
    """docs/deployment.md holds deploy/haproxy.cfg and deploy/nginx.conf word for word."""
    assert config.read_text().strip() in (REPO / "docs" / "deployment.md").read_text()


def test_the_nodes_take_each_other_for_separate_machines(nodes: Cluster) -> None:
    """Each node heartbeats in the shared store under its own host name, as on machines of
    their own (when the hosts' names could be set), and is reached at its own address."""
    assert len({node.host.address for node in nodes.nodes}) == 3

    async def owners() -> list[str]:
        conn = await asyncpg.connect(nodes.postgres.local_url)
        try:
            rows = await conn.fetch("SELECT owner_id FROM owners WHERE stopped_at IS NULL")
        finally:
            await conn.close()
        return [row["owner_id"] for row in rows]

    hosts = sorted(owner.split(":")[0] for owner in asyncio.run(owners()))
    if nodes.network.hosts[0].own_hostname:
        assert hosts == ["node-1", "node-2", "node-3"], hosts
    else:
        assert len(hosts) == 3, hosts


# --------------------------------------------------------------------------- the store


def test_what_one_node_stores_every_node_serves(nodes: Cluster) -> None:
    one, two, three = nodes.nodes
    with nodes.client(one) as a, nodes.client(two) as b, nodes.client(three) as c:
        first = a.post("/v1/responses", json={"model": "orgate/echo", "input": "remember: blue"})
        assert first.status_code == 200, first.text
        made = first.json()
        for client in (b, c):
            assert client.get(f"/v1/responses/{made['id']}").json()["output"] == made["output"]
        later = c.post(
            "/v1/responses",
            json={"model": "orgate/echo", "input": "and then", "previous_response_id": made["id"]},
        )
        assert later.status_code == 200, later.text
        items = b.get(f"/v1/responses/{later.json()['id']}/input_items").json()["data"]
        assert items[0]["content"][0]["text"] == "and then"
        streamed = sse_events(
            a.post(
                "/v1/responses", json={"model": "orgate/echo", "input": "s t r", "stream": True}
            ).text
        )
        replay = b.get(f"/v1/responses/{streamed[-1]['response']['id']}", params={"stream": "true"})
        assert [e["type"] for e in sse_events(replay.text)] == [e["type"] for e in streamed]
        assert c.delete(f"/v1/responses/{made['id']}").status_code == 200
        assert a.get(f"/v1/responses/{made['id']}").status_code == 404
        # the continuation through the deleted response is gone everywhere too
        assert (
            b.post(
                "/v1/responses",
                json={
                    "model": "orgate/echo",
                    "input": "after the delete",
                    "previous_response_id": later.json()["id"],
                },
            ).status_code
            == 404
        )


# --------------------------------------------------------------------------- the balancer


def test_a_websocket_through_the_balancer(nodes: Cluster, front: str) -> None:
    """The openai SDK's WebSocket client through the balancer (the upgrade passed on), and the
    conversation continued over HTTP on whichever node the balancer picks."""

    async def run() -> tuple[str, str, dict[str, Any]]:
        client = openai.AsyncOpenAI(base_url=f"{front}/v1", api_key=KEYS["alpha"])
        ids: list[str] = []
        async with client.beta.responses.connect() as connection:
            for text in ("over a websocket", "still on it"):
                await connection.response.create(
                    model="orgate/echo", input=text, previous_response_id=ids[-1] if ids else None
                )
                async for event in connection:
                    if event.type == "response.completed":
                        ids.append(event.response.id)
                        break
                    assert event.type not in ("error", "response.failed"), event
        later = await client.responses.create(
            model="orgate/echo", input="over HTTP", previous_response_id=ids[-1]
        )
        await client.close()
        return ids[0], ids[1], later.model_dump(mode="json")

    first, second, later = asyncio.run(run())
    assert later["status"] == "completed" and later["previous_response_id"] == second
    with nodes.client(front) as client:
        assert output_text(client.get(f"/v1/responses/{first}").json()) == "over a websocket"


def test_a_stream_through_the_balancer_is_not_buffered(nodes: Cluster, front: str) -> None:
    """The first delta of a long stream reaches the client while the response is still in
    progress (a buffering proxy would hold it until the end)."""
    words = " ".join(f"w{i}" for i in range(200))
    with (
        nodes.client(front) as client,
        client.stream(
            "POST",
            "/v1/responses",
            json={"model": "orgate/echo", "input": f"orgate:delay=1000 {words}", "stream": True},
        ) as reply,
    ):
        assert reply.headers["content-type"].startswith("text/event-stream")
        events: list[dict[str, Any]] = []
        for line in reply.iter_lines():
            if line.startswith("data: "):
                events.append(orjson.loads(line[6:]))
                if events[-1]["type"] == "response.output_text.delta":
                    break
        response_id = events[0]["response"]["id"]
        with nodes.client() as other:
            assert other.get(f"/v1/responses/{response_id}").json()["status"] == "in_progress"


# --------------------------------------------------------------------------- a drained node


def test_a_node_drained_and_started_again_costs_no_request(nodes: Cluster) -> None:
    """One node restarted under load through HAProxy, as a rolling update does it: SIGTERM (it
    stops accepting, the balancer takes it out, it finishes what it was answering), then
    started again (the balancer takes it back once its checks pass). No client of raw HTTP
    (which retries nothing) sees an error, and everything they saw completed is stored."""
    node = nodes.nodes[2]
    name = nodes.server_name(node)

    async def run() -> Ledger:
        ledger, stop = Ledger(), asyncio.Event()
        chosen = [lane for lane in lanes(uuid.uuid4().hex[:8]) if lane.kind != "sdk"]
        load = start_lanes(nodes.url, chosen, ledger, stop)
        try:
            await until("load before the drain", lambda: len(ledger.seen) >= 10, ledger)
            drained = time.monotonic()
            await asyncio.to_thread(node.stop)
            assert node.proc is not None and node.proc.returncode == 0, node.output()[-2000:]
            await until("load while it is away", lambda: len(ledger.since(drained)) >= 10, ledger)
            await asyncio.to_thread(node.start)
            back = time.monotonic()
            await until(
                "the node serving again",
                lambda: any(seen.served_by == name for seen in ledger.since(back)),
                ledger,
            )
        finally:
            stop.set()
            await load
        return ledger

    ledger = asyncio.run(run())
    assert ledger.errors == []
    with nodes.client() as client:
        for seen in ledger.seen:
            assert client.get(f"/v1/responses/{seen.id}").json()["status"] == "completed"


# --------------------------------------------------------------------------- rate limits


def _admitted_within_limit(replies: list[httpx.Response], elapsed: float) -> int:
    """How many were admitted, checked against one shared bucket of LIMITED_RPM (plus what
    refilled while the burst ran); the refusals are the spec's 429 with Retry-After."""
    admitted = sum(reply.status_code == 200 for reply in replies)
    refused = [reply for reply in replies if reply.status_code != 200]
    for reply in refused:
        assert reply.status_code == 429, reply.text
        assert (
            reply.json()["error"]["code"] == "rate_limit_exceeded" and reply.headers["retry-after"]
        )
    refilled = math.ceil(elapsed * LIMITED_RPM / 60)
    assert admitted <= LIMITED_RPM + refilled, (admitted, elapsed)
    return admitted


def test_a_keys_rate_limit_holds_across_nodes(nodes: Cluster) -> None:
    """A key limited to LIMITED_RPM calls a minute sends three times that, spread over the
    three nodes at once: one bucket in Redis admits LIMITED_RPM, not LIMITED_RPM per node."""
    started = time.monotonic()
    replies = asyncio.run(
        send_burst([node.url for node in nodes.nodes], "limited", 3 * LIMITED_RPM)
    )
    admitted = _admitted_within_limit(replies, time.monotonic() - started)
    assert admitted >= LIMITED_RPM


def test_redis_gone_the_limits_fail_open_and_hold_again_once_it_is_back(nodes: Cluster) -> None:
    """Redis stopped: every node serves the limited key (a limiter outage is no gateway
    outage) and stays healthy for the balancer. Redis back (empty): one bucket again."""
    nodes.redis.stop()
    try:
        replies = asyncio.run(
            send_burst([node.url for node in nodes.nodes], "limited", 2 * LIMITED_RPM)
        )
        assert [reply.status_code for reply in replies] == [200] * (2 * LIMITED_RPM)
        for node in nodes.nodes:
            assert httpx.get(f"{node.url}/healthz", timeout=30).status_code == 200
    finally:
        nodes.redis.start()
    started = time.monotonic()
    replies = asyncio.run(
        send_burst([node.url for node in nodes.nodes], "limited", 3 * LIMITED_RPM)
    )
    assert _admitted_within_limit(replies, time.monotonic() - started) >= LIMITED_RPM


# --------------------------------------------------------------------------- PostgreSQL down


def test_postgresql_gone_each_node_says_so_and_serves_again_once_it_is_back(
    nodes: Cluster,
) -> None:
    """PostgreSQL stopped: what needs the store is a 503 ``store_unavailable`` on every node,
    an answer that cannot be saved is still returned marked ``store: false``, and /healthz
    stays 200 (liveness: the balancer keeps the nodes, which share the one database). Once it
    is back, every node serves what was stored before."""
    with nodes.client() as client:
        before = client.post("/v1/responses", json={"model": "orgate/echo", "input": "before"})
        assert before.status_code == 200
    kept = before.json()["id"]
    nodes.postgres.pause()
    try:
        for node in nodes.nodes:
            with nodes.client(node) as client:
                read = client.get(f"/v1/responses/{kept}")
                assert read.status_code == 503, read.text
                assert read.json()["error"]["code"] == "store_unavailable"
                assert read.headers.get("retry-after") == "1"
                assert str(nodes.postgres.address) not in read.text
                more = client.post(
                    "/v1/responses",
                    json={"model": "orgate/echo", "input": "more", "previous_response_id": kept},
                )
                assert (
                    more.status_code == 503 and more.json()["error"]["code"] == "store_unavailable"
                )
                assert httpx.get(f"{node.url}/healthz", timeout=30).status_code == 200
        with nodes.client(nodes.nodes[0]) as client:
            unsaved = client.post("/v1/responses", json={"model": "orgate/echo", "input": "now"})
            assert unsaved.status_code == 200 and unsaved.json()["store"] is False
            assert unsaved.headers["x-orgate-store-error"] == "store_unavailable"
    finally:
        nodes.postgres.resume()
    for node in nodes.nodes:
        with nodes.client(node) as client:
            reply = poll(
                lambda client=client: (
                    client.post(
                        "/v1/responses",
                        json={
                            "model": "orgate/echo",
                            "input": "back",
                            "previous_response_id": kept,
                        },
                    ).status_code
                    == 200
                ),
                60,
            )
            assert reply, node.name


# --------------------------------------------------------------------------- background responses


def test_a_background_response_is_cancelled_through_another_node(nodes: Cluster) -> None:
    """Cancelled through node-2 while node-1 runs it: node-1 sees the store's flag and stops."""
    one, two, three = nodes.nodes
    words = " ".join(f"w{i}" for i in range(200))
    with nodes.client(one) as a, nodes.client(two) as b, nodes.client(three) as c:
        made = a.post(
            "/v1/responses",
            json={"model": "orgate/echo", "input": f"orgate:delay=500 {words}", "background": True},
        ).json()
        assert b.post(f"/v1/responses/{made['id']}/cancel").status_code == 200
        final = poll(
            lambda: (
                (body := c.get(f"/v1/responses/{made['id']}").json())["status"]
                not in ("queued", "in_progress")
                and body
            ),
            60,
        )
        assert final and final["status"] == "cancelled", final


def test_a_running_background_stream_is_followed_through_another_node(nodes: Cluster) -> None:
    """A client reconnecting to a running background stream (``GET …?stream=true``) through the
    balancer lands on any node: each must follow it to its end."""
    one, two = nodes.nodes[0], nodes.nodes[1]
    body = {
        "model": "orgate/echo",
        "input": "orgate:delay=200 " + " ".join(f"w{i}" for i in range(20)),
        "background": True,
        "stream": True,
    }
    with nodes.client(one) as a, nodes.client(two) as b:
        with a.stream("POST", "/v1/responses", json=body) as started:
            first = next(line for line in started.iter_lines() if line.startswith("data: "))
            response_id = orjson.loads(first[6:])["response"]["id"]
            followed = b.get(f"/v1/responses/{response_id}", params={"stream": "true"})
        assert followed.status_code == 200, followed.text
        assert sse_events(followed.text)[-1]["type"] == "response.completed"


# --------------------------------------------------------------------------- MCP approvals


def test_an_mcp_approval_asked_through_one_node_is_answered_through_another(
    nodes: Cluster,
) -> None:
    """node-1 ends a response with an ``mcp_approval_request``; the approval, sent to node-2,
    runs the call there (the request is a conversation item in the store). Sent again through
    node-3 in the same conversation, the answered approval runs nothing twice."""
    one, two, three = nodes.nodes
    tools = [{"type": "mcp", "server_label": "tools"}]
    with nodes.client(one) as a, nodes.client(two) as b, nodes.client(three) as c:
        asked = a.post(
            "/v1/responses", json={"model": "orgate/echo", "input": "echo hello", "tools": tools}
        )
        assert asked.status_code == 200, asked.text
        request = asked.json()["output"][-1]
        assert request["type"] == "mcp_approval_request" and request["name"] == "echo", request
        answer = {
            "model": "orgate/echo",
            "previous_response_id": asked.json()["id"],
            "input": [
                {
                    "type": "mcp_approval_response",
                    "approval_request_id": request["id"],
                    "approve": True,
                }
            ],
            "tools": tools,
        }
        approved = b.post("/v1/responses", json=answer)
        assert approved.status_code == 200, approved.text
        calls = [item for item in approved.json()["output"] if item["type"] == "mcp_call"]
        assert len(calls) == 1 and calls[0]["approval_request_id"] == request["id"], calls
        assert calls[0]["output"].startswith("echo: "), calls[0]
        # the same answer again, after the call ran, through node-3
        again = c.post(
            "/v1/responses", json={**answer, "previous_response_id": approved.json()["id"]}
        )
        assert again.status_code in (200, 400), again.text
        if again.status_code == 200:
            assert not [i for i in again.json()["output"] if i["type"] == "mcp_call"]


# --------------------------------------------------------------------------- the console


def test_a_console_session_and_its_traffic_list_are_the_same_on_every_node(
    nodes: Cluster,
) -> None:
    """Signed in on node-1, the same cookie works on node-2 and node-3 (signed with a key
    derived from the shared compaction secret), and each lists what node-1 stored."""
    one = nodes.nodes[0]
    with nodes.client(one) as a:
        made = a.post("/v1/responses", json={"model": "orgate/echo", "input": "listed"}).json()
    session = console(one.url, "alpha")
    for node in nodes.nodes[1:]:
        with with_cookie_of(session, node.url) as copy:
            assert copy.get("/console/api/session").json()["tenant"] == "alpha"
            assert made["id"] in _ids(copy.get("/console/api/responses", params={"limit": 200}))
            assert copy.get(f"/console/api/responses/{made['id']}").status_code == 200


def test_a_console_sign_out_ends_the_session_on_the_node_that_handled_it(
    nodes: Cluster,
) -> None:
    two = nodes.nodes[1]
    session = console(two.url, "alpha")
    copy = with_cookie_of(session, two.url)  # the cookie, as copied before the sign-out
    assert copy.get("/console/api/session").status_code == 200
    assert session.delete("/console/api/session").status_code == 200
    refused = copy.get("/console/api/session")
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "console_session_required"


def test_a_console_sign_out_holds_on_every_node(nodes: Cluster) -> None:
    one = nodes.nodes[0]
    session = console(one.url, "alpha")
    copies = [with_cookie_of(session, node.url) for node in nodes.nodes[1:]]
    assert session.delete("/console/api/session").status_code == 200
    for copy in copies:
        assert copy.get("/console/api/session").status_code == 401, copy.base_url


def test_a_review_entry_is_one_entry_on_every_node(nodes: Cluster) -> None:
    """Queued through node-1: listed, read and resolved through node-2 and node-3, only by its
    own tenant (and an admin key); resolved once."""
    one, two, three = nodes.nodes
    with nodes.client(one, "alpha") as a1:
        review_id = queue_for_review(a1)
    with (
        nodes.client(two, "alpha") as a2,
        nodes.client(two, "beta") as b2,
        nodes.client(three, "alpha") as a3,
        nodes.client(three, "root") as root3,
    ):
        assert a2.get(f"/v1/orgate/review/{review_id}").status_code == 200
        assert review_id in _ids(a3.get("/v1/orgate/review"))
        assert review_id in _ids(root3.get("/v1/orgate/review"))
        assert review_id not in _ids(b2.get("/v1/orgate/review"))
        assert b2.get(f"/v1/orgate/review/{review_id}").status_code == 404
        assert (
            b2.post(f"/v1/orgate/review/{review_id}/resolve", json={"discard": True}).status_code
            == 404
        )
        resolved = a3.post(
            f"/v1/orgate/review/{review_id}/resolve", json={"value": {"name": "Ada", "age": 36}}
        )
        assert resolved.status_code == 200, resolved.text
        again = a2.post(f"/v1/orgate/review/{review_id}/resolve", json={"discard": True})
        assert again.status_code == 400 and again.json()["error"]["code"] == (
            "invalid_review_resolution"
        )
    with nodes.client(one, "alpha") as a1:
        assert a1.get(f"/v1/orgate/review/{review_id}").json()["status"] == "resolved"


def test_the_consoles_review_queue_is_one_on_every_node(nodes: Cluster) -> None:
    one, two, three = nodes.nodes
    with nodes.client(one, "beta") as b1:
        review_id = queue_for_review(b1)
    seen_on_three = console(three.url, "beta")
    listed = seen_on_three.get("/console/api/review")
    assert review_id in _ids(listed)
    on_two = console(two.url, "beta")
    resolved = on_two.post(f"/console/api/review/{review_id}/resolve", json={"discard": True})
    assert resolved.status_code == 200, resolved.text


def _echo_requests(session: httpx.Client) -> float:
    overview = session.get("/console/api/overview")
    assert overview.status_code == 200, overview.text
    return float(overview.json()["models"].get("orgate/echo", {}).get("requests", 0))


def test_the_consoles_overview_counts_the_traffic_of_every_node(nodes: Cluster) -> None:
    """node-2's overview counts what node-1 served, once node-1's next metrics snapshot is in
    the store (every few seconds)."""
    one, two = nodes.nodes[0], nodes.nodes[1]
    overview = console(two.url, "root")
    before = _echo_requests(overview)
    with nodes.client(one) as a:
        for i in range(5):
            assert a.post(
                "/v1/responses", json={"model": "orgate/echo", "input": f"{i}"}
            ).is_success
    assert poll(lambda: _echo_requests(overview) >= before + 5, 60), _echo_requests(overview)


def test_the_consoles_node_list_shows_every_node_and_its_health(nodes: Cluster) -> None:
    """Every node, up, with its version and address, from any node; not for a tenant's key."""
    listed = console(nodes.nodes[2].url, "root").get("/console/api/nodes")
    assert listed.status_code == 200, listed.text
    up = {node["address"]: node for node in listed.json()["data"] if node["status"] == "up"}
    for node in nodes.nodes:
        assert node.url in up, (node.url, sorted(up))
        assert up[node.url]["version"] and up[node.url]["host"]
    assert sum(node["this"] for node in listed.json()["data"]) == 1
    refused = console(nodes.nodes[0].url, "alpha").get("/console/api/nodes")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "admin_required"
