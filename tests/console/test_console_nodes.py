"""The node list and the overview of every node: two ``orgate serve`` processes on one store."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.console.conftest import CONFIG, KEYS, create, shoot, sign_in
from tests.server_process import OrgateServer


@pytest.fixture
def peer(server: OrgateServer) -> Iterator[OrgateServer]:
    """A second process serving the console server's store (another node)."""
    shared = {"ORGATE_STORE__URL": server.env["ORGATE_STORE__URL"]}
    running = OrgateServer(CONFIG, api_key=KEYS["alpha"], env=shared).start()
    try:
        yield running
    finally:
        running.kill()


def _listed(server: OrgateServer) -> list[dict[str, Any]]:
    client = httpx.Client(base_url=server.url, timeout=60)
    assert client.post("/console/api/session", json={"key": KEYS["root"]}).status_code == 200
    reply = client.get("/console/api/nodes")
    assert reply.status_code == 200, reply.text
    return list(reply.json()["data"])


def test_the_node_list_shows_each_node_and_its_health(
    watched: Any, server: OrgateServer, peer: OrgateServer
) -> None:
    create(peer, "alpha", input="served by the peer")
    page = watched()
    sign_in(page, server, "root")
    page.goto(f"{server.url}/console#/nodes")
    for node in (server, peer):
        page.locator(f'#nodes tr.node.up td:text-is("{node.url}")').wait_for()
    assert page.locator("#nodes tr.node.up").count() == 2
    assert page.locator('#nodes td:has-text("(this node)")').count() == 1
    shoot(page, "nodes")
    listed = {node["address"]: node for node in _listed(peer)}
    assert listed[server.url]["status"] == "up" and listed[peer.url]["this"]
    peer.stop()  # drained: the page (refreshed every 5 s) says so
    page.locator(f'#nodes tr.node.stopped td:text-is("{peer.url}")').wait_for()
    assert {n["address"]: n["status"] for n in _listed(server)}[peer.url] == "stopped"


def test_the_overview_counts_every_nodes_traffic(server: OrgateServer, peer: OrgateServer) -> None:
    client = httpx.Client(base_url=server.url, timeout=60)
    assert client.post("/console/api/session", json={"key": KEYS["root"]}).status_code == 200

    def echo_requests() -> float:
        models = client.get("/console/api/overview").json()["models"]
        return float(models.get("orgate/echo", {}).get("requests", 0))

    before = echo_requests()
    for n in range(4):
        create(peer, "beta", input=f"on the peer {n}")
    peer.stop()  # its last snapshot is written as it drains: its counters stay counted
    assert echo_requests() >= before + 4


def test_the_node_list_needs_an_admin_key(watched: Any, server: OrgateServer) -> None:
    client = httpx.Client(base_url=server.url, timeout=60)
    assert client.post("/console/api/session", json={"key": KEYS["alpha"]}).status_code == 200
    refused = client.get("/console/api/nodes")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "admin_required"
    page = watched()
    sign_in(page, server, "alpha")
    assert page.locator('nav a[data-page="nodes"]').is_hidden()
    page.goto(f"{server.url}/console#/nodes")
    page.locator("#nodes-admin-only").wait_for()
