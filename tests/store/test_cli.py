"""``orgate store stats|prune`` through argparse, against both backends."""

from __future__ import annotations

import argparse
import asyncio
import json
import time

import pytest

from orgate.store import open_store
from orgate.store.cli import parse_duration, register
from tests.store.helpers import response, user


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="orgate")
    register(parser.add_subparsers(dest="command", required=True))
    return parser


def test_parse_duration() -> None:
    assert parse_duration("7d") == 7 * 86400
    assert parse_duration("12h") == 43200
    assert parse_duration("30m") == 1800
    assert parse_duration("90") == 90
    assert parse_duration("1.5w") == 1.5 * 604800
    with pytest.raises(argparse.ArgumentTypeError):
        parse_duration("soon")


def test_prune_defaults_to_seven_days() -> None:
    args = _parser().parse_args(["store", "prune", "--url", "sqlite:///x.db"])
    assert args.older_than == 7 * 86400 and args.url == "sqlite:///x.db"
    with pytest.raises(SystemExit):
        _parser().parse_args(["store", "prune", "--older-than", "later"])


async def test_stats_and_prune_commands(store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    store = await open_store(store_url, heartbeat_interval=0)
    old = int(time.time()) - 30 * 86400
    await store.save(response("resp_old", created_at=old), tenant="t", input_items=[user("a")])
    await store.save(
        response("resp_new", created_at=int(time.time())), tenant="t", input_items=[user("b")]
    )
    await store.close()
    parser = _parser()

    # the commands run their own event loop, as they do under `orgate`
    def run(*argv: str) -> tuple[int, str]:
        args = parser.parse_args(list(argv))
        code = args.func(args)
        return code, capsys.readouterr().out

    loop = asyncio.get_running_loop()
    code, out = await loop.run_in_executor(None, run, "store", "stats", "--url", store_url)
    assert code == 0 and "responses:      2" in out and "schema version: " in out
    assert "orgate:orgate@" not in out
    code, out = await loop.run_in_executor(
        None, run, "store", "prune", "--url", store_url, "--older-than", "7d"
    )
    assert code == 0 and out.startswith("deleted 1 response(s)")
    code, out = await loop.run_in_executor(
        None, run, "store", "stats", "--json", "--url", store_url
    )
    assert code == 0 and json.loads(out)["responses"] == 1


def test_unreachable_store_exits_nonzero(capsys: pytest.CaptureFixture[str]) -> None:
    args = _parser().parse_args(["store", "stats", "--url", "postgresql://u:pw@127.0.0.1:1/db"])
    assert args.func(args) == 1
    err = capsys.readouterr().err
    assert "cannot connect to PostgreSQL" in err and ":pw@" not in err
