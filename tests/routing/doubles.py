"""Test doubles for the router's unit tests: scripted upstream providers and a manual clock.

``Scripted`` is a ``Provider`` standing in for one upstream: each call takes the
next step of its script (``fail(error)`` before any event, ``answer(...)``,
``answer_then_fail(...)``, ``hold()`` to keep the stream open until released)
and records the request, when it came, and whether its stream was closed.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from orgate.engine.router import Route, RoutePolicy, Router, Target
from orgate.neutral import (
    Capabilities,
    Deployment,
    Finish,
    ModelEvent,
    ModelRequest,
    Provider,
    TextDelta,
)
from orgate.protocol.errors import ApiError


def server_error(
    status: int = 502, code: str = "upstream_error", headers: dict[str, str] | None = None
) -> ApiError:
    return ApiError(
        status, f"upstream failed ({code})", type="server_error", code=code, headers=headers
    )


def rate_limit(retry_after: str | None = None) -> ApiError:
    headers = {"Retry-After": retry_after} if retry_after is not None else None
    return ApiError(
        429, "slow down", type="rate_limit_error", code="rate_limit_exceeded", headers=headers
    )


def bad_request() -> ApiError:
    return ApiError(
        400,
        "upstream rejected the request",
        type="invalid_request_error",
        code="upstream_bad_request",
    )


@dataclass
class Step:
    events: list[ModelEvent] = field(default_factory=list)
    error: ApiError | None = None  # raised after the events
    hold: asyncio.Event | None = None  # wait for it after the first event
    before: asyncio.Event | None = None  # wait for it before the first event


def fail(error: ApiError) -> Step:
    return Step(error=error)


def answer(text: str = "hello") -> Step:
    return Step(events=[TextDelta(text), Finish("stop")])


def answer_then_fail(error: ApiError) -> Step:
    return Step(events=[TextDelta("partial")], error=error)


def hold(release: asyncio.Event) -> Step:
    return Step(events=[TextDelta("held"), Finish("stop")], hold=release)


def slow_start(release: asyncio.Event) -> Step:
    """No event until ``release`` is set (an upstream still thinking)."""
    return Step(events=[TextDelta("late"), Finish("stop")], before=release)


@dataclass
class Call:
    model: str
    at: float
    closed: bool = False


class Scripted(Provider):
    """One fake upstream. Without a script step it answers ``"<name> answers"``."""

    def __init__(self, name: str, *steps: Step) -> None:
        self.name = name
        self.steps: deque[Step] = deque(steps)
        self.calls: list[Call] = []

    async def aclose(self) -> None:
        return None

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        call = Call(request.model, time.monotonic())
        self.calls.append(call)
        step = self.steps.popleft() if self.steps else answer(f"{self.name} answers")
        try:
            if step.before is not None:
                await step.before.wait()
            for index, event in enumerate(step.events):
                await asyncio.sleep(0)
                yield event
                if index == 0 and step.hold is not None:
                    await step.hold.wait()
            if step.error is not None:
                raise step.error
        finally:
            call.closed = True


class ManualClock:
    """A monotonic clock that only moves when slept on (or advanced by the test)."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += max(0.0, seconds)
        await asyncio.sleep(0)


def deployment(name: str, **caps: Any) -> Deployment:
    return Deployment(
        name=name,
        provider="openai-chat",
        upstream_model=f"up-{name}",
        base_url=f"http://{name}",
        capabilities=Capabilities(**caps),
    )


def make_router(
    *upstreams: Scripted,
    policy: RoutePolicy | None = None,
    limits: dict[str, int] | None = None,
    clock: ManualClock | None = None,
    seed: int = 7,
) -> tuple[Router, Deployment]:
    """A router with one route "m" over ``upstreams`` (in that order); returns it and the route's front deployment."""
    limits = limits or {}
    by_name = {u.name: u for u in upstreams}
    targets = tuple(
        Target(deployment(u.name), max_concurrency=limits.get(u.name)) for u in upstreams
    )
    route = Route("m", targets, policy or RoutePolicy())
    kwargs: dict[str, Any] = {"rng": random.Random(seed)}
    if clock is not None:
        kwargs.update(clock=clock, sleep=clock.sleep)
    router = Router({"m": route}, lambda d: by_name[d.name], **kwargs)
    front = Deployment(
        name="m", provider="openai-chat", upstream_model="front-model", base_url="http://front"
    )
    return router, front


def request(text: str = "hi") -> ModelRequest:
    return ModelRequest(model="front-model", input=[{"role": "user", "content": text}])


async def drain(stream: AsyncIterator[ModelEvent]) -> list[ModelEvent]:
    return [event async for event in stream]


def texts(events: list[ModelEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))
