"""Routing: one client-facing model name over one or more deployments, with fallbacks.

A ``Route`` is an ordered list of ``Target``s (a ``Deployment`` plus its weight
and concurrency limit) and a ``RoutePolicy`` (plain data: ``neutral/route.py``). ``RoutedProvider``
is a
``Provider`` over a route; ``Router`` builds them and is the service's
provider factory.

Rules (see ``docs/routing.md``):

- **Fallback before the first event only.** An upstream failure raised before
  the first event (429, 500/502/503/504 of type ``server_error`` /
  ``rate_limit_error`` / ``model_error``: connection failures, timeouts,
  overload) moves on to the next deployment at once (deployments tried fewer
  times in this request come first); a deployment that failed is tried again,
  up to ``retries`` more times, after an exponential backoff with full jitter
  or its ``Retry-After`` (seconds or HTTP date). A ``Retry-After`` above ``backoff_max`` drops that
  deployment for this
  request; when none is left the last error (the 429 and its ``Retry-After``)
  goes to the client. Other errors (400s, the tool guard's verdicts) are
  never retried. After the first event nothing is retried: the error
  propagates and the engine fails the stream cleanly.
- **Concurrency.** A deployment with ``max_concurrency`` holds a slot for its
  whole stream. A full deployment is skipped for the next one; when every
  remaining deployment is full the request waits up to ``queue_timeout`` for
  a slot, then gets a 429 ``too_many_concurrent_requests`` (``Retry-After: 1``).
- **Circuit breaker.** ``circuit_failures`` consecutive failures open a
  deployment's circuit for ``circuit_cooldown`` seconds (it is skipped); then
  one probe request is let through (half-open): success closes the circuit,
  failure opens it again. When every deployment is open the request fails
  fast with 503 ``upstream_unavailable``.
- **Affinity.** ``RouteTrace.prefer`` names the deployment to try first (the
  session's previous turn); ``RouteTrace.served_by`` tells which one answered.

Only this module sleeps or keeps per-deployment state; it does no I/O itself.
"""

from __future__ import annotations

import asyncio
import dataclasses
import email.utils
import logging
import math
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal, Protocol, runtime_checkable

from orgate.neutral import Deployment, ModelEvent, ModelRequest, Provider, aclose_quietly
from orgate.neutral.route import Route, RoutePolicy, Target, intersect_capabilities
from orgate.protocol.errors import (
    MODEL_ERROR,
    RATE_LIMIT,
    SERVER_ERROR,
    ApiError,
    ErrorCode,
    upstream_without_events,
)

log = logging.getLogger("orgate.router")

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
RETRY_TYPES = frozenset({SERVER_ERROR, RATE_LIMIT, MODEL_ERROR})
# Verdicts on the model's output made by orgate itself, not upstream failures: never retried here.
NOT_UPSTREAM_CODES = frozenset({ErrorCode.INVALID_TOOL_ARGUMENTS, ErrorCode.TOOL_CHOICE_VIOLATION})
# Failures that another deployment may not have, but that asking the same one again cannot fix.
SAME_DEPLOYMENT_FUTILE = frozenset(
    {
        ErrorCode.UPSTREAM_AUTH_FAILED,
        ErrorCode.UPSTREAM_MODEL_NOT_FOUND,
        ErrorCode.UPSTREAM_REDIRECT,
    }
)

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[object]]


@dataclass(slots=True)
class Attempt:
    """One upstream call of a request: which deployment, and how it ended (None = it answered)."""

    deployment: str
    error: str | None = None  # "<status> <code>" of the failure


@dataclass(slots=True)
class RouteTrace:
    """Passed in by the caller for one turn: the deployment to prefer, and what happened."""

    prefer: str | None = None  # e.g. the deployment of the session's previous turn
    served_by: str | None = None  # the deployment whose answer is being streamed
    attempts: list[Attempt] = field(default_factory=list)


# --- errors ------------------------------------------------------------------------------------


def retryable(error: ApiError) -> bool:
    """An upstream failure another try (here or at another deployment) may not have."""
    return (
        error.status in RETRY_STATUSES
        and error.type in RETRY_TYPES
        and error.code not in NOT_UPSTREAM_CODES
    )


def retry_after_seconds(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """``Retry-After`` as seconds from now: delta-seconds or an HTTP date;
    None if absent or unreadable."""
    value = next((v for k, v in headers.items() if k.lower() == "retry-after"), None)
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        current = datetime.now(UTC).timestamp() if now is None else now
        seconds = when.timestamp() - current
    if math.isnan(seconds) or math.isinf(seconds):
        return None
    return max(0.0, seconds)


def backoff_delay(retry: int, policy: RoutePolicy, rng: random.Random) -> float:
    """Full jitter: uniform in [0, min(backoff_max, backoff_base * 2**(retry-1))] for the retry-th
    retry (1-based)."""
    ceiling = min(policy.backoff_max, policy.backoff_base * (2 ** max(0, retry - 1)))
    return rng.uniform(0.0, ceiling)


def _busy(route: Route, waited: float) -> ApiError:
    return ApiError.of(
        ErrorCode.TOO_MANY_CONCURRENT_REQUESTS,
        f"every deployment of model '{route.name}' is at its concurrency limit (waited "
        f"{waited:g}s for a slot)",
        headers={"Retry-After": "1"},
    )


def _all_open(route: Route, retry_in: float) -> ApiError:
    return ApiError.of(
        ErrorCode.UPSTREAM_UNAVAILABLE,
        f"every deployment of model '{route.name}' is cooling down after repeated failures",
        headers={"Retry-After": str(max(1, math.ceil(retry_in)))},
    )


def _empty(target: Target) -> ApiError:
    return upstream_without_events(target.name)


# --- per-deployment state ------------------------------------------------------------------------


class DeploymentState:
    """Concurrency slots and the circuit breaker of one deployment, shared by every request."""

    def __init__(self, limit: int | None, clock: Clock) -> None:
        self.limit = limit
        self.in_use = 0
        self.failures = 0  # consecutive
        self.open_until: float | None = None  # circuit open (skipped) until then
        self.probing = False  # half-open: the one probe is in flight
        self._clock = clock

    @property
    def full(self) -> bool:
        return self.limit is not None and self.in_use >= self.limit

    def circuit(self) -> Literal["closed", "open", "half_open"]:
        if self.open_until is None:
            return "closed"
        if self._clock() < self.open_until or self.probing:
            return "open"
        return "half_open"

    def acquire(self) -> bool:
        """Take a slot (and the probe when half-open); False when full or open."""
        state = self.circuit()
        if state == "open" or self.full:
            return False
        if state == "half_open":
            self.probing = True
        self.in_use += 1
        return True

    def release(self) -> None:
        self.in_use -= 1

    def succeeded(self) -> None:
        self.failures = 0
        self.open_until = None
        self.probing = False

    def failed(self, policy: RoutePolicy) -> bool:
        """Count a failure; True when this one opened (or re-opened) the circuit."""
        self.failures += 1
        opened = self.probing or (
            self.open_until is None and self.failures >= policy.circuit_failures
        )
        if opened:
            self.open_until = self._clock() + policy.circuit_cooldown
        self.probing = False
        return opened

    def abandoned(self) -> None:
        """The attempt ended without a verdict on the upstream (client gone, a 400):
        free the probe."""
        self.probing = False


# --- one request's walk over the route ------------------------------------------------------------


class _Walk:
    """One request's way through its route's deployments, until one answers: how often each was
    tried, when each may be tried again, those given up on, the last failure, the queue deadline."""

    __slots__ = (
        "route",
        "router",
        "order",
        "tries",
        "not_before",
        "done",
        "last_error",
        "queue_deadline",
    )

    def __init__(self, route: Route, router: Router, order: list[Target]) -> None:
        self.route = route
        self.router = router
        self.order = order
        self.tries = {t.name: 0 for t in order}
        self.not_before = {t.name: 0.0 for t in order}
        self.done: set[str] = set()
        self.last_error: ApiError | None = None
        self.queue_deadline: float | None = None

    async def next(self) -> Target:
        """The next deployment to try, its slot taken: waits out backoffs and full deployments;
        raises when none is left (the last failure, all circuits open, or the queue timed out)."""
        router = self.router
        while True:
            now = router.clock()
            usable = self._usable(now)
            ready = [t for t in usable if self.not_before[t.name] <= now]
            if not ready:
                await router.sleep(min(self.not_before[t.name] for t in usable) - now)
                continue
            target = self._acquire(ready)
            if target is not None:
                self.queue_deadline = None
                self.tries[target.name] += 1
                return target
            await self._queue(usable, now)

    def _usable(self, now: float) -> list[Target]:
        """The deployments not given up on whose circuit lets a request through; when there are
        none, the last failure, or (none failed here) a 503 until the first circuit closes."""
        live = [t for t in self.order if t.name not in self.done]
        usable = [t for t in live if self.router.state(t).circuit() != "open"]
        if usable:
            return usable
        if self.last_error is not None:
            raise self.last_error
        reopen = min((self.router.state(t).open_until or now) - now for t in live) if live else 0.0
        raise _all_open(self.route, reopen)

    def _acquire(self, ready: list[Target]) -> Target | None:
        """The first of ``ready`` with a free slot, its slot taken. Deployments not yet tried in
        this request come first: a failure moves on to the next deployment at once, even when the
        failed one may be retried at once too (``Retry-After: 0``, a date in the past,
        a tiny backoff)."""
        ready.sort(key=lambda t: self.tries[t.name])  # stable: route order among equals
        return next((t for t in ready if self.router.state(t).acquire()), None)

    async def _queue(self, usable: list[Target], now: float) -> None:
        """Every deployment that may be tried now is at its limit: wait, briefly, until a slot
        frees, a backed-off deployment becomes ready, or the queue times out (then a 429)."""
        if self.queue_deadline is None:
            self.queue_deadline = now + self.route.policy.queue_timeout
        if now >= self.queue_deadline:
            raise _busy(self.route, self.route.policy.queue_timeout)
        wake = min(
            [
                self.queue_deadline,
                *(self.not_before[t.name] for t in usable if self.not_before[t.name] > now),
            ]
        )
        await self.router.wait_for_slot(wake - now)

    def failed(self, target: Target, error: ApiError) -> None:
        """After ``target`` failed with a retryable ``error``: when (if ever) to try it again."""
        self.last_error = error
        policy = self.route.policy
        name = target.name
        # the request id is added by the log formatter (it is the current request's)
        fields = {
            "event": "upstream_retry",
            "model": self.route.name,
            "deployment": name,
            "status": error.status,
            "code": error.code,
        }
        if self.tries[name] > policy.retries or error.code in SAME_DEPLOYMENT_FUTILE:
            self.done.add(name)
            log.warning(
                "route %s: %s failed (%s %s); not trying it again",
                self.route.name,
                name,
                error.status,
                error.code,
                extra=fields,
            )
            return
        wait = retry_after_seconds(error.headers)
        if wait is not None and wait > policy.backoff_max:
            self.done.add(name)
            log.warning(
                "route %s: %s asks to wait %gs (> backoff_max %gs); giving up on it",
                self.route.name,
                name,
                wait,
                policy.backoff_max,
                extra=fields,
            )
            return
        if wait is None:
            wait = backoff_delay(self.tries[name], policy, self.router.rng)
        self.not_before[name] = self.router.clock() + wait
        log.warning(
            "route %s: %s failed (%s %s); may retry in %.3fs",
            self.route.name,
            name,
            error.status,
            error.code,
            wait,
            extra=fields,
        )


@dataclass(slots=True)
class _Opened:
    """A deployment that answered: its stream, its first batch, its slot and its attempt."""

    target: Target
    state: DeploymentState
    upstream: AsyncIterator[list[ModelEvent]]
    first: list[ModelEvent]
    attempt: Attempt


def _failure(error: ApiError) -> str:
    return f"{error.status} {error.code}"


# --- the provider over a route --------------------------------------------------------------------


class RoutedProvider(Provider):
    """A ``Provider`` over a ``Route``: fallbacks, retries, limits and circuits
    (see the module docstring)."""

    def __init__(
        self, route: Route, providers: Callable[[Deployment], Provider], router: Router
    ) -> None:
        self.route = route
        self._providers = providers
        self._router = router

    async def aclose(self) -> None:
        """The providers belong to the registry that built them."""

    def _order(self, prefer: str | None) -> list[Target]:
        targets = list(self.route.targets)
        if self.route.policy.strategy == "weighted" and len(targets) > 1:
            rng = self._router.rng
            targets.sort(key=lambda t: rng.random() ** (1.0 / t.weight), reverse=True)
        if prefer is not None:
            targets.sort(key=lambda t: t.name != prefer)  # stable: the preferred one first
        return targets

    async def stream_batches(
        self, request: ModelRequest, trace: RouteTrace | None = None
    ) -> AsyncIterator[list[ModelEvent]]:
        """Deployments tried until one sends its first batch (the walk), then that one streamed."""
        trace = RouteTrace() if trace is None else trace
        walk = _Walk(self.route, self._router, self._order(trace.served_by or trace.prefer))
        opened = None
        while opened is None:
            opened = await self._open(await walk.next(), request, walk, trace)
        self._serving(opened, trace)
        upstream = opened.upstream
        try:
            yield opened.first
            async for batch in upstream:
                yield batch
        except ApiError as error:
            # After the first event nothing is retried: the engine fails the stream cleanly.
            opened.attempt.error = _failure(error)
            if retryable(error):
                self._failed(opened.target, opened.state)
            raise
        finally:
            try:
                # a client that went away (generator closed or cancelled) closes the upstream now
                await aclose_quietly(upstream)
            finally:
                self._router.free(opened.state)

    async def _open(
        self, target: Target, request: ModelRequest, walk: _Walk, trace: RouteTrace
    ) -> _Opened | None:
        """Call ``target`` (its slot taken) and read its first batch. None: it failed as another try
        may not (the walk plans the next); any other failure frees the slot and propagates."""
        router = self._router
        state = router.state(target)
        attempt = Attempt(target.name)
        trace.attempts.append(attempt)
        upstream: AsyncIterator[list[ModelEvent]] | None = None
        try:
            provider = self._providers(target.deployment)
            upstream = provider.stream_batches(
                dataclasses.replace(request, model=target.deployment.upstream_model)
            )
            try:
                first = await anext(upstream)
            except StopAsyncIteration:
                raise _empty(target) from None
        except ApiError as error:
            try:
                await aclose_quietly(upstream)
            finally:
                router.free(state)
            attempt.error = _failure(error)
            if not retryable(error):
                state.abandoned()
                raise
            self._failed(target, state)
            walk.failed(target, error)
            return None
        except BaseException:
            router.free(state)
            state.abandoned()
            await aclose_quietly(upstream)
            raise
        assert upstream is not None
        return _Opened(target, state, upstream, first, attempt)

    def _serving(self, opened: _Opened, trace: RouteTrace) -> None:
        """The deployment that answered: its circuit closed, the trace told, a fallback logged."""
        name = opened.target.name
        if opened.state.probing:
            log.warning(
                "route %s: circuit of %s closed (its probe request succeeded)",
                self.route.name,
                name,
                extra={"event": "circuit_closed", "model": self.route.name, "deployment": name},
            )
        if len(trace.attempts) > 1:
            log.warning(
                "route %s: served by %s after %d failed attempt(s) (%s)",
                self.route.name,
                name,
                len(trace.attempts) - 1,
                ", ".join(f"{a.deployment}: {a.error}" for a in trace.attempts[:-1]),
                extra={"event": "fallback", "model": self.route.name, "deployment": name},
            )
        opened.state.succeeded()
        trace.served_by = name

    def _failed(self, target: Target, state: DeploymentState) -> None:
        if state.failed(self.route.policy):
            log.warning(
                "route %s: circuit of %s opened for %gs after %d consecutive failure(s)",
                self.route.name,
                target.name,
                self.route.policy.circuit_cooldown,
                state.failures,
                extra={
                    "event": "circuit_opened",
                    "model": self.route.name,
                    "deployment": target.name,
                },
            )


class _Bound(Provider):
    """A routed provider bound to one turn's ``RouteTrace`` (what wrappers such as the tool guard
    call)."""

    def __init__(self, routed: RoutedProvider, trace: RouteTrace) -> None:
        self.routed = routed
        self.trace = trace

    def stream_batches(self, request: ModelRequest) -> AsyncIterator[list[ModelEvent]]:
        return self.routed.stream_batches(request, self.trace)


class Router:
    """The service's provider factory: routed models get a ``RoutedProvider``,
    others their plain provider.

    ``providers`` builds (and owns) the provider of one deployment, e.g. a
    ``ProviderRegistry``. ``clock``, ``sleep`` and ``rng`` are injectable for tests.
    """

    def __init__(
        self,
        routes: Mapping[str, Route],
        providers: Callable[[Deployment], Provider],
        *,
        clock: Clock = time.monotonic,
        sleep: Sleep = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.routes = dict(routes)
        self.providers = providers
        self.clock = clock
        self.sleep = sleep
        self.rng = rng or random.Random()
        self._routed: dict[str, RoutedProvider] = {}
        self._states: dict[str, DeploymentState] = {}
        self._freed: asyncio.Event | None = None
        for route in self.routes.values():
            for target in route.targets:
                self._states.setdefault(target.name, DeploymentState(target.max_concurrency, clock))

    def state(self, target: Target) -> DeploymentState:
        return self._states[target.name]

    def routed(self, name: str) -> RoutedProvider | None:
        route = self.routes.get(name)
        if route is None:
            return None
        provider = self._routed.get(name)
        if provider is None:
            provider = self._routed[name] = RoutedProvider(route, self.providers, self)
        return provider

    def __call__(self, deployment: Deployment) -> Provider:
        """A ``ProviderFactory``: the provider for a client-facing model's deployment (no trace)."""
        routed = self.routed(deployment.name)
        return self.providers(deployment) if routed is None else routed

    def open(
        self, deployment: Deployment, prefer: str | None = None
    ) -> tuple[Provider, RouteTrace]:
        """The provider for one turn and its trace: ``trace.served_by`` names the deployment that
        answered."""
        trace = RouteTrace(prefer=prefer)
        routed = self.routed(deployment.name)
        if routed is None:
            trace.served_by = deployment.name
            return self.providers(deployment), trace
        return _Bound(routed, trace), trace

    def primary(self, deployment: Deployment) -> Provider:
        """The provider of the deployment a model's requests go to first (a routed model's first
        target): the one asked for a token count."""
        route = self.routes.get(deployment.name)
        return self.providers(route.targets[0].deployment if route is not None else deployment)

    def served(self, deployment: Deployment, served_by: str | None) -> Deployment:
        """The deployment named ``served_by`` among ``deployment``'s route targets (a fallback that
        answered), else ``deployment`` itself."""
        route = self.routes.get(deployment.name) if served_by is not None else None
        for target in route.targets if route is not None else ():
            if target.name == served_by:
                return target.deployment
        return deployment

    # slots: released synchronously (also from a closing generator), waited for with a timeout

    def free(self, state: DeploymentState) -> None:
        state.release()
        if self._freed is not None:
            self._freed.set()
            self._freed = None

    async def wait_for_slot(self, timeout: float) -> bool:
        """Wait until some deployment frees a slot; False on timeout."""
        if self._freed is None:
            self._freed = asyncio.Event()
        freed = self._freed
        try:
            async with asyncio.timeout(max(0.0, timeout)):
                await freed.wait()
        except TimeoutError:
            return False
        return True

    async def aclose(self) -> None:
        """Nothing of its own: the providers' owner closes them."""


@runtime_checkable
class TurnProviders(Protocol):
    """What the responses service asks of its providers: one turn's provider with its trace, the
    deployment that served a trace, and the provider a model's requests go to first
    (``Router``; ``Unrouted`` over a plain factory)."""

    def open(
        self, deployment: Deployment, prefer: str | None = None
    ) -> tuple[Provider, RouteTrace]: ...

    def served(self, deployment: Deployment, served_by: str | None) -> Deployment: ...

    def primary(self, deployment: Deployment) -> Provider: ...


class Unrouted:
    """``TurnProviders`` over a plain provider factory: every deployment answers for itself."""

    def __init__(self, providers: Callable[[Deployment], Provider]) -> None:
        self.providers = providers

    def open(
        self, deployment: Deployment, prefer: str | None = None
    ) -> tuple[Provider, RouteTrace]:
        return self.providers(deployment), RouteTrace(prefer=prefer, served_by=deployment.name)

    def served(self, deployment: Deployment, served_by: str | None) -> Deployment:
        return deployment

    def primary(self, deployment: Deployment) -> Provider:
        return self.providers(deployment)


def turn_providers(providers: TurnProviders | Callable[[Deployment], Provider]) -> TurnProviders:
    """``providers`` as ``TurnProviders`` (a plain factory is ``Unrouted``)."""
    return providers if isinstance(providers, TurnProviders) else Unrouted(providers)


__all__ = [
    "Attempt",
    "DeploymentState",
    "RoutePolicy",
    "Route",
    "RouteTrace",
    "TurnProviders",
    "Unrouted",
    "turn_providers",
    "RoutedProvider",
    "Router",
    "Target",
    "backoff_delay",
    "intersect_capabilities",
    "retry_after_seconds",
    "retryable",
]
