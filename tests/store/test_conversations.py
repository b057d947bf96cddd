"""Sessions as conversations, on SQLite and PostgreSQL: metadata, claims of existing sessions,
deleted items, the chain's items with their ids."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from orgate.store import ResponseStore, SessionBusy, StoreError, UnknownSession, open_store, schema
from tests.store.helpers import assistant, response, user


async def test_a_conversation_is_created_read_updated_and_deleted(store: ResponseStore) -> None:
    made = await store.create_conversation("t", "conv_1", metadata={"topic": "cats"})
    assert (made.id, made.metadata, made.latest_response_id, made.hidden) == (
        "conv_1",
        {"topic": "cats"},
        None,
        (),
    )
    assert made.to_wire() == {
        "id": "conv_1",
        "object": "conversation",
        "created_at": int(made.created_at),
        "metadata": {"topic": "cats"},
    }
    with pytest.raises(StoreError):  # a name is one session
        await store.create_conversation("t", "conv_1", metadata={})
    assert await store.get_conversation("conv_1", "other") is None  # another tenant's: missing
    updated = await store.update_conversation("conv_1", "t", metadata={"topic": "dogs"})
    assert updated is not None and updated.metadata == {"topic": "dogs"}
    assert updated.created_at == made.created_at
    assert await store.update_conversation("conv_1", "other", metadata={}) is None
    assert await store.delete_conversation("conv_1", "other") is False
    assert await store.delete_conversation("conv_1", "t") is True
    assert await store.get_conversation("conv_1", "t") is None
    assert await store.delete_conversation("conv_1", "t") is False


async def test_a_header_session_is_a_conversation(store: ResponseStore) -> None:
    await store.save(response("resp_1"), tenant="t", input_items=[user("a")], session_id="s1")
    found = await store.get_conversation("s1", "t")
    assert found is not None
    assert (found.latest_response_id, found.metadata) == ("resp_1", {})
    assert found.created_at > 0


async def test_claiming_a_conversation_that_does_not_exist(store: ResponseStore) -> None:
    with pytest.raises(UnknownSession):
        await store.begin_session_turn("t", "conv_x", create=False)
    assert await store.get_conversation("conv_x", "t") is None  # nothing was created
    await store.create_conversation("t", "conv_x", metadata={})
    turn = await store.begin_session_turn("t", "conv_x", create=False)
    assert turn.latest_response_id is None
    with pytest.raises(SessionBusy):
        await store.begin_session_turn("t", "conv_x", create=False)
    with pytest.raises(UnknownSession):  # another tenant's is missing, not busy
        await store.begin_session_turn("other", "conv_x", create=False)
    with pytest.raises(SessionBusy):  # not deleted under a running turn
        await store.delete_conversation("conv_x", "t")
    await store.end_session_turn(turn)
    assert await store.delete_conversation("conv_x", "t") is True


async def test_deleted_items_are_the_sessions_hidden_ids(store: ResponseStore) -> None:
    await store.create_conversation("t", "conv_h", metadata={})
    await store.save(
        response("resp_1", [assistant("msg_a", "hello")]),
        tenant="t",
        input_items=[user("hi")],
        session_id="conv_h",
    )
    assert await store.hide_item("conv_h", "t", "msg_a") is True
    assert await store.hide_item("conv_h", "other", "msg_a") is False
    found = await store.get_conversation("conv_h", "t")
    assert found is not None and found.hidden == ("msg_a",)
    turn = await store.begin_session_turn("t", "conv_h")
    assert turn.hidden == ("msg_a",) and turn.latest_response_id == "resp_1"
    await store.end_session_turn(turn)
    assert await store.context("resp_1", "t") == [user("hi"), assistant("msg_a", "hello")]


async def test_context_items_have_the_ids_the_listings_give(store: ResponseStore) -> None:
    await store.save(
        response("resp_1", [assistant("msg_out1", "one")]), tenant="t", input_items=[user("q1")]
    )
    await store.save(
        response("resp_2", [assistant("msg_out2", "two")]),
        tenant="t",
        input_items=[{"id": "msg_mine", **user("q2")}, user("q3")],
        previous_response_id="resp_1",
    )
    pairs = await store.context_items("resp_2", "t")
    assert pairs is not None
    assert [item for _, item in pairs] == await store.context("resp_2", "t")
    first = await store.input_items("resp_1", "t", order="asc")
    second = await store.input_items("resp_2", "t", order="asc")
    assert first is not None and second is not None
    assert [item_id for item_id, _ in pairs] == [
        first.data[0]["id"],
        "msg_out1",
        *(item["id"] for item in second.data),
        "msg_out2",
    ]
    assert await store.context_items("resp_2", "other") is None
    await store.delete("resp_1", "t")
    assert await store.context_items("resp_2", "t") is None  # a broken chain, as for context


async def test_sqlite_version_2_sessions_become_conversations(tmp_path: Path) -> None:
    path = tmp_path / "v2.db"
    conn = sqlite3.connect(path, isolation_level=None)
    for version in (1, 2):
        for statement in schema.SQLITE_MIGRATIONS[version]:
            conn.execute(statement)
    conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    conn.execute("INSERT INTO schema_version VALUES (2)")
    conn.execute(
        "INSERT INTO sessions (tenant, session_id, latest_response_id, updated_at)"
        " VALUES ('t', 'old', NULL, 1234.5)"
    )
    conn.close()
    store = await open_store(f"sqlite://{path}", heartbeat_interval=0)
    try:
        found = await store.get_conversation("old", "t")
        assert found is not None
        assert (found.created_at, found.metadata, found.hidden) == (1234.5, {}, ())
    finally:
        await store.close()
