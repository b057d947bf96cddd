"""The built-in model's output is bounded by the response's output budget: ``max_output_tokens``,
never past the model's own cap, tokens of at most ``CHARS_PER_TOKEN`` characters — what it
emits and what it generates from a client's schema alike. And a schema whose smallest value
no answer within the cap can hold is refused before the model is asked."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.hostile.shapes import GIGABYTE, MANY_PROPERTIES, obj, optional

from orgate.engine.output_fit import check_output_fits, output_schemas
from orgate.gate.cost import CHARS_PER_TOKEN
from orgate.gate.work import SCHEMA_WORK
from orgate.neutral import (
    Capabilities,
    Deployment,
    Finish,
    ModelEvent,
    ModelRequest,
    TextDelta,
    TextFormat,
    ToolCallDelta,
)
from orgate.protocol.errors import ApiError
from orgate.protocol.items import UserMessageItemParam
from orgate.protocol.tools import FunctionToolParam
from orgate.providers.builtin import BuiltinProvider, tokens

CAP = 64


def _model(cap: int | None = CAP) -> BuiltinProvider:
    caps = Capabilities(json_schema=True, tools=True, max_output_tokens=cap)
    return BuiltinProvider(Deployment("orgate/echo", "builtin", "echo", capabilities=caps))


def _request(prompt: str = "hello", **fields: Any) -> ModelRequest:
    return ModelRequest(
        model="echo", input=[UserMessageItemParam(role="user", content=prompt)], **fields
    )


async def _events(model: BuiltinProvider, request: ModelRequest) -> list[ModelEvent]:
    return [event async for event in model.stream(request)]


def _text(events: list[ModelEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def test_a_token_holds_at_most_chars_per_token_characters_of_a_word() -> None:
    assert tokens("one two  three") == ["one ", "two  ", "three"]
    long = "x" * (2 * CHARS_PER_TOKEN + 5)
    assert tokens(f"{long} end") == [
        "x" * CHARS_PER_TOKEN,
        "x" * CHARS_PER_TOKEN,
        "xxxxx ",
        "end",
    ]


@pytest.mark.parametrize(("asked", "emitted"), [(None, CAP), (10, 10), (CAP * 2, CAP)])
async def test_the_answer_stops_at_max_output_tokens_or_at_the_models_cap(
    asked: int | None, emitted: int
) -> None:
    prompt = " ".join(f"w{i}" for i in range(CAP * 3))
    events = await _events(_model(), _request(prompt, max_output_tokens=asked))
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.reason == "length"
    assert finish.usage is not None and finish.usage.output_tokens == emitted
    assert len([e for e in events if isinstance(e, TextDelta)]) == emitted


@pytest.mark.parametrize(
    "schema",
    [optional(a=GIGABYTE), optional(x=MANY_PROPERTIES), optional(a=GIGABYTE, b=GIGABYTE)],
)
async def test_a_value_generated_from_a_schema_fits_the_models_cap(schema: dict[str, Any]) -> None:
    """Optional members that a gigabyte-sized value would need are left out: the answer is
    complete, valid and within the cap (the unbounded generator made a gigabyte)."""
    fmt = TextFormat(type="json_schema", name="out", schema=schema, strict=False)
    events = await _events(_model(), _request(text_format=fmt))
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.reason == "stop"
    text = _text(events)
    assert len(text) <= CAP * CHARS_PER_TOKEN
    assert json.loads(text) == {}


async def test_a_value_longer_than_max_output_tokens_is_cut_and_ends_incomplete() -> None:
    schema = obj(tags={"type": "array", "minItems": 40, "items": {"type": "string"}})
    fmt = TextFormat(type="json_schema", name="out", schema=schema, strict=False)
    whole = await _events(_model(cap=4096), _request(text_format=fmt))
    assert isinstance(whole[-1], Finish) and whole[-1].reason == "stop"
    assert len(json.loads(_text(whole))["tags"]) == 40
    cut = await _events(_model(cap=4096), _request(text_format=fmt, max_output_tokens=5))
    assert isinstance(cut[-1], Finish) and cut[-1].reason == "length"
    assert _text(whole).startswith(_text(cut)) and len(_text(cut)) < len(_text(whole))


async def test_generation_from_a_schema_that_is_not_small_runs_in_a_worker_process() -> None:
    parameters = obj(rows={"type": "array", "minItems": 2_000, "items": {"type": "integer"}})
    request = _request(
        "fill the rows",
        tools=[FunctionToolParam(name="t", parameters=parameters, strict=False)],
        tool_choice="required",
    )
    answered = SCHEMA_WORK.answered
    events = await _events(_model(cap=8192), request)
    arguments = "".join(e.arguments for e in events if isinstance(e, ToolCallDelta))
    assert len(json.loads(arguments)["rows"]) == 2_000
    assert SCHEMA_WORK.answered == answered + 1


def test_a_schema_whose_smallest_value_passes_the_cap_is_refused_naming_its_place() -> None:
    deployment = Deployment(
        "orgate/echo", "builtin", "echo", capabilities=Capabilities(max_output_tokens=CAP)
    )
    fits = obj(a={"type": "string", "minLength": CAP * CHARS_PER_TOKEN - 10})
    check_output_fits(deployment, output_schemas(fits, None))
    too_long = obj(a={"type": "array", "minItems": CAP * CHARS_PER_TOKEN, "items": {}})
    tool = FunctionToolParam(name="t", parameters=too_long, strict=False)
    with pytest.raises(ApiError) as refused:
        check_output_fits(deployment, output_schemas(fits, [tool]))
    error = refused.value
    assert error.status == 400 and error.code == "schema_exceeds_output"
    assert error.param == "tools[0].parameters.properties.a.minItems"
    assert f"outputs at most {CAP} tokens" in error.message
    uncapped = Deployment("up", "openai-chat", "m", capabilities=Capabilities())
    check_output_fits(uncapped, output_schemas(too_long, [tool]))  # no cap declared: not checked
