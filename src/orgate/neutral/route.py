"""A client-facing model name over its deployments, as configured: ``Route``, ``Target``,
``RoutePolicy``; and ``intersect_capabilities``, what every deployment of a route can take.

Plain data, read by the configuration (``config.route_table``) and run by the engine's
router (``engine/router.py``, which owns the behaviour these settings describe).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from orgate.neutral.deployment import Capabilities, Deployment


@dataclass(frozen=True, slots=True)
class RoutePolicy:
    """How a route retries, falls back, limits and trips. Defaults match ``[models.routing]``."""

    strategy: Literal["ordered", "weighted"] = "ordered"
    retries: int = 2  # further tries of a deployment that failed, per request
    backoff_base: float = 0.25  # seconds; the n-th retry waits up to base * 2**(n-1)
    backoff_max: float = 8.0  # cap on one wait, and on the Retry-After honoured
    circuit_failures: int = 5  # consecutive failures that open a deployment's circuit
    circuit_cooldown: float = 30.0  # seconds a deployment is skipped before one probe
    queue_timeout: float = 1.0  # seconds to wait for a slot when every deployment is full


@dataclass(frozen=True, slots=True)
class Target:
    """One deployment of a route."""

    deployment: Deployment
    weight: float = 1.0  # for strategy "weighted"
    max_concurrency: int | None = None  # in-flight streams; None = unlimited

    @property
    def name(self) -> str:
        return self.deployment.name


@dataclass(frozen=True, slots=True)
class Route:
    """A client-facing model name served by ``targets`` (fallback order) under ``policy``."""

    name: str
    targets: tuple[Target, ...]
    policy: RoutePolicy = field(default_factory=RoutePolicy)

    @property
    def capabilities(self) -> Capabilities:
        return intersect_capabilities([t.deployment.capabilities for t in self.targets])


def intersect_capabilities(caps: Sequence[Capabilities]) -> Capabilities:
    """What every one of ``caps`` can take: flags AND-ed, limits at their smallest known value."""
    if not caps:
        return Capabilities()

    def smallest(values: list[int | None]) -> int | None:
        known = [v for v in values if v is not None]
        return min(known) if known else None

    # in the first one's order: a dialect every deployment takes (the net picks one for all)
    dialects = tuple(
        d for d in caps[0].schema_dialects if all(d in c.schema_dialects for c in caps[1:])
    )
    return Capabilities(
        tools=all(c.tools for c in caps),
        images=all(c.images for c in caps),
        json_schema=all(c.json_schema for c in caps) and bool(dialects),
        json_object=all(c.json_object for c in caps),
        strict_json_schema=all(c.strict_json_schema for c in caps),
        schema_dialects=dialects,
        schema_in_prompt=any(c.schema_in_prompt for c in caps),
        reasoning=all(c.reasoning for c in caps),
        hosted_tools=all(c.hosted_tools for c in caps),
        service_tier=all(c.service_tier for c in caps),
        logprobs=all(c.logprobs for c in caps),
        declared=frozenset().union(*(c.declared for c in caps)),
        max_output_tokens=smallest([c.max_output_tokens for c in caps]),
        context_window=smallest([c.context_window for c in caps]),
    )
