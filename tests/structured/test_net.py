"""The SafetyNet against a scripted upstream: retries, truncation, budgets, outcomes, metrics."""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from orgate.gate.work import SCHEMA_WORK, SMALL_CHECK
from orgate.neutral import (
    Capabilities,
    Deployment,
    Finish,
    ModelEvent,
    ModelRequest,
    ReasoningDelta,
    RefusalDelta,
    TextDelta,
    TextFormat,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)
from orgate.protocol import AssistantMessageItemParam, UserMessageItemParam
from orgate.protocol.errors import ApiError
from orgate.structured import (
    BudgetOverride,
    Outcome,
    ReviewQueue,
    SafetyNet,
    StructuredMetrics,
    StructuredPolicy,
    StructuredSettings,
)
from tests.structured.fakes import answer
from tests.support.scripted import HANG, Answer, ScriptedProvider, Turn

PRODUCT = {
    "type": "object",
    "properties": {
        "sku": {"type": "string"},
        "price": {"type": "number", "minimum": 0},
        "note": {"type": "string"},
    },
    "required": ["sku", "price"],
    "additionalProperties": False,
}
GOOD = '{"sku": "A1", "price": 12.5}'


def request(fmt: TextFormat | None = None, **kw: Any) -> ModelRequest:
    fmt = fmt if fmt is not None else TextFormat("json_schema", "product", PRODUCT, True)
    return ModelRequest(
        model="up",
        input=[{"type": "message", "role": "user", "content": "a product"}],
        text_format=fmt,
        **kw,
    )


def make_net(
    script: list[Answer],
    *,
    caps: Capabilities | None = None,
    settings: StructuredSettings | None = None,
    metrics: StructuredMetrics | None = None,
    queue: ReviewQueue | None = None,
    checks: dict[str, list[Any]] | None = None,
    delay: float = 0.0,
) -> tuple[SafetyNet, ScriptedProvider]:
    provider = ScriptedProvider(*script, delay=delay)
    dep = Deployment("gpt-test", "openai-chat", "up", capabilities=caps or Capabilities())
    policy = StructuredPolicy.from_settings(settings or StructuredSettings(), extra_checks=checks)
    return SafetyNet(provider, dep, policy, metrics, queue), provider


async def run(net: SafetyNet, req: ModelRequest, **kw: Any) -> tuple[list[ModelEvent], Outcome]:
    outcome = Outcome()
    events = [ev async for ev in net.stream(req, outcome=outcome, **kw)]
    return events, outcome


def text_of(events: list[ModelEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def feedback_of(req: ModelRequest) -> str:
    last = req.input[-1]
    assert isinstance(last, UserMessageItemParam)
    return last.content[0].text  # type: ignore[union-attr,index]


async def test_text_requests_pass_through_untouched() -> None:
    net, provider = make_net([answer("hello")])
    req = request(TextFormat("text"))
    stream = net.stream(req)
    events = [e async for e in stream]
    assert text_of(events) == "hello"
    assert provider.requests[0] is req  # the very same request object, no rewrite
    net2, provider2 = make_net([answer("x")])
    plain = ModelRequest("up", [])
    assert text_of([e async for e in net2.stream(plain)]) == "x"
    assert provider2.requests[0] is plain


async def test_valid_first_attempt_releases_original_events() -> None:
    net, provider = make_net([answer(GOOD)])
    events, outcome = await run(net, request())
    assert text_of(events) == GOOD
    assert (
        len([e for e in events if isinstance(e, TextDelta)]) > 1
    )  # deltas kept as the model sent them
    assert events[-1] == Finish("stop", Usage(100, 10))
    assert (
        outcome.status == "ok"
        and outcome.mode == "json_schema_strict"
        and outcome.value == {"sku": "A1", "price": 12.5}
    )
    sent = provider.requests[0].text_format
    assert sent is not None and sent.strict is True and sent.schema is not None
    assert sent.schema["required"] == ["sku", "price", "note"]  # strictified
    assert outcome.headers()["X-Orgate-Structured-Outcome"] == "ok"


async def test_strictified_nulls_are_removed_before_release() -> None:
    net, _ = make_net([answer('{"sku": "A1", "price": 3, "note": null}')])
    events, outcome = await run(net, request())
    assert json.loads(text_of(events)) == {"sku": "A1", "price": 3}
    assert outcome.status == "ok"


async def test_truncated_then_complete_raises_max_tokens_without_feedback() -> None:
    net, provider = make_net(
        [answer('{"sku": "A1", "pri', "length", tokens=50), answer(GOOD, tokens=20)]
    )
    events, outcome = await run(net, request(max_output_tokens=50))
    assert text_of(events) == GOOD
    assert provider.requests[1].max_output_tokens == 100
    assert provider.requests[1].input == provider.requests[0].input  # no error feedback
    assert outcome.status == "recovered"
    assert [a.stage for a in outcome.attempts] == ["truncation", None]
    assert events[-1] == Finish("stop", Usage(200, 70))


async def test_truncation_without_limit_uses_tokens_produced() -> None:
    net, provider = make_net([answer("{", "length", tokens=300), answer(GOOD)])
    await run(net, request())
    assert provider.requests[1].max_output_tokens == 600


async def test_truncation_at_cap_says_so_without_burning_retries() -> None:
    caps = Capabilities(max_output_tokens=1000)
    net, provider = make_net([answer("{", "length", tokens=1000)], caps=caps)
    with pytest.raises(ApiError) as info:
        await run(net, request(max_output_tokens=1000))
    assert len(provider.calls) == 1
    err = info.value
    assert err.code == "structured_output_invalid" and err.type == "model_error"
    assert "output token cap (1000 tokens)" in err.message


async def test_truncation_growth_is_capped() -> None:
    caps = Capabilities(max_output_tokens=150)
    net, provider = make_net([answer("{", "length"), answer(GOOD)], caps=caps)
    await run(net, request(max_output_tokens=100))
    assert provider.requests[1].max_output_tokens == 150


async def test_wrong_type_then_right_with_precise_feedback() -> None:
    net, provider = make_net([answer('{"sku": "A1", "price": "12.5"}'), answer(GOOD)])
    events, outcome = await run(net, request())
    assert text_of(events) == GOOD
    retry = provider.requests[1]
    assistant = retry.input[-2]
    assert isinstance(assistant, AssistantMessageItemParam)
    assert assistant.content[0].text == '{"sku": "A1", "price": "12.5"}'  # type: ignore[union-attr,index]
    assert 'price: expected number, got string "12.5"' in feedback_of(retry)
    assert outcome.status == "recovered"


async def test_missing_key_twice_then_right_recovers_at_retry_two() -> None:
    bad = answer('{"price": 1}')
    net, provider = make_net([bad, bad, answer(GOOD)])
    events, outcome = await run(net, request())
    assert text_of(events) == GOOD
    assert len(provider.calls) == 3
    assert outcome.retries == 2 and outcome.status == "recovered"
    assert "missing required key sku" in feedback_of(provider.requests[2])
    # only the latest failed attempt is replayed, not the whole history
    assert len(provider.requests[2].input) == len(provider.requests[0].input) + 2


async def test_unexpected_key_feedback() -> None:
    net, provider = make_net([answer('{"sku": "A1", "price": 1, "colour": "red"}'), answer(GOOD)])
    await run(net, request())
    assert "unexpected key colour" in feedback_of(provider.requests[1])


async def test_parse_failure_feedback_has_position_and_snippet() -> None:
    net, provider = make_net([answer('{"sku": "A1" "price": 1}'), answer(GOOD)])
    await run(net, request())
    text = feedback_of(provider.requests[1])
    assert "is not valid JSON" in text and "line 1, column 14" in text and '"A1" "price"' in text


def price_positive(value: Any) -> list[str]:
    return (
        [] if value.get("price", 0) > 1 else [f"price: must be above 1, got {value.get('price')}"]
    )


async def test_semantic_failure_retried_once_then_exhausted() -> None:
    low = answer('{"sku": "A1", "price": 0.5}')
    net, provider = make_net([low, low, answer(GOOD)], checks={"product": [price_positive]})
    with pytest.raises(ApiError) as info:
        await run(net, request())
    assert len(provider.calls) == 2  # semantic_retries = 1 although retries = 2
    assert "stage semantic" in info.value.message and "price: must be above 1" in info.value.message


async def test_semantic_failure_recovered() -> None:
    net, provider = make_net(
        [answer('{"sku": "A1", "price": 0.5}'), answer(GOOD)], checks={"product": [price_positive]}
    )
    events, outcome = await run(net, request())
    assert outcome.status == "recovered"
    assert "failed the domain checks" in feedback_of(provider.requests[1])


async def test_never_valid_error_outcome() -> None:
    bad = answer("not json at all")
    net, provider = make_net([bad, bad, bad])
    outcome = Outcome()
    with pytest.raises(ApiError) as info:
        [e async for e in net.stream(request(), outcome=outcome)]
    err = info.value
    assert len(provider.calls) == 3
    assert (
        err.status == 400 and err.code == "structured_output_invalid" and err.param == "text.format"
    )
    assert "after 3 attempt(s)" in err.message and "stage parse" in err.message
    assert outcome.status == "error" and outcome.exhausted_by == "retries"
    assert err.headers["X-Orgate-Structured-Outcome"] == "error"


async def test_never_valid_default_outcome() -> None:
    settings = StructuredSettings(
        formats={"product": {"default": {"sku": "UNKNOWN", "price": 0}, "on_exhaustion": "default"}}
    )
    net, _ = make_net([answer("{}")] * 3, settings=settings)
    events, outcome = await run(net, request())
    assert json.loads(text_of(events)) == {"sku": "UNKNOWN", "price": 0}
    assert outcome.status == "default" and not outcome.valid_model_output
    assert outcome.headers()["X-Orgate-Structured-Outcome"] == "default"
    assert events[-1] == Finish("stop", Usage(300, 30))


async def test_default_not_matching_schema_is_not_passed_off() -> None:
    settings = StructuredSettings(formats={"product": {"default": {}, "on_exhaustion": "default"}})
    net, _ = make_net([answer("{}")] * 3, settings=settings)
    with pytest.raises(ApiError):
        await run(net, request())


async def test_a_default_longer_than_the_output_budget_is_not_the_answer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The configured default is output too: within max_output_tokens (32 characters a token)."""
    default = {"sku": "U" * 200, "price": 0}
    settings = StructuredSettings(
        formats={"product": {"default": default, "on_exhaustion": "default"}}
    )
    net, _ = make_net([answer("{}")] * 3, settings=settings)
    events, _ = await run(net, request(max_output_tokens=100))
    assert json.loads(text_of(events)) == default
    net, _ = make_net([answer("{}")] * 3, settings=settings)
    with pytest.raises(ApiError):
        await run(net, request(max_output_tokens=5))
    assert "longer than the response's output budget (5 tokens)" in caplog.text


async def test_never_valid_goes_to_review_queue(tmp_path: Path) -> None:
    queue = ReviewQueue(tmp_path / "review.db")
    settings = StructuredSettings(on_exhaustion="review")
    net, _ = make_net([answer('{"price": "x"}')] * 3, settings=settings, queue=queue)
    outcome = Outcome(response_id="resp_1")
    with pytest.raises(ApiError) as info:
        [e async for e in net.stream(request(), outcome=outcome)]
    assert outcome.status == "review" and outcome.review_id
    assert outcome.review_id in info.value.message
    assert info.value.headers["X-Orgate-Review-Id"] == outcome.review_id
    item = ReviewQueue(tmp_path / "review.db").get(outcome.review_id)
    assert item is not None and item.status == "pending" and item.stage == "schema"
    assert (
        item.model == "gpt-test" and item.format_name == "product" and item.response_id == "resp_1"
    )
    assert len(item.attempts) == 3 and item.attempts[0]["text"] == '{"price": "x"}'
    assert item.request["input"][0]["content"] == "a product"


async def test_budget_override_header() -> None:
    bad = answer("nope")
    net, provider = make_net([bad, bad, bad])
    with pytest.raises(ApiError):
        await run(net, request(), budget=BudgetOverride.from_header("retries=0"))
    assert len(provider.calls) == 1


async def test_seconds_budget_stops_retries() -> None:
    bad = answer("nope", chunk=100)
    # The first answer comes at once, the retry never: the budget, whatever the machine's
    # speed, is what ends the retry (1 s leaves a slow machine room for the first attempt).
    settings = StructuredSettings(seconds=1.0)
    net, provider = make_net([bad, Turn(HANG), bad], settings=settings)
    with pytest.raises(ApiError) as info:
        await run(net, request())
    assert len(provider.calls) == 2  # the retry started, and was cut
    assert "time budget" in info.value.message


async def test_spent_seconds_budget_prevents_a_retry() -> None:
    bad = answer("nope", chunk=100)
    net, provider = make_net([bad, bad], delay=0.05)
    outcome = Outcome()
    with pytest.raises(ApiError):
        [
            e
            async for e in net.stream(
                request(), outcome=outcome, budget=BudgetOverride(seconds=0.05)
            )
        ]
    assert len(provider.calls) == 1 and outcome.exhausted_by == "seconds"


async def test_tool_calls_pass_through() -> None:
    script = [
        [
            ToolCallStart(0, "call_1", "lookup"),
            ToolCallDelta(0, "{}"),
            Finish("tool_calls", Usage(5, 5)),
        ]
    ]
    net, _ = make_net(script)
    events, outcome = await run(net, request())
    assert events == script[0]
    assert outcome.status == "passthrough" and outcome.passthrough_reason == "tool_calls"


async def test_refusal_passes_through() -> None:
    net, _ = make_net([[RefusalDelta("I can't"), Finish("stop")]])
    events, outcome = await run(net, request())
    assert outcome.passthrough_reason == "refusal" and isinstance(events[0], RefusalDelta)


async def test_rejected_attempts_events_are_never_released() -> None:
    first = [ReasoningDelta("thinking 1"), *answer("bad")]
    second = [ReasoningDelta("thinking 2"), *answer(GOOD)]
    net, _ = make_net([first, second])
    events, _ = await run(net, request())
    assert [e.text for e in events if isinstance(e, ReasoningDelta)] == ["thinking 2"]
    assert text_of(events) == GOOD


async def test_mode_json_object_instructions_adds_schema_and_json_word() -> None:
    caps = Capabilities(json_schema=False, json_object=True)
    net, provider = make_net([answer(GOOD)], caps=caps)
    _, outcome = await run(net, request())
    sent = provider.requests[0]
    assert outcome.mode == "json_object_instructions"
    assert sent.text_format is not None and sent.text_format.type == "json_object"
    assert (
        sent.instructions is not None
        and '"sku"' in sent.instructions
        and "JSON" in sent.instructions
    )


async def test_mode_instructions_only() -> None:
    caps = Capabilities(json_schema=False, json_object=False)
    net, provider = make_net([answer(GOOD)], caps=caps)
    _, outcome = await run(net, request())
    assert outcome.mode == "instructions" and provider.requests[0].text_format is None


async def test_json_object_request_gets_json_word_and_object_check() -> None:
    net, provider = make_net([answer("[1, 2]"), answer('{"a": 1}')])
    events, outcome = await run(net, request(TextFormat("json_object"), instructions="Be brief."))
    assert provider.requests[0].instructions == "Be brief.\n\nRespond in JSON."
    assert "expected object, got array" in feedback_of(provider.requests[1])
    assert outcome.format_name == "json_object" and outcome.status == "recovered"


async def test_invalid_client_schema_is_a_400() -> None:
    net, provider = make_net([answer(GOOD)])
    fmt = TextFormat(
        "json_schema", "bad", {"type": "object", "properties": {"a": {"type": "strin"}}}, False
    )
    with pytest.raises(ApiError) as info:
        await run(net, request(fmt))
    assert info.value.status == 400 and info.value.param == "text.format.schema"
    assert len(provider.calls) == 0


async def test_attempts_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    net, _ = make_net([answer("{"), answer(GOOD)])
    with caplog.at_level(logging.INFO, logger="orgate.structured"):
        await run(net, request())
    records = [r for r in caplog.records if r.name == "orgate.structured" and hasattr(r, "attempt")]
    assert [(r.attempt, r.stage, r.finish_reason, r.mode) for r in records] == [  # type: ignore[attr-defined]
        (1, "parse", "stop", "json_schema_strict"),
        (2, None, "stop", "json_schema_strict"),
    ]


async def test_metrics_rates_on_a_scripted_run() -> None:
    registry = CollectorRegistry()
    metrics = StructuredMetrics(registry)
    bad, good = answer('{"sku": 1, "price": 1}'), answer(GOOD)
    scripts = [[good]] * 6 + [[bad, good], [bad, bad, good], [bad, good]] + [[bad, bad, bad]]
    for script in scripts:
        net, _ = make_net(script, metrics=metrics)
        with contextlib.suppress(ApiError):
            await run(net, request())
    rates = metrics.rates(model="gpt-test", format_name="product")
    assert (
        rates.requests,
        rates.first_attempt_failures,
        rates.recovered_by_retry,
        rates.budget_exhausted,
    ) == (10, 4, 3, 1)
    assert rates.first_attempt_failure_rate == pytest.approx(0.4)
    assert rates.retry_recovery_rate == pytest.approx(0.75)
    assert rates.budget_exhaustion_rate == pytest.approx(0.1)
    labels = {"model": "gpt-test", "format": "product"}
    assert (
        registry.get_sample_value("orgate_structured_retries_total", {**labels, "stage": "schema"})
        == 1 + 2 + 1 + 2
    )
    assert (
        registry.get_sample_value("orgate_structured_failures_total", {**labels, "stage": "schema"})
        == 1 + 2 + 1 + 3
    )
    assert (
        registry.get_sample_value(
            "orgate_structured_outcomes_total", {**labels, "outcome": "error"}
        )
        == 1
    )
    assert metrics.rates(model="other").requests == 0


async def test_semantic_checks_from_config_end_to_end() -> None:
    mod = "tests.structured.checks_fixture"
    settings = StructuredSettings(
        formats={"product": {"semantic": [f"{mod}:sku_allowed", f"{mod}:price_non_negative"]}}
    )
    net, provider = make_net([answer('{"sku": "ZZ", "price": 1}'), answer(GOOD)], settings=settings)
    _, outcome = await run(net, request())
    text = feedback_of(provider.requests[1])
    assert (
        "failed the domain checks:\n- sku: 'ZZ' is not in the catalogue (A1, B2)\nReply again"
        in text
    )
    assert outcome.status == "recovered" and outcome.attempts[0].stage == "semantic"


async def test_broken_semantic_check_is_a_server_error() -> None:
    net, provider = make_net([answer(GOOD)], checks={"product": [lambda v: 1 / 0]})
    with pytest.raises(ApiError) as info:
        await run(net, request())
    assert (
        info.value.status == 500
        and info.value.code == "semantic_check_error"
        and len(provider.calls) == 1
    )


async def test_upstream_errors_propagate_and_aclose_delegates() -> None:
    provider = ScriptedProvider(Turn(ApiError(502, "upstream down", type="server_error")))
    net = SafetyNet(
        provider,
        Deployment("m", "openai-chat", "up"),
        StructuredPolicy.from_settings(StructuredSettings()),
    )
    outcome = Outcome()
    with pytest.raises(ApiError, match="upstream down"):
        [e async for e in net.stream(request(), outcome=outcome)]
    assert outcome.status == "pending"
    await net.aclose()
    assert provider.closed


async def test_a_retry_offers_no_tool_call_but_keeps_the_tools() -> None:
    tool = {"type": "function", "name": "lookup", "parameters": {"type": "object"}}
    net, provider = make_net([answer("not json"), answer(GOOD)])
    events, outcome = await run(net, request(tools=[tool], tool_choice="auto"))
    assert outcome.status == "recovered"
    assert provider.requests[0].tool_choice == "auto"
    assert provider.requests[1].tool_choice == "none" and provider.requests[1].tools == [tool]


async def test_a_second_call_on_the_same_outcome_counts_its_own_attempts() -> None:
    registry = CollectorRegistry()
    metrics = StructuredMetrics(registry)
    bad = answer('{"sku": 1, "price": 1}')
    net, provider = make_net([bad, answer(GOOD), answer(GOOD)], metrics=metrics)
    outcome = Outcome()
    [e async for e in net.stream(request(), outcome=outcome)]
    assert outcome.status == "recovered"
    events = [e async for e in net.stream(request(), outcome=outcome)]
    assert text_of(events) == GOOD
    assert outcome.status == "ok"  # the first attempt of this call was valid
    assert [a.number for a in outcome.attempts] == [1, 2, 3]
    labels = {"model": "gpt-test", "format": "product"}
    modes = registry.get_sample_value(
        "orgate_structured_mode_total", {**labels, "mode": "json_schema_strict"}
    )
    assert modes == 1  # the mode of a request is counted on its first call only
    assert metrics.rates(model="gpt-test").first_attempt_failures == 1
    assert len(provider.calls) == 3


async def test_a_schema_without_strict_equivalent_is_sent_non_strict_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    schema = {"type": "object", "patternProperties": {"^x": {"type": "string"}}}
    net, provider = make_net([answer('{"x1": "a"}')], caps=Capabilities(strict_json_schema=True))
    with caplog.at_level(logging.INFO, logger="orgate.structured"):
        _, outcome = await run(net, request(TextFormat("json_schema", "free", schema, True)))
    assert outcome.status == "ok" and outcome.mode != "strict"
    assert any("schema free sent non-strict" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("answers", [0, 1])
async def test_the_upstreams_own_timeout_is_not_the_time_budget(answers: int) -> None:
    # the scripted answers, then the upstream's own TimeoutError
    provider = ScriptedProvider(*[answer("nope")] * answers, otherwise=Turn(TimeoutError))
    dep = Deployment("gpt-test", "openai-chat", "up", capabilities=Capabilities())
    policy = StructuredPolicy.from_settings(StructuredSettings(seconds=None))  # no time budget
    net = SafetyNet(provider, dep, policy)
    outcome = Outcome()
    with pytest.raises(TimeoutError):
        [e async for e in net.stream(request(), outcome=outcome)]
    assert len(provider.calls) == answers + 1
    assert outcome.exhausted_by is None and len(outcome.attempts) == answers


async def test_truncation_retries_are_a_budget_of_their_own() -> None:
    cut = answer("{", "length", tokens=10)
    settings = StructuredSettings(truncation_retries=1)
    net, provider = make_net([cut, cut, cut], settings=settings)
    outcome = Outcome()
    with pytest.raises(ApiError) as info:
        [e async for e in net.stream(request(max_output_tokens=10), outcome=outcome)]
    assert len(provider.calls) == 2 and [r.max_output_tokens for r in provider.requests] == [10, 20]
    assert outcome.exhausted_by == "truncation_retries"
    assert "kept being cut at max_output_tokens" in info.value.message


async def test_the_time_budget_stops_a_truncation_retry() -> None:
    net, provider = make_net([answer("{", "length", chunk=100)] * 2, delay=0.05)
    outcome = Outcome()
    with pytest.raises(ApiError):
        [
            e
            async for e in net.stream(
                request(), outcome=outcome, budget=BudgetOverride(seconds=0.05)
            )
        ]
    assert len(provider.calls) == 1 and outcome.exhausted_by == "seconds"
    assert [a.stage for a in outcome.attempts] == ["truncation"]


async def test_review_without_a_queue_is_an_error(caplog: pytest.LogCaptureFixture) -> None:
    settings = StructuredSettings(on_exhaustion="review", retries=0)
    net, _ = make_net([answer("{}")], settings=settings)
    outcome = Outcome()
    with caplog.at_level(logging.WARNING, logger="orgate.structured"), pytest.raises(ApiError):
        [e async for e in net.stream(request(), outcome=outcome)]
    assert outcome.status == "error" and outcome.review_id is None
    assert any("no review queue is configured" in r.getMessage() for r in caplog.records)


async def test_every_attempt_is_recorded_with_its_stage_and_limit() -> None:
    script = [
        answer("{", "length", tokens=50),
        answer('{"sku": "A1"}'),
        answer(GOOD),
    ]
    net, _ = make_net(script)
    events, outcome = await run(net, request(max_output_tokens=50))
    assert [
        (a.number, a.finish_reason, a.stage, a.max_output_tokens) for a in outcome.attempts
    ] == [
        (1, "length", "truncation", 50),
        (2, "stop", "schema", 100),
        (3, "stop", None, 100),
    ]
    assert [a.text for a in outcome.attempts] == ["{", '{"sku": "A1"}', GOOD]
    assert outcome.attempts[0].errors == ("the output was cut at max_output_tokens=50",)
    assert outcome.attempts[1].errors == ("missing required key price",)
    assert outcome.status == "recovered" and outcome.value == {"sku": "A1", "price": 12.5}
    assert events[-1] == Finish("stop", Usage(300, 70))


async def test_the_semantic_budget_counts_semantic_failures_only() -> None:
    bad_schema, low = answer('{"sku": 1, "price": 5}'), answer('{"sku": "A1", "price": 0.5}')
    settings = StructuredSettings(retries=3, semantic_retries=1)
    checks = {"product": [price_positive]}
    net, _ = make_net([bad_schema, low, answer(GOOD)], settings=settings, checks=checks)
    _, outcome = await run(net, request())
    assert [a.stage for a in outcome.attempts] == ["schema", "semantic", None]
    settings = StructuredSettings(retries=3, semantic_retries=0)
    net, _ = make_net([bad_schema, answer(GOOD)], settings=settings, checks=checks)
    _, outcome = await run(net, request())
    assert outcome.status == "recovered"


async def test_a_refusal_beside_text_is_checked_and_a_content_filter_passes() -> None:
    net, _ = make_net([[RefusalDelta("hm"), *answer(GOOD)]])
    _, outcome = await run(net, request())
    assert outcome.status == "ok" and outcome.passthrough_reason is None
    net, _ = make_net([answer('{"sku"', "content_filter")])
    events, outcome = await run(net, request())
    assert outcome.status == "passthrough" and outcome.passthrough_reason == "content_filter"
    assert text_of(events) == '{"sku"'


def refusing_json_schema(*answers: list[ModelEvent]) -> ScriptedProvider:
    """Fails every request with a ``json_schema`` response format, answers the others with
    ``answers`` in turn."""
    refused = ApiError(
        502,
        "upstream 'm' failed (HTTP 500): Internal Server Error",
        type="server_error",
        code="upstream_error",
    )
    left = list(answers)

    def reply(request: ModelRequest) -> Turn | list[ModelEvent]:
        if request.text_format is not None and request.text_format.type == "json_schema":
            return Turn(refused)
        return left.pop(0)

    return ScriptedProvider(otherwise=reply)


async def test_after_a_downgrade_retries_build_on_the_plan_that_was_answered() -> None:
    provider = refusing_json_schema(answer('{"sku": "A1", "price": 1, "note": null}'), answer(GOOD))
    dep = Deployment("gpt-test", "openai-chat", "up", capabilities=Capabilities())
    net = SafetyNet(provider, dep, StructuredPolicy.from_settings(StructuredSettings()))
    _, outcome = await run(net, request())
    # strict mode's nulls are not removed from a json_object answer: the schema rejects them
    assert [a.stage for a in outcome.attempts] == ["schema", None]
    assert outcome.attempts[0].errors == ("note: expected string, got null",)
    answered = [call.request for call in provider.calls if call.error is None]
    retry = answered[1]
    assert retry.text_format is not None and retry.text_format.type == "json_object"
    assert retry.input[: len(answered[0].input)] == answered[0].input
    assert "note" in feedback_of(retry)


async def test_a_retry_cut_by_the_time_budget_is_recorded_as_a_timeout() -> None:
    provider = ScriptedProvider(answer("nope"), Turn(HANG))  # the retry never answers
    dep = Deployment("gpt-test", "openai-chat", "up", capabilities=Capabilities())
    policy = StructuredPolicy.from_settings(StructuredSettings(seconds=1.0))
    net = SafetyNet(provider, dep, policy)
    outcome = Outcome()
    with pytest.raises(ApiError):
        [e async for e in net.stream(request(), outcome=outcome)]
    assert [a.stage for a in outcome.attempts] == ["parse", "timeout"]
    assert outcome.exhausted_by == "seconds" and len(provider.calls) == 2


async def test_a_long_output_is_checked_off_the_event_loop() -> None:
    """Past the small work of its schema, the parse and schema layers run in a schema work
    process and the semantic checks in a thread."""
    threads: list[bool] = []

    def on_main_thread(value: Any) -> list[str]:
        threads.append(threading.current_thread() is threading.main_thread())
        return []

    long = json.dumps({"sku": "A1", "price": 2, "note": "x" * SMALL_CHECK})
    net, _ = make_net([answer(GOOD), answer(long)], checks={"product": [on_main_thread]})
    answered = SCHEMA_WORK.answered
    await run(net, request())
    assert SCHEMA_WORK.answered == answered
    events, outcome = await run(net, request())
    assert threads == [True, False]
    assert SCHEMA_WORK.answered == answered + 1
    assert outcome.status == "ok" and isinstance(events[-1], Finish)


async def test_a_truncation_after_feedback_keeps_the_feedback() -> None:
    script = [answer('{"sku": 1}'), answer("{", "length", tokens=10), answer(GOOD)]
    net, provider = make_net(script)
    _, outcome = await run(net, request(max_output_tokens=10))
    assert [a.stage for a in outcome.attempts] == ["schema", "truncation", None]
    assert provider.requests[2].input == provider.requests[1].input
    assert provider.requests[2].max_output_tokens == 20


async def test_a_check_of_two_parameters_reads_what_was_asked_and_its_feedback_recovers() -> None:
    """A number the model invented (not in the input) is a semantic failure, retried with
    feedback naming it; the client's own text is what the check reads, not the net's."""
    seen: list[str] = []

    def numbers_from_input(value: Any, asked: str) -> list[str]:
        seen.append(asked)
        price = value.get("price")
        return [] if f"{price}" in asked else [f"price: {price} is not in the input"]

    net, provider = make_net(
        [answer('{"sku": "A1", "price": 29.9}'), answer('{"sku": "A1", "price": 12.5}')],
        checks={"product": [numbers_from_input]},
    )
    req = ModelRequest(
        model="up",
        input=[{"type": "message", "role": "user", "content": "A1 costs 12.5 EUR"}],
        instructions="Extract the product.",
        text_format=TextFormat("json_schema", "product", PRODUCT, True),
    )
    events, outcome = await run(net, req)
    assert outcome.status == "recovered" and text_of(events) == GOOD
    assert seen == ["Extract the product.\nA1 costs 12.5 EUR"] * 2
    assert "price: 29.9 is not in the input" in feedback_of(provider.requests[1])
