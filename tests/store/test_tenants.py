"""Tenants of a store: listed, and renamed in one piece (``orgate store tenants|rename-tenant``)."""

from __future__ import annotations

import argparse
import asyncio

import pytest

from orgate.store import ResponseStore
from orgate.store.base import TenantInUse
from orgate.store.cli import register
from tests.store.helpers import assistant, response, session_pointer, user


async def _two_tenants(store: ResponseStore) -> None:
    await store.save(
        response("resp_a1", [assistant("msg_a1", "one")]),
        tenant="key0",
        input_items=[user("a")],
        events=b"data: {}\n\n",
        session_id="s1",
    )
    turn = await store.begin_session_turn("key0", "s1")
    await store.end_session_turn(turn)
    await store.save(response("resp_b1"), tenant="key1", input_items=[user("b")])


async def test_rename_moves_every_record_of_the_tenant(store: ResponseStore) -> None:
    await _two_tenants(store)
    assert await store.tenants() == {"key0": 1, "key1": 1}
    assert await store.rename_tenant("key0", "team-a") == 1
    assert await store.tenants() == {"key1": 1, "team-a": 1}
    assert await store.get("resp_a1", "key0") is None
    moved = await store.get("resp_a1", "team-a")
    assert moved is not None and moved.response["id"] == "resp_a1"
    assert await store.get_item("msg_a1", "team-a") is not None
    assert await store.events("resp_a1", "team-a") is not None
    assert await store.context("resp_a1", "team-a") is not None
    assert (await session_pointer(store, "team-a", "s1"))[0] == "resp_a1"
    assert await session_pointer(store, "key0", "s1") == (None, None)
    assert await store.get("resp_b1", "key1") is not None  # the other tenant is untouched


async def test_rename_never_merges_two_tenants(store: ResponseStore) -> None:
    await _two_tenants(store)
    with pytest.raises(TenantInUse, match="already holds data"):
        await store.rename_tenant("key0", "key1")
    assert await store.tenants() == {"key0": 1, "key1": 1}


async def test_rename_refuses_a_tenant_with_a_response_in_progress(store: ResponseStore) -> None:
    await store.save(
        response("resp_live", status="in_progress"), tenant="key0", input_items=[user("a")]
    )
    with pytest.raises(TenantInUse, match="in progress"):
        await store.rename_tenant("key0", "default")
    assert await store.get("resp_live", "key0") is not None


async def test_the_commands(
    store: ResponseStore, store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    await _two_tenants(store)
    parser = argparse.ArgumentParser(prog="orgate")
    register(parser.add_subparsers(dest="command", required=True))

    def run(*argv: str) -> tuple[int, str, str]:
        args = parser.parse_args(list(argv))
        code = args.func(args)
        out = capsys.readouterr()
        return code, out.out, out.err

    loop = asyncio.get_running_loop()
    code, out, _ = await loop.run_in_executor(None, run, "store", "tenants", "--url", store_url)
    # piped (not a terminal): tab-separated tenant and count, no header
    assert code == 0 and out.splitlines() == ["key0\t1", "key1\t1"]
    code, _, err = await loop.run_in_executor(
        None, run, "store", "rename-tenant", "key0", "key1", "--url", store_url
    )
    assert code == 1 and "already holds data" in err
    code, out, _ = await loop.run_in_executor(
        None, run, "store", "rename-tenant", "key0", "default", "--url", store_url
    )
    assert code == 0 and "1 response(s) moved" in out
    assert await store.get("resp_a1", "default") is not None
