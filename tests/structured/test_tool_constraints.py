"""Tool calls constrained by the upstream where it can: ``required`` of one tool named, strict
tools where the schema already is strict and the upstream takes strict mode."""

from __future__ import annotations

import dataclasses

from orgate.neutral import Capabilities, Deployment, ModelRequest
from orgate.protocol import FunctionToolParam, SpecificFunctionParam
from orgate.structured.tool_constraints import constrain_tools

STRICT = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}
LOOSE = {"type": "object", "properties": {"city": {"type": "string"}}}  # optional, extra keys
CHAT = Deployment("m", "openai-chat", "up")  # server "auto": the strict subset wanted
GRAMMAR = dataclasses.replace(CHAT, capabilities=Capabilities(strict_json_schema=False))


def tool(name: str, schema: dict[str, object], strict: bool | None = None) -> FunctionToolParam:
    return FunctionToolParam(name=name, parameters=schema, strict=strict)


def request(*tools: FunctionToolParam, choice: object = None) -> ModelRequest:
    return ModelRequest("up", [], tools=list(tools), tool_choice=choice)


def test_required_of_one_tool_is_that_tool_named() -> None:
    sent = constrain_tools(request(tool("f", LOOSE), choice="required"), GRAMMAR)
    assert sent.tool_choice == SpecificFunctionParam(name="f")
    two = request(tool("f", LOOSE), tool("g", LOOSE), choice="required")
    assert constrain_tools(two, GRAMMAR) is two  # a choice between tools: the upstream's


def test_strict_is_set_where_the_schema_already_is_strict() -> None:
    sent = constrain_tools(request(tool("f", STRICT), tool("g", LOOSE)), CHAT)
    assert [t.strict for t in sent.tools] == [True, None]  # type: ignore[union-attr]
    assert sent.tools[0].parameters == STRICT  # type: ignore[union-attr]
    said_no = request(tool("f", STRICT, strict=False))
    assert constrain_tools(said_no, CHAT) is said_no  # the client's own choice stands
    on_grammar = request(tool("f", STRICT))
    assert constrain_tools(on_grammar, GRAMMAR) is on_grammar
    other = request(tool("f", STRICT))
    anthropic = Deployment("m", "anthropic", "up")
    assert constrain_tools(other, anthropic) is other
