"""HTTP routes: ``POST /v1/responses``, ``GET /v1/models``, ``GET /healthz``.

Each handler authenticates, parses, calls the service and renders: JSON for
non-streaming bodies, SSE for streams. Errors are raised as ``ApiError`` and
rendered by the app's one handler.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

import orjson
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from orgate.engine.context import parse_body
from orgate.engine.input_gate import split_namespaced
from orgate.engine.service import Caller, ResponseStream
from orgate.protocol.errors import ApiError
from orgate.server.body import read_json
from orgate.server.errors import error_response
from orgate.server.sse import DONE, frame
from orgate.structured import BODY_FIELD, BUDGET_HEADER, BudgetOverride, ReviewError

if TYPE_CHECKING:
    from orgate.server.app import Services

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def json_response(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(data), status_code=status, media_type="application/json", headers=headers)


def authenticate(services: Services, request: Request) -> Caller:
    return services.auth.authenticate(request.headers.get("authorization"))


def core_routes(services: Services) -> Sequence[BaseRoute]:
    async def create_response(request: Request) -> Response:
        caller = authenticate(services, request)
        data = await read_json(request, services.settings.limits)
        if isinstance(data, dict):
            items = data.get("input")
            if isinstance(items, list) and len(items) > services.settings.limits.max_input_items:
                raise ApiError(
                    400,
                    f"'input' has {len(items)} items, more than the limit of {services.settings.limits.max_input_items} (limits.max_input_items).",
                    code="too_many_items",
                    param="input",
                )
            tools = data.get("tools")
            if isinstance(tools, list) and len(tools) > services.settings.limits.max_tools:
                raise ApiError(400, f"'tools' has {len(tools)} tools, more than the limit of {services.settings.limits.max_tools} (limits.max_tools).", code="too_many_tools", param="tools")
        warnings: list[str] = []
        budget = structured_budget(data, request.headers.get(BUDGET_HEADER))
        if isinstance(data, dict) and "input" in data:
            data["input"] = split_namespaced(data["input"], services.settings.gate.policy, warnings)
        body = parse_body(data)
        session_id = session_of(services, request, body)
        stream = await services.responses.create(body, caller, warnings, budget=budget, session_id=session_id)
        if body.background:
            services.background.start(stream, frame)
            if body.stream:
                return StreamingResponse(_subscribe(services, stream.response_id), media_type="text/event-stream", headers=SSE_HEADERS | stream.headers)
            return json_response(stream.builder.snapshot(), headers=stream.headers)
        if body.stream:
            return StreamingResponse(_sse(stream), media_type="text/event-stream", headers=SSE_HEADERS | stream.headers)
        response = await stream.final()
        if stream.error is not None:
            error = stream.error
            error.headers = {**stream.headers, **error.headers}
            return error_response(error)
        return json_response(response, headers=stream.headers)

    async def list_models(request: Request) -> Response:
        caller_models = authenticate(services, request).models
        data = [
            {"id": name, "object": "model", "created": 0, "owned_by": deployment.provider}
            for name, deployment in services.deployments.items()
            if caller_models is None or name in caller_models
        ]
        return json_response({"object": "list", "data": data})

    async def healthz(request: Request) -> Response:
        return json_response({"status": "ok"})

    async def metrics(request: Request) -> Response:
        return Response(generate_latest(services.metrics), media_type=CONTENT_TYPE_LATEST)

    async def review_list(request: Request) -> Response:
        authenticate(services, request)
        status = request.query_params.get("status", "pending")
        if status not in ("pending", "resolved", "discarded", "all"):
            raise ApiError(400, "status must be pending, resolved, discarded or all.", param="status", code="invalid_value")
        items = await asyncio.to_thread(services.pipeline.review.list, None if status == "all" else status)
        return json_response({"object": "list", "data": [item.to_dict() for item in items]})

    async def review_get(request: Request) -> Response:
        authenticate(services, request)
        item = await asyncio.to_thread(services.pipeline.review.get, request.path_params["review_id"])
        if item is None:
            raise ApiError(404, f"Review item '{request.path_params['review_id']}' not found.", code="not_found", param="review_id")
        return json_response(item.to_dict())

    async def review_resolve(request: Request) -> Response:
        authenticate(services, request)
        review_id = request.path_params["review_id"]
        data = await read_json(request, services.settings.limits)
        if not isinstance(data, dict) or ("value" not in data and not data.get("discard")):
            raise ApiError(400, "Send {\"value\": <the corrected object>} or {\"discard\": true}.", code="invalid_review_resolution")
        try:
            if data.get("discard"):
                item = await asyncio.to_thread(services.pipeline.review.discard, review_id)
            else:
                item = await asyncio.to_thread(services.pipeline.review.resolve, review_id, data["value"])
        except ReviewError as exc:
            raise ApiError(400, str(exc), code="invalid_review_resolution") from None
        return json_response(item.to_dict())

    routes: list[BaseRoute] = [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        Route("/v1/models", list_models, methods=["GET"]),
        Route("/v1/orgate/review", review_list, methods=["GET"]),
        Route("/v1/orgate/review/{review_id}", review_get, methods=["GET"]),
        Route("/v1/orgate/review/{review_id}/resolve", review_resolve, methods=["POST"]),
    ]
    if services.settings.endpoints.responses.enabled:
        routes.append(Route("/v1/responses", create_response, methods=["POST"]))
    return routes


def structured_budget(data: Any, header: str | None) -> BudgetOverride | None:
    """The safety-net budget override: body field ``structured_budget`` (removed here) and/or the header."""
    from_body = None
    if isinstance(data, dict) and BODY_FIELD in data:
        raw = data.pop(BODY_FIELD)
        if not isinstance(raw, dict):
            raise ApiError(400, f"'{BODY_FIELD}' must be an object like {{\"retries\": 1, \"seconds\": 5}}.", code="invalid_structured_budget", param=BODY_FIELD)
        from_body = BudgetOverride.from_mapping(raw)
    from_header = BudgetOverride.from_header(header) if header else None
    if from_body is not None and from_header is not None:
        return from_body.merged(from_header)
    return from_body or from_header


def fallback_routes(services: Services) -> Sequence[BaseRoute]:
    return []


async def _sse(stream: ResponseStream) -> AsyncIterator[bytes]:
    async for chunk in stream.frames(frame):
        yield chunk
    yield DONE


async def _subscribe(services: Services, response_id: str) -> AsyncIterator[bytes]:
    async for chunk in services.background.subscribe(response_id):
        yield chunk
    yield DONE


def session_of(services: Services, request: Request, body: Any) -> str | None:
    """The session key: the configured header, else the body's ``user`` (scoped per API key by the store)."""
    settings = services.settings.sessions
    value = request.headers.get(settings.header)
    if value:
        if len(value) > 256:
            raise ApiError(400, f"The {settings.header} header is longer than 256 characters.", param=settings.header, code="invalid_value")
        return value
    if settings.use_user_field:
        user = (body.model_extra or {}).get("user")
        if isinstance(user, str) and user:
            return user
    return None
