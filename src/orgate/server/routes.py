"""HTTP routes: ``POST /v1/responses``, ``GET /v1/models``, ``GET /healthz``.

Each handler authenticates, parses, calls the service and renders: JSON for
non-streaming bodies, SSE for streams. Errors are raised as ``ApiError`` and
rendered by the app's one handler.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

import orjson
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
        if isinstance(data, dict) and "input" in data:
            data["input"] = split_namespaced(data["input"], services.settings.gate.policy, warnings)
        body = parse_body(data)
        stream = await services.responses.create(body, caller, warnings)
        headers = {"X-Orgate-Gate-Warnings": " | ".join(warnings)} if warnings else None
        if body.stream:
            return StreamingResponse(_sse(stream), media_type="text/event-stream", headers=SSE_HEADERS | (headers or {}))
        response = await stream.final()
        if stream.error is not None:
            return error_response(stream.error)
        return json_response(response, headers=headers)

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

    routes: list[BaseRoute] = [Route("/healthz", healthz, methods=["GET"]), Route("/v1/models", list_models, methods=["GET"])]
    if services.settings.endpoints.responses.enabled:
        routes.append(Route("/v1/responses", create_response, methods=["POST"]))
    return routes


def fallback_routes(services: Services) -> Sequence[BaseRoute]:
    return []


async def _sse(stream: ResponseStream) -> AsyncIterator[bytes]:
    async for event in stream:
        yield frame(event)
    yield DONE
