"""Instructions per turn as a conversation grows: ``conversation_bench.py``'s four kinds of
conversation, counted under ``valgrind --tool=cachegrind`` instead of timed.

``conversation_bench.py`` reads the server's CPU clock per turn; on a shared machine its
rows move by ±0.3× between runs. This drives ``create_app`` in process (its lifespan, then
the turns through an in-process ASGI client) in front of the same fake upstream (its own
process, not counted) and counts every thread's instructions for four lengths of the same
run: ``repeats`` conversations of 0, 10, 90 and 100 turns (after the same warm-up). The
difference of the 10- and 0-turn totals is what turns 1–10 cost, that of the 100- and
90-turn totals what turns 91–100 cost; start-up and warm-up cancel out. The client's part
(building the request, reading the answer) is the same for every turn.

"Net of mapping" subtracts what mapping the history into the upstream's Chat Completions
messages costs: the same four runs with the provider building each body twice (the second
discarded), the difference being one mapping per turn.

A node's periodic work (the store's heartbeat, the cluster's metrics, store upkeep, the look
for background responses to take over) runs on the clock, and under valgrind a run lasts
minutes: it would count as the turns' cost, more of it the longer (and the busier the machine)
a run is. The driver spaces it out beyond any run. PostgreSQL rows are printed but do not
compare: the pool opens connections as turns need them, and the loop's work while it waits on
the server follows the server's pace (``conversation_bench.py`` is the measure there).

Run: ``.venv/bin/python bench/conversation_instructions.py [--kind N] [--pg URL]``
(needs ``valgrind``; a few minutes a row).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

import conversation_bench as timed  # noqa: E402 - a script beside this one
from cachegrind import instructions_of  # noqa: E402

KEY = "conversation-instructions-key"
WARMUP_TURNS = 5
LENGTHS = (0, 10, 90, 100)


def _config(upstream: str, store: str) -> str:
    return (
        f'[auth]\napi_keys = ["{KEY}"]\n\n[store]\nurl = "{store}"\n'
        "background_lease_seconds = 3600\n\n" + timed.config(upstream)  # the longest lease
    )


NEVER = 1e6  # seconds: the period given to the clock's work (see the module docstring)


def _no_periodic_work() -> None:
    """Space out the clock's work beyond any run (its first round, at start, still runs)."""
    from orgate import store
    from orgate.server import app, cluster

    cluster.keep_node.__defaults__ = (NEVER,)
    app._maintain.__defaults__ = (NEVER,)
    assert store.open_store.__kwdefaults__ is not None
    store.open_store.__kwdefaults__["heartbeat_interval"] = NEVER


def _map_twice() -> None:
    """Make the ``openai-chat`` provider build every body twice (see the module docstring)."""
    from orgate.providers.openai_chat import provider

    once = provider.build_body

    def twice(*args: Any, **kwargs: Any) -> Any:
        once(*args, **kwargs)
        return once(*args, **kwargs)

    provider.build_body = twice  # type: ignore[assignment]


async def _drive(kind: str, store: str, upstream: str, turns: int, repeats: int) -> None:
    """``repeats`` conversations of ``kind``, ``turns`` turns each, after a warm-up."""
    import httpx

    from orgate.config import load_settings
    from orgate.gateway import create_app

    _no_periodic_work()
    config = Path(tempfile.mkdtemp(prefix="conversation-instructions-")) / "orgate.toml"
    config.write_text(_config(upstream, store))
    app = create_app(load_settings(str(config)))
    startup: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    await startup.put({"type": "lifespan.startup"})
    started = asyncio.Event()

    async def lifespan_send(message: dict[str, Any]) -> None:
        if message["type"].startswith("lifespan.startup."):
            started.set()

    lifespan = asyncio.create_task(
        app({"type": "lifespan", "asgi": {"version": "3.0"}}, startup.get, lifespan_send)
    )
    await started.wait()
    transport = httpx.ASGITransport(app=app)
    headers = {"Authorization": f"Bearer {KEY}"}
    async with httpx.AsyncClient(
        transport=transport, base_url="http://bench", headers=headers, timeout=600
    ) as client:

        async def play(body_of: timed.Turn, count: int, extra: dict[str, str]) -> None:
            previous = None
            for turn in range(count):
                response = await client.post(
                    "/v1/responses", json=body_of(turn, previous), headers=extra
                )
                response.raise_for_status()
                previous = response.json()

        await play(timed.agent_loop(timed.FAKE_MODEL), WARMUP_TURNS, {})
        await play(timed.chain(timed.FAKE_MODEL), WARMUP_TURNS, {})
        gc.collect()
        gc.freeze()
        gc.set_threshold(20_000, 20, 20)  # what `orgate serve` sets
        for _ in range(repeats):
            conversation = None
            if kind == timed.KINDS[2]:
                created = await client.post("/v1/conversations", json={})
                created.raise_for_status()
                conversation = created.json()["id"]
            body_of, extra = timed.conversation_of(kind, timed.FAKE_MODEL, conversation)
            await play(body_of, turns, extra)
    await startup.put({"type": "lifespan.shutdown"})
    await lifespan


def _count(kind: int, store: str, upstream: str, turns: int, repeats: int, twice: bool) -> int:
    driver = [
        __file__, "--drive", str(kind), "--store", store, "--upstream", upstream,
        "--turns", str(turns), "--repeats", str(repeats),
    ]  # fmt: skip
    return instructions_of(driver + ["--map-twice"] * twice, f"{timed.KINDS[kind]}, {turns} turns")


def _fresh(store: str) -> str:
    """A new SQLite file for each run (PostgreSQL: the same database)."""
    if not store.startswith("sqlite"):
        return store
    return f"sqlite:///{Path(tempfile.mkdtemp(prefix='conversation-instructions-')) / 'o.db'}"


def _ends(kind: int, store: str, upstream: str, repeats: int, twice: bool) -> tuple[float, float]:
    """Millions of instructions per turn over turns 1–10 and 91–100."""
    totals = {n: _count(kind, _fresh(store), upstream, n, repeats, twice) for n in LENGTHS}
    per_turn = 10 * repeats * 1e6
    return (totals[10] - totals[0]) / per_turn, (totals[100] - totals[90]) / per_turn


def _row(name: str, kind: int, store: str, upstream: str, repeats: int) -> str:
    first, last = _ends(kind, store, upstream, repeats, twice=False)
    first_twice, last_twice = _ends(kind, store, upstream, repeats, twice=True)
    net_first = first - (first_twice - first)
    net_last = last - (last_twice - last)
    return (
        f"| {name} | {timed.KINDS[kind]} | {first:.2f} → {last:.2f} M ({last / first:.2f}×) "
        f"| {net_first:.2f} → {net_last:.2f} M ({net_last / net_first:.2f}×) |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--kind",
        type=int,
        action="append",
        choices=range(len(timed.KINDS)),
        help="only these conversations (0 chain, 1 session, 2 conversation, 3 agent loop)",
    )
    parser.add_argument("--repeats", type=int, default=1, help="conversations of each length")
    parser.add_argument(
        "--pg", default=os.environ.get("ORGATE_TEST_PG_URL"), help="PostgreSQL URL (else SQLite)"
    )
    parser.add_argument("--only", choices=("sqlite", "postgresql"), help="one store only")
    parser.add_argument("--drive", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--store", help=argparse.SUPPRESS)
    parser.add_argument("--upstream", help=argparse.SUPPRESS)
    parser.add_argument("--turns", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--map-twice", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.drive is not None:
        import uvloop

        if args.map_twice:
            _map_twice()

        uvloop.run(
            _drive(timed.KINDS[args.drive], args.store, args.upstream, args.turns, args.repeats)
        )
        return 0
    stores = {"SQLite": "sqlite"}
    if args.pg:
        stores["PostgreSQL"] = args.pg
    if args.only:
        stores = {k: v for k, v in stores.items() if k.lower() == args.only}
    kinds = args.kind or range(len(timed.KINDS))
    print("| store | conversation | instructions per turn, turns 1–10 → 91–100 | net of mapping |")
    print("|---|---|---|---|")
    with contextlib.ExitStack() as stack:
        upstream = stack.enter_context(timed.fake_upstream())
        for name, store in stores.items():
            for kind in kinds:
                print(_row(name, kind, store, upstream, args.repeats), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
