"""The ``forced_tool`` dialect on the way back: the answer tool's call becomes the text."""

from __future__ import annotations

from collections.abc import AsyncIterator

from orgate.neutral import (
    Finish,
    ModelEvent,
    ModelRequest,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)
from orgate.neutral.request import TextFormat
from orgate.providers.forced_tool import answer_batches


async def batches(*batches: list[ModelEvent]) -> AsyncIterator[list[ModelEvent]]:
    for batch in batches:
        yield batch


def request(dialect: str | None) -> ModelRequest:
    fmt = TextFormat("json_schema", "x", {"type": "object"}, None, None, dialect)  # type: ignore[arg-type]
    return ModelRequest("m", [], text_format=fmt)


async def test_the_answer_tools_arguments_become_text_and_the_call_a_stop() -> None:
    usage = Usage(3, 4)
    upstream = batches(
        [ToolCallStart(0, "toolu_1", "json_answer"), ToolCallDelta(0, '{"a": ')],
        [ToolCallDelta(0, "1}"), Finish("tool_calls", usage)],
    )
    forced = request("forced_tool")
    out = [e async for b in answer_batches(forced, upstream) for e in b]
    assert out == [TextDelta('{"a": '), TextDelta("1}"), Finish("stop", usage)]
    assert [(e.code, e.path) for e in forced.ledger] == [("forced_tool_call_as_text", "output")]


async def test_other_requests_get_their_stream_itself() -> None:
    upstream = batches([ToolCallStart(0, "c", "json_answer"), Finish("tool_calls")])
    assert answer_batches(request(None), upstream) is upstream
