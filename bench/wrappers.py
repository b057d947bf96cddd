"""CPU instructions of the engine's provider wrappers, per batch and per request, in process.

The router (``RoutedProvider``), the tool guard (``ToolGuard``) and the MCP loop
(``McpLoop``) sit between the engine and the upstream whenever a routed model, a
tool or an MCP tool is used. Each leg drives one wrapper over a scripted provider
(no network, no HTTP) and counts instructions under ``valgrind --tool=cachegrind``:

- **per batch**: two runs of the same requests with a short and a long answer; the
  difference of the totals over the difference of the batch counts is what one
  upstream read costs as it passes through the wrapper;
- **per request**: two runs of short answers with a small and a large request count;
  the difference over the request counts is what the wrapper costs once per request
  (ordering deployments, listing tools, checking the calls).

Start-up cancels out, and so does the warm-up per request; per batch the warm-up's
requests, whose answers have the run's length, are counted with the measured ones. With a
fixed ``PYTHONHASHSEED`` runs agree closely however busy the machine is. The ``plain`` leg
(the scripted provider alone) is the floor.

Legs:

- ``plain``: the scripted provider alone;
- ``router``: a route of two deployments; the first answers;
- ``guard``: ``ToolGuard`` (``enforce``) over a request with one function tool; the
  text streams live and the answer ends with one valid call, checked against the schema;
- ``mcp``: ``McpLoop`` with one MCP server offering one tool (a scripted client: its
  listing is a cached value, as the real client's is); the model answers with text.

Run: ``.venv/bin/python bench/wrappers.py`` (needs ``valgrind``; about a minute a leg).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cachegrind import instructions_of  # noqa: E402 - a script beside this one

LEGS = ("plain", "router", "guard", "mcp")
WARMUP = 50
EVENTS_PER_BATCH = 4


def _scripted(batches: int) -> Any:
    """A provider answering every request with ``batches`` batches of text, then a Finish
    (preceded, when the request has tools, by one valid call of the first)."""
    from orgate.neutral import (
        Finish,
        ModelEvent,
        ModelRequest,
        Provider,
        TextDelta,
        ToolCallDelta,
        ToolCallStart,
    )

    text = [TextDelta("tok ") for _ in range(EVENTS_PER_BATCH)]
    finish = [Finish("stop")]

    class Scripted(Provider):
        async def stream_batches(self, request: ModelRequest) -> AsyncIterator[list[ModelEvent]]:
            for _ in range(batches):
                yield text
            if request.tools and request.tools[0].name == "add":
                yield [ToolCallStart(0, "call_1", "add"), ToolCallDelta(0, '{"a": 2, "b": 3}')]
            yield finish

    return Scripted()


def _wrapper(leg: str, batches: int) -> tuple[Any, Any]:
    """The leg's provider (a factory of one per request) and its request."""
    from orgate.neutral import ModelRequest
    from orgate.protocol import FunctionToolParam, UserMessageItemParam

    inner = _scripted(batches)
    message = [UserMessageItemParam(content="hi")]
    if leg == "plain":
        return (lambda: inner), ModelRequest(model="m", input=message)
    if leg == "router":
        from orgate.engine.router import Route, RoutePolicy, Router, Target
        from orgate.neutral import Deployment

        def deployment(name: str) -> Deployment:
            return Deployment(
                name=name,
                provider="openai-chat",
                upstream_model=f"up-{name}",
                base_url=f"http://{name}",
            )

        route = Route("m", (Target(deployment("a")), Target(deployment("b"))), RoutePolicy())
        router = Router({"m": route}, lambda d: inner)
        front = deployment("m")
        return (lambda: router.open(front)[0]), ModelRequest(model="m", input=message)
    if leg == "guard":
        from orgate.engine.tool_guard import ToolGuard

        schema = {
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        }
        tools = [FunctionToolParam(name="add", parameters=schema)]
        guard = ToolGuard(inner)
        return (lambda: guard), ModelRequest(model="m", input=message, tools=tools)
    from orgate.engine.approvals import LocalApprovals
    from orgate.engine.mcp_loop import McpLoop, McpRuntime, McpTurn
    from orgate.mcptools.client import McpTool, ToolList
    from orgate.mcptools.servers import McpRegistry, McpServer, McpUse

    listing = ToolList(
        (
            McpTool(
                "lookup",
                "Look a word up.",
                {"type": "object", "properties": {"q": {"type": "string"}}},
            ),
        )
    )

    class Client:
        async def list_tools(self, server: McpServer) -> ToolList:
            return listing

    server = McpServer(label="docs", url="http://docs", require_approval="never")
    use = McpUse(index=0, server=server, allowed_tools=None, always=None, never=True)
    runtime = McpRuntime(registry=McpRegistry(), client=Client())  # type: ignore[arg-type]
    ledger = LocalApprovals()  # the service's one ledger (its store), not one per response

    def loop() -> McpLoop:
        return McpLoop(inner, McpTurn([use], [], 16, "acme", "resp_x", ledger), runtime)

    return loop, ModelRequest(model="m", input=message)


async def _drive(leg: str, requests: int, batches: int) -> None:
    provider, request = _wrapper(leg, batches)

    async def one() -> None:
        async for _ in provider().stream_batches(request):
            pass

    for _ in range(WARMUP):
        await one()
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 20, 20)  # what `orgate serve` sets
    for _ in range(requests):
        await one()


def _count(leg: str, requests: int, batches: int) -> int:
    """Instructions of one driver run."""
    return instructions_of(
        [__file__, "--drive", leg, "--requests", str(requests), "--batches", str(batches)], leg
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--legs", default=",".join(LEGS))
    parser.add_argument(
        "--requests",
        default="200,1000",
        help="per request: the two request counts (answers of 2 batches)",
    )
    parser.add_argument(
        "--batches",
        default="100,500",
        help="per batch: the two answer lengths, in batches (20 requests each)",
    )
    parser.add_argument("--drive", choices=LEGS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.drive:
        asyncio.run(_drive(args.drive, int(args.requests), int(args.batches)))
        return
    few, many = (int(n) for n in args.requests.split(","))
    short, long = (int(n) for n in args.batches.split(","))
    for leg in args.legs.split(","):
        per_request = (_count(leg, many, 2) - _count(leg, few, 2)) / (many - few)
        # the warm-up's requests have the run's answer length too: their batches count
        per_batch = (_count(leg, 20, long) - _count(leg, 20, short)) / (
            (WARMUP + 20) * (long - short)
        )
        print(
            f"{leg:7} {per_request:10,.0f} instructions / request {per_batch:8,.0f} "
            "instructions / batch",
            flush=True,
        )


if __name__ == "__main__":
    main()
