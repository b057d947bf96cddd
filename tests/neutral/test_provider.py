"""The provider contract: the batch stream is the primitive, ``stream`` derives from it,
and a class that would lose the batches or be bypassed is refused when it is defined."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from tests.support.scripted import ScriptedProvider, Turn

from orgate.neutral import Finish, ModelEvent, ModelRequest, Provider, TextDelta, WrapperProvider

REQUEST = ModelRequest(model="m", input=[])
BATCHES: list[list[ModelEvent]] = [
    [TextDelta("a"), TextDelta("b")],
    [TextDelta("c"), Finish("stop")],
]


def batched() -> ScriptedProvider:
    """Answers in two batches, as a decoder fed two network reads would (every call)."""
    return ScriptedProvider(otherwise=Turn(*BATCHES))


class OneByOne(Provider):
    """Answers one event at a time: what is tested is the base class's batches for a class
    that defines ``stream`` only, so this test defines one (as the refusals below do)."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        yield TextDelta("a")
        yield Finish("stop")


async def collect(stream: AsyncIterator[object]) -> list[object]:
    return [item async for item in stream]


async def test_a_batched_provider_gives_single_events_too() -> None:
    provider = batched()
    assert await collect(provider.stream_batches(REQUEST)) == BATCHES
    assert await collect(provider.stream(REQUEST)) == [
        event for batch in BATCHES for event in batch
    ]


async def test_a_provider_of_single_events_answers_in_batches_of_one() -> None:
    assert await collect(OneByOne().stream_batches(REQUEST)) == [[TextDelta("a")], [Finish("stop")]]


async def test_a_wrapper_forwards_batches_and_closing() -> None:
    inner = batched()
    wrapper = WrapperProvider(inner)
    assert await collect(wrapper.stream_batches(REQUEST)) == BATCHES
    await wrapper.aclose()
    assert inner.closed


def test_a_provider_without_a_stream_is_refused() -> None:
    with pytest.raises(TypeError, match="must define stream_batches"):

        class Mute(Provider):  # noqa: F841 - defining it is the test
            pass


def test_a_wrapper_that_overrides_only_stream_is_refused() -> None:
    # The engine calls stream_batches: WrapperProvider's would go around this override.
    with pytest.raises(TypeError, match="override stream_batches"):

        class Bypassed(WrapperProvider):  # noqa: F841 - defining it is the test
            def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
                return self.inner.stream(request)
