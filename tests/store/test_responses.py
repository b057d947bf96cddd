"""Responses, items and chains: every test runs on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import time

import pytest

from orgate.store import ResponseConflict, ResponseStore, UnknownResponse
from tests.store.helpers import assistant, response, session_pointer, user


async def test_save_get_delete(store: ResponseStore) -> None:
    body = response("resp_a", [assistant("msg_a", "hello")])
    await store.save(
        body,
        tenant="acme",
        input_items=[user("hi")],
        deployment="dep-1",
        request={"model": "test-model", "input": "hi"},
        events=b"event: response.created\ndata: {}\n\n",
    )
    got = await store.get("resp_a", "acme")
    assert got is not None
    assert got.response == body
    assert got.request == {"model": "test-model", "input": "hi"}
    assert (got.status, got.model, got.deployment, got.tenant) == (
        "completed",
        "test-model",
        "dep-1",
        "acme",
    )
    assert (got.depth, got.history_len, got.previous_response_id) == (0, 2, None)
    assert got.created_at == 1_700_000_000
    assert got.owner == store.owner_id
    assert await store.events("resp_a", "acme") == b"event: response.created\ndata: {}\n\n"
    assert await store.context("resp_a", "acme") == [user("hi"), assistant("msg_a", "hello")]

    assert await store.delete("resp_a", "acme") is True
    assert await store.get("resp_a", "acme") is None
    assert await store.context("resp_a", "acme") is None
    assert await store.input_items("resp_a", "acme") is None
    assert await store.get_item("msg_a", "acme") is None
    assert await store.events("resp_a", "acme") is None
    assert await store.delete("resp_a", "acme") is False


async def test_save_is_an_idempotent_upsert(store: ResponseStore) -> None:
    inputs = [user("q")]
    await store.save(response("resp_bg", status="queued"), tenant="t", input_items=inputs)
    page = await store.input_items("resp_bg", "t")
    assert page is not None
    first_ids = [item["id"] for item in page.data]
    partial = response("resp_bg", [assistant("msg_1", "par")], status="in_progress")
    await store.save(partial, tenant="t", input_items=inputs, events=b"1")
    done = response("resp_bg", [assistant("msg_1", "part"), assistant("msg_2", "two")])
    await store.save(done, tenant="t", input_items=inputs, events=b"12")
    got = await store.get("resp_bg", "t")
    assert got is not None and got.status == "completed" and got.response == done
    assert got.history_len == 3
    assert await store.context("resp_bg", "t") == [inputs[0], *done["output"]]
    assert await store.events("resp_bg", "t") == b"12"
    page = await store.input_items("resp_bg", "t")
    assert page is not None and [item["id"] for item in page.data] == first_ids
    # fewer output items than before: the stale ones go
    await store.save(response("resp_bg", [], status="failed"), tenant="t", input_items=inputs)
    assert await store.context("resp_bg", "t") == inputs
    assert await store.get_item("msg_2", "t") is None
    got = await store.get("resp_bg", "t")
    assert got is not None and got.history_len == 1


async def test_a_finished_response_never_goes_back_to_running(store: ResponseStore) -> None:
    """A save of an earlier state that lands after the final one (it waited for the write lock,
    or its caller was cancelled mid-way) changes nothing: the response stays finished."""
    inputs = [user("q")]
    await store.save(
        response("resp_late", status="in_progress"), tenant="t", input_items=inputs, events=b"1"
    )
    await store.save(
        response("resp_late", status="in_progress"), tenant="t", input_items=inputs, events=b"12"
    )
    done = response("resp_late", [assistant("msg_1", "all")], status="failed")
    await store.save(done, tenant="t", input_items=inputs, events=b"123", session_id="s1")
    for late in ("in_progress", "queued"):
        await store.save(
            response("resp_late", status=late),
            tenant="t",
            input_items=inputs,
            events=b"1",
            session_id="s2",
        )
        got = await store.get("resp_late", "t")
        assert got is not None and got.status == "failed" and got.response == done
        assert await store.events("resp_late", "t") == b"123"
        assert await store.context("resp_late", "t") == [inputs[0], *done["output"]]
    with pytest.raises(ResponseConflict):  # another tenant's id is still refused, late or not
        await store.save(
            response("resp_late", status="in_progress"), tenant="other", input_items=inputs
        )
    final = response("resp_late", [assistant("msg_1", "all")], status="completed")
    await store.save(
        final, tenant="t", input_items=inputs
    )  # finished to finished is a save like any
    got = await store.get("resp_late", "t")
    assert got is not None and got.status == "completed"


async def test_save_rejects_unknown_previous_and_bad_bodies(store: ResponseStore) -> None:
    with pytest.raises(UnknownResponse):
        await store.save(
            response("resp_x"), tenant="t", input_items=[], previous_response_id="resp_nope"
        )
    assert await store.get("resp_x", "t") is None
    with pytest.raises(ValueError):
        await store.save({"status": "completed"}, tenant="t", input_items=[])
    with pytest.raises(ValueError):
        await store.save(response("resp_y", status="weird"), tenant="t", input_items=[])


async def test_tenant_isolation(store: ResponseStore) -> None:
    await store.save(
        response("resp_a", [assistant("msg_a", "secret")]),
        tenant="alpha",
        input_items=[user("alpha's question")],
        session_id="shared-name",
        events=b"x",
    )
    # every read and write by another tenant sees nothing
    assert await store.get("resp_a", "beta") is None
    assert await store.context("resp_a", "beta") is None
    assert await store.input_items("resp_a", "beta") is None
    assert await store.get_item("msg_a", "beta") is None
    assert await store.events("resp_a", "beta") is None
    assert await session_pointer(store, "beta", "shared-name") == (None, None)
    assert await store.delete("resp_a", "beta") is False
    assert await store.request_cancel("resp_a", "beta") is False
    assert await store.cancel_requested("resp_a", "beta") is False
    with pytest.raises(UnknownResponse):
        await store.save(
            response("resp_b"), tenant="beta", input_items=[], previous_response_id="resp_a"
        )
    with pytest.raises(ResponseConflict):
        await store.save(response("resp_a"), tenant="beta", input_items=[user("overwrite")])
    # the same session name is a different session per tenant
    turn = await store.begin_session_turn("beta", "shared-name")
    assert turn.latest_response_id is None
    await store.end_session_turn(turn)
    # alpha's data is intact
    got = await store.get("resp_a", "alpha")
    assert got is not None and got.status == "completed" and not got.cancel_requested
    assert await store.context("resp_a", "alpha") == [
        user("alpha's question"),
        assistant("msg_a", "secret"),
    ]
    assert await store.get_item("msg_a", "alpha") == assistant("msg_a", "secret")
    assert (await session_pointer(store, "alpha", "shared-name"))[0] == "resp_a"


async def test_hundred_turn_chain_costs_constant_round_trips(store: ResponseStore) -> None:
    expected: list[dict] = []
    save_costs: list[int] = []
    context_costs: dict[int, int] = {}
    previous = None
    for turn in range(100):
        rid = f"resp_{turn:03d}"
        inputs = [user(f"question {turn}")]
        if turn % 3 == 0:
            inputs.append({"type": "function_call_output", "call_id": f"c{turn}", "output": "ok"})
        outputs = [assistant(f"msg_{turn:03d}", f"answer {turn}")]
        before = store.query_count
        await store.save(
            response(rid, outputs), tenant="t", input_items=inputs, previous_response_id=previous
        )
        save_costs.append(store.query_count - before)
        expected += inputs + outputs
        if turn in (0, 1, 49, 99):
            before = store.query_count
            ctx = await store.context(rid, "t")
            context_costs[turn] = store.query_count - before
            assert ctx == expected
        previous = rid
    assert len(set(save_costs[1:])) == 1, save_costs  # the root skips the parent lookup
    assert max(save_costs) <= 8 and len(set(context_costs.values())) == 1, context_costs
    if store.backend == "postgresql":
        assert save_costs[0] == 1 and context_costs[99] == 1
    last = await store.get("resp_099", "t")
    assert last is not None
    assert (last.depth, last.history_len) == (99, len(expected))


async def test_forks_keep_separate_histories(store: ResponseStore) -> None:
    await store.save(
        response("resp_root", [assistant("msg_r", "root")]), tenant="t", input_items=[user("r")]
    )
    for branch in ("a", "b"):
        await store.save(
            response(f"resp_{branch}", [assistant(f"msg_{branch}", branch)]),
            tenant="t",
            input_items=[user(f"to {branch}")],
            previous_response_id="resp_root",
        )
        await store.save(
            response(f"resp_{branch}2", [assistant(f"msg_{branch}2", branch * 2)]),
            tenant="t",
            input_items=[user(f"more {branch}")],
            previous_response_id=f"resp_{branch}",
        )
    root = [user("r"), assistant("msg_r", "root")]
    for branch in ("a", "b"):
        assert await store.context(f"resp_{branch}2", "t") == [
            *root,
            user(f"to {branch}"),
            assistant(f"msg_{branch}", branch),
            user(f"more {branch}"),
            assistant(f"msg_{branch}2", branch * 2),
        ]
    # deleting one branch's middle breaks only that branch's continuations
    assert await store.delete("resp_a", "t")
    assert await store.context("resp_a2", "t") is None
    assert await store.get("resp_a2", "t") is not None
    assert await store.context("resp_b2", "t") is not None
    with pytest.raises(UnknownResponse):
        await store.save(
            response("resp_a3"), tenant="t", input_items=[], previous_response_id="resp_a"
        )


async def test_input_items_pagination(store: ResponseStore) -> None:
    inputs = [user(f"m{i}") for i in range(7)]
    inputs[2] = {"id": "fco_given", "type": "function_call_output", "call_id": "c", "output": "x"}
    await store.save(
        response("resp_p", [assistant("msg_out", "o")]), tenant="t", input_items=inputs
    )
    full = await store.input_items("resp_p", "t", limit=100, order="asc")
    assert full is not None and not full.has_more
    assert len(full.data) == 7  # outputs are not input items
    ids = [item["id"] for item in full.data]
    assert len(set(ids)) == 7 and ids[2] == "fco_given"
    assert all(i.startswith("msg_") for n, i in enumerate(ids) if n != 2)
    assert [{k: v for k, v in item.items() if k != "id"} for item in full.data] == [
        {k: v for k, v in item.items() if k != "id"} for item in inputs
    ]

    for order, expected in (("asc", ids), ("desc", ids[::-1])):
        seen: list[str] = []
        after = None
        while True:
            page = await store.input_items("resp_p", "t", limit=3, order=order, after=after)
            assert page is not None
            assert page.first_id == page.data[0]["id"] and page.last_id == page.data[-1]["id"]
            seen += [item["id"] for item in page.data]
            if not page.has_more:
                break
            after = page.last_id
        assert seen == expected

    default = await store.input_items("resp_p", "t")  # desc, limit 20
    assert default is not None and [i["id"] for i in default.data] == ids[::-1]
    wire = default.to_wire()
    assert wire["object"] == "list" and wire["first_id"] == ids[-1] and wire["last_id"] == ids[0]
    empty = await store.input_items("resp_p", "t", after="msg_not_there")
    assert empty is not None and empty.data == [] and empty.first_id is None
    last = await store.input_items("resp_p", "t", order="asc", after=ids[-1])
    assert last is not None and last.data == [] and not last.has_more
    with pytest.raises(ValueError):
        await store.input_items("resp_p", "t", limit=0)
    with pytest.raises(ValueError):
        await store.input_items("resp_p", "t", order="sideways")  # type: ignore[arg-type]


async def test_get_item_resolves_references(store: ResponseStore) -> None:
    call = {
        "id": "fc_1",
        "type": "function_call",
        "call_id": "call_1",
        "name": "f",
        "arguments": "{}",
        "status": "completed",
    }
    await store.save(response("resp_1", [call]), tenant="t", input_items=[user("go")])
    # a client replays the call as input of the next turn: the first occurrence wins
    replayed = {**call, "status": "in_progress"}
    await store.save(
        response("resp_2", []),
        tenant="t",
        input_items=[replayed],
        previous_response_id="resp_1",
    )
    assert await store.get_item("fc_1", "t") == call
    page = await store.input_items("resp_1", "t")
    assert page is not None
    generated = page.data[0]["id"]
    assert await store.get_item(generated, "t") == page.data[0]
    assert await store.get_item("fc_missing", "t") is None


async def test_expired_responses_are_gone(store: ResponseStore) -> None:
    await store.save(
        response("resp_old", [assistant("msg_old", "x")]),
        tenant="t",
        input_items=[user("a")],
        expires_at=time.time() - 1,
    )
    await store.save(response("resp_new"), tenant="t", input_items=[], expires_at=time.time() + 60)
    assert await store.get("resp_old", "t") is None
    assert await store.context("resp_old", "t") is None
    assert await store.get_item("msg_old", "t") is None
    assert await store.get("resp_new", "t") is not None
    with pytest.raises(UnknownResponse):
        await store.save(
            response("resp_c"), tenant="t", input_items=[], previous_response_id="resp_old"
        )


async def test_two_hundred_concurrent_chains(store: ResponseStore) -> None:
    async def chain(n: int) -> None:
        expected: list[dict] = []
        previous = None
        for turn in range(5):
            rid = f"resp_c{n}_{turn}"
            inputs = [user(f"chain {n} turn {turn}")]
            outputs = [assistant(f"msg_c{n}_{turn}", f"reply {n}/{turn}")]
            ctx = await store.context(previous, "t") if previous else []
            assert ctx == expected
            await store.save(
                response(rid, outputs),
                tenant="t",
                input_items=inputs,
                previous_response_id=previous,
            )
            expected += inputs + outputs
            previous = rid
        assert await store.context(previous, "t") == expected

    await asyncio.gather(*(chain(n) for n in range(200)))
    stats = await store.stats()
    assert stats.responses == 1000 and stats.items == 2000


async def test_cancel_flag(store: ResponseStore) -> None:
    await store.save(response("resp_bg", status="in_progress"), tenant="t", input_items=[])
    assert await store.cancel_requested("resp_bg", "t") is False
    assert await store.request_cancel("resp_bg", "t") is True
    assert await store.cancel_requested("resp_bg", "t") is True
    assert await store.request_cancel("resp_missing", "t") is False


async def test_one_failing_write_does_not_sink_its_batch(store: ResponseStore) -> None:
    async def good(n: int) -> str:
        await store.save(response(f"resp_g{n}"), tenant="t", input_items=[user(str(n))])
        return "ok"

    async def bad(n: int) -> str:
        try:
            await store.save(
                response(f"resp_b{n}"), tenant="t", input_items=[], previous_response_id="nope"
            )
        except UnknownResponse:
            return "rejected"
        return "saved?"

    results = await asyncio.gather(*(good(n) if n % 5 else bad(n) for n in range(100)))
    assert results.count("rejected") == 20 and results.count("ok") == 80
    for n in range(100):
        got = await store.get(f"resp_{'b' if n % 5 == 0 else 'g'}{n}", "t")
        assert (got is None) == (n % 5 == 0)
    assert await store.context("resp_g1", "t") == [user("1")]


async def test_output_items_replace_the_spec_output_in_the_history(store: ResponseStore) -> None:
    # A provider-extension item the spec's output leaves out is kept for the next turn.
    extension = {"id": "ws_1", "type": "web_search_call", "status": "completed"}
    answer = assistant("msg_x", "found it")
    body = response("resp_x", [answer])
    await store.save(
        body, tenant="t", input_items=[user("search")], output_items=[extension, answer]
    )
    got = await store.get("resp_x", "t")
    assert got is not None and got.response == body
    assert await store.context("resp_x", "t") == [user("search"), extension, answer]
    assert await store.get_item("ws_1", "t") == extension
    page = await store.input_items("resp_x", "t")
    assert page is not None and [item["role"] for item in page.data] == ["user"]
    await store.save(
        response("resp_y"), tenant="t", input_items=[user("more")], previous_response_id="resp_x"
    )
    assert await store.context("resp_y", "t") == [user("search"), extension, answer, user("more")]


async def test_listed_ids_of_id_less_inputs_resolve_until_deleted(store: ResponseStore) -> None:
    await store.save(response("resp_0a1b"), tenant="t", input_items=[user("one"), user("two")])
    page = await store.input_items("resp_0a1b", "t", order="asc")
    assert page is not None
    for item in page.data:
        assert await store.get_item(item["id"], "t") == item
        assert await store.get_item(item["id"], "other-tenant") is None
    assert page.data[0]["id"] != page.data[1]["id"]
    await store.delete("resp_0a1b", "t")
    assert await store.get_item(page.data[0]["id"], "t") is None


async def test_builder_output_ids_resolve_without_an_index(store: ResponseStore) -> None:
    from orgate.engine import ids
    from orgate.engine.builder import ResponseBuilder

    builder = ResponseBuilder({"model": "m"}, response_id="resp_0123abcd")
    out_id = ids.output_item_id("msg", builder.id, 0)
    call_id = ids.output_item_id("fc", builder.id, 1)
    call = {
        "id": call_id,
        "type": "function_call",
        "call_id": "c1",
        "name": "f",
        "arguments": "{}",
        "status": "completed",
    }
    body = response(builder.id, [assistant(out_id, "hi"), call])
    before = store.query_count
    await store.save(body, tenant="t", input_items=[user("q")])
    if store.backend == "sqlite":
        assert store.query_count - before == 1  # the row alone: every id is derived, none indexed
    assert await store.get_item(out_id, "t") == assistant(out_id, "hi")
    assert await store.get_item(call_id, "t") == call
    assert await store.get_item(call_id, "u") is None
    assert (
        await store.get_item(ids.output_item_id("fc", builder.id, 2), "t") is None
    )  # no such output
    await store.delete(builder.id, "t")
    assert await store.get_item(out_id, "t") is None
