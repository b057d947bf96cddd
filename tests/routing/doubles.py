"""Test doubles for the router's unit tests: scripted upstreams and a manual clock.

``upstream(name, *answers)`` is the scripted provider (tests/support/scripted.py) standing
in for one upstream: each call takes the next answer (``fail(error)`` before any event,
``answer(...)``, ``answer_then_fail(...)``, ``hold()`` to keep the stream open until
released, ``slow_start()``), then ``"<name> answers"``; it records each call.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from typing import Any

from orgate.engine.router import Route, RoutePolicy, Router, Target
from orgate.neutral import (
    Capabilities,
    Deployment,
    Finish,
    ModelEvent,
    ModelRequest,
    TextDelta,
)
from orgate.protocol.errors import ApiError
from tests.support.scripted import Answer, ScriptedProvider, Turn, wait_for


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


def fail(error: ApiError) -> Turn:
    return Turn(error)


def answer(text: str = "hello") -> Turn:
    return Turn.events([TextDelta(text), Finish("stop")])


def answer_then_fail(error: ApiError) -> Turn:
    return Turn([TextDelta("partial")], error)


def hold(release: asyncio.Event) -> Turn:
    """The first event, then nothing until ``release`` is set (a stream kept open)."""
    return Turn([TextDelta("held")], wait_for(release), [Finish("stop")])


def slow_start(release: asyncio.Event) -> Turn:
    """No event until ``release`` is set (an upstream still thinking)."""
    return Turn(wait_for(release), [TextDelta("late")], [Finish("stop")])


def upstream(name: str, *answers: Answer) -> ScriptedProvider:
    """One upstream, ``name``: its script, then ``"<name> answers"`` to every call."""
    return ScriptedProvider(*answers, otherwise=answer(f"{name} answers"), name=name)


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
    *upstreams: ScriptedProvider,
    policy: RoutePolicy | None = None,
    limits: dict[str, int] | None = None,
    clock: ManualClock | None = None,
    seed: int = 7,
) -> tuple[Router, Deployment]:
    """A router with one route "m" over ``upstreams`` (in that order);
    returns it and the route's front deployment."""
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
