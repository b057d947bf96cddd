"""The review queue in the browser: the schema-checked editor and the three resolutions,
seen through the API."""

from __future__ import annotations

from typing import Any

import httpx

from tests.console.conftest import KEYS, PERSON, create, queue_for_review, shoot, sign_in
from tests.server_process import OrgateServer


def _entry(server: OrgateServer, tenant: str, review_id: str) -> dict[str, Any]:
    got = httpx.get(
        f"{server.base_url}/orgate/review/{review_id}",
        headers={"Authorization": f"Bearer {KEYS[tenant]}"},
        timeout=60,
    )
    assert got.status_code == 200, got.text
    return dict(got.json())


def test_edit_validate_and_resolve_review_entries(watched: Any, server: OrgateServer) -> None:
    edited, defaulted, rejected = (queue_for_review(server, "alpha") for _ in range(3))
    foreign = queue_for_review(server, "beta")
    page = watched()
    sign_in(page, server, "alpha")
    page.goto(f"{server.url}/console#/review")
    card = page.locator(f'.review-entry[data-id="{edited}"]')
    card.wait_for()
    assert page.locator(f'.review-entry[data-id="{foreign}"]').count() == 0
    shoot(page, "review")

    editor = card.locator("textarea.editor")
    editor.fill('{"name": "Ada", "age": "old"}')
    # (the draft first shown is the failed attempt's text, with its own errors)
    card.locator(".validation li.error", has_text="age").wait_for()
    assert card.locator("button.accept").is_disabled()
    editor.fill('{"name": "Ada", "age": 36')
    card.locator(".validation li.error", has_text="not JSON").wait_for()
    editor.fill('{"name": "Ada", "age": 36}')
    card.locator(".validation li.ok").wait_for()
    card.locator("button.accept").click()
    card.wait_for(state="detached")
    assert _entry(server, "alpha", edited)["status"] == "resolved"
    assert _entry(server, "alpha", edited)["resolution"] == {"name": "Ada", "age": 36}

    page.locator(f'.review-entry[data-id="{defaulted}"] button.default').click()
    page.locator(f'.review-entry[data-id="{defaulted}"]').wait_for(state="detached")
    assert _entry(server, "alpha", defaulted)["resolution"] == {"name": "nobody", "age": 0}

    page.locator(f'.review-entry[data-id="{rejected}"] button.reject').click()
    page.locator(f'.review-entry[data-id="{rejected}"]').wait_for(state="detached")
    assert _entry(server, "alpha", rejected)["status"] == "discarded"
    assert _entry(server, "beta", foreign)["status"] == "pending"


def test_review_endpoints_keep_tenants_apart_and_need_csrf(server: OrgateServer) -> None:
    theirs = queue_for_review(server, "beta")
    alpha = httpx.Client(base_url=server.url, timeout=60)
    token = alpha.post("/console/api/session", json={"key": KEYS["alpha"]}).json()["csrf_token"]
    listed = {e["id"] for e in alpha.get("/console/api/review").json()["data"]}
    assert theirs not in listed
    assert alpha.get(f"/console/api/review/{theirs}").status_code == 404
    csrf = {"X-CSRF-Token": token}
    assert (
        alpha.post(
            f"/console/api/review/{theirs}/resolve", json={"discard": True}, headers=csrf
        ).status_code
        == 404
    )
    mine = queue_for_review(server, "alpha")
    refused = alpha.post(f"/console/api/review/{mine}/resolve", json={"discard": True})
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "csrf_failed"
    bad = alpha.post(
        f"/console/api/review/{mine}/resolve", json={"value": {"name": 1}}, headers=csrf
    )
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_review_resolution"
    draft = {"value": {"name": "x", "age": 1}}
    refused = alpha.post(f"/console/api/review/{mine}/validate", json=draft)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "csrf_failed"
    check = alpha.post(f"/console/api/review/{mine}/validate", json=draft, headers=csrf)
    assert check.json() == {"valid": True, "errors": []}
    assert _entry(server, "beta", theirs)["status"] == "pending"


def test_each_structured_output_attempt_is_shown(watched: Any, server: OrgateServer) -> None:
    review_id = queue_for_review(server, "alpha")
    entry = _entry(server, "alpha", review_id)
    page = watched()
    sign_in(page, server, "alpha")
    page.goto(f"{server.url}/console#/review")
    card = page.locator(f'.review-entry[data-id="{review_id}"]')
    card.locator("details summary").click()
    attempts = card.locator(".attempts tbody tr")
    attempts.first.wait_for()
    assert attempts.count() == len(entry["attempts"]) == 1
    cells = attempts.first.locator("td").all_inner_texts()
    # number, finish reason, the stage that failed, its errors, the token budget, the raw text
    assert cells[2] == "schema" and "12.5" in cells[3] and "12.5" in cells[5]


def test_a_recovered_response_shows_its_outcome_and_attempts(
    watched: Any, server: OrgateServer
) -> None:
    pet = {**PERSON, "name": "pet"}  # one retry for this format: the feedback recovers it
    made = create(server, "alpha", input="a pet orgate:bad-json", text={"format": pet})
    rows = httpx.Client(base_url=server.url, timeout=60)
    rows.post("/console/api/session", json={"key": KEYS["alpha"]})
    row = next(
        r for r in rows.get("/console/api/responses").json()["data"] if r["id"] == made["id"]
    )
    assert row["structured"] == "recovered"
    page = watched()
    sign_in(page, server, "alpha")
    page.locator(f'#traffic-rows tr[data-id="{made["id"]}"]', has_text="recovered").wait_for()
    page.goto(f"{server.url}/console#/response/{made['id']}")
    attempts = page.locator("#inspector .attempts tbody tr")
    attempts.first.wait_for()
    assert attempts.count() == 2
    assert attempts.nth(0).locator("td").nth(2).inner_text() == "schema"
    assert attempts.nth(1).locator("td").nth(2).inner_text() == ""
    assert page.locator("#inspector .route").count() == 0  # one upstream call: no route to show
