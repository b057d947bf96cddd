"""The response object's skeleton: every field of the spec's ``ResponseResource``, in its order.

The response object a client gets is a plain dict made in two places only: here, the fields
echoed from the request (tools, tool_choice, text, sampling values, ...), once per turn; and
``ResponseBuilder.snapshot`` (``builder.py``), the fields the builder owns (``id``,
``status``, ``output``, ``usage``, ...), set on a copy of this skeleton for each snapshot.
There is no second definition to keep in step (``protocol/response.py`` says why): the
spec's own schema is the reference, and tests/engine/test_response_shape.py validates the
responses built from every echoed variant against it, key order included.
"""

from __future__ import annotations

from typing import Any

from orgate.neutral import TextFormat
from orgate.protocol import AllowedToolsParam, CreateResponseBody, FunctionToolParam
from orgate.protocol.response import ResponseResource
from orgate.protocol.tools import ToolChoiceParam


def response_skeleton(
    body: CreateResponseBody,
    tools: list[Any],
    fmt: TextFormat | None,
    previous_response_id: str | None,
    store: bool,
    service_tier: str | None,
) -> ResponseResource:
    """The response's fields in the spec's order, echoed from ``body``; the builder's own are
    ``None`` placeholders (they fix the key order). ``tools``: the tools sent upstream;
    ``fmt``: the turn's text format; ``service_tier``: the tier used, not only the one asked
    for."""
    reasoning = body.reasoning
    return {
        "id": None,
        "object": "response",
        "created_at": None,
        "completed_at": None,
        "status": None,
        "incomplete_details": None,
        "model": body.model,
        "previous_response_id": previous_response_id,
        "instructions": body.instructions,
        "output": None,
        "error": None,
        # The spec's ``Tool`` union has function tools only: a ``custom`` tool is not echoed.
        "tools": [_tool_echo(t) for t in tools if type(t) is FunctionToolParam],
        "tool_choice": _tool_choice_echo(body.tool_choice),
        "truncation": body.truncation or "disabled",
        "parallel_tool_calls": body.parallel_tool_calls
        if body.parallel_tool_calls is not None
        else True,
        "text": _text_echo(body, fmt),
        "top_p": body.top_p if body.top_p is not None else 1.0,
        "presence_penalty": body.presence_penalty if body.presence_penalty is not None else 0.0,
        "frequency_penalty": body.frequency_penalty if body.frequency_penalty is not None else 0.0,
        "top_logprobs": body.top_logprobs or 0,
        "temperature": body.temperature if body.temperature is not None else 1.0,
        "reasoning": {"effort": reasoning.effort, "summary": reasoning.summary}
        if reasoning
        else None,
        "usage": None,
        "max_output_tokens": body.max_output_tokens,
        "max_tool_calls": body.max_tool_calls,
        "store": store,
        "background": bool(body.background),
        "service_tier": service_tier or "default",
        "metadata": dict(body.metadata) if body.metadata else {},
        "safety_identifier": body.safety_identifier,
        "prompt_cache_key": body.prompt_cache_key,
    }


def _tool_echo(tool: FunctionToolParam) -> dict[str, Any]:
    return {
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
        "strict": tool.strict,
    }


def _tool_choice_echo(choice: ToolChoiceParam | None) -> str | dict[str, Any]:
    if choice is None:
        return "auto"
    if isinstance(choice, str):
        return choice
    if not isinstance(choice, AllowedToolsParam):
        # a function or a ``custom`` choice (OpenAI's extension, echoed as OpenAI does)
        return {"type": choice.type, "name": choice.name}
    return {
        "type": "allowed_tools",
        "tools": [{"type": t.type, "name": t.name} for t in choice.tools],
        "mode": choice.mode or "auto",
    }


def _text_echo(body: CreateResponseBody, fmt: TextFormat | None) -> dict[str, Any]:
    if fmt is None:
        out: dict[str, Any] = {"format": {"type": "text"}}
    elif fmt.type == "json_object":
        out = {"format": {"type": "json_object"}}
    else:
        # The spec's JsonSchemaResponseFormat allows only `schema: null` in a response.
        out = {
            "format": {
                "type": "json_schema",
                "name": fmt.name,
                "description": fmt.description,
                "schema": None,
                "strict": bool(fmt.strict),
            }
        }
    if body.text is not None and body.text.verbosity is not None:
        out["verbosity"] = body.text.verbosity
    return out


__all__ = ["response_skeleton"]
