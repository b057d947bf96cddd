"""A scripted upstream for the safety net: one list of neutral events per attempt.

This is a test double of an upstream provider (a neutral ``Provider``), not a
mock of orgate code. It records every request
it was asked, so tests can inspect the feedback messages and token limits.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

from orgate.neutral import (
    Finish,
    FinishReason,
    ModelEvent,
    ModelRequest,
    Provider,
    TextDelta,
    Usage,
)


def answer(
    text: str, reason: FinishReason = "stop", *, tokens: int = 10, chunk: int = 7
) -> list[ModelEvent]:
    """``text`` as several TextDeltas (split every ``chunk`` chars) and a Finish with usage."""
    parts: list[ModelEvent] = [TextDelta(text[i : i + chunk]) for i in range(0, len(text), chunk)]
    return [*parts, Finish(reason, Usage(input_tokens=100, output_tokens=tokens))]


class ScriptedProvider(Provider):
    """Yields ``script[n]`` for the n-th call; ``delay`` seconds before each event."""

    def __init__(self, script: Sequence[Sequence[ModelEvent]], *, delay: float = 0.0) -> None:
        self.script = [list(s) for s in script]
        self.delay = delay
        self.requests: list[ModelRequest] = []
        self.closed = False

    @property
    def calls(self) -> int:
        return len(self.requests)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        index = len(self.requests)
        self.requests.append(request)
        if index >= len(self.script):
            raise AssertionError(
                f"unexpected attempt {index + 1}: only {len(self.script)} scripted"
            )
        for ev in self.script[index]:
            if self.delay:
                await asyncio.sleep(self.delay)
            yield ev

    async def aclose(self) -> None:
        self.closed = True
