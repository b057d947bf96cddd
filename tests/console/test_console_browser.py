"""The console in a real browser: sign in, live traffic, the inspector, sign out,
and its security."""

from __future__ import annotations

import re
import time
from typing import Any

import httpx

from tests.console.conftest import KEYS, SESSION_SECRET, WEATHER_TOOL, create, shoot, sign_in
from tests.server_process import OrgateServer

XSS_TEXT = (
    "<script>document.title = 'pwned'</script><img src=x onerror=\"document.title = 'pwned'\">"
)


def _row(page: Any, response_id: str) -> Any:
    return page.locator(f'#traffic-rows tr[data-id="{response_id}"]')


def test_sign_in_watch_traffic_live_inspect_a_gate_finding_and_sign_out(
    watched: Any, server: OrgateServer
) -> None:
    first = create(server, "alpha", input="hello console")
    page = watched()
    sign_in(page, server, "alpha")
    _row(page, first["id"]).wait_for()
    # A response made after the page loaded shows up without a reload.
    bad = create(
        server,
        "alpha",
        input="weather in Paris orgate:bad-args",
        tools=[WEATHER_TOOL],
        tool_choice="required",
    )
    _row(page, bad["id"]).wait_for()
    assert "arguments_schema" in _row(page, bad["id"]).inner_text()
    create(server, "alpha", input="a streamed one", stream=True)
    shoot(page, "traffic")

    page.click(f'#traffic-rows tr[data-id="{bad["id"]}"] a')
    marked = page.locator(".card.gate .gate-error").first
    marked.wait_for()
    assert page.locator(".card.gate .badge.code").first.inner_text() == "arguments_schema"
    # The highlighted span is the value at the failing path inside the arguments.
    paths = [
        node.get_attribute("data-path") for node in page.locator(".card.gate .gate-error").all()
    ]
    errors = page.locator(".card.gate li code").all_inner_texts()
    assert paths and set(paths) <= set(errors) | {"$"}
    shoot(page, "inspector")

    page.click("#signout")
    page.wait_for_selector("#signin")
    page.goto(f"{server.url}/console#/traffic")
    page.wait_for_selector("#signin")


def test_a_streamed_response_shows_its_event_timeline(watched: Any, server: OrgateServer) -> None:
    create(server, "alpha", input="stream me", stream=True)
    rows = _api(server, "alpha").get("/console/api/responses").json()["data"]
    streamed = next(r for r in rows if r["status"] == "completed" and _events(server, r["id"]))
    page = watched()
    sign_in(page, server, "alpha")
    page.goto(f"{server.url}/console#/response/{streamed['id']}")
    page.wait_for_selector("ol.events li")
    names = page.locator("ol.events li code").all_inner_texts()
    assert names[0] == "response.created" and names[-1] == "response.completed"


def _events(server: OrgateServer, response_id: str) -> list[Any]:
    return list(_api(server, "alpha").get(f"/console/api/responses/{response_id}").json()["events"])


def test_model_output_and_user_input_render_as_text(watched: Any, server: OrgateServer) -> None:
    made = create(server, "alpha", input=XSS_TEXT)
    page = watched()
    sign_in(page, server, "alpha")
    page.goto(f"{server.url}/console#/response/{made['id']}")
    page.wait_for_selector(".card.item .text p")
    shown = page.locator(".card.item .text p").all_inner_texts()
    assert shown.count(XSS_TEXT) == 2  # the input and the echoed output, as characters
    assert page.title() == "orgate console"
    assert page.locator("main img").count() == 0 and page.locator("main script").count() == 0


def _api(server: OrgateServer, tenant: str) -> httpx.Client:
    client = httpx.Client(base_url=server.url, timeout=60)
    response = client.post("/console/api/session", json={"key": KEYS[tenant]})
    assert response.status_code == 200, response.text
    client.headers["X-CSRF-Token"] = response.json()["csrf_token"]
    return client


def test_tenants_never_see_each_others_responses(watched: Any, server: OrgateServer) -> None:
    mine = create(server, "alpha", input="alpha's secret")
    theirs = create(server, "beta", input="beta's secret")
    alpha, beta = _api(server, "alpha"), _api(server, "beta")
    ids = {
        r["id"] for r in beta.get("/console/api/responses", params={"limit": 200}).json()["data"]
    }
    assert theirs["id"] in ids and mine["id"] not in ids
    # Naming the other tenant changes nothing for a key that is not an admin key.
    ids = {
        r["id"]
        for r in beta.get("/console/api/responses", params={"tenant": "alpha"}).json()["data"]
    }
    assert mine["id"] not in ids
    assert (
        beta.get(f"/console/api/responses/{mine['id']}", params={"tenant": "alpha"}).status_code
        == 404
    )
    assert alpha.get(f"/console/api/responses/{mine['id']}").status_code == 200

    page = watched(expected_failures=(f"/console/api/responses/{mine['id']}",))
    sign_in(page, server, "beta")
    _row(page, theirs["id"]).wait_for()
    assert _row(page, mine["id"]).count() == 0
    page.goto(f"{server.url}/console#/response/{mine['id']}?tenant=alpha")
    page.wait_for_selector("main .error")
    assert "alpha's secret" not in page.content()


def test_state_changes_need_the_csrf_token_and_this_origin(server: OrgateServer) -> None:
    client = _api(server, "alpha")
    token = client.headers.pop("X-CSRF-Token")
    refused = client.delete("/console/api/session")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "csrf_failed"
    wrong = client.delete("/console/api/session", headers={"X-CSRF-Token": token[::-1]})
    assert wrong.status_code == 403
    foreign = client.delete(
        "/console/api/session", headers={"X-CSRF-Token": token, "Origin": "https://evil.example"}
    )
    assert foreign.status_code == 403
    signin = httpx.post(
        f"{server.url}/console/api/session",
        json={"key": KEYS["alpha"]},
        headers={"Origin": "https://evil.example"},
    )
    assert signin.status_code == 403
    assert client.get("/console/api/session").status_code == 200  # still signed in
    assert client.delete("/console/api/session", headers={"X-CSRF-Token": token}).status_code == 200
    assert client.get("/console/api/session").status_code == 401


def test_a_signed_out_cookie_is_refused_even_when_replayed(server: OrgateServer) -> None:
    client = _api(server, "alpha")
    cookie = client.cookies.get("orgate_console")
    assert client.delete("/console/api/session").status_code == 200
    replay = httpx.get(f"{server.url}/console/api/responses", cookies={"orgate_console": cookie})
    assert (
        replay.status_code == 401 and replay.json()["error"]["code"] == "console_session_required"
    )


def test_an_expired_or_forged_session_gets_the_sign_in_page(
    watched: Any, server: OrgateServer
) -> None:
    from orgate.config import load_settings, resolve_api_keys
    from orgate.console.session import SessionSigner

    settings = load_settings(str(server.config_path))
    signer = SessionSigner(SESSION_SECRET.encode(), resolve_api_keys(settings), 60.0)
    alpha = next(key for key in resolve_api_keys(settings) if key.name == "alpha")
    expired, _ = signer.issue(alpha, now=time.time() - 120)
    valid, _ = signer.issue(alpha)
    forged = valid.replace(valid.split(".")[0], valid.split(".")[0][:-2] + "AA")
    for cookie, expect in ((valid, 200), (expired, 401), (forged, 401)):
        got = httpx.get(f"{server.url}/console/api/session", cookies={"orgate_console": cookie})
        assert got.status_code == expect, (cookie, got.text)
    page = watched()
    page.context.add_cookies(
        [{"name": "orgate_console", "value": expired, "url": f"{server.url}/console"}]
    )
    page.goto(f"{server.url}/console#/traffic")
    page.wait_for_selector("#signin")
    shoot(page, "signin")


def test_security_headers_on_every_console_response(server: OrgateServer) -> None:
    client = _api(server, "alpha")
    for path in (
        "/console",
        "/console/static/app.js",
        "/console/api/responses",
        "/console/api/session",
    ):
        headers = client.get(path).headers
        csp = headers["content-security-policy"]
        assert (
            "script-src 'self'" in csp
            and "frame-ancestors 'none'" in csp
            and "unsafe-inline" not in csp
        )
        assert headers["x-content-type-options"] == "nosniff"
    assert client.get("/console/static/..%2Fapi.py").status_code == 404
    set_cookie = httpx.post(
        f"{server.url}/console/api/session", json={"key": KEYS["alpha"]}
    ).headers["set-cookie"]
    assert re.search(r"HttpOnly", set_cookie, re.I) and re.search(
        r"SameSite=strict", set_cookie, re.I
    )
    assert KEYS["alpha"] not in set_cookie


def test_the_console_is_off_when_disabled(tmp_path: Any) -> None:
    with OrgateServer("[console]\nenabled = false\n", workdir=str(tmp_path)) as off:
        assert httpx.get(f"{off.url}/console").status_code == 404
        assert httpx.get(f"{off.url}/console/api/session").status_code == 404


def test_the_traffic_endpoint_pages_and_filters(server: OrgateServer) -> None:
    made = [create(server, "beta", input=f"page {n}")["id"] for n in range(3)]
    client = _api(server, "beta")
    seen: list[str] = []
    cursor = None
    while True:
        params = {"limit": 1, **({"cursor": cursor} if cursor else {})}
        page = client.get("/console/api/responses", params=params).json()
        seen += [r["id"] for r in page["data"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen.index(made[2]) < seen.index(made[1]) < seen.index(made[0]) and len(seen) == len(
        set(seen)
    )
    completed = client.get(
        "/console/api/responses", params={"status": "completed", "model": "orgate/echo"}
    ).json()["data"]
    assert set(made) <= {r["id"] for r in completed}
    assert client.get("/console/api/responses", params={"status": "cancelled"}).json()["data"] == []
    assert client.get("/console/api/responses", params={"model": "nope"}).json()["data"] == []
    bad = client.get("/console/api/responses", params={"cursor": "???"})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "cursor"
    assert client.get("/console/api/responses", params={"status": "odd"}).status_code == 400


def test_the_inspector_walks_the_previous_response_chain(
    watched: Any, server: OrgateServer
) -> None:
    first = create(server, "alpha", input="first turn")
    second = create(server, "alpha", input="second turn", previous_response_id=first["id"])
    page = watched()
    sign_in(page, server, "alpha")
    page.goto(f"{server.url}/console#/response/{second['id']}")
    page.locator("#inspector h2 code", has_text=second["id"]).wait_for()
    assert "depth 1" in page.locator("#inspector nav.chain").inner_text()
    page.click("#previous")
    page.locator("#inspector h2 code", has_text=first["id"]).wait_for()
    assert "first in its chain" in page.locator("#inspector nav.chain").inner_text()


def test_the_inspector_shows_the_translation_ledger(watched: Any, server: OrgateServer) -> None:
    """A hosted tool orgate/echo cannot run is dropped: the inspector lists the ledger entry."""
    dropped = create(
        server,
        "alpha",
        input="search the web",
        tools=[WEATHER_TOOL, {"type": "web_search"}],
    )
    page = watched()
    sign_in(page, server, "alpha")
    page.goto(f"{server.url}/console#/response/{dropped['id']}")
    card = page.locator(".card.translation")
    card.wait_for()
    assert "1 dropped" in card.locator("h3").inner_text()
    cells = card.locator("tbody tr").first.locator("td").all_inner_texts()
    assert cells == ["hosted_tool_dropped", "dropped", "request", "tools[1]", "web_search"]
    shoot(page, "translation")
