"""The response object is held to the spec's ``ResponseResource`` schema, for every echoed variant.

The response object has one definition at run time: the dict ``engine/response_echo.py`` lays
out from the request and ``ResponseBuilder`` completes (``protocol/response.py`` says why there
is no model of it). Here every echoed field's variants go through the real ``parse_body`` and
``build_turn``, then through the builder to each way a response ends; every snapshot an event
carries must validate against the spec's schema and hold exactly the spec's fields, in the
spec's order. A field added, renamed, retyped or dropped on one side fails here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from orgate.engine.builder import ResponseBuilder
from orgate.engine.request_body import normalize_input, parse_body
from orgate.engine.turn import Turn, build_turn
from orgate.neutral import (
    Capabilities,
    Deployment,
    Finish,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)
from orgate.protocol.errors import internal
from tests.support.spec import spec, validate

DEPLOYMENT = Deployment(
    name="m",
    provider="openai-chat",
    upstream_model="up",
    capabilities=Capabilities(reasoning=True),
)
TOOL = {
    "type": "function",
    "name": "f",
    "description": "look up",
    "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
    "strict": True,
}
SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}

# One body per echoed variant. A request with OpenAI's ``custom`` tools is left out on purpose:
# its ``custom`` tool_choice is echoed as OpenAI echoes it (docs/providers.md#tool-types).
BODIES: dict[str, dict[str, Any]] = {
    "minimal": {"input": "hi"},
    "every_sampling_value": {
        "input": "hi",
        "instructions": "be brief",
        "temperature": 0.2,
        "top_p": 0.5,
        "presence_penalty": 0.1,
        "frequency_penalty": -0.1,
        "top_logprobs": 3,
        "max_output_tokens": 64,
        "max_tool_calls": 2,
        "parallel_tool_calls": False,
        "truncation": "auto",
        "metadata": {"k": "v"},
        "safety_identifier": "user-1",
        "prompt_cache_key": "ck",
        "service_tier": "flex",
        "store": False,
        "user": "u",
        "stop": ["\n"],
    },
    "reasoning": {"input": "hi", "reasoning": {"effort": "low", "summary": "auto"}},
    "tool_choice_auto": {"input": "hi", "tools": [TOOL]},
    "tool_choice_required": {"input": "hi", "tools": [TOOL], "tool_choice": "required"},
    "tool_choice_none": {"input": "hi", "tools": [TOOL], "tool_choice": "none"},
    "tool_choice_function": {
        "input": "hi",
        "tools": [TOOL],
        "tool_choice": {"type": "function", "name": "f"},
    },
    "tool_choice_allowed": {
        "input": "hi",
        "tools": [TOOL],
        "tool_choice": {"type": "allowed_tools", "tools": [{"type": "function", "name": "f"}]},
    },
    "json_object": {"input": "hi", "text": {"format": {"type": "json_object"}}},
    "json_schema": {
        "input": "hi",
        "text": {
            "format": {
                "type": "json_schema",
                "name": "answer",
                "description": "the answer",
                "schema": SCHEMA,
                "strict": True,
            },
            "verbosity": "low",
        },
    },
    "background": {"input": "hi", "background": True},
}


def _turn(fields: dict[str, Any], previous: str | None = None) -> Turn:
    body = parse_body({"model": "m", **fields})
    return build_turn(
        body,
        DEPLOYMENT,
        normalize_input(body),
        [],
        store_enabled=True,
        previous_response_id=previous,
    )


def _completed(builder: ResponseBuilder) -> None:
    builder.feed(TextDelta("hello"))
    builder.feed(Finish("stop", Usage(input_tokens=3, output_tokens=1)))


def _called(builder: ResponseBuilder) -> None:
    builder.feed(ToolCallStart(index=0, call_id="call_1", name="f"))
    builder.feed(ToolCallDelta(index=0, arguments='{"q": "x"}'))
    builder.feed(Finish("tool_calls"))


def _incomplete(builder: ResponseBuilder) -> None:
    builder.feed(TextDelta("hel"))
    builder.feed(Finish("length"))


def _failed(builder: ResponseBuilder) -> None:
    builder.feed(TextDelta("hel"))
    builder.fail(internal())


ENDINGS: dict[str, Callable[[ResponseBuilder], None]] = {
    "completed": _completed,
    "tool_call": _called,
    "incomplete": _incomplete,
    "failed": _failed,
}


def _snapshots(turn: Turn, ending: Callable[[ResponseBuilder], None]) -> list[dict[str, Any]]:
    """Every response an event of the turn carries, from ``response.created`` to its end."""
    builder = ResponseBuilder(dict(turn.base), response_id=turn.response_id)
    builder.start(queued=turn.background)
    if turn.background:
        builder.in_progress()
    ending(builder)
    events = builder.drain()
    assert events[-1]["type"] in {"response.completed", "response.incomplete", "response.failed"}
    return [event["response"] for event in events if "response" in event]


def _assert_spec_shaped(response: dict[str, Any]) -> None:
    validate("ResponseResource", response)
    # The schema's validation alone lets an extra field through: the fields are the spec's, in
    # its order (the skeleton fixes the order, so a client sees the spec's layout).
    assert list(response) == list(spec()["components"]["schemas"]["ResponseResource"]["properties"])


@pytest.mark.parametrize("ending", list(ENDINGS), ids=list(ENDINGS))
@pytest.mark.parametrize("variant", list(BODIES), ids=list(BODIES))
def test_every_built_response_is_a_spec_response_resource(variant: str, ending: str) -> None:
    fields = BODIES[variant]
    if ending == "tool_call" and "tools" not in fields:
        fields = {**fields, "tools": [TOOL]}
    for response in _snapshots(_turn(fields), ENDINGS[ending]):
        _assert_spec_shaped(response)


def test_the_echo_says_what_was_asked_and_the_defaults_the_spec_names() -> None:
    asked = _snapshots(_turn(BODIES["every_sampling_value"], "resp_prev"), _completed)[-1]
    assert asked["previous_response_id"] == "resp_prev"
    assert (asked["temperature"], asked["top_p"], asked["top_logprobs"]) == (0.2, 0.5, 3)
    assert (asked["parallel_tool_calls"], asked["truncation"]) == (False, "auto")
    assert (asked["store"], asked["service_tier"], asked["metadata"]) == (False, "flex", {"k": "v"})
    assert "user" not in asked and "stop" not in asked  # extensions are read, not echoed
    default = _snapshots(_turn(BODIES["minimal"]), _completed)[-1]
    assert (default["temperature"], default["top_p"], default["top_logprobs"]) == (1.0, 1.0, 0)
    assert (default["tool_choice"], default["truncation"], default["text"]) == (
        "auto",
        "disabled",
        {"format": {"type": "text"}},
    )
    assert (default["store"], default["service_tier"], default["metadata"]) == (True, "default", {})
    schema = _snapshots(_turn(BODIES["json_schema"]), _completed)[-1]["text"]
    assert schema["format"]["schema"] is None  # the spec allows only null in a response
    assert schema["verbosity"] == "low"
