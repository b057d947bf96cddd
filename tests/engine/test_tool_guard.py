"""``ToolGuard`` in process: the gate on a model's function calls, driven by a scripted provider.

What docs/gate.md ("In the gateway", on the output) promises: calls are held until the
answer is complete, then checked (defined, allowed by ``tool_choice``, arguments that parse
and satisfy the schema); under ``enforce`` a violation is sent back to the model as
``function_call_output`` feedback within ``tool_retries``, then the response fails with
``model_error`` / ``invalid_tool_arguments`` (or ``tool_choice_violation``); under ``warn``
it passes and is logged; ``off`` skips everything. Text streams live unless a call is
required; ``max_tool_calls`` and ``parallel_tool_calls: false`` keep the first calls.
The guard's events are also folded by the ``ResponseBuilder`` (the streamed and the
non-streamed answer are the same events): a held or refused call never reaches the client.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from typing import Any

import pytest

from orgate.engine.builder import ResponseBuilder
from orgate.engine.tool_guard import ToolGuard
from orgate.neutral import (
    Finish,
    ModelEvent,
    ModelRequest,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    Usage,
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
    UserMessageItemParam,
)
from orgate.protocol.errors import ApiError
from tests.engine.helpers import base
from tests.support.scripted import ScriptedProvider
from tests.support.spec import check_events, validate

WEATHER = FunctionToolParam(
    name="get_weather",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
        "required": ["city"],
        "additionalProperties": False,
    },
)
TIME = FunctionToolParam(name="get_time", parameters=None)  # no schema: any JSON object
GOOD = '{"city": "Paris", "unit": "c"}'
USER = UserMessageItemParam(content="Weather in Paris?")


def call(
    name: str, arguments: str, call_id: str = "call_1", index: int = 0, pieces: int = 2
) -> list[ModelEvent]:
    """A streamed function call: its start, then its arguments in ``pieces`` deltas."""
    size = max(1, -(-len(arguments) // pieces))
    chunks = [arguments[i : i + size] for i in range(0, len(arguments), size)] or [""]
    return [ToolCallStart(index, call_id, name), *(ToolCallDelta(index, c) for c in chunks)]


#: Makes the scripted upstream of a test (tests/support/scripted.py).
Upstream = Callable[..., ScriptedProvider]


@pytest.fixture(params=[1, 3], ids=["events", "batches"])
def scripted(request: pytest.FixtureRequest) -> Upstream:
    """Each test runs against an upstream that yields single events and one that yields
    three events per read (text and calls mixed in one batch)."""
    return functools.partial(ScriptedProvider, per_batch=request.param)


def traced(trace: list[str]) -> Callable[[list[ModelEvent]], None]:
    """An ``on_batch`` hook writing what the upstream produced into ``trace``, where
    ``collect`` interleaves what the guard's consumer took: held events tell from live ones."""
    return lambda batch: trace.extend(f"upstream:{type(event).__name__}" for event in batch)


def request(
    *, tools: list[Any] | None = None, tool_choice: Any = None, **fields: Any
) -> ModelRequest:
    return ModelRequest(
        model="m",
        input=[USER],
        tools=[WEATHER, TIME] if tools is None else tools,
        tool_choice=tool_choice,
        **fields,
    )


async def collect(
    guard: ToolGuard, req: ModelRequest, trace: list[str] | None = None
) -> list[ModelEvent]:
    """Everything the guard releases, batch by batch as the engine reads it."""
    out: list[ModelEvent] = []
    async for batch in guard.stream_batches(req):
        assert batch, "an empty batch"
        if trace is not None:
            trace += [f"client:{type(event).__name__}" for event in batch]
        out += batch
    return out


def calls_of(events: list[ModelEvent]) -> list[tuple[int, str, str, str]]:
    """(index, call_id, name, arguments) of each call the events carry."""
    out: dict[int, list[Any]] = {}
    for event in events:
        if isinstance(event, ToolCallStart):
            out[event.index] = [event.index, event.call_id, event.name, ""]
        elif isinstance(event, ToolCallDelta):
            out[event.index][3] += event.arguments
    return [tuple(v) for v in out.values()]  # type: ignore[misc]


def text_of(events: list[ModelEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def finish_of(events: list[ModelEvent]) -> Finish:
    assert isinstance(events[-1], Finish), events[-1]
    assert sum(isinstance(e, Finish) for e in events) == 1
    return events[-1]


def guard_for(provider: ScriptedProvider, **options: Any) -> tuple[ToolGuard, list[str]]:
    """A guard over ``provider`` and the list it counts its verdicts into (the metrics hook)."""
    counted: list[str] = []
    return ToolGuard(provider, on_verdict=counted.append, **options), counted


# --- when the guard applies -----------------------------------------------------------------------


def test_applies_only_to_requests_with_tools_or_a_tool_choice() -> None:
    assert not ToolGuard.applies(request(tools=[]))
    assert ToolGuard.applies(request())
    assert ToolGuard.applies(request(tools=[], tool_choice="none"))


@pytest.mark.parametrize("options", [{"policy": "off"}, {}], ids=["policy-off", "no-tools"])
async def test_nothing_to_guard_passes_the_stream_through(
    scripted: Upstream, options: dict[str, Any]
) -> None:
    bad = [TextDelta("hi"), *call("nowhere", "not json"), Finish("stop")]
    provider = scripted(bad)
    guard, counted = guard_for(provider, **options)
    req = request() if options else request(tools=[])
    out = await collect(guard, req)
    assert out == bad  # unchanged: not renumbered, the reason not rewritten
    assert counted == [] and len(provider.requests) == 1


async def test_aclose_closes_the_inner_provider(scripted: Upstream) -> None:
    provider = scripted()
    guard, _ = guard_for(provider)
    await guard.aclose()
    assert provider.closed


# --- valid calls ----------------------------------------------------------------------------------


async def test_a_valid_call_is_held_until_the_answer_ends_and_text_streams_live(
    scripted: Upstream,
) -> None:
    trace: list[str] = []
    provider = scripted(
        [
            TextDelta("Let me see. "),
            *call("get_weather", GOOD, pieces=3),
            Finish("stop", Usage(5, 7)),
        ],
        on_batch=traced(trace),
    )
    guard, counted = guard_for(provider)
    out = await collect(guard, request(), trace)
    # the text reached the client before the upstream went on; the call only after its Finish
    assert trace.index("client:TextDelta") < trace.index("upstream:Finish")
    if provider.per_batch == 1:  # one event per read: the text went on before the call started
        assert trace.index("client:TextDelta") < trace.index("upstream:ToolCallStart")
    assert trace.index("upstream:Finish") < trace.index("client:ToolCallStart")
    assert text_of(out) == "Let me see. "
    assert calls_of(out) == [(0, "call_1", "get_weather", GOOD)]
    assert sum(isinstance(e, ToolCallDelta) for e in out) == 3  # the deltas as the model sent them
    finish = finish_of(out)
    assert finish.reason == "tool_calls"  # a stop with calls is a tool_calls answer
    assert finish.usage == Usage(5, 7)
    assert counted == ["ok"] and len(provider.requests) == 1


async def test_calls_are_released_renumbered_in_order(scripted: Upstream) -> None:
    provider = scripted(
        [
            *call("get_weather", GOOD, "call_a", index=3),
            *call("get_time", "{}", "call_b", index=7),
            Finish("tool_calls"),
        ]
    )
    guard, counted = guard_for(provider)
    out = await collect(guard, request())
    assert calls_of(out) == [(0, "call_a", "get_weather", GOOD), (1, "call_b", "get_time", "{}")]
    assert counted == ["ok", "ok"]


async def test_an_answer_without_calls_keeps_its_reason(scripted: Upstream) -> None:
    provider = scripted(
        [ReasoningDelta("hm", "summary"), TextDelta("No tool needed."), Finish("stop")]
    )
    guard, counted = guard_for(provider)
    out = await collect(guard, request())
    assert finish_of(out).reason == "stop" and text_of(out) == "No tool needed."
    assert isinstance(out[0], ReasoningDelta) and counted == []


# --- each finding ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "arguments", "code", "detail"),
    [
        ("get_weather", '{"city": "Par', "arguments_parse", "arguments_parse"),
        ("get_weather", "NaN", "arguments_parse", "arguments_parse"),
        ("get_weather", "", "arguments_parse", "arguments_parse"),
        ("get_weather", '{"city": "Paris", "unit": "kelvin"}', "arguments_schema", "$.unit"),
        ("get_weather", '{"unit": "c"}', "arguments_schema", "city"),
        ("get_weather", "[1]", "arguments_schema", "fail its schema"),
        ("get_forecast", "{}", "unknown_tool", "unknown_tool"),
    ],
)
async def test_an_invalid_call_is_retried_with_feedback(
    scripted: Upstream, name: str, arguments: str, code: str, detail: str
) -> None:
    provider = scripted(
        [
            TextDelta("Checking. "),
            *call(name, arguments, "call_bad"),
            Finish("tool_calls", Usage(10, 3)),
        ],
        [*call("get_weather", GOOD, "call_good"), Finish("tool_calls", Usage(20, 4))],
    )
    guard, counted = guard_for(provider)
    out = await collect(guard, request())
    assert calls_of(out) == [(0, "call_good", "get_weather", GOOD)]  # the invalid call never shows
    assert text_of(out) == "Checking. "
    assert finish_of(out).usage == Usage(30, 7)  # both attempts were paid for
    assert counted == [code, "ok"]
    first, second = provider.requests
    assert first.input == [USER]
    sent_call, feedback = second.input[1:]
    assert second.input[0] == USER and len(second.input) == 3
    assert isinstance(sent_call, FunctionCallItemParam) and isinstance(
        feedback, FunctionCallOutputItemParam
    )
    assert (sent_call.call_id, sent_call.name, sent_call.arguments) == ("call_bad", name, arguments)
    assert feedback.call_id == "call_bad"
    assert feedback.output.startswith("ERROR") and detail in feedback.output
    assert second.tools == first.tools and second.tool_choice == first.tool_choice


async def test_every_invalid_call_of_an_attempt_is_sent_back(scripted: Upstream) -> None:
    provider = scripted(
        [
            *call("get_weather", GOOD, "c1"),
            *call("get_weather", "{", "c2", index=1),
            Finish("tool_calls"),
        ],
        [*call("get_weather", GOOD, "c3"), Finish("tool_calls")],
    )
    guard, counted = guard_for(provider)
    out = await collect(guard, request())
    assert calls_of(out) == [(0, "c3", "get_weather", GOOD)]
    assert counted == ["ok", "arguments_parse", "ok"]
    feedback = provider.requests[1].input[1:]
    assert [type(i).__name__ for i in feedback] == [
        "FunctionCallItemParam",
        "FunctionCallOutputItemParam",
        "FunctionCallItemParam",
        "FunctionCallOutputItemParam",
    ]
    assert [i.call_id for i in feedback] == ["c1", "c1", "c2", "c2"]


async def test_a_rejected_call_without_a_call_id_gets_one_for_its_feedback(
    scripted: Upstream,
) -> None:
    provider = scripted(
        [*call("get_weather", "{", ""), Finish("tool_calls")],
        [*call("get_weather", GOOD), Finish("tool_calls")],
    )
    guard, _ = guard_for(provider)
    await collect(guard, request())
    sent_call, feedback = provider.requests[1].input[1:]
    assert sent_call.call_id and sent_call.call_id == feedback.call_id


async def test_spent_retries_fail_with_a_model_error_naming_every_problem(
    scripted: Upstream,
) -> None:
    bad = [
        TextDelta("Sure. "),
        *call("get_weather", '{"city": "Paris", "unit": "kelvin"}'),
        Finish("tool_calls"),
    ]
    provider = scripted(bad, bad, bad)
    guard, counted = guard_for(provider, retries=2)
    seen: list[ModelEvent] = []
    with pytest.raises(ApiError) as caught:
        async for event in guard.stream(request()):
            seen.append(event)
    error = caught.value
    assert (error.status, error.type, error.code) == (400, "model_error", "invalid_tool_arguments")
    assert error.headers == {"x-should-retry": "false"}
    assert "3 attempt(s)" in error.message and "unit" in error.message
    assert len(provider.requests) == 3 and counted == ["arguments_schema"] * 3
    assert not any(
        isinstance(e, ToolCallStart | ToolCallDelta | Finish) for e in seen
    )  # never passed as valid
    assert (
        text_of(seen) == "Sure. "
    )  # the first attempt's text only: a retry's is dropped once text was sent
    assert len(provider.requests[2].input) == 5  # each retry adds its own feedback


async def test_zero_retries_fails_at_once(scripted: Upstream) -> None:
    provider = scripted([*call("get_weather", "{"), Finish("tool_calls")])
    guard, _ = guard_for(provider, retries=0)
    with pytest.raises(ApiError) as caught:
        await collect(guard, request())
    assert caught.value.code == "invalid_tool_arguments" and "1 attempt(s)" in caught.value.message
    assert len(provider.requests) == 1


async def test_a_retrys_text_is_dropped_once_text_was_sent(scripted: Upstream) -> None:
    provider = scripted(
        [TextDelta("first "), *call("get_weather", "{"), Finish("tool_calls")],
        [
            TextDelta("second "),
            ReasoningDelta("again"),
            *call("get_weather", GOOD),
            Finish("tool_calls"),
        ],
    )
    guard, _ = guard_for(provider)
    out = await collect(guard, request())
    assert text_of(out) == "first "
    assert not any(isinstance(e, ReasoningDelta) for e in out)
    assert calls_of(out) == [(0, "call_1", "get_weather", GOOD)]


async def test_a_retrys_text_flows_when_the_first_attempt_sent_none(
    scripted: Upstream,
) -> None:
    provider = scripted(
        [*call("get_weather", "{"), Finish("tool_calls")],
        [TextDelta("Here it is. "), *call("get_weather", GOOD), Finish("tool_calls")],
    )
    guard, _ = guard_for(provider)
    assert text_of(await collect(guard, request())) == "Here it is. "


# --- tool_choice ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool_choice", "name"),
    [
        ("none", "get_weather"),
        (SpecificFunctionParam(name="get_time"), "get_weather"),
        (AllowedToolsParam(tools=[SpecificFunctionParam(name="get_time")]), "get_weather"),
        (
            AllowedToolsParam(tools=[SpecificFunctionParam(name="get_time")], mode="none"),
            "get_time",
        ),
    ],
    ids=["none", "named", "allowed", "allowed-mode-none"],
)
async def test_a_call_tool_choice_does_not_allow_is_a_violation(
    scripted: Upstream, tool_choice: Any, name: str
) -> None:
    arguments = GOOD if name == "get_weather" else "{}"
    provider = scripted(
        [*call(name, arguments), Finish("tool_calls")],
        [*call(name, arguments), Finish("tool_calls")],
    )
    guard, counted = guard_for(provider)
    with pytest.raises(ApiError) as caught:
        await collect(guard, request(tool_choice=tool_choice))
    assert (caught.value.status, caught.value.type, caught.value.code) == (
        400,
        "model_error",
        "tool_choice_violation",
    )
    assert f"'{name}'" in caught.value.message
    assert counted == ["tool_choice", "tool_choice"]
    feedback = provider.requests[1].input[-1]
    assert isinstance(feedback, FunctionCallOutputItemParam) and "tool_choice" in feedback.output


@pytest.mark.parametrize(
    "tool_choice",
    [
        "required",
        SpecificFunctionParam(name="get_weather"),
        AllowedToolsParam(tools=[SpecificFunctionParam(name="get_weather")], mode="required"),
    ],
    ids=["required", "named", "allowed-required"],
)
async def test_a_required_call_holds_the_text_and_asks_again(
    scripted: Upstream, tool_choice: Any
) -> None:
    trace: list[str] = []
    provider = scripted(
        [TextDelta("I'd rather chat."), Finish("stop")],
        [TextDelta("Calling. "), *call("get_weather", GOOD), Finish("stop")],
        on_batch=traced(trace),
    )
    guard, counted = guard_for(provider)
    out = await collect(guard, request(tool_choice=tool_choice), trace)
    assert trace.index("upstream:Finish") < trace.index("client:TextDelta")  # held with the calls
    assert text_of(out) == "Calling. "  # the refused attempt's text never reaches the client
    assert (
        calls_of(out) == [(0, "call_1", "get_weather", GOOD)]
        and finish_of(out).reason == "tool_calls"
    )
    assert counted == ["ok"]
    nudge = provider.requests[1].input[-1]
    assert isinstance(nudge, UserMessageItemParam) and "requires a tool call" in str(nudge.content)


async def test_a_required_call_never_made_is_a_tool_choice_violation(
    scripted: Upstream,
) -> None:
    provider = scripted([TextDelta("no"), Finish("stop")], [TextDelta("still no"), Finish("stop")])
    guard, _ = guard_for(provider)
    seen: list[ModelEvent] = []
    with pytest.raises(ApiError) as caught:
        async for event in guard.stream(request(tool_choice="required")):
            seen.append(event)
    assert caught.value.code == "tool_choice_violation" and seen == []


async def test_allowed_tools_lets_the_listed_ones_through(scripted: Upstream) -> None:
    choice = AllowedToolsParam(tools=[SpecificFunctionParam(name="get_time")], mode="auto")
    provider = scripted([*call("get_time", '{"tz": "UTC"}'), Finish("tool_calls")])
    guard, counted = guard_for(provider)
    out = await collect(guard, request(tool_choice=choice))
    assert calls_of(out) == [(0, "call_1", "get_time", '{"tz": "UTC"}')] and counted == ["ok"]


# --- limits on the number of calls ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "kept"),
    [({"max_tool_calls": 2}, 2), ({"parallel_tool_calls": False}, 1), ({"max_tool_calls": 5}, 3)],
)
async def test_extra_calls_are_dropped_keeping_the_first(
    scripted: Upstream, fields: dict[str, Any], kept: int, caplog: pytest.LogCaptureFixture
) -> None:
    answer = [call("get_time", "{}", f"c{i}", index=i) for i in range(3)]
    provider = scripted([*(e for c in answer for e in c), Finish("tool_calls")])
    guard, _ = guard_for(provider)
    with caplog.at_level(logging.WARNING, logger="orgate.gate"):
        out = await collect(guard, request(**fields))
    assert [c[1] for c in calls_of(out)] == [f"c{i}" for i in range(kept)]
    assert ("dropped" in caplog.text) == (kept < 3)


# --- policies and odd endings ---------------------------------------------------------------------


async def test_warn_passes_an_invalid_call_and_logs_it(
    scripted: Upstream, caplog: pytest.LogCaptureFixture
) -> None:
    bad = '{"city": "Paris", "unit": "kelvin"}'
    provider = scripted([*call("get_weather", bad), Finish("stop")])
    guard, counted = guard_for(provider, policy="warn")
    with caplog.at_level(logging.WARNING, logger="orgate.gate"):
        out = await collect(guard, request())
    assert (
        calls_of(out) == [(0, "call_1", "get_weather", bad)]
        and finish_of(out).reason == "tool_calls"
    )
    assert counted == ["arguments_schema"] and len(provider.requests) == 1
    assert "policy=warn" in caplog.text and "unit" in caplog.text


async def test_warn_still_applies_the_call_limits(scripted: Upstream) -> None:
    provider = scripted(
        [*call("get_time", "{}", "c0"), *call("get_time", "{", "c1", index=1), Finish("tool_calls")]
    )
    guard, _ = guard_for(provider, policy="warn")
    out = await collect(guard, request(parallel_tool_calls=False))
    assert [c[1] for c in calls_of(out)] == ["c0"]


async def test_a_truncated_answer_is_not_judged(scripted: Upstream) -> None:
    provider = scripted(
        [TextDelta("x"), *call("get_weather", '{"city": "Pa'), Finish("length", Usage(1, 9))]
    )
    guard, counted = guard_for(provider)
    out = await collect(guard, request())
    assert calls_of(out) == [(0, "call_1", "get_weather", '{"city": "Pa')]
    assert finish_of(out) == Finish("length", Usage(1, 9))
    assert counted == [] and len(provider.requests) == 1


async def test_an_upstream_that_never_finishes_is_an_upstream_error(
    scripted: Upstream,
) -> None:
    provider = scripted([TextDelta("and then"), *call("get_weather", GOOD)])
    guard, _ = guard_for(provider)
    with pytest.raises(ApiError) as caught:
        await collect(guard, request())
    assert (caught.value.status, caught.value.code) == (502, "upstream_stream_truncated")


async def test_an_invalid_tool_schema_is_a_client_error(scripted: Upstream) -> None:
    broken = FunctionToolParam(
        name="broken", parameters={"type": "object", "properties": {"a": {"type": "no-such-type"}}}
    )
    provider = scripted([TextDelta("x"), Finish("stop")])
    guard, _ = guard_for(provider)
    with pytest.raises(ApiError) as caught:
        await collect(guard, request(tools=[WEATHER, broken]))
    assert (caught.value.status, caught.value.code) == (400, "invalid_tool_schema")
    assert caught.value.param and caught.value.param.startswith("tools")


# --- through the builder: what a client receives, streamed or not ---------------------------------


async def _answer(
    guard: ToolGuard, req: ModelRequest
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The guard's events through the builder, batch by batch as the service drains them."""
    builder = ResponseBuilder(base())
    builder.start()
    events = builder.drain()
    try:
        async for batch in guard.stream_batches(req):
            for event in batch:
                builder.feed(event)
            events += builder.drain()
    except ApiError as error:
        builder.fail(error)
        events += builder.drain()
    check_events(events)
    assert builder.final is events[-1]["response"]
    validate("ResponseResource", builder.final)
    return events, builder.final


async def test_a_retried_call_reaches_the_client_once_and_valid(scripted: Upstream) -> None:
    provider = scripted(
        [
            TextDelta("One moment. "),
            *call("get_weather", '{"city": 1}', "call_bad"),
            Finish("tool_calls"),
        ],
        [*call("get_weather", GOOD, "call_good"), Finish("tool_calls")],
    )
    guard, _ = guard_for(provider)
    events, final = await _answer(guard, request())
    assert final["status"] == "completed"
    assert [i["type"] for i in final["output"]] == ["message", "function_call"]
    fc = final["output"][1]
    assert (fc["call_id"], json.loads(fc["arguments"])) == (
        "call_good",
        {"city": "Paris", "unit": "c"},
    )
    assert "call_bad" not in json.dumps(events)


async def test_refused_calls_end_the_stream_as_failed_after_the_text(
    scripted: Upstream,
) -> None:
    bad = [TextDelta("Sure. "), *call("get_weather", "{", "call_bad"), Finish("tool_calls")]
    guard, _ = guard_for(scripted(bad, bad))
    events, final = await _answer(guard, request())
    assert [e["type"] for e in events[-2:]] == ["error", "response.failed"]
    assert (
        events[-2]["error"]["code"] == "invalid_tool_arguments"
        and events[-2]["error"]["type"] == "model_error"
    )
    assert final["status"] == "failed" and final["error"]["code"] == "invalid_tool_arguments"
    assert [i["type"] for i in final["output"]] == ["message"]  # the text sent before; no call
    assert "call_bad" not in json.dumps(events)


# --- OpenAI's custom tools: free-form input, only the name is checked -----------------------------

PATCH = CustomToolParam(name="apply_patch")


def custom_call(name: str, text: str, call_id: str = "call_c") -> list[ModelEvent]:
    return [ToolCallStart(0, call_id, name, custom=True), ToolCallDelta(0, text)]


async def test_a_custom_call_of_a_defined_custom_tool_passes_whatever_its_input(
    scripted: Upstream,
) -> None:
    provider = scripted([*custom_call("apply_patch", "not JSON { at all"), Finish("stop")])
    guard, counted = guard_for(provider)
    out = await collect(guard, request(tools=[WEATHER, PATCH]))
    starts = [e for e in out if isinstance(e, ToolCallStart)]
    assert starts == [ToolCallStart(0, "call_c", "apply_patch", custom=True)]  # still a custom call
    assert calls_of(out) == [(0, "call_c", "apply_patch", "not JSON { at all")]
    assert finish_of(out).reason == "tool_calls" and counted == ["ok"]


async def test_a_custom_call_of_an_unknown_name_is_sent_back_as_a_custom_pair(
    scripted: Upstream,
) -> None:
    provider = scripted(
        [
            *custom_call("get_weather", "Paris"),
            Finish("stop"),
        ],  # a function tool's name: not a custom tool
        [*custom_call("apply_patch", "ok"), Finish("stop")],
    )
    guard, counted = guard_for(provider)
    out = await collect(guard, request(tools=[WEATHER, PATCH]))
    assert calls_of(out) == [(0, "call_c", "apply_patch", "ok")]
    assert counted == ["unknown_tool", "ok"]
    sent, told = provider.requests[1].input[1:]
    assert isinstance(sent, CustomToolCallItemParam) and isinstance(
        told, CustomToolCallOutputItemParam
    )
    assert (sent.call_id, sent.name, sent.input) == ("call_c", "get_weather", "Paris")
    assert told.call_id == "call_c" and "unknown_tool" in told.output


async def test_a_named_custom_tool_choice_allows_that_tool_only(scripted: Upstream) -> None:
    choice = SpecificCustomParam(name="apply_patch")
    provider = scripted(
        [*call("get_weather", GOOD), Finish("tool_calls")],
        [*call("get_weather", GOOD), Finish("tool_calls")],
    )
    guard, _ = guard_for(provider)
    with pytest.raises(ApiError) as caught:
        await collect(guard, request(tools=[WEATHER, PATCH], tool_choice=choice))
    assert caught.value.code == "tool_choice_violation" and "apply_patch" in caught.value.message


# --- what the gate cannot judge -------------------------------------------------------------------


def namespaced_call(namespace: str, name: str, arguments: str) -> list[ModelEvent]:
    return [ToolCallStart(0, "call_ns", name, namespace=namespace), ToolCallDelta(0, arguments)]


async def test_a_call_inside_a_namespace_is_not_checked_against_a_schema(
    scripted: Upstream,
) -> None:
    # The upstream that runs namespaces holds their definitions; orgate has nothing to check by.
    provider = scripted([*namespaced_call("crm", "lookup", "not JSON"), Finish("stop")])
    guard, counted = guard_for(provider)
    out = await collect(guard, request())
    starts = [e for e in out if isinstance(e, ToolCallStart)]
    assert starts == [ToolCallStart(0, "call_ns", "lookup", namespace="crm")]
    assert calls_of(out) == [(0, "call_ns", "lookup", "not JSON")]
    assert finish_of(out).reason == "tool_calls" and counted == [] and len(provider.requests) == 1


async def test_a_call_inside_a_namespace_still_answers_to_tool_choice(
    scripted: Upstream,
) -> None:
    provider = scripted(
        [*namespaced_call("crm", "lookup", "{}"), Finish("stop")],
        [*call("get_weather", GOOD), Finish("stop")],
    )
    guard, counted = guard_for(provider)
    out = await collect(guard, request(tool_choice=SpecificFunctionParam(name="get_weather")))
    assert calls_of(out) == [(0, "call_1", "get_weather", GOOD)]
    assert counted == ["tool_choice", "ok"]


async def test_an_argument_delta_before_any_call_is_dropped(scripted: Upstream) -> None:
    provider = scripted(
        [
            ToolCallDelta(0, '{"stray": 1}'),
            TextDelta("Hi."),
            *call("get_time", "{}"),
            Finish("stop"),
        ]
    )
    guard, counted = guard_for(provider)
    out = await collect(guard, request())
    assert calls_of(out) == [(0, "call_1", "get_time", "{}")]
    assert text_of(out) == "Hi." and counted == ["ok"]


# --- what decides the end of an attempt -----------------------------------------------------------


async def test_reasoning_alone_does_not_count_as_text_sent(scripted: Upstream) -> None:
    provider = scripted(
        [ReasoningDelta("hm", "summary"), *call("get_weather", "{"), Finish("tool_calls")],
        [TextDelta("Here it is. "), *call("get_weather", GOOD), Finish("tool_calls")],
    )
    guard, _ = guard_for(provider)
    out = await collect(guard, request())
    assert text_of(out) == "Here it is. "  # the retry's text is the first the client gets


async def test_calls_keep_a_finish_reason_other_than_stop(scripted: Upstream) -> None:
    provider = scripted([*call("get_weather", GOOD), Finish("content_filter")])
    guard, _ = guard_for(provider)
    out = await collect(guard, request())
    assert calls_of(out) == [(0, "call_1", "get_weather", GOOD)]
    assert finish_of(out).reason == "content_filter"


async def test_a_truncated_retry_is_paid_for_with_the_attempts_before_it(
    scripted: Upstream,
) -> None:
    provider = scripted(
        [*call("get_weather", "{"), Finish("tool_calls", Usage(10, 2))],
        [*call("get_weather", '{"city": "Pa'), Finish("length", Usage(12, 9))],
    )
    guard, _ = guard_for(provider)
    out = await collect(guard, request())
    assert finish_of(out) == Finish("length", Usage(22, 11))


async def test_tool_choice_and_argument_problems_together_are_invalid_arguments(
    scripted: Upstream,
) -> None:
    bad = [
        *call("get_weather", '{"city": 1}', "c0"),
        *call("get_time", "{}", "c1", index=1),
        Finish("tool_calls"),
    ]
    guard, _ = guard_for(scripted(bad, bad))
    choice = AllowedToolsParam(tools=[SpecificFunctionParam(name="get_weather")], mode="auto")
    with pytest.raises(ApiError) as caught:
        await collect(guard, request(tool_choice=choice))
    assert caught.value.code == "invalid_tool_arguments"
    assert "tool_choice" in caught.value.message and "fail its schema" in caught.value.message


async def test_text_sent_stays_sent_when_later_events_are_not_text(
    scripted: Upstream,
) -> None:
    provider = scripted(
        [
            TextDelta("first "),
            ReasoningDelta("a"),
            ReasoningDelta("b"),
            ReasoningDelta("c"),
            *call("get_weather", "{"),
            Finish("tool_calls"),
        ],
        [TextDelta("second "), *call("get_weather", GOOD), Finish("tool_calls")],
    )
    guard, _ = guard_for(provider)
    assert text_of(await collect(guard, request())) == "first "
