"""The console's overview endpoint: the server's own Prometheus metrics, read in-process.

``snapshot(registry)`` reads the registry ``/metrics`` exposes (every worker's, under
``--workers``) into cumulative figures per model (requests, errors) and per deployment
(upstream calls, errors, tokens, the latency histogram's buckets). The page polls it
while it is open and draws rates and percentiles from the difference between two
snapshots; nothing is collected while no console is open. Metrics are not kept per
tenant, so only admin keys may read them.
"""

from __future__ import annotations

import asyncio
import math
import time
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from orgate.console.guard import json_response, require_session
from orgate.console.session import SessionSigner
from orgate.protocol.errors import ApiError, ErrorCode

if TYPE_CHECKING:
    from orgate.server.services import Services

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
                entry = _deployment_entry(deployments, labels.get("deployment", "?"))
                if sample.name.endswith("_count"):
                    entry["calls"] += sample.value
                    if labels.get("outcome") == "error":
                        entry["errors"] += sample.value
                elif sample.name.endswith("_bucket"):
                    le = float(labels["le"])
                    entry["buckets"][le] = entry["buckets"].get(le, 0.0) + sample.value
            elif family.name == _TOKENS and sample.name.endswith("_total"):
                entry = _deployment_entry(deployments, labels.get("deployment", "?"))
                direction = labels.get("direction")
                if direction in ("input", "output"):
                    entry[f"{direction}_tokens"] += sample.value
    for entry in deployments.values():
        # JSON has no infinity: the +Inf bucket is sent as null.
        entry["buckets"] = [
            [None if math.isinf(le) else le, n] for le, n in sorted(entry["buckets"].items())
        ]
    return {"at": time.time(), "models": models, "deployments": deployments}


def overview_routes(services: Services, signer: SessionSigner) -> list[BaseRoute]:
    async def overview(request: Request) -> Response:
        session = await require_session(signer, request)
        if not session.admin:
            raise ApiError.of(
                ErrorCode.ADMIN_REQUIRED,
                "The overview shows every tenant's traffic: it needs an admin key (admin = true in [auth]).",
            )
        registry = services.metrics_view or services.metrics
        return json_response(await asyncio.to_thread(snapshot, registry))

    return [Route("/console/api/overview", overview, methods=["GET"])]
