"""``list_responses``: the console's newest-first, keyset-paginated listing,
on SQLite and PostgreSQL."""

from __future__ import annotations

import time

import pytest

from orgate.store import ResponseFilter, ResponseStore
from tests.store.helpers import response, user


async def _save(
    store: ResponseStore,
    rid: str,
    tenant: str,
    *,
    status: str = "completed",
    created: int,
    session: str | None = None,
) -> None:
    body = {**response(rid, status=status, created_at=created), "model": "m-" + rid[-1]}
    await store.save(body, tenant=tenant, input_items=[user(rid)], session_id=session)


async def _all_pages(store: ResponseStore, where: ResponseFilter, limit: int) -> list[list[str]]:
    pages: list[list[str]] = []
    cursor = None
    while True:
        page = await store.list_responses(where, limit=limit, cursor=cursor)
        pages.append([r.id for r in page.data])
        if page.next_cursor is None:
            return pages
        cursor = page.next_cursor


async def test_pages_go_newest_first_without_gaps_or_repeats(store: ResponseStore) -> None:
    # Several responses share a created_at second: the id breaks ties on PostgreSQL.
    ids = [f"resp_{n:02d}" for n in range(7)]
    for n, rid in enumerate(ids):
        await _save(store, rid, "acme", created=1_700_000_000 + n // 3)
    await _save(store, "resp_other", "globex", created=1_700_000_100)
    pages = await _all_pages(store, ResponseFilter(tenant="acme"), limit=3)
    assert [len(p) for p in pages] == [3, 3, 1]
    assert [rid for page in pages for rid in page] == ids[::-1]
    everyone = await store.list_responses(ResponseFilter(), limit=100)
    assert [r.id for r in everyone.data] == ["resp_other", *ids[::-1]]
    assert everyone.next_cursor is None


async def test_filters_by_status_model_and_session(store: ResponseStore) -> None:
    await _save(store, "resp_a1", "acme", created=1, session="s1")
    await _save(store, "resp_b2", "acme", created=2, status="failed")
    await _save(store, "resp_c1", "acme", created=3, session="s1")
    await _save(store, "resp_d1", "other", created=4, session="s1")

    async def ids(**where: str) -> list[str]:
        page = await store.list_responses(ResponseFilter(tenant="acme", **where))
        return [r.id for r in page.data]

    assert await ids(status="failed") == ["resp_b2"]
    assert await ids(model="m-1") == ["resp_c1", "resp_a1"]
    assert await ids(session_id="s1") == ["resp_c1", "resp_a1"]
    assert await ids(status="completed", session_id="s1", model="m-1") == ["resp_c1", "resp_a1"]
    assert await ids(status="cancelled") == []


async def test_an_update_keeps_a_response_in_its_place(store: ResponseStore) -> None:
    await _save(store, "resp_1", "acme", created=1, status="in_progress")
    await _save(store, "resp_2", "acme", created=2)
    await _save(store, "resp_1", "acme", created=1, status="completed")
    page = await store.list_responses(ResponseFilter(tenant="acme"))
    assert [(r.id, r.status) for r in page.data] == [
        ("resp_2", "completed"),
        ("resp_1", "completed"),
    ]


async def test_expired_responses_are_not_listed(store: ResponseStore) -> None:
    await store.save(
        response("resp_old"), tenant="acme", input_items=[], expires_at=time.time() - 1
    )
    await _save(store, "resp_new", "acme", created=2)
    page = await store.list_responses(ResponseFilter(tenant="acme"))
    assert [r.id for r in page.data] == ["resp_new"]


async def test_a_cursor_it_did_not_make_is_a_value_error(store: ResponseStore) -> None:
    with pytest.raises(ValueError):
        await store.list_responses(ResponseFilter(), cursor="not a cursor!")
