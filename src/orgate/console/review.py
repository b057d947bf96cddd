"""The console's review-queue endpoints: the same operations as ``/v1/orgate/review``.

Listing, reading and resolving call the functions behind that API (``server.routes``),
scoped to the session's tenant (every tenant for an admin key). The console adds what an
editor needs: each entry's configured default, and ``validate``, which checks a draft
against the entry's schema with the validator ``resolve`` uses.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from orgate.console.guard import json_response, require_change_allowed, require_session
from orgate.console.session import ConsoleSession, SessionSigner
from orgate.protocol.errors import invalid_value, review_not_found
from orgate.server.body import read_json
from orgate.server.routes import get_review, list_reviews, resolve_review
from orgate.structured.review import ReviewItem, schema_errors

if TYPE_CHECKING:
    from orgate.server.services import Services


def _scope(session: ConsoleSession) -> str | None:
    return None if session.admin else session.tenant


def _with_default(services: Services, entry: dict[str, Any]) -> dict[str, Any]:
    """The entry plus ``default``: its format's configured fallback object, when there is one."""
    fmt = services.settings.structured.formats.get(entry.get("format_name") or "")
    return {**entry, "default": fmt.default if fmt is not None and fmt.has_default else None}


def review_routes(services: Services, signer: SessionSigner) -> list[BaseRoute]:
    async def listing(request: Request) -> Response:
        session = await require_session(signer, request)
        body = await list_reviews(
            services, _scope(session), request.query_params.get("status", "pending")
        )
        body["data"] = [_with_default(services, entry) for entry in body["data"]]
        return json_response(body)

    async def one(request: Request) -> Response:
        session = await require_session(signer, request)
        entry = await get_review(services, _scope(session), request.path_params["review_id"])
        return json_response(_with_default(services, entry))

    async def validate(request: Request) -> Response:
        session = await require_change_allowed(signer, request)
        review_id = request.path_params["review_id"]
        data = await read_json(request, services.settings.limits)
        if not isinstance(data, dict) or "value" not in data:
            raise invalid_value('Send {"value": <the draft>}.', param="value")
        item: ReviewItem | None = await services.output_checks.review.get(
            review_id, tenant=_scope(session)
        )
        if item is None:
            raise review_not_found(review_id)
        errors = await asyncio.to_thread(schema_errors, item, data["value"])
        return json_response({"valid": not errors, "errors": errors})

    async def resolve(request: Request) -> Response:
        session = await require_change_allowed(signer, request)
        data = await read_json(request, services.settings.limits)
        return json_response(
            await resolve_review(services, _scope(session), request.path_params["review_id"], data)
        )

    return [
        Route("/console/api/review", listing, methods=["GET"]),
        Route("/console/api/review/{review_id}", one, methods=["GET"]),
        Route("/console/api/review/{review_id}/validate", validate, methods=["POST"]),
        Route("/console/api/review/{review_id}/resolve", resolve, methods=["POST"]),
    ]
