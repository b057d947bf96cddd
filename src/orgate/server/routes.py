"""HTTP routes: ``POST /v1/responses`` (see ``create_endpoint``), models (list and one), health,
metrics, review queue.

Each handler takes the caller the edge authenticated (``auth.caller_of``), parses,
calls a service and renders JSON. Errors
are raised as ``ApiError`` and rendered by the app's one handler.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import orjson
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from orgate.protocol.errors import (
    ApiError,
    ErrorCode,
    invalid_value,
    model_not_found,
    review_not_found,
)
from orgate.server.auth import caller_of
from orgate.server.body import read_json
from orgate.server.create_endpoint import CreateResponse
from orgate.store.base import ReviewStatus
from orgate.structured import ReviewError, ReviewNotFound

if TYPE_CHECKING:
    from orgate.server.services import Services

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def json_response(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(
        orjson.dumps(data), status_code=status, media_type="application/json", headers=headers
    )


# The review queue's operations, for /v1/orgate/review and the web console alike.
# ``tenant`` is the caller's scope: its own tenant, None for an admin key (every tenant).


#: The ``status`` query parameter of the review list: a review status, or None for all.
_REVIEW_STATUSES: dict[str, ReviewStatus | None] = {
    "pending": "pending",
    "resolved": "resolved",
    "discarded": "discarded",
    "all": None,
}


async def list_reviews(services: Services, tenant: str | None, status: str) -> dict[str, Any]:
    if status not in _REVIEW_STATUSES:
        raise invalid_value("status must be pending, resolved, discarded or all.", param="status")
    items = await services.output_checks.review.list(_REVIEW_STATUSES[status], tenant=tenant)
    return {"object": "list", "data": [item.to_dict() for item in items]}


async def get_review(services: Services, tenant: str | None, review_id: str) -> dict[str, Any]:
    item = await services.output_checks.review.get(review_id, tenant=tenant)
    if item is None:
        raise review_not_found(review_id)
    return item.to_dict()


async def resolve_review(
    services: Services, tenant: str | None, review_id: str, data: Any
) -> dict[str, Any]:
    """``{"value": ...}`` (checked against the entry's schema) or ``{"discard":
    true}``, optional ``note``."""
    if not isinstance(data, dict) or ("value" not in data and not data.get("discard")):
        raise ApiError.of(
            ErrorCode.INVALID_REVIEW_RESOLUTION,
            'Send {"value": <the corrected object>} or {"discard": true}.',
        )
    note = data.get("note") if isinstance(data.get("note"), str) else None
    try:
        if data.get("discard"):
            item = await services.output_checks.review.discard(review_id, note=note, tenant=tenant)
        else:
            item = await services.output_checks.review.resolve(
                review_id, data["value"], note=note, tenant=tenant
            )
    except ReviewNotFound as exc:
        raise review_not_found(review_id) from exc
    except ReviewError as exc:
        raise ApiError.of(ErrorCode.INVALID_REVIEW_RESOLUTION, str(exc)) from None
    return item.to_dict()


def core_routes(services: Services) -> Sequence[BaseRoute]:
    async def list_models(request: Request) -> Response:
        caller_models = caller_of(request.scope).models
        data = [
            {"id": name, "object": "model", "created": 0, "owned_by": deployment.provider}
            for name, deployment in services.deployments.items()
            if caller_models is None or name in caller_models
        ]
        return json_response({"object": "list", "data": data})

    async def retrieve_model(request: Request) -> Response:
        caller_models = caller_of(request.scope).models
        name = request.path_params["model"]
        deployment = services.deployments.get(name)
        if deployment is None or (caller_models is not None and name not in caller_models):
            raise model_not_found(name)
        return json_response(
            {"id": name, "object": "model", "created": 0, "owned_by": deployment.provider}
        )

    async def healthz(request: Request) -> Response:
        return json_response({"status": "ok"})

    async def metrics(request: Request) -> Response:
        return Response(
            generate_latest(services.metrics_view or services.metrics),
            media_type=CONTENT_TYPE_LATEST,
        )

    def review_scope(request: Request) -> str | None:
        """The tenant whose review entries the caller sees: its own;
        an admin key's, every tenant's."""
        caller = caller_of(request.scope)
        return None if caller.admin else caller.tenant

    async def review_list(request: Request) -> Response:
        return json_response(
            await list_reviews(
                services, review_scope(request), request.query_params.get("status", "pending")
            )
        )

    async def review_get(request: Request) -> Response:
        return json_response(
            await get_review(services, review_scope(request), request.path_params["review_id"])
        )

    async def review_resolve(request: Request) -> Response:
        tenant = review_scope(request)
        data = await read_json(request, services.settings.limits)
        return json_response(
            await resolve_review(services, tenant, request.path_params["review_id"], data)
        )

    routes: list[BaseRoute] = [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        Route("/v1/models", list_models, methods=["GET"]),
        # Model names contain "/" (orgate/echo): the rest of the path is the name.
        Route("/v1/models/{model:path}", retrieve_model, methods=["GET"]),
        Route("/v1/orgate/review", review_list, methods=["GET"]),
        Route("/v1/orgate/review/{review_id}", review_get, methods=["GET"]),
        Route("/v1/orgate/review/{review_id}/resolve", review_resolve, methods=["POST"]),
    ]
    if services.settings.endpoints.responses.enabled:
        routes.append(Route("/v1/responses", CreateResponse(services), methods=["POST"]))
    return routes
