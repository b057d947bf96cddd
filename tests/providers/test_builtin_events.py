"""The built-in model's event stream, in process: each directive, budget and answer kind of
docs/builtin-model.md, event by event (the order, the finish reason and the usage)."""

from __future__ import annotations

import asyncio
import json
import types

import jsonschema
import pytest

from orgate.neutral import (
    Deployment,
    Finish,
    ModelRequest,
    ReasoningDelta,
    RefusalDelta,
    TextDelta,
    TextFormat,
    ToolCallDelta,
    ToolCallStart,
)
from orgate.protocol.errors import ApiError
from orgate.protocol.items import (
    FunctionCallItemParam,
    FunctionCallOutputItemParam,
    UserMessageItemParam,
)
from orgate.protocol.tools import FunctionToolParam
from orgate.providers import builtin
from orgate.providers.builtin import BuiltinProvider, tokens

REASONING = "The user asked me to think first, so I did."
CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def _request(prompt: str, **fields) -> ModelRequest:
    return ModelRequest(
        model="echo", input=[UserMessageItemParam(role="user", content=prompt)], **fields
    )


def _after_tool_output(prompt: str, output: str, **fields) -> ModelRequest:
    return ModelRequest(
        model="echo",
        input=[
            UserMessageItemParam(role="user", content=prompt),
            FunctionCallItemParam(
                type="function_call", call_id="c1", name="get_weather", arguments="{}"
            ),
            FunctionCallOutputItemParam(type="function_call_output", call_id="c1", output=output),
        ],
        **fields,
    )


async def _events(request: ModelRequest) -> list:
    provider = BuiltinProvider(
        Deployment(name="orgate/echo", provider="builtin", upstream_model="echo")
    )
    return [ev async for ev in provider.stream(request)]


def _text(events: list, kind=TextDelta) -> str:
    return "".join(
        ev.text if kind is not ToolCallDelta else ev.arguments
        for ev in events
        if isinstance(ev, kind)
    )


async def test_fail_raises_a_model_error_before_any_event():
    with pytest.raises(ApiError) as caught:
        await _events(_request("hello orgate:fail"))
    assert caught.value.status == 500 and caught.value.code == "model_error"
    assert "orgate:fail" in caught.value.message


async def test_rate_limit_raises_429_with_retry_after():
    with pytest.raises(ApiError) as caught:
        await _events(_request("hello orgate:rate-limit"))
    assert caught.value.status == 429 and caught.value.headers == {"Retry-After": "1"}


async def test_directives_after_a_tool_output_are_not_read():
    events = await _events(_after_tool_output("orgate:fail orgate:refuse", "sunny"))
    assert _text(events) == "get_weather returned: sunny"
    assert events[-1].reason == "stop"


async def test_echo_counts_words_as_tokens():
    events = await _events(_request("one two  three", instructions="be brief"))
    assert [ev.text for ev in events if isinstance(ev, TextDelta)] == ["one ", "two  ", "three"]
    finish = events[-1]
    assert finish == Finish("stop", finish.usage)
    assert (
        finish.usage.input_tokens,
        finish.usage.output_tokens,
        finish.usage.reasoning_tokens,
    ) == (5, 3, 0)


async def test_empty_prompt_answers_no_text():
    assert _text(await _events(_request("   "))) == "(no text)"


async def test_reason_gives_a_summary_first_and_counts_it_as_output():
    events = await _events(_request("hi orgate:reason"))
    summary = [ev for ev in events if isinstance(ev, ReasoningDelta)]
    assert "".join(ev.text for ev in summary) == REASONING and {ev.part for ev in summary} == {
        "summary"
    }
    first_text = next(i for i, ev in enumerate(events) if isinstance(ev, TextDelta))
    assert all(isinstance(ev, ReasoningDelta) for ev in events[:first_text])
    usage = events[-1].usage
    assert usage.reasoning_tokens == len(tokens(REASONING))
    assert usage.output_tokens == len(tokens(REASONING)) + 2


async def test_budget_ends_the_reasoning_with_length():
    events = await _events(_request("hi orgate:reason", max_output_tokens=3))
    assert [type(ev) for ev in events] == [ReasoningDelta] * 3 + [Finish]
    assert events[-1].reason == "length" and events[-1].usage.output_tokens == 3
    assert events[-1].usage.reasoning_tokens == 3


async def test_budget_ends_the_text_with_length():
    events = await _events(_request("a b c d e", max_output_tokens=2))
    assert [ev.text for ev in events if isinstance(ev, TextDelta)] == ["a ", "b "]
    assert events[-1].reason == "length" and events[-1].usage.output_tokens == 2


async def test_a_tool_call_then_finish_tool_calls():
    request = _request(
        "weather in Paris", tools=[FunctionToolParam(name="get_weather", parameters=CITY)]
    )
    events = await _events(request)
    assert events[0] == ToolCallStart(0, "", "get_weather")
    arguments = json.loads(_text(events, ToolCallDelta))
    assert set(arguments) == {"city"} and isinstance(arguments["city"], str)
    pieces = len([ev for ev in events if isinstance(ev, ToolCallDelta)])
    assert events[-1].reason == "tool_calls" and events[-1].usage.output_tokens == pieces


async def test_budget_ends_the_tool_call_with_length():
    request = _request(
        "weather in Paris",
        tools=[FunctionToolParam(name="get_weather", parameters=CITY)],
        max_output_tokens=1,
    )
    events = await _events(request)
    assert [type(ev) for ev in events] == [ToolCallStart, ToolCallDelta, Finish]
    assert events[-1].reason == "length"


async def test_a_tool_without_parameters_gets_an_empty_object():
    events = await _events(_request("go", tools=[FunctionToolParam(name="ping")]))
    assert json.loads(_text(events, ToolCallDelta)) == {}


async def test_bad_args_break_the_tool_schema():
    request = _request(
        "weather orgate:bad-args", tools=[FunctionToolParam(name="get_weather", parameters=CITY)]
    )
    arguments = json.loads(_text(await _events(request), ToolCallDelta))
    assert list(jsonschema.Draft202012Validator(CITY).iter_errors(arguments))


async def test_tool_choice_none_answers_text():
    request = _request(
        "weather",
        tools=[FunctionToolParam(name="get_weather", parameters=CITY)],
        tool_choice="none",
    )
    events = await _events(request)
    assert _text(events) == "weather" and events[-1].reason == "stop"


async def test_refuse_streams_a_refusal():
    events = await _events(_request("do it orgate:refuse"))
    assert not any(isinstance(ev, TextDelta) for ev in events)
    assert (
        _text(events, RefusalDelta)
        == "I can't help with that: the prompt asked me to refuse (orgate:refuse)."
    )
    assert events[-1].reason == "stop"


async def test_fail_mid_fails_after_half_the_words():
    request = _request("one two three four orgate:fail-mid")
    provider = BuiltinProvider(
        Deployment(name="orgate/echo", provider="builtin", upstream_model="echo")
    )
    seen = []
    with pytest.raises(ApiError) as caught:
        async for ev in provider.stream(request):
            seen.append(ev)
    assert [ev.text for ev in seen] == ["one ", "two "]
    assert caught.value.status == 500 and "orgate:fail-mid" in caught.value.message


async def test_fail_mid_fails_after_the_first_word_at_the_least():
    provider = BuiltinProvider(
        Deployment(name="orgate/echo", provider="builtin", upstream_model="echo")
    )
    seen = []
    with pytest.raises(ApiError):
        async for ev in provider.stream(_request("one orgate:fail-mid")):
            seen.append(ev)
    assert [ev.text for ev in seen] == ["one "]
    # One word has no middle: it is answered whole.
    events = await _events(_request("orgate:fail-mid"))
    assert _text(events) == "orgate:fail-mid" and events[-1].reason == "stop"


@pytest.mark.parametrize("with_tool", [False, True])
async def test_delay_sleeps_between_words(monkeypatch, with_tool):
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr(
        builtin, "asyncio", types.SimpleNamespace(sleep=sleep, to_thread=asyncio.to_thread)
    )
    tools = [FunctionToolParam(name="get_weather", parameters=CITY)] if with_tool else []
    events = await _events(_request("a b orgate:delay=250 orgate:reason", tools=tools))
    produced = [ev for ev in events if isinstance(ev, ReasoningDelta | TextDelta | ToolCallDelta)]
    assert slept == [0.25] * len(produced)


async def test_no_delay_without_the_directive(monkeypatch):
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr(
        builtin, "asyncio", types.SimpleNamespace(sleep=sleep, to_thread=asyncio.to_thread)
    )
    await _events(_request("a b orgate:reason"))
    assert slept == []


async def test_json_object_echoes_the_prompt_and_bad_json_breaks_it():
    fmt = TextFormat(type="json_object")
    assert json.loads(_text(await _events(_request("hi", text_format=fmt)))) == {"echo": "hi"}
    assert json.loads(_text(await _events(_request("hi orgate:bad-json", text_format=fmt)))) == {
        "echo": 12.5
    }


async def test_bad_json_breaks_the_json_schema_answer():
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    fmt = TextFormat(type="json_schema", name="x", schema=schema, strict=True)
    good = json.loads(_text(await _events(_request("name please", text_format=fmt))))
    assert not list(jsonschema.Draft202012Validator(schema).iter_errors(good))
    bad = json.loads(_text(await _events(_request("name please orgate:bad-json", text_format=fmt))))
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(bad))


async def test_a_tool_output_is_quoted_as_json_when_json_is_asked_for():
    events = await _events(
        _after_tool_output("weather", "sunny", text_format=TextFormat(type="json_object"))
    )
    assert json.loads(_text(events)) == {"echo": "get_weather returned: sunny"}


async def test_logprobs_mark_each_word_certain():
    events = await _events(_request("hi there", logprobs=True, top_logprobs=1))
    deltas = [ev for ev in events if isinstance(ev, TextDelta)]
    assert [ev.logprobs[0]["logprob"] for ev in deltas] == [0.0, 0.0]
    assert deltas[0].logprobs[0]["top_logprobs"][0]["token"] == "hi "
