"""What the structured-output safety net costs per request, in process and without I/O.

A ``SafetyNet`` over an upstream that answers from memory (a 40-item JSON object in 4-character
text deltas) is asked ``--requests`` times for a ``json_schema`` answer: ``valid`` (the first
answer passes) or ``retry`` (a schema failure, feedback, then a valid answer). Prints the wall
time per request. For a figure a busy machine does not move, count instructions as
``instructions.py`` does: run it twice under ``valgrind --tool=cachegrind`` with a fixed
``PYTHONHASHSEED`` and divide the difference of the totals by the difference of the counts.

Run: ``.venv/bin/python bench/safety_net.py [--case valid|retry] [--requests 2000]``
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import time
from collections.abc import AsyncIterator

from orgate.neutral import (
    Capabilities,
    Deployment,
    Finish,
    ModelEvent,
    ModelRequest,
    Provider,
    TextDelta,
    TextFormat,
    Usage,
)
from orgate.protocol import UserMessageItemParam
from orgate.structured import Outcome, SafetyNet, StructuredPolicy, StructuredSettings

SCHEMA = {
    "type": "object",
    "properties": {
        "sku": {"type": "string"},
        "price": {"type": "number"},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["sku", "price", "tags"],
    "additionalProperties": False,
}
VALID = '{"sku": "A1", "price": 12.5, "tags": [' + ", ".join(f'"t{i}"' for i in range(40)) + "]}"
INVALID = '{"sku": "A1", "price": "x", "tags": []}'
WARMUP = 50


def _answer(text: str) -> list[ModelEvent]:
    deltas: list[ModelEvent] = [TextDelta(text[i : i + 4]) for i in range(0, len(text), 4)]
    return [*deltas, Finish("stop", Usage(10, 10))]


class _FromMemory(Provider):
    """Answers each request with the next scripted answer, in a cycle."""

    def __init__(self, answers: list[list[ModelEvent]]) -> None:
        self.answers = answers
        self.calls = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        events = self.answers[self.calls % len(self.answers)]
        self.calls += 1
        for event in events:
            yield event


async def _measure(case: str, requests: int) -> float:
    answers = [_answer(VALID)] if case == "valid" else [_answer(INVALID), _answer(VALID)]
    deployment = Deployment("m", "openai-chat", "up", capabilities=Capabilities())
    net = SafetyNet(
        _FromMemory(answers), deployment, StructuredPolicy.from_settings(StructuredSettings())
    )
    request = ModelRequest(
        model="up",
        input=[UserMessageItemParam(content="a product")],
        text_format=TextFormat("json_schema", "product", SCHEMA, True),
    )
    for _ in range(WARMUP):  # compiled validator, first-call imports
        [event async for event in net.stream(request, outcome=Outcome())]
    started = time.perf_counter()
    for _ in range(requests):
        [event async for event in net.stream(request, outcome=Outcome())]
    return (time.perf_counter() - started) / requests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", choices=("valid", "retry"), default="valid")
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args()
    # the net logs every attempt: kept, but not printed
    logging.getLogger("orgate.structured").addHandler(logging.NullHandler())
    logging.getLogger("orgate.structured").propagate = False
    per_request = asyncio.run(_measure(args.case, args.requests))
    print(f"{args.case}: {per_request * 1e6:.1f} µs per request ({args.requests} requests)")


if __name__ == "__main__":
    main()
