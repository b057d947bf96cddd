"""The history cache across processes: ``orgate serve`` nodes A and B (each with its cache) and C
(``history_cache_mb = 0``: every turn reads the whole chain, the reference) on one real SQLite
file or one real PostgreSQL schema. What a node holds never lets a turn continue what the store
no longer has, nor another tenant's response, and never changes what the upstream is sent."""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import chat_model_config
from tests.fakes.openai_chat_upstream import FakeOpenAIChat
from tests.server_process import OrgateServer
from tests.store_e2e.helpers import PG_SKIP, PG_URL, TWO_TENANTS, create, uid

Nodes = tuple[OrgateServer, OrgateServer, OrgateServer]


async def _sql(statement: str) -> None:
    import asyncpg  # only needed (and installed) where PostgreSQL tests run

    conn = await asyncpg.connect(PG_URL)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def store_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path_factory.mktemp('history-cache') / 'orgate.db'}"
        return
    if not PG_URL:
        pytest.skip(PG_SKIP)
    schema = f"hc_{uuid.uuid4().hex[:12]}"
    asyncio.run(_sql(f"CREATE SCHEMA {schema}"))
    yield f"{PG_URL}{'&' if '?' in PG_URL else '?'}search_path={schema}"
    asyncio.run(_sql(f"DROP SCHEMA {schema} CASCADE"))


def _start(fake: FakeOpenAIChat, url: str, **store: str) -> OrgateServer:
    env = {"ORGATE_STORE__URL": url}
    env.update({f"ORGATE_STORE__{key.upper()}": value for key, value in store.items()})
    config = TWO_TENANTS + chat_model_config(fake.base_url)
    return OrgateServer(config, api_key="key-a", env=env).start()


@pytest.fixture(scope="module")
def nodes(fake_chat: FakeOpenAIChat, store_url: str) -> Iterator[Nodes]:
    """A and B with a history cache, C without, on one store."""
    started: list[OrgateServer] = []
    try:
        for cache_mb in ("64", "64", "0"):
            started.append(_start(fake_chat, store_url, history_cache_mb=cache_mb))
        yield started[0], started[1], started[2]
    finally:
        for server in started:
            server.stop()


def _client(server: OrgateServer, key: str = "key-a") -> httpx.Client:
    return httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=30)


def _held(server: OrgateServer) -> float:
    """How many continuations the node served from a history it held."""
    text = httpx.get(f"{server.url}/metrics", timeout=30).text
    found = re.search(r'^orgate_history_cache_turns_total\{source="held"\} (\S+)$', text, re.M)
    return float(found.group(1)) if found else 0.0


def _turn(client: httpx.Client, previous: str | None, text: str, **more: Any) -> httpx.Response:
    body = {"model": "fake-chat", "input": text, "previous_response_id": previous, **more}
    return client.post("/v1/responses", json=body)


def _chain(client: httpx.Client, turns: int) -> list[str]:
    ids: list[str] = []
    for n in range(turns):
        ids.append(create(client, model="fake-chat", input=f"turn {n} {uid()}",
                          previous_response_id=ids[-1] if ids else None)["id"])  # fmt: skip
    return ids


def test_a_response_deleted_on_b_is_not_continued_from_as_cache(nodes: Nodes) -> None:
    a, b, c = nodes
    with _client(a) as on_a, _client(b) as on_b, _client(c) as on_c:
        ids = _chain(on_a, 4)
        held = _held(a)
        assert _turn(on_a, ids[2], "again").status_code == 200  # a fork: A holds ids[2]'s history
        assert _turn(on_a, ids[2], "once more").status_code == 200
        assert _held(a) >= held + 2  # served from what it held, not read again
        assert on_b.delete(f"/v1/responses/{ids[2]}").status_code == 200
        refused, reference = _turn(on_a, ids[2], "after delete"), _turn(on_c, ids[2], "after")
        assert refused.status_code == reference.status_code == 404
        assert refused.json() == reference.json()
        # an ancestor deleted: the continuations of the chain through it are refused as well
        ids = _chain(on_a, 4)
        assert _turn(on_a, ids[3], "fork").status_code == 200  # A holds ids[3]'s history now
        assert on_b.delete(f"/v1/responses/{ids[0]}").status_code == 200
        refused, reference = _turn(on_a, ids[3], "after"), _turn(on_c, ids[3], "after")
        assert refused.status_code == reference.status_code == 404
        assert refused.json() == reference.json()


def test_another_tenant_cannot_continue_a_held_history(nodes: Nodes) -> None:
    a, _, c = nodes
    with _client(a) as a_on_a, _client(a, "key-b") as b_on_a, _client(c, "key-b") as b_on_c:
        ids = _chain(a_on_a, 3)
        assert _turn(a_on_a, ids[1], "fork").status_code == 200  # A holds ids[1]'s history
        refused, reference = _turn(b_on_a, ids[1], "mine?"), _turn(b_on_c, ids[1], "mine?")
        assert refused.status_code == reference.status_code == 404
        assert refused.json() == reference.json()
        refused = _turn(b_on_a, ids[2], "mine?")  # its parent is held by A for tenant a
        assert refused.status_code == 404


def _input(n: int) -> list[dict[str, Any]]:
    """A turn's input with more than a user message: a developer note, a client-run tool call."""
    items: list[dict[str, Any]] = [{"role": "user", "content": f"step {n}"}]
    if n % 3 == 1:
        items.insert(0, {"role": "developer", "content": f"be brief ({n})"})
    if n % 3 == 2:
        call = f"call_{n}"
        items += [
            {"type": "function_call", "call_id": call, "name": "lookup", "arguments": "{}"},
            {"type": "function_call_output", "call_id": call, "output": f"result {n}"},
        ]
    return items


def _upstream_inputs(fake: FakeOpenAIChat, clients: list[httpx.Client], turns: int) -> list[Any]:
    """The ``messages`` the upstream got on each turn of one chain, turn n played by
    ``clients[n % len(clients)]``."""
    previous, sent = None, []
    for n in range(turns):
        before = len(fake.bodies)
        reply = _turn(clients[n % len(clients)], previous, "", input=_input(n))
        assert reply.status_code == 200, reply.text
        previous = reply.json()["id"]
        (body,) = fake.bodies[before:]
        sent.append(body["messages"])
    return sent


def test_a_chain_alternating_nodes_sends_what_an_uncached_node_sends(
    nodes: Nodes, fake: FakeOpenAIChat
) -> None:
    a, b, c = nodes
    with _client(a) as on_a, _client(b) as on_b, _client(c) as on_c:
        held = _held(a) + _held(b)
        alternating = _upstream_inputs(fake, [on_a, on_b], 12)
        assert _held(a) + _held(b) >= held + 9  # most turns began from a held history
        assert alternating == _upstream_inputs(fake, [on_c], 12)
        assert len(alternating[-1]) > 12  # the whole history went up


def test_a_chain_and_its_forks_on_one_node_send_what_an_uncached_node_sends(
    nodes: Nodes, fake: FakeOpenAIChat
) -> None:
    """Every turn on one node: its history held, and the messages mapped from it resumed."""
    a, _, c = nodes
    with _client(a) as on_a, _client(c) as on_c:
        assert _upstream_inputs(fake, [on_a], 10) == _upstream_inputs(fake, [on_c], 10)
        ids = _chain(on_a, 4)
        for fork in (ids[3], ids[1], ids[3]):  # forks of a held chain, back and forth
            before = len(fake.bodies)
            assert _turn(on_a, fork, "fork", input=_input(2)).status_code == 200
            assert _turn(on_c, fork, "fork", input=_input(2)).status_code == 200
            held, reference = fake.bodies[before:]
            assert held["messages"] == reference["messages"]


def test_a_conversation_item_deleted_is_not_sent_from_a_held_history(
    nodes: Nodes, fake: FakeOpenAIChat
) -> None:
    a, b, _ = nodes
    with _client(a) as on_a, _client(b) as on_b:
        conversation = on_a.post("/v1/conversations", json={}).json()["id"]
        for n in range(3):
            reply = on_a.post(
                "/v1/responses",
                json={"model": "fake-chat", "input": f"say {n}", "conversation": conversation},
            )
            assert reply.status_code == 200, reply.text
        items = on_b.get(f"/v1/conversations/{conversation}/items", params={"order": "asc"})
        second = items.json()["data"][2]  # the second user message
        assert second["content"][0]["text"] == "say 1"
        deleted = on_b.delete(f"/v1/conversations/{conversation}/items/{second['id']}")
        assert deleted.status_code == 200
        before = len(fake.bodies)
        reply = on_a.post(
            "/v1/responses",
            json={"model": "fake-chat", "input": "last", "conversation": conversation},
        )
        assert reply.status_code == 200, reply.text
        texts = [m["content"] for m in fake.bodies[before]["messages"]]
        assert "say 1" not in texts and "say 0" in texts and "say 2" in texts


def test_an_expired_response_is_not_continued_from_as_cache(
    fake_chat: FakeOpenAIChat, store_url: str
) -> None:
    ttl_seconds = 3.0
    node = _start(fake_chat, store_url, ttl_days=str(ttl_seconds / 86400))
    try:
        with _client(node) as on_node:
            ids = _chain(on_node, 2)
            held = _held(node)
            assert _turn(on_node, ids[0], "fork").status_code == 200  # the node holds ids[0]'s
            assert _held(node) > held
            deadline = time.monotonic() + 120
            while on_node.get(f"/v1/responses/{ids[0]}").status_code != 404:
                assert time.monotonic() < deadline, "the response never expired"
                time.sleep(0.2)
            refused = _turn(on_node, ids[0], "after expiry")
            assert refused.status_code == 404, refused.text
            assert refused.json()["error"]["param"] == "previous_response_id"
    finally:
        node.stop()


def test_a_tiny_cache_stays_within_its_bound(fake_chat: FakeOpenAIChat, store_url: str) -> None:
    bound = 2048
    node = _start(fake_chat, store_url, history_cache_mb=str(bound / 1024 / 1024))
    try:
        with _client(node) as on_node:
            for _ in range(3):
                _chain(on_node, 6)  # more than the bound, over three chains
            text = httpx.get(f"{node.url}/metrics", timeout=30).text
            size = re.search(r"^orgate_history_cache_bytes (\S+)$", text, re.M)
            evicted = re.search(r"^orgate_history_cache_evictions_total (\S+)$", text, re.M)
            assert size is not None and evicted is not None
            assert 0 < float(size.group(1)) <= bound
            assert float(evicted.group(1)) > 0
    finally:
        node.stop()
