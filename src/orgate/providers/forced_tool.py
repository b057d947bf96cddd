"""The ``forced_tool`` schema dialect (neutral/dialects.py): a JSON format asked for as one
tool whose input schema is the format, forced; its input comes back as the answer's text.

For an upstream whose own structured output is missing (older Anthropic models) the one
mechanism that constrains what it writes to a schema is a tool's ``input_schema``. The
mapping adds the tool and forces it (``forced_tool``); ``answer_batches`` turns the call of
that tool back into text deltas (its arguments are the JSON), and the call's finish reason
into ``stop``, so the safety net and the client see an answer like any other.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from orgate.neutral import (
    Finish,
    ModelEvent,
    ModelRequest,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    aclose,
)
from orgate.neutral.dialects import FORCED_TOOL_NAME
from orgate.neutral.ledger import Ledger, Translation

DESCRIPTION = "Give your answer as this tool's input: the JSON value the user asked for."


def forced(request: ModelRequest) -> bool:
    """Whether ``request`` asks for its JSON format as a forced tool."""
    fmt = request.text_format
    return fmt is not None and fmt.dialect == "forced_tool"


def answer_tool(request: ModelRequest) -> dict[str, Any]:
    """The Anthropic tool that carries the answer: the format's schema as its input schema."""
    fmt = request.text_format
    assert fmt is not None
    description = f"{DESCRIPTION} {fmt.description}" if fmt.description else DESCRIPTION
    return {
        "name": FORCED_TOOL_NAME,
        "description": description,
        "input_schema": fmt.schema or {"type": "object"},
    }


class _Answer:
    """Turns the answer tool's call into text, batch by batch."""

    def __init__(self, ledger: Ledger) -> None:
        self.index: int | None = None  # the answer call's index, once it started
        self.ledger = ledger

    def feed(self, batch: list[ModelEvent]) -> list[ModelEvent]:
        out: list[ModelEvent] = []
        for event in batch:
            if isinstance(event, ToolCallStart) and event.name == FORCED_TOOL_NAME:
                self.index = event.index
                self.ledger.note(Translation.FORCED_TOOL_CALL_AS_TEXT, "output")
            elif isinstance(event, ToolCallDelta) and event.index == self.index:
                if event.arguments:
                    out.append(TextDelta(event.arguments))
            elif isinstance(event, Finish) and self.index is not None:
                out.append(
                    Finish("stop" if event.reason == "tool_calls" else event.reason, event.usage)
                )
            else:
                out.append(event)
        return out


def answer_batches(
    request: ModelRequest, batches: AsyncIterator[list[ModelEvent]]
) -> AsyncIterator[list[ModelEvent]]:
    """``batches`` with the answer tool's call as text (``batches`` itself when the request's
    format is not a forced tool: nothing is added to other streams)."""
    if not forced(request):
        return batches
    return _answer_batches(_Answer(request.ledger), batches)


async def _answer_batches(
    answer: _Answer, batches: AsyncIterator[list[ModelEvent]]
) -> AsyncIterator[list[ModelEvent]]:
    try:
        async for batch in batches:
            batch = answer.feed(batch)
            if batch:
                yield batch
    finally:
        await aclose(batches)
