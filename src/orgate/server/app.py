"""The server's app: ``build_app(settings, route_sets=...)``, over one typed ``Services``.

``build_app`` mounts the core routes and exactly the route sets it is given (none by default);
the gateway's ``orgate.gateway.create_app`` is the one factory a server runs: it adds the sets
the settings switch on.

No module-level state and no work at import time: the store, the provider
registry and the HTTP pool are opened in the app's lifespan and closed with it.
The optional route sets (the chat adapter, the console) are given by the
composition root, ``orgate/gateway.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.routing import BaseRoute, Route

from orgate.config import ResolvedKey, Settings
from orgate.gate.work import SCHEMA_WORK
from orgate.protocol.errors import ApiError
from orgate.server import routes
from orgate.server.background_jobs import take_over
from orgate.server.cluster import keep_node
from orgate.server.compact import compact_routes
from orgate.server.conversations import conversation_routes
from orgate.server.create_endpoint import CreateResponse
from orgate.server.errors import handle_api_error, handle_http_exception, handle_unexpected
from orgate.server.middleware import edge_middleware, wrap
from orgate.server.observability import setup_tracing
from orgate.server.openapi import openapi_routes
from orgate.server.services import Services, build_services
from orgate.server.sse import frame, openai_frame
from orgate.server.stored import stored_routes
from orgate.server.token_count import token_count_routes
from orgate.server.websocket import websocket_routes
from orgate.server.worker_metrics import keep_snapshots
from orgate.store import ResponseStore, StoreError, describe_url, open_store
from orgate.structured.review_store import StoreReviews, import_review_file

log = logging.getLogger("orgate.server")

# Extra route sets (the legacy chat adapter, the console) are given by the composition root,
# ``orgate/gateway.py``: the server imports none of the packages it mounts.
RouteSet = Callable[[Services], Sequence[BaseRoute]]


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
        except Exception as exc:  # noqa: BLE001 - upkeep outlives any failure (retried next round)
            log.warning("store maintenance failed: %s", exc)


async def _reviews_in_store(services: Services, store: ResponseStore) -> None:
    """The review queue in the store from now on; a review file of an earlier orgate imported."""
    services.output_checks.review = StoreReviews(store)
    try:
        await import_review_file(services.settings.structured.review_path(), store)
    except StoreError as exc:  # tried again at the next start: the file is still there
        log.warning("could not import the review file into the store: %s", exc)


async def _warn_unreachable_tenants(store: ResponseStore, keys: Sequence[ResolvedKey]) -> None:
    """Say when the store holds data of tenants no configured key has: most likely a store
    written when tenants were derived (``key0``…), or a key renamed, whose data now answers
    404."""
    try:
        stored = await store.tenants()
    except Exception as exc:  # noqa: BLE001 - a hint only: never in the way of serving
        log.debug("could not list the store's tenants: %s", exc)
        return
    unreachable = sorted(set(stored) - {key.tenant for key in keys})
    if unreachable:
        log.warning(
            "the store holds data of tenant(s) %s, which no configured API key has: that data is "
            "not served; if a key's tenant was renamed, move it with "
            "`orgate store rename-tenant OLD NEW` "
            "(see `orgate store tenants`, docs/store.md)",
            ", ".join(repr(name) for name in unreachable),
        )


def build_app(
    settings: Settings, *, route_sets: Sequence[RouteSet] = (), services: Services | None = None
) -> Starlette:
    """The ASGI app with the core routes and ``route_sets`` only (``orgate.gateway.create_app``
    adds what the settings switch on)."""
    services = services or build_services(settings)
    extra = route_sets
    table: list[BaseRoute] = [
        *routes.core_routes(services),
        *compact_routes(services),  # before /v1/responses/{response_id}: "compact" is no id
        *token_count_routes(services),  # nor is "input_tokens"
        *stored_routes(services),
        *conversation_routes(services),
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
        takeover: asyncio.Task[None] | None = None
        node: asyncio.Task[None] | None = None
        snapshots = (
            asyncio.create_task(keep_snapshots(services.metrics, services.worker.metrics_dir))
            if services.worker
            else None
        )
        if settings.store.enabled:
            try:
                store = await open_store(settings.store.url)
            except (StoreError, ValueError) as exc:
                log.error(
                    "cannot open the response store %s: %s", describe_url(settings.store.url), exc
                )
                raise SystemExit(f"orgate: cannot open the response store: {exc}") from None
            services.store = store
            services.responses.store = store
            await _reviews_in_store(services, store)
            recovered = await store.recover_interrupted()
            if recovered:
                log.warning("marked %d interrupted response(s) as failed", len(recovered))
            maintenance = asyncio.create_task(_maintain(services))
            takeover = asyncio.create_task(take_over(services, _encoder(app, settings)))
            node = asyncio.create_task(keep_node(services, store))
            if services.worker is None or services.worker.slot == 0:  # one warning per server
                unreachable = asyncio.create_task(_warn_unreachable_tenants(store, services.keys))
        try:
            yield
        finally:
            for task in (maintenance, snapshots, unreachable, takeover, node):
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
            services.output_checks.close()
            SCHEMA_WORK.stop()  # the worker processes of schema work (gate/work.py)

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
    # Outermost, around the fast path too: request id, access log and metrics, auth, rate limits.
    stack = edge_middleware(
        metrics=services.http_metrics,
        auth=services.auth,
        limiter=services.limiter,
        log_bodies=settings.logging.bodies,
        tracer=setup_tracing(
            settings.tracing.enabled, settings.tracing.service_name, settings.tracing.otlp_endpoint
        ),
        static_routes=[path for route in table if "{" not in (path := getattr(route, "path", "{"))],
    )
    app.edge = wrap(app.dispatch, stack)
    return app


def _encoder(app: Starlette, settings: Settings) -> Any:
    """How this server writes SSE events (what a background response taken over is run with)."""
    fast = getattr(app, "fast_create", None)
    if fast is not None:
        return fast.frame
    return openai_frame if settings.endpoints.responses.event_names == "openai" else frame


class OrgateApp(Starlette):
    """The Starlette app, with ``POST /v1/responses`` dispatched straight to its ASGI handler.

    The hot path skips the framework's middleware and routing layers; every
    other request (and the same path's WebSocket and other methods) goes
    through Starlette as usual.
    """

    fast_create: CreateResponse | None = None
    #: ``dispatch`` inside the edge middlewares (``middleware.py``), for HTTP and WebSocket scopes.
    edge: Callable[[Any, Any, Any], Awaitable[None]] | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        path = scope.get("path")
        if path and len(path) > 1 and path[-1] == "/":
            # `/v1/responses/` is `/v1/responses` (before the rate limits see the path): no
            # framework redirect, whose Location says http:// behind a TLS-terminating proxy.
            scope = {**scope, "path": path.rstrip("/") or "/"}
        if self.edge is not None and scope["type"] != "lifespan":
            await self.edge(scope, receive, send)
            return
        await self.dispatch(scope, receive, send)

    def dispatch(self, scope: Any, receive: Any, send: Any) -> Awaitable[None]:
        """The fast path, or Starlette (the awaitable of either: no coroutine of its own)."""
        fast = self.fast_create
        if (
            fast is not None
            and scope["type"] == "http"
            and scope["path"] == "/v1/responses"
            and scope["method"] == "POST"
        ):
            return fast(scope, receive, send)
        return super().__call__(scope, receive, send)


__all__ = ["Route", "RouteSet", "build_app"]
