"""Answers of a scripted model for the safety net's tests (tests/support/scripted.py)."""

from __future__ import annotations

from orgate.neutral import Finish, FinishReason, ModelEvent, TextDelta, Usage


def answer(
    text: str, reason: FinishReason = "stop", *, tokens: int = 10, chunk: int = 7
) -> list[ModelEvent]:
    """``text`` as several TextDeltas (split every ``chunk`` chars) and a Finish with usage."""
    parts: list[ModelEvent] = [TextDelta(text[i : i + chunk]) for i in range(0, len(text), chunk)]
    return [*parts, Finish(reason, Usage(input_tokens=100, output_tokens=tokens))]
