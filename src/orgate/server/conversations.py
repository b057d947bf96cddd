"""The Conversations API over HTTP (OpenAI's ``/v1/conversations`` routes).

Each handler takes the caller the edge authenticated, reads its body or query within the
server's limits and answers with what the engine's ``ConversationsService``
(``engine/conversations.py``) made: ``conversation``, ``conversation.deleted`` and ``list``
objects in OpenAI's shapes. Another tenant's conversation is a 404, like a missing one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from orgate.engine.conversations import path_id
from orgate.protocol.errors import invalid_type, invalid_value
from orgate.server.auth import caller_of
from orgate.server.body import read_json
from orgate.server.routes import json_response

if TYPE_CHECKING:
    from orgate.server.services import Services


def conversation_routes(services: Services) -> Sequence[BaseRoute]:
    conversations = services.conversations
    limits = services.settings.limits

    async def body_of(request: Request) -> Any:
        """The JSON body; none (an empty body) is an empty object."""
        if request.headers.get("content-length", "0") in ("0", "") and (
            "transfer-encoding" not in request.headers
        ):
            return None
        return await read_json(request, limits)

    def conversation(request: Request) -> str:
        return path_id(request.path_params["conversation_id"])

    async def create(request: Request) -> Response:
        caller = caller_of(request.scope)
        return json_response(await conversations.create(caller, await body_of(request)))

    async def retrieve(request: Request) -> Response:
        caller = caller_of(request.scope)
        return json_response(await conversations.retrieve(caller, conversation(request)))

    async def update(request: Request) -> Response:
        caller = caller_of(request.scope)
        data = await body_of(request)
        return json_response(await conversations.update(caller, conversation(request), data))

    async def delete(request: Request) -> Response:
        caller = caller_of(request.scope)
        return json_response(await conversations.delete(caller, conversation(request)))

    async def list_items(request: Request) -> Response:
        caller = caller_of(request.scope)
        params = request.query_params
        limit = _limit(params.get("limit"))
        order = params.get("order", "desc")
        if order not in ("asc", "desc"):
            raise invalid_value("order must be 'asc' or 'desc'.", param="order")
        page = await conversations.list_items(
            caller, conversation(request), limit=limit, order=order, after=params.get("after")
        )
        return json_response(page)

    async def add_items(request: Request) -> Response:
        caller = caller_of(request.scope)
        data = await body_of(request)
        return json_response(await conversations.add_items(caller, conversation(request), data))

    async def get_item(request: Request) -> Response:
        caller = caller_of(request.scope)
        item_id = request.path_params["item_id"]
        return json_response(await conversations.get_item(caller, conversation(request), item_id))

    async def delete_item(request: Request) -> Response:
        caller = caller_of(request.scope)
        item_id = request.path_params["item_id"]
        return json_response(
            await conversations.delete_item(caller, conversation(request), item_id)
        )

    return [
        Route("/v1/conversations", create, methods=["POST"]),
        Route("/v1/conversations/{conversation_id}", retrieve, methods=["GET"]),
        Route("/v1/conversations/{conversation_id}", update, methods=["POST"]),
        Route("/v1/conversations/{conversation_id}", delete, methods=["DELETE"]),
        Route("/v1/conversations/{conversation_id}/items", list_items, methods=["GET"]),
        Route("/v1/conversations/{conversation_id}/items", add_items, methods=["POST"]),
        Route("/v1/conversations/{conversation_id}/items/{item_id}", get_item, methods=["GET"]),
        Route(
            "/v1/conversations/{conversation_id}/items/{item_id}", delete_item, methods=["DELETE"]
        ),
    ]


def _limit(raw: str | None) -> int:
    """``limit``: 1 to 100, 20 when not given."""
    if raw is None:
        return 20
    try:
        value = int(raw)
    except ValueError:
        raise invalid_type("limit must be an integer.", param="limit") from None
    if not 1 <= value <= 100:
        raise invalid_value("limit must be between 1 and 100.", param="limit")
    return value


__all__ = ["conversation_routes"]
