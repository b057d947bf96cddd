"""What the HTTP layer works with: the typed ``Services`` of one app,
and ``build_services(settings)``.

Every service is made here, once per app, from the settings: the deployments and
the router over the provider registry, the responses and compaction services, the
authenticator and the rate limiter, the metrics and the output checks.
The store is opened later, in the app's lifespan (``server/app.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry

from orgate.config import (
    ResolvedKey,
    Settings,
    deployments,
    resolve_api_keys,
    resolve_secret,
    route_table,
)
from orgate.engine.background import BackgroundRunner
from orgate.engine.compaction.service import CompactionService
from orgate.engine.conversations import ConversationsService
from orgate.engine.history_cache import HistoryCache
from orgate.engine.router import Router
from orgate.engine.service import ResponsesService
from orgate.gate.work import SCHEMA_WORK
from orgate.neutral import Deployment
from orgate.providers import ProviderRegistry
from orgate.providers.builtin_misbehave import flaky_wrapper
from orgate.server.auth import Authenticator
from orgate.server.compact import compaction_key
from orgate.server.history_metrics import register_history_metrics
from orgate.server.log_redaction import REDACTOR, url_password
from orgate.server.mcp_runtime import build_mcp_runtime
from orgate.server.observability import HttpMetrics, instrument_providers
from orgate.server.output_checks import OutputChecks
from orgate.server.ratelimit import RateLimiter, build_limiter
from orgate.server.shutdown import Shutdown
from orgate.server.worker_metrics import WorkersView
from orgate.server.workers import WorkerContext, worker_context
from orgate.store import ResponseStore


@dataclass
class Services:
    """Everything the HTTP layer uses, built once per app."""

    settings: Settings
    keys: list[ResolvedKey]
    deployments: dict[str, Deployment]
    auth: Authenticator
    providers: ProviderRegistry
    responses: ResponsesService
    compaction: CompactionService
    conversations: ConversationsService
    metrics: CollectorRegistry
    output_checks: OutputChecks
    http_metrics: HttpMetrics
    limiter: RateLimiter | None = None
    #: What ``/metrics`` exposes: the registry, or every worker's numbers (``worker_metrics``).
    metrics_view: CollectorRegistry | WorkersView | None = None
    #: This process's part in a multi-worker server (None: a single process).
    worker: WorkerContext | None = None
    #: Opened in the app's lifespan when ``[store] enabled`` (None before, or without a store).
    store: ResponseStore | None = None
    background: BackgroundRunner = field(default_factory=BackgroundRunner)
    #: A shutdown in progress and its drain deadline (started by ``shutdown.DrainingServer``).
    shutdown: Shutdown = field(default_factory=lambda: Shutdown(0.0))


#: The modules of the schema work's jobs (``gate/work.py``): its fork server imports them once.
SCHEMA_JOB_MODULES = (
    "orgate.gate.checks",
    "orgate.providers.builtin",
    "orgate.structured.layers",
)


def build_services(settings: Settings) -> Services:
    keys = resolve_api_keys(settings)
    limits = settings.limits
    SCHEMA_WORK.configure(
        limits.schema_work_processes, limits.schema_work_seconds, SCHEMA_JOB_MODULES
    )
    table = deployments(settings)
    metrics = CollectorRegistry()
    output_checks = OutputChecks(settings, metrics)
    http_metrics = HttpMetrics(metrics, known_models=table)
    worker = worker_context()
    shared = worker.ratelimit_file if worker else None
    limiter = build_limiter(
        keys, settings.ratelimit.redis_url, settings.ratelimit.prefix, shared_path=shared
    )
    ttl = settings.store.ttl_days * 86400 if settings.store.ttl_days else None
    key = compaction_key(settings)  # ConfigError on an unreadable key file / too short secret
    routes_ = route_table(settings)
    upstreams = [*table.values(), *(t.deployment for r in routes_.values() for t in r.targets)]
    providers = ProviderRegistry(
        wrap=instrument_providers(
            http_metrics, limiter, inner=flaky_wrapper(settings.builtin.misbehave)
        ),
        kinds={deployment.provider for deployment in upstreams},  # imported now, not by a request
    )
    router = Router(routes_, providers)
    register_secrets(settings, keys, upstreams)
    responses = ResponsesService(
        table,
        router,
        store=None,
        gate_policy=settings.gate.policy,
        output_checks=output_checks,
        ttl_seconds=ttl,
        compaction_key=key,
        mcp=build_mcp_runtime(settings, metrics),
        refuse_translations=frozenset(settings.translation.refuse),
        background_lease_seconds=settings.store.background_lease_seconds,
        history_cache=_history_cache(settings),
    )
    register_history_metrics(metrics, responses.history_cache)
    compaction = CompactionService(responses, key, settings.compaction.keep_turns)
    responses.compactor = compaction  # compaction on create (`context_management`)
    return Services(
        compaction=compaction,
        conversations=ConversationsService(responses, settings.limits.max_input_items),
        metrics=metrics,
        metrics_view=WorkersView(metrics, worker.metrics_dir) if worker else metrics,
        worker=worker,
        output_checks=output_checks,
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


def _history_cache(settings: Settings) -> HistoryCache | None:
    """The process's cache of decoded histories (``[store] history_cache_mb``; 0: none)."""
    size = int(settings.store.history_cache_mb * 1024 * 1024)
    return HistoryCache(size) if size > 0 and settings.store.enabled else None


def register_secrets(
    settings: Settings, keys: Sequence[ResolvedKey], upstreams: Sequence[Deployment]
) -> None:
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
            url_password(
                resolve_secret(
                    settings.ratelimit.redis_url, where="ratelimit.redis_url", required=False
                )
            ),
        ]
    )


__all__ = ["Services", "build_services", "register_secrets"]
