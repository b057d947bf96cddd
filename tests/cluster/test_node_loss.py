"""Two of the three nodes SIGKILLed, one after the other, under load through HAProxy.

The ``node_loss`` fixture runs six lanes of conversations through the balancer (the openai SDK
and raw HTTP, ``previous_response_id`` chains and ``X-Session-Id`` sessions, streamed and not),
and, on the node killed first, a long stream and a session turn that are still running when it
dies (a long stream on the second too), and on each killed node background responses of the
``counted`` model that are still running when it dies. It kills ``node-1`` once
the load has reached it, ``node-2`` once the load has gone on without the first, and stops
the load once it has gone on without both. The tests then check, through the balancer (so on
the survivor), what must hold after a machine is lost.

The checks that wait for crash recovery (a dead node's responses and session leases are
freed by the survivors once its heartbeat is ``stale_after`` = 30 s old, at their next
upkeep, every 60 s) poll for up to ``RECOVERY`` seconds. A dead node's background responses
are taken over once their lease (``LEASE_SECONDS``) expires and run to their end once: the
counting upstream says how often each ran, and ran to its end. The last test kills a third
time (node-3, once node-1 is back) for the same check.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson
import pytest

from tests.cluster.clients import output_text, poll
from tests.cluster.conftest import COUNTED_PAUSE, KEYS, LEASE_SECONDS, Cluster
from tests.cluster.load import Lane, Ledger, lanes, start_lanes, until
from tests.cluster.nodes import Node
from tests.cluster.services import Nginx
from tests.fakes.openai_chat_upstream import last_user_text
from tests.server_process import START_TIMEOUT

pytestmark = pytest.mark.timeout(900)  # one worker runs the tier: tests/support/scheduling.py

#: Completions through the balancer before the first kill, and after each kill.
PER_PHASE = 20
#: How long crash recovery may take: stale_after (30 s) + the upkeep's period (60 s), with
#: room for a loaded machine.
RECOVERY = 240.0
#: A turn that outlives any phase of the scenario: it is still running when its node dies.
LONG = "orgate:delay=500 " + " ".join(f"word{i}" for i in range(400))
#: A background response's words: about 10 s of answer from the counting upstream, started just
#: before its node dies, so that a node taking it over runs it again well within the bar's 30 s.
BACKGROUND_WORDS = 40
BACKGROUND = " ".join(f"word{i}" for i in range(BACKGROUND_WORDS))
#: Background responses accepted by each node killed.
BACKGROUND_PER_KILL = 3


@dataclass
class NodeLoss:
    ledger: Ledger
    lanes: list[Lane]
    kills: list[tuple[Node, float]] = field(default_factory=list)  # node, time.monotonic()
    in_flight: list[str] = field(default_factory=list)  # streams running on a node at its kill
    # background responses running on a killed node: id → (input, time.time() of the kill)
    background: dict[str, tuple[str, float]] = field(default_factory=dict)
    held_session: str = ""  # a session whose turn was running on node-1 at its kill
    held_last: str = ""  # that session's last completed turn before it


async def _long_stream(
    client: httpx.AsyncClient, node: Node, started: asyncio.Future[str], session: str | None
) -> None:
    """A stream on ``node`` that outlasts the scenario: ``started`` gets its id; it ends when
    the node dies (the connection is cut)."""
    headers = {"X-Session-Id": session} if session else {}
    body = {"model": "orgate/echo", "input": LONG, "stream": True}
    try:
        async with client.stream(
            "POST", f"{node.url}/v1/responses", json=body, headers=headers
        ) as reply:
            assert reply.status_code == 200, await reply.aread()
            async for line in reply.aiter_lines():
                if line.startswith("data: ") and not started.done():
                    started.set_result(orjson.loads(line[6:])["response"]["id"])
    except httpx.HTTPError:
        pass  # the node was killed: the stream is cut
    if not started.done():
        started.set_exception(AssertionError(f"the stream on {node.name} never started"))


async def _start_long_streams(
    client: httpx.AsyncClient, node: Node, sessions: list[str | None]
) -> tuple[list[str], list[asyncio.Task[None]]]:
    loop = asyncio.get_running_loop()
    started = [loop.create_future() for _ in sessions]
    tasks = [
        asyncio.create_task(_long_stream(client, node, future, session))
        for future, session in zip(started, sessions, strict=True)
    ]
    ids = [await asyncio.wait_for(future, START_TIMEOUT) for future in started]
    return ids, tasks


async def _background_on(client: httpx.AsyncClient, node: Node, tag: str) -> dict[str, str]:
    """Background responses of the ``counted`` model accepted by ``node``, each running (its
    upstream call started: checked): id → input."""
    made = {}
    for i in range(BACKGROUND_PER_KILL):
        text = f"background {tag} {i} {BACKGROUND}"
        reply = await client.post(
            f"{node.url}/v1/responses",
            json={"model": "counted", "input": text, "background": True},
        )
        assert reply.status_code == 200, reply.text
        made[reply.json()["id"]] = text
    for response_id in made:
        status = (await client.get(f"{node.url}/v1/responses/{response_id}")).json()["status"]
        assert status in ("queued", "in_progress"), status
    return made


def _marked_down(cluster: Cluster, names: list[str]) -> bool:
    """Whether HAProxy takes each of ``names`` for down (the next kill waits for it: one machine
    lost, then another, rather than two at once)."""
    states = cluster.balancer.states() or {}
    return all(states.get(name, "").startswith("DOWN") for name in names)


async def _scenario(cluster: Cluster) -> NodeLoss:
    first, second = cluster.nodes[0], cluster.nodes[1]
    run = uuid.uuid4().hex[:8]
    loss = NodeLoss(Ledger(), lanes(run))
    stop = asyncio.Event()
    headers = {"Authorization": f"Bearer {KEYS['alpha']}"}
    async with httpx.AsyncClient(timeout=120, headers=headers) as client:
        loss.held_session = f"{run}-held"
        held = await client.post(
            f"{first.url}/v1/responses",
            json={"model": "orgate/echo", "input": "the held session's first turn"},
            headers={"X-Session-Id": loss.held_session},
        )
        assert held.status_code == 200, held.text
        loss.held_last = held.json()["id"]
        load = start_lanes(cluster.url, loss.lanes, loss.ledger, stop)
        try:
            mark = 0.0
            for victim, sessions in ((first, [None, loss.held_session]), (second, [None])):
                name = cluster.server_name(victim)
                gone = [cluster.server_name(node) for node, _ in loss.kills]
                await until(
                    f"load before killing {victim.name}",
                    lambda mark=mark, name=name, gone=gone: (
                        len(loss.ledger.since(mark)) >= PER_PHASE
                        and any(seen.served_by == name for seen in loss.ledger.since(mark))
                        and _marked_down(cluster, gone)
                    ),
                    loss.ledger,
                )
                ids, streams = await _start_long_streams(client, victim, sessions)
                loss.in_flight.append(ids[0])
                running = await _background_on(client, victim, f"{run} {victim.name}")
                victim.kill()
                loss.background |= {key: (text, time.time()) for key, text in running.items()}
                mark = time.monotonic()
                loss.kills.append((victim, mark))
                await asyncio.wait_for(asyncio.gather(*streams), START_TIMEOUT)
            await until(
                "load after the second kill",
                lambda: len(loss.ledger.since(mark)) >= PER_PHASE,
                loss.ledger,
            )
        finally:
            stop.set()
            await load
    return loss


@pytest.fixture(scope="module")
def node_loss(cluster: Cluster) -> NodeLoss:
    cluster.require_all_nodes()
    return asyncio.run(_scenario(cluster))


def test_traffic_goes_on_through_each_kill(cluster: Cluster, node_loss: NodeLoss) -> None:
    """The balancer takes each killed node out, and the load went on after each kill
    (``PER_PHASE`` completions, served by the survivors only). A kill costs the clients only
    what was in flight on the node: at most one failed request per lane."""
    killed = [cluster.server_name(node) for node, _ in node_loss.kills]
    cluster.wait_balancer({name: "DOWN" for name in killed} | {"orgate-3": "UP"})
    ledger = node_loss.ledger
    assert len(ledger.errors) <= len(node_loss.lanes) * len(node_loss.kills), ledger.errors
    for _node, at in node_loss.kills:
        assert len(ledger.since(at)) >= PER_PHASE
    last_kill = node_loss.kills[-1][1]
    served = {seen.served_by for seen in ledger.since(last_kill + 5) if seen.served_by}
    assert served <= {"orgate-3"}, served


def test_every_response_a_client_saw_completed_is_stored(
    cluster: Cluster, node_loss: NodeLoss
) -> None:
    seen = node_loss.ledger.seen
    assert len(seen) >= 3 * PER_PHASE
    with cluster.client() as client:
        for item in seen:
            stored = client.get(f"/v1/responses/{item.id}")
            assert stored.status_code == 200, (item, stored.text)
            body = stored.json()
            assert body["status"] == "completed", (item, body["status"])
            assert (
                "".join(
                    part["text"]
                    for out in body["output"]
                    if out["type"] == "message"
                    for part in out["content"]
                )
                == item.text
            ), item


def test_chains_continue_on_the_survivor(cluster: Cluster, node_loss: NodeLoss) -> None:
    """Each ``previous_response_id`` chain goes on from the last turn its client saw, however
    many of its turns the killed nodes served: every ancestor is there (a missing one is 404)."""
    chains = [lane for lane in node_loss.lanes if lane.session is None]
    with cluster.client() as client:
        for lane in chains:
            assert lane.last is not None, lane
            reply = client.post(
                "/v1/responses",
                json={
                    "model": "orgate/echo",
                    "input": "after the kills",
                    "previous_response_id": lane.last,
                },
            )
            assert reply.status_code == 200, (lane, reply.text)
            assert reply.json()["previous_response_id"] == lane.last


def _session_turn(client: httpx.Client, session: str) -> httpx.Response | None:
    """The session's next turn; None while the session is busy (409 session_busy)."""
    reply = client.post(
        "/v1/responses",
        json={"model": "orgate/echo", "input": "after the kills"},
        headers={"X-Session-Id": session},
    )
    if reply.status_code == 409 and reply.json()["error"]["code"] == "session_busy":
        return None
    return reply


def _ancestors(client: httpx.Client, response: dict[str, Any], depth: int) -> list[str]:
    found = []
    while response.get("previous_response_id") and len(found) < depth:
        found.append(response["previous_response_id"])
        response = client.get(f"/v1/responses/{found[-1]}").json()
    return found


def test_sessions_continue_on_the_survivor(cluster: Cluster, node_loss: NodeLoss) -> None:
    """Each session takes its next turn through the balancer and continues after the last turn
    its client saw. The session whose turn was running on node-1 when it died is busy until
    the survivor's crash recovery frees it (its stream then reads ``failed``)."""
    sessions = [(lane.session, lane.last) for lane in node_loss.lanes if lane.session]
    sessions.append((node_loss.held_session, node_loss.held_last))
    with cluster.client() as client:
        for session, last in sessions:
            assert session is not None and last is not None
            reply = poll(lambda session=session: _session_turn(client, session), RECOVERY, 1.0)
            assert reply is not None, f"session {session} still busy after {RECOVERY} s"
            assert reply.status_code == 200, (session, reply.text)
            # the turn continues the session after ``last`` (or after a turn the client never saw
            # finish: its node died while answering it)
            assert last in _ancestors(client, reply.json(), depth=3), session


def _status(client: httpx.Client, response_id: str) -> dict[str, Any]:
    reply = client.get(f"/v1/responses/{response_id}")
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


def _finished(client: httpx.Client, ids: list[str]) -> list[dict[str, Any]] | None:
    bodies = [_status(client, response_id) for response_id in ids]
    return bodies if all(b["status"] not in ("queued", "in_progress") for b in bodies) else None


def test_what_a_killed_node_was_answering_ends_failed(
    cluster: Cluster, node_loss: NodeLoss
) -> None:
    """A stream running on a node when it was killed is stored ``failed`` by the survivor's
    crash recovery (its heartbeat stopped): never left ``in_progress``, never ``completed``."""
    with cluster.client() as client:
        bodies = poll(lambda: _finished(client, node_loss.in_flight), RECOVERY, 1.0)
        assert bodies, [_status(client, i)["status"] for i in node_loss.in_flight]
    for body in bodies:
        assert body["status"] == "failed" and body["error"]["code"] == "server_error", body


def _runs(cluster: Cluster, text: str) -> tuple[int, int]:
    """How often the counting upstream was asked for ``text``, and how often it answered to
    the end (a node killed mid-answer cuts its call)."""
    calls = [
        record
        for record in list(cluster.upstream.requests)
        if isinstance(record.body, dict) and last_user_text(record.body) == text
    ]
    return len(calls), sum(record.answered for record in calls)


def check_background_taken_over(
    cluster: Cluster, background: dict[str, tuple[str, float]]
) -> list[float]:
    """Each background response of a killed node completed through another node, its answer
    whole and asked of the upstream to its end exactly once; the seconds from each kill to
    each completion (the bar: the lease, then 30 s at most, for an answer of about 10 s)."""
    ids = list(background)
    with cluster.client() as client:
        bodies = poll(lambda: _finished(client, ids), RECOVERY, 1.0)
        assert bodies, [_status(client, i)["status"] for i in ids]
    delays = []
    for body in bodies:
        text, killed_at = background[body["id"]]
        assert body["status"] == "completed", (body["id"], body["status"], body.get("error"))
        assert output_text(body) == text, body["id"]
        calls, completed = _runs(cluster, text)
        assert completed == 1, (body["id"], calls, completed)  # never run to its end twice
        delays.append(body["completed_at"] - killed_at)
    return delays


def test_background_responses_of_a_killed_node_complete_on_another(
    cluster: Cluster, node_loss: NodeLoss
) -> None:
    """The background responses node-1 and node-2 accepted and were running when each was
    killed complete, once, through another node (after the killed node's lease expires)."""
    delays = check_background_taken_over(cluster, node_loss.background)
    print(  # the bar's figures, for `pytest -s`
        f"background takeover: lease {LEASE_SECONDS} s, answer "
        f"{BACKGROUND_WORDS * COUNTED_PAUSE:.0f} s, kill → completed: "
        + ", ".join(f"{d:.0f} s" for d in sorted(delays))
    )


def test_nginx_passes_over_the_killed_nodes(
    cluster: Cluster, node_loss: NodeLoss, nginx: Nginx
) -> None:
    """nginx (deploy/nginx.conf) has no active health checks: a connection refused by a dead
    node sends the request on to the next one, so every request through it is served."""
    with cluster.client(nginx.url) as client:
        for i in range(12):
            reply = client.post("/v1/responses", json={"model": "orgate/echo", "input": f"n{i}"})
            assert reply.status_code == 200, reply.text


def test_a_third_kill_background_responses_complete_once(
    cluster: Cluster, node_loss: NodeLoss
) -> None:
    """node-1 started again; background responses accepted by node-3, which is then killed
    (the third kill): node-1 takes them over and runs each to its end once."""
    first, third = cluster.nodes[0], cluster.nodes[2]
    first.start()
    cluster.wait_balancer({cluster.server_name(first): "UP"})

    async def accept() -> dict[str, str]:
        headers = {"Authorization": f"Bearer {KEYS['alpha']}"}
        async with httpx.AsyncClient(timeout=120, headers=headers) as client:
            return await _background_on(client, third, f"{uuid.uuid4().hex[:8]} third")

    running = asyncio.run(accept())
    third.kill()
    killed_at = time.time()
    delays = check_background_taken_over(
        cluster, {key: (text, killed_at) for key, text in running.items()}
    )
    print("background takeover, third kill: " + ", ".join(f"{d:.0f} s" for d in sorted(delays)))
