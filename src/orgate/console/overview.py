"""The console's overview and node list: the metrics of every node sharing the store.

``snapshot(registry)`` reads the numbers of every process serving the store (this one's live,
the others' latest snapshots in the store: ``server/cluster.py``; without a store, what
``/metrics`` exposes: every worker's, under ``--workers``) into cumulative figures per model
(requests, errors) and per deployment
(upstream calls, errors, tokens, the latency histogram's buckets). The page polls it
while it is open and draws rates and percentiles from the difference between two
snapshots; nothing is collected while no console is open. Metrics are not kept per
tenant, so only admin keys may read them. ``/console/api/nodes`` lists the processes (the
nodes, or the workers of one) with their health, version, address and traffic.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from orgate.console.guard import json_response, require_session
from orgate.console.session import SessionSigner
from orgate.engine.service import store_failure
from orgate.protocol.errors import ApiError, ErrorCode
from orgate.server.cluster import cluster_view, node_list
from orgate.store import StoreError

if TYPE_CHECKING:
    from orgate.server.services import Services

log = logging.getLogger("orgate.console")

_REQUESTS = "orgate_http_requests"
_UPSTREAM = "orgate_upstream_duration_seconds"
_TOKENS = "orgate_tokens"


def _model_entry(models: dict[str, dict[str, float]], name: str) -> dict[str, float]:
    return models.setdefault(name, {"requests": 0.0, "errors": 0.0})


def _deployment_entry(deployments: dict[str, dict[str, Any]], name: str) -> dict[str, Any]:
    return deployments.setdefault(
        name,
        {"calls": 0.0, "errors": 0.0, "input_tokens": 0.0, "output_tokens": 0.0, "buckets": {}},
    )


def snapshot(registry: Any) -> dict[str, Any]:
    """Cumulative counts since the server started, per model and per deployment."""
    models: dict[str, dict[str, float]] = {}
    deployments: dict[str, dict[str, Any]] = {}
    for family in registry.collect():
        for sample in family.samples:
            labels = sample.labels
            if (
                family.name == _REQUESTS
                and sample.name.endswith("_total")
                and labels.get("route") == "/v1/responses"
            ):
                entry = _model_entry(models, labels.get("model") or "(none)")
                entry["requests"] += sample.value
                if labels.get("status", "").startswith(("4", "5")):
                    entry["errors"] += sample.value
            elif family.name == _UPSTREAM:
                deployment = _deployment_entry(deployments, labels.get("deployment", "?"))
                if sample.name.endswith("_count"):
                    deployment["calls"] += sample.value
                    if labels.get("outcome") == "error":
                        deployment["errors"] += sample.value
                elif sample.name.endswith("_bucket"):
                    le = float(labels["le"])
                    buckets = deployment["buckets"]
                    buckets[le] = buckets.get(le, 0.0) + sample.value
            elif family.name == _TOKENS and sample.name.endswith("_total"):
                deployment = _deployment_entry(deployments, labels.get("deployment", "?"))
                direction = labels.get("direction")
                if direction in ("input", "output"):
                    deployment[f"{direction}_tokens"] += sample.value
    for deployment in deployments.values():
        # JSON has no infinity: the +Inf bucket is sent as null.
        deployment["buckets"] = [
            [None if math.isinf(le) else le, n] for le, n in sorted(deployment["buckets"].items())
        ]
    return {"at": time.time(), "models": models, "deployments": deployments}


async def _require_admin(signer: SessionSigner, request: Request) -> None:
    if not (await require_session(signer, request)).admin:
        raise ApiError.of(
            ErrorCode.ADMIN_REQUIRED,
            "The overview shows every tenant's traffic: it needs an admin key (admin = "
            "true in [auth]).",
        )


async def _numbers(services: Services) -> Any:
    """Every node's numbers when they are in the store, else this server's own."""
    if services.store is not None:
        try:
            return await cluster_view(services, services.store)
        except StoreError as exc:  # the store is down: this node's figures are better than none
            log.warning("the overview shows this node only: %s", exc)
    return services.metrics_view or services.metrics


def overview_routes(services: Services, signer: SessionSigner) -> list[BaseRoute]:
    async def overview(request: Request) -> Response:
        await _require_admin(signer, request)
        registry = await _numbers(services)
        return json_response(await asyncio.to_thread(snapshot, registry))

    async def nodes(request: Request) -> Response:
        await _require_admin(signer, request)
        store = services.store
        if store is None:
            return json_response({"object": "list", "data": [], "store": False})
        try:
            listed = node_list(await store.nodes(), store.owner_id)
        except StoreError as exc:
            raise store_failure(exc) from None
        return json_response({"object": "list", "data": listed, "store": True})

    return [
        Route("/console/api/overview", overview, methods=["GET"]),
        Route("/console/api/nodes", nodes, methods=["GET"]),
    ]
