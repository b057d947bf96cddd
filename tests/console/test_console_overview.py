"""The overview: the server's own metrics as charts, for admin keys;
and what an admin key sees of every tenant."""

from __future__ import annotations

from typing import Any

import httpx

from tests.console.conftest import KEYS, create, shoot, sign_in
from tests.server_process import OrgateServer


def _client(server: OrgateServer, tenant: str) -> httpx.Client:
    client = httpx.Client(base_url=server.url, timeout=60)
    assert client.post("/console/api/session", json={"key": KEYS[tenant]}).status_code == 200
    return client


def test_admin_sees_request_rate_errors_and_latency_per_model_and_deployment(
    watched: Any, server: OrgateServer
) -> None:
    page = watched()
    sign_in(page, server, "root")
    page.goto(f"{server.url}/console#/overview")
    for n in range(3):
        create(server, "alpha", input=f"overview {n}")
    httpx.post(
        f"{server.base_url}/responses",
        headers={"Authorization": f"Bearer {KEYS['beta']}"},
        json={"model": "orgate/echo", "input": "orgate:fail"},
        timeout=60,
    )
    page.locator("#overview-rate canvas").first.wait_for()
    page.locator("#overview-p95 canvas").first.wait_for()
    for n in range(3):  # a few more samples, so the charts have lines
        create(server, "beta", input=f"overview again {n}")
        page.locator("#overview-totals td", has_text=str(5 + n)).first.wait_for()
    totals = page.locator("#overview-totals").inner_text()
    assert "orgate/echo" in totals
    shoot(page, "overview")
    snap = _client(server, "root").get("/console/api/overview").json()
    echo = snap["models"]["orgate/echo"]
    assert echo["requests"] >= 4 and echo["errors"] >= 1
    deployment = snap["deployments"]["orgate/echo"]
    assert deployment["calls"] >= 4 and deployment["buckets"][-1][0] is None  # +Inf


def test_the_overview_needs_an_admin_key(watched: Any, server: OrgateServer) -> None:
    refused = _client(server, "alpha").get("/console/api/overview")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "admin_required"
    page = watched()
    sign_in(page, server, "alpha")
    assert page.locator('nav a[data-page="overview"]').is_hidden()
    page.goto(f"{server.url}/console#/overview")
    page.locator("#overview-admin-only").wait_for()


def test_an_admin_key_sees_every_tenant_and_may_narrow_to_one(
    watched: Any, server: OrgateServer
) -> None:
    a = create(server, "alpha", input="alpha for root")
    b = create(server, "beta", input="beta for root")
    root = _client(server, "root")
    ids = {
        r["id"]: r["tenant"]
        for r in root.get("/console/api/responses", params={"limit": 200}).json()["data"]
    }
    assert ids[a["id"]] == "alpha" and ids[b["id"]] == "beta"
    only = {
        r["tenant"]
        for r in root.get("/console/api/responses", params={"tenant": "beta"}).json()["data"]
    }
    assert only == {"beta"}
    assert (
        root.get(f"/console/api/responses/{a['id']}", params={"tenant": "alpha"}).status_code == 200
    )
    page = watched()
    sign_in(page, server, "root")
    page.locator(f'#traffic-rows tr[data-id="{a["id"]}"]').wait_for()
    page.locator(f'#traffic-rows tr[data-id="{b["id"]}"]').wait_for()
    page.fill("form.filters input[name=tenant]", "beta")
    page.click("form.filters button[type=submit]")
    page.locator(f'#traffic-rows tr[data-id="{a["id"]}"]').wait_for(state="detached")
    # the list is redrawn: the other tenant's row goes first, this one's comes back with the new
    # page
    page.locator(f'#traffic-rows tr[data-id="{b["id"]}"]').wait_for()
    assert page.locator(f'#traffic-rows tr[data-id="{b["id"]}"]').count() == 1
