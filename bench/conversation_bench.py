"""What a turn costs as a conversation grows: a 100-turn ``previous_response_id`` chain, a
100-turn session (``X-Session-Id``), a 100-turn conversation (``POST /v1/conversations``,
then ``conversation``) and a 100-turn agent loop (a chain whose every answer is a function
call and every next turn its output), on SQLite and (with ``ORGATE_TEST_PG_URL`` or
``--pg URL``) PostgreSQL.

Starts ``orgate serve`` in front of a fake OpenAI-compatible upstream (``tests/fakes``, in a
process of its own: it streams a Chat Completions answer, as a real one does for orgate's
``stream: true``) and plays each conversation turn by turn on one connection, recording the
server's CPU time (``/proc/<pid>/task/*/schedstat``, every thread) and the wall time of each
turn. Prints the mean of the first and the last ``--window`` turns, and their ratio.
``--model orgate/echo`` measures the built-in model instead (no upstream: it counts the
history's tokens itself).

Run: ``.venv/bin/python bench/conversation_bench.py [--turns 100] [--pg URL]``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.server_process import OrgateServer  # noqa: E402

from orgate.engine.history_items import items_from_wire  # noqa: E402
from orgate.neutral import ModelRequest  # noqa: E402
from orgate.providers.openai_chat.mapping import build_body  # noqa: E402

KEY = "conversation-bench-key"
FAKE_MODEL = "fake-chat"
Costs = list[tuple[float, float]]  # (CPU ms, wall ms) of each turn


def cpu_seconds(pid: int) -> float:
    """CPU time of every thread of ``pid``, in nanoseconds' resolution (``schedstat``: the
    clock ticks of ``/proc/<pid>/stat`` are 10 ms, longer than a turn)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError, ValueError, IndexError):  # a thread that ended meanwhile
            total += int((task / "schedstat").read_text().split()[0])
    return total / 1e9


def _fake_upstream_main() -> None:
    """``conversation_bench.py _fake``: serve the fake upstream in this process, print its port.
    A request with tools is answered with a call of the first one (the agent loop's turns)."""
    from tests.fakes.openai_chat_upstream import FakeOpenAIChat, Reply, tool_calls

    class AgentLoopFake(FakeOpenAIChat):
        def _default(self, body: dict[str, Any]) -> Reply:
            if body.get("tools"):
                return tool_calls((body["tools"][0]["function"]["name"], '{"city": "Paris"}'))
            return super()._default(body)

    async def run() -> None:
        fake = AgentLoopFake()
        await fake.start()
        print(fake.port, flush=True)
        while True:
            await asyncio.sleep(3600)
            fake.requests.clear()  # what it records is not needed here

    asyncio.run(run())


@contextlib.contextmanager
def fake_upstream() -> Iterator[str]:
    """The fake upstream's base URL, while its process runs."""
    proc = subprocess.Popen(
        [sys.executable, __file__, "_fake"], stdout=subprocess.PIPE, cwd=REPO, text=True
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


def config(upstream: str | None) -> str:
    if upstream is None:
        return ""
    return (
        f'[[models]]\nname = "{FAKE_MODEL}"\nprovider = "openai-chat"\nbase_url = "{upstream}"\n'
        'api_key = "k"\nupstream_model = "fake-model"\n'
    )


Answer = dict[str, Any]
Turn = Callable[[int, Answer | None], dict[str, Any]]  # (turn, previous answer) -> the body
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def chain(model: str) -> Turn:
    return lambda turn, previous: {
        "model": model,
        "input": f"turn {turn} of the conversation",
        "previous_response_id": previous and previous["id"],
    }


def agent_loop(model: str) -> Turn:
    """Each turn answers the previous turn's function call (the first turn asks)."""

    def body(turn: int, previous: Answer | None) -> dict[str, Any]:
        if previous is None:
            return {"model": model, "input": "what is the weather?", "tools": [WEATHER]}
        call = next(item for item in previous["output"] if item["type"] == "function_call")
        output = {"type": "function_call_output", "call_id": call["call_id"], "output": "sunny"}
        return {
            "model": model,
            "input": [output],
            "tools": [WEATHER],
            "previous_response_id": previous["id"],
        }

    return body


def in_conversation(model: str, conversation: str) -> Turn:
    return lambda turn, _previous: {
        "model": model,
        "input": f"turn {turn} of the conversation",
        "conversation": conversation,
    }


def input_items(body: dict[str, Any]) -> list[dict[str, Any]]:
    text = body["input"]
    return [{"role": "user", "content": text}] if isinstance(text, str) else list(text)


def play(
    client: httpx.Client,
    pid: int,
    turns: int,
    body_of: Turn,
    headers: dict[str, str] | None = None,
) -> tuple[Costs, list[list[dict[str, Any]]]]:
    """(CPU ms, wall ms) of each turn of one conversation, and the items the model read on
    each turn (the history and the turn's input)."""
    previous = None
    costs = []
    history: list[dict[str, Any]] = []
    read = []
    for turn in range(turns):
        body = body_of(turn, previous)
        cpu0, wall0 = cpu_seconds(pid), time.perf_counter()
        response = client.post("/v1/responses", json=body, headers=headers)
        costs.append(((cpu_seconds(pid) - cpu0) * 1000, (time.perf_counter() - wall0) * 1000))
        response.raise_for_status()
        answer = response.json()
        previous = answer
        history = [*history, *input_items(body)]
        read.append(history)
        history = [*history, *answer["output"]]
    return costs, read


def upstream_body_ms(items: list[dict[str, Any]]) -> float:
    """What the upstream request itself carries on a turn that reads ``items``: its Chat
    Completions body mapped from them and serialized, as orgate's ``openai-chat`` provider
    does it, timed in this process (the best of several runs)."""
    request = ModelRequest(model="fake-model", input=items_from_wire(items))
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(20):
            orjson.dumps(build_body(request))
        best = min(best, (time.perf_counter() - start) / 20 * 1000)
    return best


KINDS = (
    "`previous_response_id` chain",
    "session (`X-Session-Id`)",
    "conversation",
    "agent loop (chain of tool calls)",
)


def conversation_of(
    kind: str, model: str, conversation: str | None = None
) -> tuple[Turn, dict[str, str]]:
    """A new conversation of this kind: its request bodies and its headers (``conversation``:
    the id ``POST /v1/conversations`` gave, for that kind)."""
    if kind == KINDS[1]:
        session = {"X-Session-Id": f"bench-{uuid.uuid4().hex}"}
        return (
            lambda turn, _p: {"model": model, "input": f"turn {turn} of the conversation"}
        ), session
    if kind == KINDS[2]:
        assert conversation is not None, "a conversation's id is created first"
        return in_conversation(model, conversation), {}
    if kind == KINDS[3]:
        return agent_loop(model), {}
    return chain(model), {}


def start_conversation(kind: str, client: httpx.Client, model: str) -> tuple[Turn, dict[str, str]]:
    """``conversation_of``, its conversation created first where the kind needs one."""
    if kind != KINDS[2]:
        return conversation_of(kind, model)
    created = client.post("/v1/conversations", json={})
    created.raise_for_status()
    return conversation_of(kind, model, created.json()["id"])


def summary(costs: Costs, window: int) -> str:
    def mean(part: Costs, i: int) -> float:
        return sum(c[i] for c in part) / len(part)

    first, last = costs[:window], costs[-window:]
    cpu1, cpu2, wall1, wall2 = mean(first, 0), mean(last, 0), mean(first, 1), mean(last, 1)
    return (
        f"{cpu1:.2f} → {cpu2:.2f} ms CPU ({cpu2 / cpu1:.2f}×) | "
        f"{wall1:.2f} → {wall2:.2f} ms wall ({wall2 / wall1:.2f}×)"
    )


def net_of_body(costs: Costs, read: list[list[dict[str, Any]]], window: int) -> str:
    """CPU per turn less what building the upstream body costs, at each end."""
    ends = (range(window), range(len(costs) - window, len(costs)))
    net = [sum(costs[i][0] - upstream_body_ms(read[i]) for i in turns) / window for turns in ends]
    return f"{net[0]:.2f} → {net[1]:.2f} ms ({net[1] / net[0]:.2f}×)"


def median_per_turn(runs: list[Costs]) -> Costs:
    """Per turn, the median over the repeats, so one disturbed turn does not count."""
    return [sorted(run[i] for run in runs)[len(runs) // 2] for i in range(len(runs[0]))]


def measure_store(name: str, url: str, upstream: str | None, args: argparse.Namespace) -> None:
    model = FAKE_MODEL if upstream is not None else "orgate/echo"
    server = OrgateServer(
        config(upstream), api_key=KEY, env={"ORGATE_STORE__URL": url}, args=tuple(args.serve_arg)
    )
    with server:
        assert server.proc is not None
        pid = server.proc.pid
        with httpx.Client(base_url=server.url, headers=server.headers(), timeout=60) as client:
            play(client, pid, 5, chain(model))  # warm-up
            for kind in [KINDS[i] for i in args.kind] if args.kind else KINDS:
                runs = []
                for _ in range(args.repeats):
                    body_of, headers = start_conversation(kind, client, model)
                    costs, read = play(client, pid, args.turns, body_of, headers)
                    runs.append(costs)
                row = summary(median_per_turn(runs), args.window)
                if upstream is not None:
                    row += " | " + net_of_body(median_per_turn(runs), read, args.window)
                print(f"| {name} | {kind} | {row} |", flush=True)


def main() -> int:
    if sys.argv[1:] == ["_fake"]:
        _fake_upstream_main()
        return 0
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--window", type=int, default=10, help="turns averaged at each end")
    parser.add_argument("--repeats", type=int, default=3, help="conversations of each kind")
    parser.add_argument(
        "--model",
        choices=("fake", "orgate/echo"),
        default="fake",
        help="the fake upstream (openai-chat) or the built-in model",
    )
    parser.add_argument(
        "--pg", default=os.environ.get("ORGATE_TEST_PG_URL"), help="PostgreSQL URL (else SQLite)"
    )
    parser.add_argument("--only", choices=("sqlite", "postgresql"), help="one store only")
    parser.add_argument(
        "--kind",
        type=int,
        action="append",
        choices=range(len(KINDS)),
        help="only these conversations (0 chain, 1 session, 2 conversation, 3 agent loop)",
    )
    parser.add_argument(
        "--serve-arg", action="append", default=[], help="one more `orgate serve` argument"
    )
    args = parser.parse_args()
    stores = {
        "SQLite": f"sqlite:///{Path(tempfile.mkdtemp(prefix='conversation-bench-')) / 'orgate.db'}"
    }
    if args.pg:
        stores["PostgreSQL"] = args.pg
    if args.only:
        stores = {k: v for k, v in stores.items() if k.lower() == args.only}
    last = args.turns - args.window + 1
    net = " net of the upstream body |" if args.model == "fake" else ""
    print(f"| store | conversation | turns 1–{args.window} → {last}–{args.turns} |{net}")
    print("|---|---|---|" + ("---|" if net else ""))
    with contextlib.ExitStack() as stack:
        upstream = stack.enter_context(fake_upstream()) if args.model == "fake" else None
        for name, url in stores.items():
            measure_store(name, url, upstream, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
