"""The upstream instrumentation (``InstrumentedProvider``): each call's outcome, the in-flight gauge
and tokens, however the call ends (answered, failed, closed early, dropped without a close)."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from orgate.neutral import Deployment, Finish, ModelRequest, TextDelta, Usage
from orgate.protocol.errors import ApiError
from orgate.server.observability import HttpMetrics, InstrumentedProvider
from tests.support.scripted import HANG, ScriptedProvider, Turn
from tests.support.waiting import eventually


def scripted(batches: list[list[Any]], error: BaseException | None = None) -> ScriptedProvider:
    """One call answered with ``batches``, then ``error`` raised if given."""
    return ScriptedProvider(Turn(*batches, *([error] if error is not None else [])))


def _setup(inner: ScriptedProvider) -> tuple[InstrumentedProvider, CollectorRegistry]:
    registry = CollectorRegistry()
    metrics = HttpMetrics(registry)
    deployment = Deployment(name="dep", provider="openai-chat", upstream_model="m")
    return InstrumentedProvider(inner, deployment, metrics, None), registry  # type: ignore[arg-type]


def _value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


def _calls(registry: CollectorRegistry, outcome: str) -> float:
    return _value(
        registry, "orgate_upstream_duration_seconds_count", deployment="dep", outcome=outcome
    )


def _in_flight(registry: CollectorRegistry) -> float:
    return _value(registry, "orgate_upstream_requests_in_flight", deployment="dep")


REQUEST = ModelRequest(model="m", input=[])
ANSWER = [[TextDelta("hi")], [Finish("stop", Usage(input_tokens=3, output_tokens=2))]]


async def test_an_answered_call_is_ok_with_its_tokens_and_the_gauge_back_to_zero() -> None:
    inner = scripted(ANSWER)
    provider, registry = _setup(inner)
    stream = provider.stream_batches(REQUEST)
    assert _in_flight(registry) == 0  # not started before its first batch is asked for
    got = [batch async for batch in stream]
    assert got == ANSWER
    assert _calls(registry, "ok") == 1 and _in_flight(registry) == 0
    assert (
        _value(registry, "orgate_upstream_time_to_first_event_seconds_count", deployment="dep") == 1
    )
    assert _value(registry, "orgate_tokens_total", deployment="dep", direction="input") == 3
    assert _value(registry, "orgate_tokens_total", deployment="dep", direction="output") == 2
    await stream.aclose()  # after the end: changes nothing
    assert _calls(registry, "ok") == 1 and _calls(registry, "cancelled") == 0


async def test_a_call_closed_after_its_finish_event_is_ok() -> None:
    inner = scripted(ANSWER)
    provider, registry = _setup(inner)
    stream = provider.stream_batches(REQUEST)
    async for batch in stream:
        if isinstance(batch[-1], Finish):
            break  # the engine stops at the final event
    assert _in_flight(registry) == 1  # still open: the consumer has not closed it
    await stream.aclose()
    assert inner.calls[0].ended
    assert _calls(registry, "ok") == 1 and _in_flight(registry) == 0


async def test_a_call_closed_before_its_answer_is_cancelled_and_closes_the_upstream() -> None:
    inner = scripted(ANSWER)
    provider, registry = _setup(inner)
    stream = provider.stream_batches(REQUEST)
    assert await stream.__anext__() == ANSWER[0]
    await stream.aclose()
    assert inner.calls[0].ended
    assert (
        _calls(registry, "cancelled") == 1
        and _calls(registry, "ok") == 0
        and _in_flight(registry) == 0
    )
    with pytest.raises(StopAsyncIteration):
        await stream.__anext__()


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (ApiError(502, "bad", code="upstream_error"), "upstream_error"),
        (ConnectionResetError("cut"), "ConnectionResetError"),
    ],
)
async def test_a_failing_call_counts_its_error(error: BaseException, code: str) -> None:
    inner = scripted([[TextDelta("a")]], error=error)
    provider, registry = _setup(inner)
    stream = provider.stream_batches(REQUEST)
    assert await stream.__anext__() == [TextDelta("a")]
    with pytest.raises(type(error)):
        await stream.__anext__()
    assert _calls(registry, "error") == 1 and _in_flight(registry) == 0
    assert _value(registry, "orgate_upstream_errors_total", deployment="dep", code=code) == 1
    await stream.aclose()  # the engine closes it in any case: counted once
    assert _calls(registry, "error") == 1 and _calls(registry, "cancelled") == 0


async def test_a_cancelled_wait_is_recorded_by_the_close() -> None:
    inner = ScriptedProvider(Turn(HANG))
    provider, registry = _setup(inner)
    stream = provider.stream_batches(REQUEST)
    waiting = asyncio.create_task(stream.__anext__())
    assert await eventually(lambda: inner.calls and inner.calls[0].waiting)
    assert _in_flight(registry) == 1
    waiting.cancel()  # the client went away while the upstream was silent
    with pytest.raises(asyncio.CancelledError):
        await waiting
    await stream.aclose()
    assert _calls(registry, "cancelled") == 1 and _in_flight(registry) == 0


async def test_a_stream_dropped_without_close_does_not_leave_the_gauge_up() -> None:
    inner = scripted(ANSWER)
    provider, registry = _setup(inner)
    stream = provider.stream_batches(REQUEST)
    await stream.__anext__()
    assert _in_flight(registry) == 1
    del stream
    gc.collect()
    assert _in_flight(registry) == 0 and _calls(registry, "cancelled") == 1


async def test_the_event_stream_closed_early_closes_the_upstream_at_once() -> None:
    """``stream()`` (events one by one, as the router reads them) ends its upstream call when it is
    closed."""
    inner = scripted(ANSWER)
    provider, registry = _setup(inner)
    events = provider.stream(REQUEST)
    assert await events.__anext__() == TextDelta("hi")
    await events.aclose()
    assert inner.calls[0].ended
    assert _calls(registry, "cancelled") == 1 and _in_flight(registry) == 0
