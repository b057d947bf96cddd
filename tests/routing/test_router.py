"""The router over scripted upstreams: fallbacks, retries and their timing, circuits, limits,
affinity."""

from __future__ import annotations

import asyncio
import random
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from orgate.engine.router import (
    RoutePolicy,
    Router,
    RouteTrace,
    backoff_delay,
    intersect_capabilities,
    retry_after_seconds,
    retryable,
)
from orgate.neutral import Capabilities, Deployment, Finish, Provider, TextDelta
from orgate.protocol.errors import ApiError
from tests.routing.doubles import (
    ManualClock,
    answer,
    answer_then_fail,
    bad_request,
    deployment,
    drain,
    fail,
    hold,
    make_router,
    rate_limit,
    request,
    server_error,
    slow_start,
    texts,
    upstream,
)
from tests.support.scripted import Turn
from tests.support.waiting import eventually

FAST = RoutePolicy(retries=0, backoff_base=0.01, backoff_max=0.05)


# --- fallbacks ---------------------------------------------------------------------------------


async def test_falls_back_in_order_and_rewrites_the_model() -> None:
    a = upstream("a", fail(server_error(502)))
    b = upstream("b", fail(server_error(503, "upstream_overloaded")))
    c = upstream("c")
    router, front = make_router(a, b, c, policy=FAST)
    provider, trace = router.open(front)
    events = await drain(provider.stream(request()))
    assert texts(events) == "c answers" and isinstance(events[-1], Finish)
    assert [call.model for call in a.calls + b.calls + c.calls] == ["up-a", "up-b", "up-c"]
    assert trace.served_by == "c"
    assert [(x.deployment, x.error) for x in trace.attempts] == [
        ("a", "502 upstream_error"),
        ("b", "503 upstream_overloaded"),
        ("c", None),
    ]


@pytest.mark.parametrize(
    "error",
    [
        rate_limit(),
        server_error(500, "model_error"),
        server_error(502, "upstream_unavailable"),
        server_error(504, "upstream_timeout"),
        ApiError(500, "model failed", type="model_error", code="model_error"),
    ],
)
async def test_retryable_failures_fall_back(error: ApiError) -> None:
    a, b = upstream("a", fail(error)), upstream("b")
    router, front = make_router(a, b, policy=FAST)
    assert texts(await drain(router(front).stream(request()))) == "b answers"


@pytest.mark.parametrize(
    "error",
    [
        bad_request(),
        ApiError(404, "nope", type="invalid_request_error", code="not_found"),
        ApiError(500, "invalid calls", type="model_error", code="invalid_tool_arguments"),
        ApiError(501, "odd", type="server_error", code="upstream_error"),
    ],
)
async def test_other_errors_are_not_retried(error: ApiError) -> None:
    a, b = upstream("a", fail(error)), upstream("b")
    router, front = make_router(a, b, policy=RoutePolicy(retries=2))
    with pytest.raises(ApiError) as info:
        await drain(router(front).stream(request()))
    assert info.value is error
    assert len(a.calls) == 1 and not b.calls


async def test_no_retry_after_the_first_event() -> None:
    a = upstream("a", answer_then_fail(server_error(502)))
    b = upstream("b")
    router, front = make_router(a, b, policy=RoutePolicy(retries=2))
    provider, trace = router.open(front)
    seen = []
    with pytest.raises(ApiError) as info:
        async for event in provider.stream(request()):
            seen.append(event)
    assert info.value.status == 502
    assert seen == [TextDelta("partial")]
    assert len(a.calls) == 1 and not b.calls and a.calls[0].ended
    assert trace.served_by == "a"


async def test_all_failing_raises_the_last_error() -> None:
    a = upstream("a", fail(server_error(502)))
    b = upstream("b", fail(server_error(503, "upstream_overloaded")))
    router, front = make_router(a, b, policy=FAST)
    with pytest.raises(ApiError) as info:
        await drain(router(front).stream(request()))
    assert info.value.code == "upstream_overloaded"
    assert len(a.calls) == len(b.calls) == 1


async def test_auth_failure_falls_back_but_is_not_retried_on_the_same_deployment() -> None:
    a = upstream("a", fail(server_error(502, "upstream_auth_failed")))
    router, front = make_router(a, policy=RoutePolicy(retries=3, backoff_base=0.001))
    with pytest.raises(ApiError):
        await drain(router(front).stream(request()))
    assert len(a.calls) == 1


async def test_an_empty_upstream_stream_counts_as_a_failure() -> None:
    a = upstream("a", Turn())  # a stream that ends without an event
    router, front = make_router(a, upstream("b"), policy=FAST)
    assert texts(await drain(router(front).stream(request()))) == "b answers"


# --- retries and their timing ------------------------------------------------------------------


async def test_retry_honours_retry_after_seconds() -> None:
    # Measured on the real monotonic clock: the backoff alone would retry at once. Only the
    # lower bound is real time (a loaded machine makes the gap longer, never shorter); the
    # wait's length is the manual clock's test below.
    a = upstream("a", fail(rate_limit("0.2")), answer("second try"))
    router, front = make_router(a, policy=RoutePolicy(retries=2, backoff_base=0.001, backoff_max=1))
    events = await drain(router(front).stream(request()))
    assert texts(events) == "second try"
    gap = a.calls[1].at - a.calls[0].at
    assert gap >= 0.2, gap


async def test_retry_waits_the_retry_after_seconds_not_longer() -> None:
    clock = ManualClock()
    a = upstream("a", fail(rate_limit("0.2")), answer("second try"))
    policy = RoutePolicy(retries=2, backoff_base=0.001, backoff_max=1)
    router, front = make_router(a, policy=policy, clock=clock)
    assert texts(await drain(router(front).stream(request()))) == "second try"
    assert clock.sleeps == [pytest.approx(0.2)]


async def test_retry_after_above_backoff_max_gives_up_with_the_429() -> None:
    clock = ManualClock()
    a = upstream("a", fail(rate_limit("30")))
    router, front = make_router(a, policy=RoutePolicy(retries=2, backoff_max=0.5), clock=clock)
    with pytest.raises(ApiError) as info:
        await drain(router(front).stream(request()))
    assert clock.sleeps == []  # no wait at all
    assert info.value.status == 429 and info.value.headers == {"Retry-After": "30"}
    assert len(a.calls) == 1


async def test_retry_after_above_backoff_max_moves_on_to_the_next_deployment() -> None:
    clock = ManualClock()
    a, b = upstream("a", fail(rate_limit("30"))), upstream("b")
    router, front = make_router(a, b, policy=RoutePolicy(retries=2, backoff_max=0.5), clock=clock)
    assert texts(await drain(router(front).stream(request()))) == "b answers"
    assert clock.sleeps == [] and len(a.calls) == 1


async def test_a_fallback_does_not_wait_but_a_retry_does() -> None:
    clock = ManualClock()
    a = upstream("a", fail(rate_limit("2")), answer("a again"))
    b = upstream("b", fail(server_error(502, "upstream_auth_failed")))
    router, front = make_router(
        a, b, policy=RoutePolicy(retries=1, backoff_base=4, backoff_max=8), clock=clock
    )
    events = await drain(router(front).stream(request()))
    assert texts(events) == "a again"
    # a (429, Retry-After 2) → b at once → b failed for good: wait for a's Retry-After, not longer
    assert clock.sleeps == [2.0]
    # Real time: the manual clock did the waiting. Waiting for real would take 2 s; the calls
    # themselves take microseconds, so a machine a thousand times slower still passes.
    assert a.calls[1].at - a.calls[0].at < 2.0


def test_retry_after_parses_seconds_and_http_dates() -> None:
    assert retry_after_seconds({"Retry-After": "3"}) == 3.0
    assert retry_after_seconds({"retry-after": "0.25"}) == 0.25
    assert retry_after_seconds({"Retry-After": "-4"}) == 0.0
    assert retry_after_seconds({}) is None
    assert retry_after_seconds({"Retry-After": "soon"}) is None
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    later = format_datetime(now + timedelta(seconds=90), usegmt=True)
    assert retry_after_seconds({"Retry-After": later}, now=now.timestamp()) == pytest.approx(90)
    past = format_datetime(now - timedelta(seconds=90), usegmt=True)
    assert retry_after_seconds({"Retry-After": past}, now=now.timestamp()) == 0.0


async def test_retry_after_http_date_is_honoured() -> None:
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=100), usegmt=True)
    a = upstream("a", fail(rate_limit(when)))
    router, front = make_router(a, policy=RoutePolicy(retries=2, backoff_max=8))
    with pytest.raises(ApiError) as info:  # 100 s > backoff_max: given up at once, date passed on
        await drain(router(front).stream(request()))
    assert info.value.headers["Retry-After"] == when


def test_backoff_is_full_jitter_within_exponential_bounds() -> None:
    policy = RoutePolicy(backoff_base=0.25, backoff_max=2.0)
    rng = random.Random(1)
    for retry, ceiling in [(1, 0.25), (2, 0.5), (3, 1.0), (4, 2.0), (5, 2.0), (12, 2.0)]:
        samples = [backoff_delay(retry, policy, rng) for _ in range(500)]
        assert all(0.0 <= s <= ceiling for s in samples)
        assert (
            max(samples) > 0.8 * ceiling and min(samples) < 0.2 * ceiling
        )  # jitter spans the range


async def test_backoff_waits_grow_and_stay_bounded() -> None:
    clock = ManualClock()
    a = upstream("a", *[fail(server_error(502)) for _ in range(5)])
    router, front = make_router(
        a, policy=RoutePolicy(retries=4, backoff_base=1.0, backoff_max=3.0), clock=clock
    )
    with pytest.raises(ApiError):
        await drain(router(front).stream(request()))
    assert len(a.calls) == 5
    assert len(clock.sleeps) == 4
    for retry, slept in enumerate(clock.sleeps, start=1):
        assert 0.0 <= slept <= min(3.0, 1.0 * 2 ** (retry - 1))


async def test_retries_count_per_deployment() -> None:
    clock = ManualClock()
    a = upstream("a", *[fail(server_error(502)) for _ in range(3)])
    b = upstream("b", *[fail(server_error(502)) for _ in range(3)])
    router, front = make_router(
        a, b, policy=RoutePolicy(retries=2, circuit_failures=100), clock=clock
    )
    with pytest.raises(ApiError):
        await drain(router(front).stream(request()))
    assert (len(a.calls), len(b.calls)) == (3, 3)


# --- circuit breaker ------------------------------------------------------------------------------


async def test_circuit_opens_then_half_opens_for_one_probe() -> None:
    clock = ManualClock()
    a = upstream("a", fail(server_error()), fail(server_error()))
    b = upstream("b")
    policy = RoutePolicy(retries=0, circuit_failures=2, circuit_cooldown=10)
    router, front = make_router(a, b, policy=policy, clock=clock)
    for _ in range(2):
        assert texts(await drain(router(front).stream(request()))) == "b answers"
    assert len(a.calls) == 2
    # open: a is skipped without being called
    assert texts(await drain(router(front).stream(request()))) == "b answers"
    assert len(a.calls) == 2
    clock.now += 10
    # half-open: one probe reaches a; until it answers, other requests skip a
    release = asyncio.Event()
    a.enqueue(slow_start(release))
    probe = asyncio.create_task(drain(router(front).stream(request())))
    assert await eventually(lambda: len(a.calls) == 3)
    assert texts(await drain(router(front).stream(request()))) == "b answers"
    assert len(a.calls) == 3
    release.set()
    assert texts(await probe) == "late"
    # the probe succeeded (its first event came): closed again
    assert texts(await drain(router(front).stream(request()))) == "a answers"


async def test_a_failed_probe_opens_the_circuit_again() -> None:
    clock = ManualClock()
    a = upstream("a", fail(server_error()), fail(server_error()))
    b = upstream("b")
    router, front = make_router(
        a, b, policy=RoutePolicy(retries=0, circuit_failures=1, circuit_cooldown=10), clock=clock
    )
    await drain(router(front).stream(request()))
    clock.now += 10
    await drain(router(front).stream(request()))  # the probe fails; b answers
    assert len(a.calls) == 2
    clock.now += 5
    await drain(router(front).stream(request()))
    assert len(a.calls) == 2  # open again for a whole cool-down


async def test_every_circuit_open_fails_fast_with_503() -> None:
    clock = ManualClock()
    a = upstream("a", fail(server_error()))
    router, front = make_router(
        a, policy=RoutePolicy(retries=0, circuit_failures=1, circuit_cooldown=30), clock=clock
    )
    with pytest.raises(ApiError) as first:
        await drain(router(front).stream(request()))
    assert first.value.code == "upstream_error"  # the real error the first time
    clock.now += 12
    with pytest.raises(ApiError) as info:
        await drain(router(front).stream(request()))
    assert (info.value.status, info.value.code) == (503, "upstream_unavailable")
    assert info.value.headers == {"Retry-After": "18"}
    assert len(a.calls) == 1


async def test_bad_requests_and_cancellations_do_not_trip_the_circuit() -> None:
    a = upstream("a", fail(bad_request()), fail(bad_request()))
    router, front = make_router(a, policy=RoutePolicy(retries=0, circuit_failures=1))
    for _ in range(2):
        with pytest.raises(ApiError):
            await drain(router(front).stream(request()))
    assert texts(await drain(router(front).stream(request()))) == "a answers"


async def test_mid_stream_failures_count_towards_the_circuit() -> None:
    a = upstream("a", answer_then_fail(server_error()))
    router, front = make_router(
        a, upstream("b"), policy=RoutePolicy(retries=0, circuit_failures=1, circuit_cooldown=60)
    )
    with pytest.raises(ApiError):
        await drain(router(front).stream(request()))
    assert texts(await drain(router(front).stream(request()))) == "b answers"


# --- concurrency limits ---------------------------------------------------------------------------


async def test_a_full_deployment_is_skipped_for_the_next() -> None:
    release = asyncio.Event()
    a = upstream("a", hold(release))
    b = upstream("b")
    router, front = make_router(a, b, limits={"a": 1}, policy=FAST)
    first = router(front).stream(request())
    assert await anext(first) == TextDelta("held")
    provider, trace = router.open(front)
    assert texts(await drain(provider.stream(request()))) == "b answers"
    assert trace.served_by == "b" and trace.attempts[0].deployment == "b"
    release.set()
    await drain(first)
    assert texts(await drain(router(front).stream(request()))) == "a answers"  # the slot was freed


async def test_all_full_waits_for_a_slot_within_the_queue_timeout() -> None:
    release = asyncio.Event()
    a = upstream("a", hold(release))
    # the slot frees when the test says: the queue timeout only bounds a failure
    router, front = make_router(a, limits={"a": 1}, policy=RoutePolicy(queue_timeout=60))
    first = router(front).stream(request())
    await anext(first)
    second = asyncio.create_task(drain(router(front).stream(request())))
    assert await eventually(lambda: router._freed is not None)  # it waits for the slot
    assert len(a.calls) == 1 and not second.done()
    release.set()
    await drain(first)
    assert texts(await second) == "a answers"
    assert len(a.calls) == 2


async def test_all_full_past_the_queue_timeout_is_a_429() -> None:
    release = asyncio.Event()
    a = upstream("a", hold(release))
    router, front = make_router(a, limits={"a": 1}, policy=RoutePolicy(queue_timeout=0.15))
    first = router(front).stream(request())
    await anext(first)
    started = time.monotonic()
    with pytest.raises(ApiError) as info:
        await drain(router(front).stream(request()))
    # Real time from below only (a loaded machine waits longer, never shorter); the 429 at
    # all is what shows the wait ended at the queue timeout.
    assert time.monotonic() - started >= 0.15
    assert (info.value.status, info.value.code, info.value.headers) == (
        429,
        "too_many_concurrent_requests",
        {"Retry-After": "1"},
    )
    release.set()
    await drain(first)


async def test_slots_are_freed_on_failure_and_on_close() -> None:
    release = asyncio.Event()
    a = upstream("a", fail(server_error()), hold(release), answer_then_fail(server_error()))
    router, front = make_router(
        a, limits={"a": 1}, policy=RoutePolicy(retries=0, queue_timeout=0, circuit_failures=100)
    )
    state = router.state(router.routes["m"].targets[0])
    with pytest.raises(ApiError):
        await drain(router(front).stream(request()))
    assert state.in_use == 0
    stream = router(front).stream(request())
    await anext(stream)
    assert state.in_use == 1
    await stream.aclose()  # the client went away
    assert state.in_use == 0 and a.calls[1].ended
    with pytest.raises(ApiError):
        await drain(router(front).stream(request()))
    assert state.in_use == 0


async def test_cancelling_the_consumer_closes_the_upstream() -> None:
    release = asyncio.Event()
    a = upstream("a", hold(release))
    router, front = make_router(a, limits={"a": 1})

    async def consume() -> None:
        await drain(router(front).stream(request()))

    task = asyncio.create_task(consume())
    assert await eventually(lambda: a.calls and a.calls[0].waiting)  # held after its first event
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert a.calls[0].ended
    assert router.state(router.routes["m"].targets[0]).in_use == 0


# --- affinity and routing shape -------------------------------------------------------------------


async def test_prefer_routes_to_the_named_deployment_first() -> None:
    a, b = upstream("a"), upstream("b")
    router, front = make_router(a, b)
    provider, trace = router.open(front, prefer="b")
    assert texts(await drain(provider.stream(request()))) == "b answers"
    assert trace.served_by == "b" and not a.calls


async def test_prefer_falls_back_when_the_preferred_deployment_fails() -> None:
    a, b = upstream("a"), upstream("b", fail(server_error()))
    router, front = make_router(a, b, policy=FAST)
    provider, trace = router.open(front, prefer="b")
    assert texts(await drain(provider.stream(request()))) == "a answers"
    assert trace.served_by == "a"


async def test_a_second_call_in_the_same_turn_sticks_to_the_serving_deployment() -> None:
    a, b = upstream("a", fail(server_error())), upstream("b")
    router, front = make_router(a, b, policy=FAST)
    provider, trace = router.open(front)
    await drain(provider.stream(request()))
    await drain(provider.stream(request()))  # e.g. the tool guard's second attempt
    assert len(a.calls) == 1 and len(b.calls) == 2 and trace.served_by == "b"


async def test_weighted_strategy_spreads_first_choices() -> None:
    a, b = upstream("a"), upstream("b")
    router, front = make_router(a, b, policy=RoutePolicy(strategy="weighted"))
    for _ in range(40):
        await drain(router(front).stream(request()))
    assert 8 <= len(a.calls) <= 32 and len(a.calls) + len(b.calls) == 40


async def test_unrouted_models_get_their_plain_provider() -> None:
    plain = upstream("plain")
    router, _ = make_router(upstream("a"))
    router.providers = lambda d: plain
    other = deployment("other")
    provider, trace = router.open(other, prefer="x")
    assert provider is plain and trace.served_by == "other"
    assert router(other) is plain


def test_route_capabilities_are_what_every_deployment_takes() -> None:
    caps = intersect_capabilities(
        [
            Capabilities(
                tools=True, images=True, json_schema=True, reasoning=True, max_output_tokens=4096
            ),
            Capabilities(
                tools=True,
                images=False,
                json_schema=False,
                reasoning=True,
                max_output_tokens=None,
                context_window=8000,
            ),
        ]
    )
    assert (caps.tools, caps.images, caps.json_schema, caps.reasoning) == (True, False, False, True)
    assert (caps.max_output_tokens, caps.context_window) == (4096, 8000)


def test_retryable_classification() -> None:
    assert retryable(rate_limit())
    assert retryable(server_error(503))
    assert not retryable(bad_request())
    assert not retryable(ApiError(500, "x", type="model_error", code="tool_choice_violation"))
    assert not retryable(ApiError(500, "x", type="invalid_request_error"))


def test_trace_defaults() -> None:
    trace = RouteTrace()
    assert (trace.prefer, trace.served_by, trace.attempts) == (None, None, [])


# --- the ways out before and after the first event ------------------------------------------------


async def test_a_mid_stream_client_error_does_not_count_towards_the_circuit() -> None:
    a = upstream("a", answer_then_fail(bad_request()))
    policy = RoutePolicy(retries=0, circuit_failures=1)
    router, front = make_router(a, upstream("b"), policy=policy)
    provider, trace = router.open(front)
    with pytest.raises(ApiError) as info:
        await drain(provider.stream(request()))
    assert info.value.code == "upstream_bad_request"
    assert [(x.deployment, x.error) for x in trace.attempts] == [("a", "400 upstream_bad_request")]
    assert texts(await drain(router(front).stream(request()))) == "a answers"  # still closed


async def test_cancelled_before_the_first_event_frees_the_slot_and_the_probe() -> None:
    clock = ManualClock()
    release = asyncio.Event()
    a = upstream("a", fail(server_error()), slow_start(release))
    policy = RoutePolicy(retries=0, circuit_failures=1, circuit_cooldown=10)
    router, front = make_router(a, upstream("b"), limits={"a": 1}, policy=policy, clock=clock)
    await drain(router(front).stream(request()))  # a fails (circuit open), b answers
    clock.now += 10
    state = router.state(router.routes["m"].targets[0])
    probe = asyncio.create_task(drain(router(front).stream(request())))
    assert await eventually(lambda: len(a.calls) == 2)
    assert state.probing and state.in_use == 1
    probe.cancel()
    with pytest.raises(asyncio.CancelledError):
        await probe
    assert a.calls[1].ended and state.in_use == 0
    assert not state.probing and state.failures == 1  # no verdict on the upstream: not counted
    assert texts(await drain(router(front).stream(request()))) == "a answers"  # the next probe


async def test_a_provider_that_cannot_be_built_is_not_retried_and_frees_its_slot() -> None:
    routed, front = make_router(upstream("a"), upstream("b"), limits={"a": 1}, policy=FAST)

    def broken(d: Deployment) -> Provider:
        raise RuntimeError(f"no provider for {d.name}")

    router = Router(routed.routes, broken)
    with pytest.raises(RuntimeError):
        await drain(router(front).stream(request()))
    state = router.state(router.routes["m"].targets[0])
    assert (state.in_use, state.failures) == (0, 0)


async def test_a_waiter_that_loses_the_freed_slot_keeps_its_queue_deadline() -> None:
    clock = ManualClock()
    first, second = asyncio.Event(), asyncio.Event()
    a = upstream("a", hold(first), hold(second))
    policy = RoutePolicy(queue_timeout=100)
    router, front = make_router(a, limits={"a": 1}, policy=policy, clock=clock)
    holder = router(front).stream(request())
    await anext(holder)
    winner = asyncio.create_task(drain(router(front).stream(request())))
    loser = asyncio.create_task(drain(router(front).stream(request())))
    while router._freed is None:  # both wait for a slot
        await asyncio.sleep(0)
    await asyncio.sleep(0)
    clock.now += 100  # the queue timeout has passed when the slot frees
    first.set()
    await drain(holder)
    with pytest.raises(ApiError) as info:
        await loser  # woken with the winner, finds the slot taken, and its deadline past
    assert info.value.code == "too_many_concurrent_requests"
    second.set()
    assert texts(await winner) == "held"


async def test_an_untried_deployment_comes_before_one_that_may_be_retried_at_once() -> None:
    a, b = upstream("a", fail(rate_limit("0"))), upstream("b")
    router, front = make_router(a, b, policy=RoutePolicy(retries=1))
    provider, trace = router.open(front)
    assert texts(await drain(provider.stream(request()))) == "b answers"
    assert len(a.calls) == 1 and [x.deployment for x in trace.attempts] == ["a", "b"]


async def test_a_probe_answered_with_a_client_error_frees_the_probe() -> None:
    clock = ManualClock()
    a = upstream("a", fail(server_error()), fail(bad_request()))
    policy = RoutePolicy(retries=0, circuit_failures=1, circuit_cooldown=10)
    router, front = make_router(a, upstream("b"), policy=policy, clock=clock)
    await drain(router(front).stream(request()))  # a fails (circuit open), b answers
    clock.now += 10
    with pytest.raises(ApiError):  # the probe: a 400 says nothing about the upstream's health
        await drain(router(front).stream(request()))
    assert texts(await drain(router(front).stream(request()))) == "a answers"  # the next probe


async def test_a_second_wait_for_a_slot_gets_a_queue_deadline_of_its_own() -> None:
    clock = ManualClock()
    first, third = asyncio.Event(), asyncio.Event()
    busy = server_error(503, "upstream_overloaded", {"Retry-After": "1"})
    a = upstream("a", hold(first), fail(busy), hold(third), answer("second try"))
    policy = RoutePolicy(queue_timeout=5, retries=1)
    router, front = make_router(a, limits={"a": 1}, policy=policy, clock=clock)
    holder = router(front).stream(request())
    await anext(holder)
    retried = asyncio.create_task(drain(router(front).stream(request())))
    other = asyncio.create_task(drain(router(front).stream(request())))
    while router._freed is None:  # both wait for a slot
        await asyncio.sleep(0)
    await asyncio.sleep(0)
    clock.now += 4  # within the queue timeout, the slot frees: the first waiter's call fails,
    first.set()  # and while it waits out the Retry-After the other waiter takes the slot
    await drain(holder)
    assert await eventually(lambda: len(a.calls) == 3 and a.calls[2].waiting)
    assert clock.now == 1005  # past the first wait's deadline: the second wait has its own
    third.set()
    assert texts(await other) == "held"
    assert texts(await retried) == "second try"
