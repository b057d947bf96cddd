"""The app factory: ``create_app(settings)`` wires every service explicitly onto one ``Services`` object.

No module-level state and no work at import time: the store, the provider
registry and the HTTP pool are opened in the app's lifespan and closed with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.routing import BaseRoute, Route

from orgate.config import (
    ResolvedKey,
    Settings,
    deployments,
    resolve_api_keys,
    resolve_secret,
    route_table,
)
from orgate.engine.background import BackgroundRunner
from orgate.engine.router import Router
from orgate.engine.service import ResponsesService
from orgate.neutral import Deployment
from orgate.protocol.errors import ApiError
from orgate.providers import ProviderRegistry
from orgate.providers.builtin_misbehave import flaky_wrapper
from orgate.server import routes
from orgate.server.auth import Authenticator
from orgate.server.compact import KEY_EXTRA, compact_routes, compaction_key
from orgate.server.create_endpoint import CreateResponse
from orgate.server.errors import handle_api_error, handle_http_exception, handle_unexpected
from orgate.server.log_redaction import REDACTOR, url_password
from orgate.server.mcp_runtime import build_mcp_runtime
from orgate.server.observability import (
    HttpMetrics,
    ObservabilityMiddleware,
    instrument_providers,
    setup_tracing,
)
from orgate.server.openapi import openapi_routes
from orgate.server.pipeline import Pipeline
from orgate.server.ratelimit import RateLimiter, build_limiter
from orgate.server.shutdown import Shutdown
from orgate.server.stored import stored_routes
from orgate.server.websocket import websocket_routes
from orgate.server.worker_metrics import WorkersView, keep_snapshots
from orgate.server.workers import WorkerContext, worker_context
from orgate.store import StoreError, describe_url, open_store

log = logging.getLogger("orgate.server")

# Extra route sets (e.g. the legacy chat adapter) are plugged in by name, so deleting one
# package only means deleting its line here.
RouteSet = Callable[["Services"], Sequence[BaseRoute]]


@dataclass
class Services:
    """Everything the HTTP layer uses, built once per app."""

    settings: Settings
    keys: list[ResolvedKey]
    deployments: dict[str, Deployment]
    auth: Authenticator
    providers: ProviderRegistry
    responses: ResponsesService
    metrics: CollectorRegistry
    pipeline: Pipeline
    http_metrics: HttpMetrics
    limiter: RateLimiter | None = None
    #: What ``/metrics`` exposes: the registry, or every worker's numbers (``worker_metrics``).
    metrics_view: Any = None
    #: This process's part in a multi-worker server (None: a single process).
    worker: WorkerContext | None = None
    store: Any = None
    background: BackgroundRunner = field(default_factory=BackgroundRunner)
    #: A shutdown in progress and its drain deadline (started by ``shutdown.DrainingServer``).
    shutdown: Shutdown = field(default_factory=lambda: Shutdown(0.0))
    extras: dict[str, Any] = field(default_factory=dict)


def build_services(settings: Settings) -> Services:
    keys = resolve_api_keys(settings)
    table = deployments(settings)
    metrics = CollectorRegistry()
    pipeline = Pipeline(settings, metrics)
    http_metrics = HttpMetrics(metrics, known_models=table)
    worker = worker_context()
    shared = worker.ratelimit_file if worker else None
    limiter = build_limiter(keys, settings.ratelimit.redis_url, settings.ratelimit.prefix, shared_path=shared)
    ttl = settings.store.ttl_days * 86400 if settings.store.ttl_days else None
    key = compaction_key(settings)  # ConfigError on an unreadable key file / too short secret
    routes_ = route_table(settings)
    upstreams = [*table.values(), *(t.deployment for r in routes_.values() for t in r.targets)]
    providers = ProviderRegistry(
        wrap=instrument_providers(http_metrics, limiter, inner=flaky_wrapper(settings.builtin.misbehave)),
        kinds={deployment.provider for deployment in upstreams},  # imported now, not by a request
    )
    router = Router(routes_, providers)
    register_secrets(settings, keys, upstreams)
    responses = ResponsesService(
        table, router, store=None, gate_policy=settings.gate.policy, pipeline=pipeline, ttl_seconds=ttl, compaction_key=key,
        mcp=build_mcp_runtime(settings, metrics),
    )
    return Services(
        extras={KEY_EXTRA: key},
        metrics=metrics,
        metrics_view=WorkersView(metrics, worker.metrics_dir) if worker else metrics,
        worker=worker,
        pipeline=pipeline,
        http_metrics=http_metrics,
        limiter=limiter,
        settings=settings,
        keys=keys,
        deployments=table,
        auth=Authenticator(keys),
        providers=providers,
        responses=responses,
        shutdown=Shutdown(settings.server.drain_timeout),
    )


def register_secrets(settings: Settings, keys: Sequence[ResolvedKey], upstreams: Sequence[Deployment]) -> None:
    """Tell the log redaction every secret this configuration resolved (and the names of the
    configured upstream headers, whose values it hides wherever they are logged)."""
    REDACTOR.add_secrets(k.secret.decode() for k in keys if k.secret)
    REDACTOR.add_secrets(d.api_key for d in upstreams)
    REDACTOR.add_secrets(value for d in upstreams for value in d.headers.values())
    REDACTOR.add_headers(name for d in upstreams for name in d.headers)
    REDACTOR.add_secrets(
        [
            resolve_secret(settings.compaction.secret, where="compaction.secret", required=False),
            url_password(resolve_secret(settings.store.url, where="store.url", required=False)),
            url_password(resolve_secret(settings.ratelimit.redis_url, where="ratelimit.redis_url", required=False)),
        ]
    )


async def _maintain(services: Services, every: float = 60.0) -> None:
    """Periodic store upkeep: fail responses of dead processes, prune past the TTL."""
    ttl_days = services.settings.store.ttl_days
    while True:
        await asyncio.sleep(every)
        store = services.store
        if store is None:
            return
        try:
            await store.recover_interrupted()
            if ttl_days:
                await store.prune(older_than=ttl_days * 86400)
        except Exception as exc:  # noqa: BLE001 - upkeep must outlive any failure (the next round retries)
            log.warning("store maintenance failed: %s", exc)


async def _warn_unreachable_tenants(store: Any, keys: Sequence[ResolvedKey]) -> None:
    """Say when the store holds data of tenants no configured key has: most likely a store
    written when tenants were derived (``key0``…), or a key renamed, whose data now answers 404."""
    try:
        stored = await store.tenants()
    except Exception as exc:  # noqa: BLE001 - a hint only: never in the way of serving
        log.debug("could not list the store's tenants: %s", exc)
        return
    unreachable = sorted(set(stored) - {key.tenant for key in keys})
    if unreachable:
        log.warning(
            "the store holds data of tenant(s) %s, which no configured API key has: that data is "
            "not served; if a key's tenant was renamed, move it with `orgate store rename-tenant OLD NEW` "
            "(see `orgate store tenants`, docs/store.md)",
            ", ".join(repr(name) for name in unreachable),
        )


def default_route_sets(settings: Settings) -> list[RouteSet]:
    """Optional route sets switched on by configuration."""
    sets: list[RouteSet] = []
    if settings.endpoints.chat_completions.enabled:
        from orgate.chat import STARTUP_WARNING  # the one optional, deletable package
        from orgate.chat import routes as chat_routes

        log.warning(STARTUP_WARNING)
        sets.append(chat_routes)
    if settings.console.enabled:
        from orgate.console import routes as console_routes

        sets.append(console_routes)
    return sets


def create_app(settings: Settings, *, route_sets: list[RouteSet] | None = None, services: Services | None = None) -> Starlette:
    """Build the ASGI app. ``route_sets`` defaults to what the settings switch on."""
    services = services or build_services(settings)
    extra = default_route_sets(settings) if route_sets is None else route_sets
    table: list[BaseRoute] = [
        *routes.core_routes(services),
        *compact_routes(services),  # before /v1/responses/{response_id}: "compact" is no id
        *stored_routes(services),
        *websocket_routes(services),
        *openapi_routes(services),
    ]
    for route_set in extra:
        table.extend(route_set(services))

    services.shutdown.at_deadline(services.background.aclose)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        maintenance: asyncio.Task[None] | None = None
        unreachable: asyncio.Task[None] | None = None
        snapshots = asyncio.create_task(keep_snapshots(services.metrics, services.worker.metrics_dir)) if services.worker else None
        if settings.store.enabled:
            try:
                store = await open_store(settings.store.url)
            except (StoreError, ValueError) as exc:
                log.error("cannot open the response store %s: %s", describe_url(settings.store.url), exc)
                raise SystemExit(f"orgate: cannot open the response store: {exc}") from None
            services.store = store
            services.responses.store = store
            recovered = await store.recover_interrupted()
            if recovered:
                log.warning("marked %d interrupted response(s) as failed", len(recovered))
            maintenance = asyncio.create_task(_maintain(services))
            if services.worker is None or services.worker.slot == 0:  # one warning per server
                unreachable = asyncio.create_task(_warn_unreachable_tenants(store, services.keys))
        try:
            yield
        finally:
            for task in (maintenance, snapshots, unreachable):
                if task is not None:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
            await services.background.drain(services.shutdown.remaining())
            await services.background.aclose()
            await services.providers.aclose()
            if services.limiter is not None:
                await services.limiter.aclose()
            if services.store is not None:
                await services.store.close()
            services.pipeline.close()

    app = OrgateApp(
        routes=table,
        lifespan=lifespan,
        exception_handlers={
            ApiError: handle_api_error,
            HTTPException: handle_http_exception,
            Exception: handle_unexpected,
        },
    )
    app.state.services = services
    if settings.endpoints.responses.enabled:
        app.fast_create = CreateResponse(services)
    # Outermost, around the fast path too: request id, rate limits, access log, metrics.
    app.observe = ObservabilityMiddleware(
        app.dispatch,
        metrics=services.http_metrics,
        auth=services.auth,
        limiter=services.limiter,
        log_bodies=settings.logging.bodies,
        tracer=setup_tracing(settings.tracing.enabled, settings.tracing.service_name, settings.tracing.otlp_endpoint),
        static_routes=[path for route in table if "{" not in (path := getattr(route, "path", "{"))],
    )
    return app


class OrgateApp(Starlette):
    """The Starlette app, with ``POST /v1/responses`` dispatched straight to its ASGI handler.

    The hot path skips the framework's middleware and routing layers; every
    other request (and the same path's WebSocket and other methods) goes
    through Starlette as usual.
    """

    fast_create: CreateResponse | None = None
    observe: ObservabilityMiddleware | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        path = scope.get("path")
        if path and len(path) > 1 and path[-1] == "/":
            # `/v1/responses/` is `/v1/responses` (before the rate limits see the path): no
            # framework redirect, whose Location says http:// behind a TLS-terminating proxy.
            scope = {**scope, "path": path.rstrip("/") or "/"}
        if self.observe is not None and scope["type"] == "http":
            await self.observe(scope, receive, send)
            return
        await self.dispatch(scope, receive, send)

    async def dispatch(self, scope: Any, receive: Any, send: Any) -> None:
        fast = self.fast_create
        if fast is not None and scope["type"] == "http" and scope["path"] == "/v1/responses" and scope["method"] == "POST":
            await fast(scope, receive, send)
            return
        await super().__call__(scope, receive, send)


__all__ = ["Route", "Services", "build_services", "create_app"]
