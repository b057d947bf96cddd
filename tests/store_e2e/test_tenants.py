"""Tenant isolation: every endpoint answers 404 (or a separate session) for another tenant's
response."""

from __future__ import annotations

import httpx
import pytest

from tests.store_e2e.helpers import assert_error, create, create_stream, poll, text_of, uid


@pytest.fixture
def owned(a: httpx.Client) -> dict[str, str]:
    """Responses of tenant a: a streamed one, a slow background one, and an output item id."""
    _, events = create_stream(a, input=f"tenant a private {uid()}")
    streamed = events[-1]["response"]
    slow = create(
        a, input="orgate:delay=300 " + " ".join(f"s{i}" for i in range(30)), background=True
    )
    return {
        "streamed": streamed["id"],
        "item": streamed["output"][0]["id"],
        "background": slow["id"],
    }


def test_cross_tenant_matrix(a: httpx.Client, b: httpx.Client, owned: dict[str, str]) -> None:
    for rid in (owned["streamed"], owned["background"]):
        assert_error(b.get(f"/v1/responses/{rid}"), 404, "not_found")
        assert_error(b.get(f"/v1/responses/{rid}", params={"stream": "true"}), 404, "not_found")
        assert_error(b.get(f"/v1/responses/{rid}/input_items"), 404, "not_found")
        assert_error(b.post(f"/v1/responses/{rid}/cancel"), 404, "not_found")
        assert_error(b.delete(f"/v1/responses/{rid}"), 404, "not_found")
        r = b.post(
            "/v1/responses",
            json={"model": "orgate/echo", "input": "steal", "previous_response_id": rid},
        )
        assert_error(r, 404, "not_found", "previous_response_id")
    r = b.post(
        "/v1/responses",
        json={"model": "orgate/echo", "input": [{"type": "item_reference", "id": owned["item"]}]},
    )
    assert_error(r, 404, "not_found", "input[0].id")

    # Nothing tenant b did touched tenant a's responses.
    assert a.get(f"/v1/responses/{owned['streamed']}").status_code == 200
    assert a.get(f"/v1/responses/{owned['streamed']}", params={"stream": "true"}).status_code == 200
    assert a.get(f"/v1/responses/{owned['streamed']}/input_items").json()["data"]
    assert a.get(f"/v1/responses/{owned['background']}").json()["status"] in (
        "queued",
        "in_progress",
    ), "b's cancel must not cancel a's response"
    ref = [{"type": "item_reference", "id": owned["item"]}, {"role": "user", "content": "ok"}]
    r = a.post("/v1/responses", json={"model": "orgate/echo", "input": ref})
    assert r.status_code == 200 and text_of(r.json()) == "ok", r.text
    assert a.post(f"/v1/responses/{owned['background']}/cancel").json()["status"] == "cancelled"


def test_isolation_is_symmetric(a: httpx.Client, b: httpx.Client) -> None:
    """The other direction: tenant a cannot see tenant b's responses either."""
    theirs = create(b, input="tenant b private")
    assert_error(a.get(f"/v1/responses/{theirs['id']}"), 404, "not_found")
    assert_error(a.delete(f"/v1/responses/{theirs['id']}"), 404, "not_found")
    assert poll(b, theirs["id"])["status"] == "completed"


def test_unauthenticated_requests_are_401(a: httpx.Client) -> None:
    rid = create(a, input="x")["id"]
    with httpx.Client(base_url=a.base_url, timeout=10) as anon:
        for method, path in (
            ("GET", f"/v1/responses/{rid}"),
            ("DELETE", f"/v1/responses/{rid}"),
            ("GET", f"/v1/responses/{rid}/input_items"),
            ("POST", f"/v1/responses/{rid}/cancel"),
        ):
            assert_error(anon.request(method, path), 401)
            assert_error(anon.request(method, path, headers={"Authorization": "Bearer wrong"}), 401)
