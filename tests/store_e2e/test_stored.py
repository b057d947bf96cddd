"""Stored responses over HTTP: GET/DELETE, store=false, input_items paging, ?stream=true replay."""

from __future__ import annotations

import httpx
import pytest

from tests.store_e2e.helpers import assert_error, create, create_stream, uid
from tests.support.spec import check_sse, validate


def test_get_returns_the_body_the_post_returned(a: httpx.Client) -> None:
    created = create(a, input=f"remember {uid()}", instructions="be terse", metadata={"k": "v"})
    assert created["status"] == "completed" and created["store"] is True
    got = a.get(f"/v1/responses/{created['id']}")
    assert got.status_code == 200 and got.headers["content-type"].startswith("application/json")
    validate("ResponseResource", got.json())
    assert got.json() == created


def test_get_returns_the_body_of_a_streamed_response(a: httpx.Client) -> None:
    _, events = create_stream(a, input=f"streamed {uid()} words here")
    final = events[-1]
    assert final["type"] == "response.completed"
    got = a.get(f"/v1/responses/{final['response']['id']}").json()
    validate("ResponseResource", got)
    assert got == final["response"]


def test_delete_then_get_and_continue_are_404(a: httpx.Client) -> None:
    created = create(a, input="to be deleted")
    rid = created["id"]
    r = a.delete(f"/v1/responses/{rid}")
    assert r.status_code == 200, r.text
    assert r.json() == {"id": rid, "object": "response", "deleted": True}
    assert_error(a.get(f"/v1/responses/{rid}"), 404, "not_found")
    assert_error(a.get(f"/v1/responses/{rid}/input_items"), 404, "not_found")
    r = a.post(
        "/v1/responses", json={"model": "orgate/echo", "input": "next", "previous_response_id": rid}
    )
    assert_error(r, 404, "not_found", "previous_response_id")
    assert_error(a.delete(f"/v1/responses/{rid}"), 404, "not_found")


def test_deleting_an_ancestor_breaks_the_chain_after_it(a: httpx.Client) -> None:
    first = create(a, input="one")
    second = create(a, input="two", previous_response_id=first["id"])
    assert a.delete(f"/v1/responses/{first['id']}").status_code == 200
    assert a.get(f"/v1/responses/{second['id']}").status_code == 200  # the record stays readable
    r = a.post(
        "/v1/responses",
        json={"model": "orgate/echo", "input": "three", "previous_response_id": second["id"]},
    )
    assert_error(r, 404, "not_found", "previous_response_id")


@pytest.mark.parametrize("stream", [False, True])
def test_store_false_is_not_retrievable(a: httpx.Client, stream: bool) -> None:
    if stream:
        _, events = create_stream(a, input="ephemeral", store=False)
        created = events[-1]["response"]
    else:
        created = create(a, input="ephemeral", store=False)
    assert created["store"] is False and created["status"] == "completed"
    rid = created["id"]
    assert_error(a.get(f"/v1/responses/{rid}"), 404, "not_found")
    assert_error(a.get(f"/v1/responses/{rid}?stream=true"), 404, "not_found")
    assert_error(a.get(f"/v1/responses/{rid}/input_items"), 404, "not_found")
    r = a.post(
        "/v1/responses", json={"model": "orgate/echo", "input": "next", "previous_response_id": rid}
    )
    assert_error(r, 404, "not_found", "previous_response_id")


# --------------------------------------------------------------------------- input_items

FIVE = [
    {"type": "message", "role": "user", "content": "first"},
    {"type": "message", "role": "assistant", "content": "second"},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "third"}]},
    {"type": "message", "role": "developer", "content": "fourth"},
    {"type": "message", "role": "user", "content": "fifth"},
]


def _texts(page: dict) -> list[str]:
    out = []
    for item in page["data"]:
        content = item["content"]
        out.append(content if isinstance(content, str) else "".join(p["text"] for p in content))
    return out


def test_input_items_shape_order_limit_after(a: httpx.Client) -> None:
    rid = create(a, input=FIVE)["id"]
    full = a.get(f"/v1/responses/{rid}/input_items", params={"order": "asc"}).json()
    assert set(full) == {"object", "data", "first_id", "last_id", "has_more"}
    assert full["object"] == "list" and full["has_more"] is False
    assert _texts(full) == ["first", "second", "third", "fourth", "fifth"]
    assert [i["role"] for i in full["data"]] == ["user", "assistant", "user", "developer", "user"]
    ids = [item["id"] for item in full["data"]]
    assert len(set(ids)) == 5 and all(isinstance(i, str) and i for i in ids)
    assert (full["first_id"], full["last_id"]) == (ids[0], ids[-1])

    default = a.get(f"/v1/responses/{rid}/input_items").json()  # order defaults to desc
    assert [i["id"] for i in default["data"]] == ids[::-1]

    page1 = a.get(f"/v1/responses/{rid}/input_items", params={"order": "asc", "limit": 2}).json()
    assert [i["id"] for i in page1["data"]] == ids[:2] and page1["has_more"] is True
    assert page1["last_id"] == ids[1]
    page2 = a.get(
        f"/v1/responses/{rid}/input_items",
        params={"order": "asc", "limit": 2, "after": page1["last_id"]},
    ).json()
    assert [i["id"] for i in page2["data"]] == ids[2:4] and page2["has_more"] is True
    page3 = a.get(
        f"/v1/responses/{rid}/input_items",
        params={"order": "asc", "limit": 2, "after": page2["last_id"]},
    ).json()
    assert [i["id"] for i in page3["data"]] == ids[4:] and page3["has_more"] is False

    desc = a.get(
        f"/v1/responses/{rid}/input_items", params={"order": "desc", "limit": 3, "after": ids[3]}
    ).json()
    assert [i["id"] for i in desc["data"]] == [ids[2], ids[1], ids[0]] and desc["has_more"] is False


def test_input_items_lists_only_the_turns_own_input(a: httpx.Client) -> None:
    first = create(a, input="alpha")
    second = create(
        a, input=[{"role": "user", "content": "beta"}], previous_response_id=first["id"]
    )
    page = a.get(f"/v1/responses/{second['id']}/input_items").json()
    assert _texts(page) == ["beta"]


@pytest.mark.parametrize(
    "query", ["limit=0", "limit=101", "limit=abc", "limit=-1", "order=sideways"]
)
def test_input_items_bad_parameters_are_400(a: httpx.Client, query: str) -> None:
    rid = create(a, input="x")["id"]
    error = assert_error(a.get(f"/v1/responses/{rid}/input_items?{query}"), 400)
    assert error["param"] == query.partition("=")[0]


def test_input_items_of_unknown_response_is_404(a: httpx.Client) -> None:
    assert_error(a.get("/v1/responses/resp_doesnotexist/input_items"), 404, "not_found")


# --------------------------------------------------------------------------- ?stream=true replay


def test_stream_replay_returns_the_same_events(a: httpx.Client) -> None:
    raw, events = create_stream(a, input=f"replay me please {uid()}")
    rid = events[0]["response"]["id"]
    r = a.get(f"/v1/responses/{rid}", params={"stream": "true"})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/event-stream")
    replayed = check_sse(r.content)
    assert replayed == events
    assert r.content == raw


def test_stream_replay_of_a_non_streamed_response_is_400(a: httpx.Client) -> None:
    rid = create(a, input="not streamed")["id"]
    error = assert_error(
        a.get(f"/v1/responses/{rid}", params={"stream": "true"}), 400, param="stream"
    )
    assert "stream=true" in error["message"]


def test_stream_replay_of_unknown_response_is_404(a: httpx.Client) -> None:
    assert_error(a.get("/v1/responses/resp_nope", params={"stream": "true"}), 404, "not_found")
