"""Stored responses over HTTP: ``GET``/``DELETE /v1/responses/{id}``, ``input_items``, ``cancel``.

Every lookup is scoped to the caller's tenant: another key's response is a
404, exactly like a missing one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from orgate.engine.service import store_failure
from orgate.protocol.errors import ApiError, invalid_request, not_found
from orgate.server.body import read_json
from orgate.server.create_endpoint import subscribe_frames
from orgate.server.routes import SSE_HEADERS, authenticate, json_response
from orgate.store import ResponseStore, StoreError

if TYPE_CHECKING:
    from orgate.server.app import Services


def _store(services: Services) -> ResponseStore:
    if services.store is None:
        raise not_found("This server does not store responses ([store] enabled = false).", code="not_found")
    return services.store


def _missing(response_id: str) -> ApiError:
    return not_found(f"Response with id '{response_id}' not found.", param="response_id")


def stored_routes(services: Services) -> Sequence[BaseRoute]:
    async def get_response(request: Request) -> Response:
        caller = authenticate(services, request)
        response_id = request.path_params["response_id"]
        store = _store(services)
        try:
            if request.query_params.get("stream", "false").lower() == "true":
                record = await store.get(response_id, caller.tenant)
                if record is None:
                    raise _missing(response_id)
                if record.status in ("queued", "in_progress") and response_id in services.background.jobs:
                    # Still running here: replay its frames so far, then follow it live.
                    return StreamingResponse(subscribe_frames(services, response_id), media_type="text/event-stream", headers=SSE_HEADERS)
                events = await store.events(response_id, caller.tenant)
                if not events:
                    raise invalid_request(
                        "This response's events were not kept (it was not created with stream=true); fetch it without ?stream=true.",
                        param="stream",
                        code="events_not_stored",
                    )
                return Response(events + b"data: [DONE]\n\n", media_type="text/event-stream", headers=SSE_HEADERS)
            record = await store.get(response_id, caller.tenant)
        except StoreError as exc:
            raise store_failure(exc) from None
        if record is None:
            raise _missing(response_id)
        return json_response(record.response)

    async def delete_response(request: Request) -> Response:
        caller = authenticate(services, request)
        response_id = request.path_params["response_id"]
        store = _store(services)
        try:
            record = await store.get(response_id, caller.tenant)
            if record is not None and record.status in ("queued", "in_progress"):
                # Stop the work first: its final save would otherwise store the response again.
                await store.request_cancel(response_id, caller.tenant)
                if services.background.cancel(response_id):
                    await services.background.wait_stored(store, response_id, caller.tenant)
            deleted = await store.delete(response_id, caller.tenant)
        except StoreError as exc:
            raise store_failure(exc) from None
        if not deleted:
            raise _missing(response_id)
        return json_response({"id": response_id, "object": "response", "deleted": True})

    async def input_items(request: Request) -> Response:
        caller = authenticate(services, request)
        response_id = request.path_params["response_id"]
        params = request.query_params
        limit = _int_param(params.get("limit"), "limit", default=20, low=1, high=100)
        order = params.get("order", "desc")
        if order not in ("asc", "desc"):
            raise invalid_request("order must be 'asc' or 'desc'.", param="order", code="invalid_value")
        try:
            page = await _store(services).input_items(response_id, caller.tenant, limit=limit, order=order, after=params.get("after"))
        except StoreError as exc:
            raise store_failure(exc) from None
        if page is None:
            raise _missing(response_id)
        return json_response(page.to_wire())

    async def cancel_response(request: Request) -> Response:
        caller = authenticate(services, request)
        response_id = request.path_params["response_id"]
        if request.headers.get("content-length", "0") not in ("0", ""):
            await read_json(request, services.settings.limits)
        store = _store(services)
        try:
            record = await store.get(response_id, caller.tenant)
            if record is None:
                raise _missing(response_id)
            if not record.response.get("background"):
                raise invalid_request("Only background responses can be cancelled.", param="response_id", code="not_background")
            if record.status in ("queued", "in_progress"):
                await store.request_cancel(response_id, caller.tenant)
                services.background.cancel(response_id)
                record = await services.background.wait_stored(store, response_id, caller.tenant) or record
        except StoreError as exc:
            raise store_failure(exc) from None
        return json_response(record.response)

    return [
        Route("/v1/responses/{response_id}", get_response, methods=["GET"]),
        Route("/v1/responses/{response_id}", delete_response, methods=["DELETE"]),
        Route("/v1/responses/{response_id}/input_items", input_items, methods=["GET"]),
        Route("/v1/responses/{response_id}/cancel", cancel_response, methods=["POST"]),
    ]


def _int_param(raw: Any, name: str, *, default: int, low: int, high: int) -> int:
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise invalid_request(f"{name} must be an integer.", param=name, code="invalid_type") from None
    if not low <= value <= high:
        raise invalid_request(f"{name} must be between {low} and {high}.", param=name, code="invalid_value")
    return value
