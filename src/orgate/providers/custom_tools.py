"""OpenAI's ``custom`` tools for an upstream that has function tools only (``openai-chat``,
``anthropic``, the built-in models).

A custom tool takes one free-form string. Such an upstream gets it as a function with one string
argument, ``input``; the tool's ``format`` (a Lark or regex grammar) goes into the description,
since the upstream cannot enforce it. History follows: a ``custom_tool_call`` is sent as a
function call with ``{"input": ...}`` arguments, a ``custom_tool_call_output`` as a function
call output; a ``tool_choice`` naming a custom tool names that function.

On the way back, ``CustomCalls`` turns the upstream's call of such a function into a custom
call (``ToolCallStart(custom=True)``, the ``input`` string as its one delta), so the client gets
a ``custom_tool_call`` as from OpenAI. The arguments are JSON until the call ends, so the input
is passed on whole, when the call is complete.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import orjson

from orgate.neutral import (
    Ledger,
    ModelEvent,
    ModelRequest,
    ToolCallDelta,
    ToolCallStart,
    Translation,
    aclose,
)
from orgate.protocol import (
    AllowedToolsParam,
    CustomToolCallItemParam,
    CustomToolCallOutputItemParam,
    CustomToolParam,
    FunctionCallItemParam,
    FunctionCallOutputItemParam,
    FunctionToolParam,
    SpecificCustomParam,
    SpecificFunctionParam,
)

ARGUMENT = "input"  # the one string argument a custom tool becomes


def as_function_tool(tool: CustomToolParam) -> FunctionToolParam:
    """A custom tool as a function with one string argument, its format described."""
    parts = [tool.description] if tool.description else []
    fmt = tool.format
    lead = (
        f"Put the whole free-form input in the string argument '{ARGUMENT}' (plain text, not JSON)"
    )
    if fmt is not None and fmt.type == "grammar":
        kind = "Lark grammar" if fmt.syntax == "lark" else "regular expression"
        parts.append(f"{lead}; it must match this {kind}:\n{fmt.definition}")
    else:
        parts.append(f"{lead}.")
    return FunctionToolParam(
        name=tool.name,
        description="\n\n".join(parts),
        parameters={
            "type": "object",
            "properties": {
                ARGUMENT: {"type": "string", "description": "The tool's free-form input."}
            },
            "required": [ARGUMENT],
            "additionalProperties": False,
        },
        strict=True,
    )


def as_function_item(item: Any) -> Any:
    """A custom tool call (or its output) from history as the function call
    (output) it was sent as."""
    kind = type(item)
    if kind is CustomToolCallItemParam:
        arguments = orjson.dumps({ARGUMENT: item.input}).decode()
        return FunctionCallItemParam(
            call_id=item.call_id, name=item.name, arguments=arguments, status=item.status
        )
    if kind is CustomToolCallOutputItemParam:
        return FunctionCallOutputItemParam(call_id=item.call_id, output=item.output)
    return item


def _function_choice(choice: Any) -> Any:
    if type(choice) is SpecificCustomParam:
        return SpecificFunctionParam(name=choice.name)
    if type(choice) is AllowedToolsParam and any(
        type(t) is SpecificCustomParam for t in choice.tools
    ):
        tools: list[SpecificFunctionParam | SpecificCustomParam] = [
            SpecificFunctionParam(name=t.name) for t in choice.tools
        ]
        return AllowedToolsParam(tools=tools, mode=choice.mode)
    return choice


_CUSTOM_ITEMS = frozenset({CustomToolCallItemParam, CustomToolCallOutputItemParam})


def functions_only(request: ModelRequest) -> ModelRequest:
    """The request with its custom tools, custom items and custom tool choice as function ones
    (the request itself when it has none of them)."""
    # hot path (every request): the types compared in C, no generator (see bench/instructions.py)
    has_tools = CustomToolParam in map(type, request.tools)
    has_items = not _CUSTOM_ITEMS.isdisjoint(map(type, request.input))
    if not (has_tools or has_items):
        return request
    _note(request)
    return dataclasses.replace(
        request,
        tools=[as_function_tool(t) if type(t) is CustomToolParam else t for t in request.tools],
        input=[as_function_item(i) for i in request.input] if has_items else request.input,
        tool_choice=_function_choice(request.tool_choice),
    )


def _note(request: ModelRequest) -> None:
    """The ledger entries of the custom tools and items sent as function ones."""
    ledger = request.ledger
    for tool in request.tools:
        if type(tool) is CustomToolParam:
            ledger.note(Translation.CUSTOM_TOOL_AS_FUNCTION, "tools", tool.name)
    for index, item in enumerate(request.input):
        if type(item) is CustomToolCallItemParam or type(item) is CustomToolCallOutputItemParam:
            ledger.note(Translation.CUSTOM_CALL_AS_FUNCTION_CALL, f"input[{index}]", item.type)


def custom_tool_names(request: ModelRequest) -> frozenset[str]:
    return frozenset(t.name for t in request.tools if type(t) is CustomToolParam)


def input_of(arguments: str) -> str:
    """The free-form input in a function call's JSON arguments: the ``input`` string (or the one
    string argument under another name); the arguments as they came when they are no such object."""
    try:
        value = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return arguments
    if isinstance(value, dict):
        if isinstance(value.get(ARGUMENT), str):
            return str(value[ARGUMENT])
        strings = [v for v in value.values() if isinstance(v, str)]
        if len(value) == 1 and strings:
            return strings[0]
    return arguments


class CustomCalls:
    """Turns calls of the functions that stand for custom tools into custom calls, in a stream of
    neutral events (fed in batches; every other event passes unchanged, in order)."""

    def __init__(self, names: frozenset[str], ledger: Ledger | None = None) -> None:
        self.names = names
        self.ledger = ledger  # notes each call turned back into a custom call
        self._open: ToolCallStart | None = None  # a custom call whose JSON arguments are being read
        self._chunks: list[str] = []

    def feed(self, events: list[ModelEvent]) -> list[ModelEvent]:
        out: list[ModelEvent] = []
        for event in events:
            if self._open is not None:
                if type(event) is ToolCallDelta and event.index == self._open.index:
                    self._chunks.append(event.arguments)
                    continue
                self._close(out)
            if type(event) is ToolCallStart and not event.custom and event.name in self.names:
                self._open = ToolCallStart(event.index, event.call_id, event.name, custom=True)
                out.append(self._open)
                if self.ledger is not None:
                    self.ledger.note(
                        Translation.CUSTOM_CALL_FROM_FUNCTION_CALL, "output", event.name
                    )
                continue
            out.append(event)
        return out

    def _close(self, out: list[ModelEvent]) -> None:
        call, self._open = self._open, None
        assert call is not None
        text = input_of("".join(self._chunks))
        self._chunks = []
        if text:
            out.append(ToolCallDelta(call.index, text))


def custom_call_batches(
    request: ModelRequest, batches: AsyncIterator[list[ModelEvent]]
) -> AsyncIterator[list[ModelEvent]]:
    """``batches`` with the request's custom tools' calls as custom calls (``batches`` itself when
    the request has no custom tool: nothing is added to the stream's path)."""
    if CustomToolParam not in map(type, request.tools):  # hot path: no call at all
        return batches
    return _custom_batches(CustomCalls(custom_tool_names(request), request.ledger), batches)


def custom_call_events(
    request: ModelRequest, events: AsyncIterator[ModelEvent]
) -> AsyncIterator[ModelEvent]:
    """The same for a stream of single events."""
    if CustomToolParam not in map(type, request.tools):  # hot path: no call at all
        return events
    return _custom_events(CustomCalls(custom_tool_names(request), request.ledger), events)


async def _custom_batches(
    calls: CustomCalls, batches: AsyncIterator[list[ModelEvent]]
) -> AsyncIterator[list[ModelEvent]]:
    try:
        async for batch in batches:
            batch = calls.feed(batch)
            if batch:
                yield batch
    finally:
        await aclose(batches)


async def _custom_events(
    calls: CustomCalls, events: AsyncIterator[ModelEvent]
) -> AsyncIterator[ModelEvent]:
    try:
        async for event in events:
            for out in calls.feed([event]):
                yield out
    finally:
        await aclose(events)
