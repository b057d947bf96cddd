"""Stored responses over HTTP: ``GET``/``DELETE /v1/responses/{id}``, ``input_items``, ``cancel``.

Every lookup is scoped to the caller's tenant: another key's response is a
404, exactly like a missing one.

``input_items`` lists spec items only. A response saved with a history it
did not get from the store (a WebSocket ``store: false`` chain continued with
``store: true``) has that history among its input items, and so does one whose
input held a compaction item with extension items in it (opened in place).
That history may hold an upstream's own items (``orgate:extension_item``
wrappers) and reasoning items marked with their origin (``orgate:origin``): the listing
leaves the wrappers out and the markers off (``engine.history_items.listed_item``),
and fills the page from further rows, so ``limit``, ``after``, ``first_id``,
``last_id`` and ``has_more`` count listed items only. The stored history
keeps both for the next turn. Orgate has no endpoint that returns one item by
id (``item_reference`` resolves items into the model input, never to the
client). Listed items have the spec's item shape (``engine.history_items.as_item_field``):
content parts rather than a bare string, and a ``status``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

import orjson
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from orgate.engine.history_items import as_item_field, is_private, listed_item
from orgate.engine.service import store_failure
from orgate.protocol.errors import (
    ApiError,
    ErrorCode,
    invalid_type,
    invalid_value,
    not_found,
)
from orgate.server.auth import caller_of
from orgate.server.body import read_json
from orgate.server.follow import follow_stored
from orgate.server.routes import SSE_HEADERS, json_response
from orgate.server.sse import DONE, frame, openai_frame, then_done
from orgate.store import ItemsPage, ResponseStore, StoreError
from orgate.store.base import Order

if TYPE_CHECKING:
    from orgate.server.services import Services

#: The ``order`` query parameter's values.
_ORDERS: dict[str, Order] = {"asc": "asc", "desc": "desc"}


def _openai_names(services: Services) -> bool:
    return services.settings.endpoints.responses.event_names == "openai"


def _store(services: Services) -> ResponseStore:
    if services.store is None:
        raise ApiError.of(
            ErrorCode.NOT_FOUND, "This server does not store responses ([store] enabled = false)."
        )
    return services.store


def _missing(response_id: str) -> ApiError:
    return not_found(f"Response with id '{response_id}' not found.", param="response_id")


def stored_routes(services: Services) -> Sequence[BaseRoute]:
    async def get_response(request: Request) -> Response:
        caller = caller_of(request.scope)
        response_id = request.path_params["response_id"]
        store = _store(services)
        try:
            if request.query_params.get("stream", "false").lower() == "true":
                after = _int_param(
                    request.query_params.get("starting_after"),
                    "starting_after",
                    default=-1,
                    low=0,
                    high=2**63 - 1,
                )
                record = await store.get(response_id, caller.tenant)
                if record is None:
                    raise _missing(response_id)
                if (
                    record.status in ("queued", "in_progress")
                    and response_id in services.background.jobs
                ):
                    # Still running here: replay its frames so far, then follow it live.
                    follower = asyncio.current_task()
                    if follower is not None:
                        services.shutdown.followers.add(
                            follower
                        )  # it ends with the response, at shutdown too
                    frames = then_done(services.background.subscribe(response_id))
                    if after >= 0:
                        frames = _frames_after(frames, after)
                    return StreamingResponse(
                        frames, media_type="text/event-stream", headers=SSE_HEADERS
                    )
                if record.status in ("queued", "in_progress") and record.response.get("background"):
                    progress = await store.background_progress(response_id, caller.tenant)
                    if progress is not None and progress.attempts is not None:
                        # Running on another node: followed through the events it keeps.
                        follower = asyncio.current_task()
                        if follower is not None:
                            services.shutdown.followers.add(follower)
                        encode = openai_frame if _openai_names(services) else frame
                        frames = then_done(
                            follow_stored(store, response_id, caller.tenant, encode, after)
                        )
                        return StreamingResponse(
                            frames, media_type="text/event-stream", headers=SSE_HEADERS
                        )
                events = await store.events(response_id, caller.tenant)
                if not events:
                    raise ApiError.of(
                        ErrorCode.EVENTS_NOT_STORED,
                        "This response's events were not kept (it was not created with "
                        "stream=true); fetch it without ?stream=true.",
                        param="stream",
                    )
                if after >= 0:
                    events = events_after(events, after)
                return Response(events + DONE, media_type="text/event-stream", headers=SSE_HEADERS)
            record = await store.get(response_id, caller.tenant)
        except StoreError as exc:
            raise store_failure(exc) from None
        if record is None:
            raise _missing(response_id)
        return json_response(record.response)

    async def delete_response(request: Request) -> Response:
        caller = caller_of(request.scope)
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
        caller = caller_of(request.scope)
        response_id = request.path_params["response_id"]
        params = request.query_params
        limit = _int_param(params.get("limit"), "limit", default=20, low=1, high=100)
        order = _ORDERS.get(params.get("order", "desc"))
        if order is None:
            raise invalid_value("order must be 'asc' or 'desc'.", param="order")
        try:
            page = await listed_page(
                _store(services),
                response_id,
                caller.tenant,
                limit=limit,
                order=order,
                after=params.get("after"),
            )
        except StoreError as exc:
            raise store_failure(exc) from None
        if page is None:
            raise _missing(response_id)
        body = page.to_wire()
        body["data"] = [as_item_field(item) for item in page.data]
        return json_response(body)

    async def cancel_response(request: Request) -> Response:
        caller = caller_of(request.scope)
        response_id = request.path_params["response_id"]
        if request.headers.get("content-length", "0") not in ("0", ""):
            await read_json(request, services.settings.limits)
        store = _store(services)
        try:
            record = await store.get(response_id, caller.tenant)
            if record is None:
                raise _missing(response_id)
            if not record.response.get("background"):
                raise ApiError.of(
                    ErrorCode.NOT_BACKGROUND,
                    "Only background responses can be cancelled.",
                    param="response_id",
                )
            if record.status in ("queued", "in_progress"):
                await store.request_cancel(response_id, caller.tenant)
                services.background.cancel(response_id)
                record = (
                    await services.background.wait_stored(store, response_id, caller.tenant)
                    or record
                )
        except StoreError as exc:
            raise store_failure(exc) from None
        return json_response(record.response)

    return [
        Route("/v1/responses/{response_id}", get_response, methods=["GET"]),
        Route("/v1/responses/{response_id}", delete_response, methods=["DELETE"]),
        Route("/v1/responses/{response_id}/input_items", input_items, methods=["GET"]),
        Route("/v1/responses/{response_id}/cancel", cancel_response, methods=["POST"]),
    ]


async def listed_page(
    store: ResponseStore,
    response_id: str,
    tenant: str,
    *,
    limit: int,
    order: Order,
    after: str | None,
) -> ItemsPage | None:
    """A page of a response's input items as a client sees them (see the module docstring)."""
    page = await store.input_items(response_id, tenant, limit=limit, order=order, after=after)
    if page is None or not any(is_private(item) for item in page.data):
        return page  # the usual case: the store's page as it is
    listed = [shown for item in page.data if (shown := listed_item(item)) is not None]
    more = page.has_more
    while more and len(listed) <= limit and page.last_id is not None:
        page = await store.input_items(
            response_id, tenant, limit=limit, order=order, after=page.last_id
        )
        if page is None:  # deleted meanwhile: what was read is the page
            more = False
            break
        listed.extend(shown for item in page.data if (shown := listed_item(item)) is not None)
        more = page.has_more
    data = listed[:limit]
    return ItemsPage(
        data=data,
        first_id=data[0]["id"] if data else None,
        last_id=data[-1]["id"] if data else None,
        has_more=more or len(listed) > limit,
    )


def events_after(chunk: bytes, after: int) -> bytes:
    """The SSE frames of ``chunk`` whose event's ``sequence_number`` is greater than ``after``
    (``GET …?stream=true&starting_after=N``: resume a stream after the last event seen)."""
    kept = []
    for raw in chunk.split(b"\n\n"):
        if not raw.strip():
            continue
        data = next((line[6:] for line in raw.split(b"\n") if line.startswith(b"data: ")), None)
        if data is not None and data != b"[DONE]":
            try:
                number = orjson.loads(data).get("sequence_number")
            except (orjson.JSONDecodeError, AttributeError):
                number = None
            if isinstance(number, int) and number <= after:
                continue
        kept.append(raw + b"\n\n")
    return b"".join(kept)


async def _frames_after(frames: AsyncIterator[bytes], after: int) -> AsyncIterator[bytes]:
    async for chunk in frames:
        if kept := events_after(chunk, after):
            yield kept


def _int_param(raw: Any, name: str, *, default: int, low: int, high: int) -> int:
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise invalid_type(f"{name} must be an integer.", param=name) from None
    if not low <= value <= high:
        raise invalid_value(f"{name} must be between {low} and {high}.", param=name)
    return value
