"""``GET /openapi.json``: the Open Responses document as orgate serves it.

The spec's schemas and ``POST /responses`` are kept as they are; orgate adds
what it serves beyond the spec:

- ``servers``: this gateway's ``/v1`` (relative, or under ``[server] public_url``),
- ``GET``/``DELETE /responses/{response_id}``, ``GET .../input_items``,
  ``POST .../cancel``, ``POST /responses/input_tokens``, ``GET /models``,
- OpenAI's Conversations API: ``/conversations``, ``/conversations/{conversation_id}``,
  its ``items`` and ``items/{item_id}``,
- ``POST /chat/completions`` (marked ``deprecated``: the legacy adapter) when enabled,
- the bearer ``security`` scheme applied to every operation,
- the spec's error shape (``Error``) for every 4xx/5xx answer, each status with the
  catalogue's codes that come with it, and the whole catalogue (code, status, type, when,
  what to do) as ``components["x-orgate-error-codes"]`` (see docs/errors.md),
- ``model`` of ``CreateResponseBody`` required and a string (the spec lets it be
  absent or null for a server with a default model; orgate has none, and answers
  400 ``missing_required_parameter`` without one).

The spec file ships in the package (``orgate/data/openapi-2026-04-24.json``);
``ORGATE_SPEC_PATH`` names another copy. The document is built once per app.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from importlib import resources
from typing import TYPE_CHECKING, Any

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from orgate.protocol.error_codes import ErrorCode

if TYPE_CHECKING:
    from orgate.server.services import Services

SPEC_FILE = "openapi-2026-04-24.json"
SECURITY = "ApiKeyAuth"
# The error body of every non-2xx HTTP answer (the spec's normative shape).
ERROR_RESPONSE: dict[str, Any] = {
    "type": "object",
    "required": ["error"],
    "additionalProperties": False,
    "properties": {
        "error": {
            "type": "object",
            "required": ["message", "type", "param", "code"],
            "properties": {
                "message": {"type": "string"},
                "type": {"type": "string"},
                "param": {"type": ["string", "null"]},
                "code": {
                    "type": ["string", "null"],
                    "description": "One of the codes in components.x-orgate-error-codes "
                    "(docs/errors.md), "
                    "an upstream Responses API's own code passed on, or null.",
                },
            },
        }
    },
}


def load_spec() -> dict[str, Any]:
    override = os.environ.get("ORGATE_SPEC_PATH")
    if override:
        with open(override, "rb") as file:
            spec: dict[str, Any] = orjson.loads(file.read())
            return spec
    spec = orjson.loads(resources.files("orgate").joinpath("data", SPEC_FILE).read_bytes())
    return spec


def _error_responses(*statuses: int) -> dict[str, Any]:
    content = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}}
    text = {
        400: "Invalid request",
        401: "Missing or invalid API key",
        404: "Not found",
        413: "Request body too large",
        415: "Unsupported Content-Type",
        429: "Rate limit",
        500: "Server error",
        502: "Upstream error",
        503: "Unavailable",
        504: "Upstream timeout",
    }
    return {
        str(s): {"description": _described(text.get(s, "Error"), s), "content": content}
        for s in statuses
    }


def _described(text: str, status: int) -> str:
    """A status's description with the catalogue codes it comes with (docs/errors.md)."""
    codes = ", ".join(f"`{code}`" for code in ErrorCode if code.status == status)
    return f"{text}. Codes: {codes}." if codes else text


def error_catalogue() -> list[dict[str, Any]]:
    """Every error code orgate sends, as ``components["x-orgate-error-codes"]`` lists it."""
    return [
        {
            "code": code.value,
            "status": code.status,
            "type": code.type,
            "when": code.when,
            "action": code.action,
        }
        for code in ErrorCode
    ]


_COMMON = (400, 401, 404, 429, 500)
_ID = {"name": "response_id", "in": "path", "required": True, "schema": {"type": "string"}}


def _stored_paths() -> dict[str, Any]:
    resource = {"$ref": "#/components/schemas/ResponseResource"}
    return {
        "/responses/{response_id}": {
            "get": {
                "summary": "Get a stored response",
                "operationId": "getResponse",
                "parameters": [
                    _ID,
                    {
                        "name": "stream",
                        "in": "query",
                        "required": False,
                        "schema": {"type": "boolean"},
                    },
                ],
                "responses": {
                    "200": {
                        "description": "The response",
                        "content": {"application/json": {"schema": resource}},
                    },
                    **_error_responses(*_COMMON),
                },
            },
            "delete": {
                "summary": "Delete a stored response",
                "operationId": "deleteResponse",
                "parameters": [_ID],
                "responses": {
                    "200": {
                        "description": "Deleted",
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "required": ["id", "object", "deleted"],
                                    "properties": {
                                        "id": {"type": "string"},
                                        "object": {"type": "string", "enum": ["response"]},
                                        "deleted": {"type": "boolean"},
                                    },
                                }
                            }
                        },
                    },
                    **_error_responses(*_COMMON),
                },
            },
        },
        "/responses/{response_id}/input_items": {
            "get": {
                "summary": "List the input items of a stored response",
                "operationId": "listInputItems",
                "parameters": [
                    _ID,
                    {
                        "name": "limit",
                        "in": "query",
                        "required": False,
                        "schema": {"type": "integer", "minimum": 1, "maximum": 100},
                    },
                    {
                        "name": "order",
                        "in": "query",
                        "required": False,
                        "schema": {"type": "string", "enum": ["asc", "desc"]},
                    },
                    {
                        "name": "after",
                        "in": "query",
                        "required": False,
                        "schema": {"type": "string"},
                    },
                ],
                "responses": {
                    "200": {
                        "description": "A page of items",
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "required": ["object", "data", "has_more"],
                                    "properties": {
                                        "object": {"type": "string", "enum": ["list"]},
                                        "data": {
                                            "type": "array",
                                            "items": {"$ref": "#/components/schemas/ItemField"},
                                        },
                                        "first_id": {"type": ["string", "null"]},
                                        "last_id": {"type": ["string", "null"]},
                                        "has_more": {"type": "boolean"},
                                    },
                                }
                            }
                        },
                    },
                    **_error_responses(*_COMMON),
                },
            }
        },
        "/responses/{response_id}/cancel": {
            "post": {
                "summary": "Cancel a background response",
                "operationId": "cancelResponse",
                "parameters": [_ID],
                "responses": {
                    "200": {
                        "description": "The response",
                        "content": {"application/json": {"schema": resource}},
                    },
                    **_error_responses(*_COMMON),
                },
            }
        },
        "/models": {
            "get": {
                "summary": "List the models this key may use",
                "operationId": "listModels",
                "responses": {
                    "200": {
                        "description": "Models",
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "required": ["object", "data"],
                                    "properties": {
                                        "object": {"type": "string", "enum": ["list"]},
                                        "data": {
                                            "type": "array",
                                            "items": {
                                                "type": "object",
                                                "required": ["id", "object", "owned_by"],
                                                "properties": {
                                                    "id": {"type": "string"},
                                                    "object": {"type": "string"},
                                                    "created": {"type": "integer"},
                                                    "owned_by": {"type": "string"},
                                                },
                                            },
                                        },
                                    },
                                }
                            }
                        },
                    },
                    **_error_responses(401, 500),
                },
            }
        },
    }


def _json(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _body(schema: dict[str, Any], *, required: bool = True) -> dict[str, Any]:
    return {"required": required, "content": {"application/json": {"schema": schema}}}


_CONVERSATION_ID = {
    "name": "conversation_id",
    "in": "path",
    "required": True,
    "schema": {"type": "string"},
}
_ITEM_ID = {"name": "item_id", "in": "path", "required": True, "schema": {"type": "string"}}
_METADATA = {
    "type": ["object", "null"],
    "maxProperties": 16,
    "additionalProperties": {"type": "string", "maxLength": 512},
}
_CONVERSATION = {
    "type": "object",
    "required": ["id", "object", "created_at", "metadata"],
    "properties": {
        "id": {"type": "string"},
        "object": {"type": "string", "enum": ["conversation"]},
        "created_at": {"type": "integer"},
        "metadata": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}
_ITEMS_BODY = {"type": "array", "items": {"$ref": "#/components/schemas/ItemParam"}}
# An item as a listing shows it: the spec's ItemField shapes (referenced without the union's
# discriminator, which names schemas rather than `type` values)
_ITEM = {
    "type": "object",
    "required": ["id", "type"],
    "properties": {"id": {"type": "string"}, "type": {"type": "string"}},
    "description": "An item in the shape of a response's output items (ItemField).",
}
_ITEM_LIST = {
    "type": "object",
    "required": ["object", "data", "first_id", "last_id", "has_more"],
    "properties": {
        "object": {"type": "string", "enum": ["list"]},
        "data": {"type": "array", "items": _ITEM},
        "first_id": {"type": ["string", "null"]},
        "last_id": {"type": ["string", "null"]},
        "has_more": {"type": "boolean"},
    },
}
_PAGE = [
    {
        "name": "limit",
        "in": "query",
        "required": False,
        "schema": {"type": "integer", "minimum": 1, "maximum": 100},
    },
    {
        "name": "order",
        "in": "query",
        "required": False,
        "schema": {"type": "string", "enum": ["asc", "desc"]},
    },
    {"name": "after", "in": "query", "required": False, "schema": {"type": "string"}},
]


def _busy() -> dict[str, Any]:
    content = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}}
    return {"409": {"description": _described("Conflict", 409), "content": content}}


_BUSY = _busy()


def _conversation_paths() -> dict[str, Any]:
    """OpenAI's Conversations API (docs/store.md#conversations): a session is a conversation."""
    conversation = _json("The conversation", _CONVERSATION)
    return {
        "/conversations": {
            "post": {
                "summary": "Create a conversation (OpenAI's Conversations API)",
                "operationId": "createConversation",
                "requestBody": _body(
                    {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "items": _ITEMS_BODY,
                            "metadata": _METADATA,
                            "safety_identifier": {"type": ["string", "null"]},
                        },
                    },
                    required=False,
                ),
                "responses": {"200": conversation},
            }
        },
        "/conversations/{conversation_id}": {
            "get": {
                "summary": "Get a conversation",
                "operationId": "getConversation",
                "parameters": [_CONVERSATION_ID],
                "responses": {"200": conversation},
            },
            "post": {
                "summary": "Replace a conversation's metadata",
                "operationId": "updateConversation",
                "parameters": [_CONVERSATION_ID],
                "requestBody": _body(
                    {
                        "type": "object",
                        "required": ["metadata"],
                        "additionalProperties": False,
                        "properties": {"metadata": _METADATA},
                    }
                ),
                "responses": {"200": conversation},
            },
            "delete": {
                "summary": "Delete a conversation (its responses stay)",
                "operationId": "deleteConversation",
                "parameters": [_CONVERSATION_ID],
                "responses": {
                    **_BUSY,
                    "200": _json(
                        "Deleted",
                        {
                            "type": "object",
                            "required": ["id", "object", "deleted"],
                            "properties": {
                                "id": {"type": "string"},
                                "object": {"type": "string", "enum": ["conversation.deleted"]},
                                "deleted": {"type": "boolean"},
                            },
                        },
                    ),
                },
            },
        },
        "/conversations/{conversation_id}/items": {
            "get": {
                "summary": "List a conversation's items",
                "operationId": "listConversationItems",
                "parameters": [_CONVERSATION_ID, *_PAGE],
                "responses": {"200": _json("A page of items", _ITEM_LIST)},
            },
            "post": {
                "summary": "Add items to a conversation",
                "operationId": "createConversationItems",
                "parameters": [_CONVERSATION_ID],
                "requestBody": _body(
                    {
                        "type": "object",
                        "required": ["items"],
                        "additionalProperties": False,
                        "properties": {"items": _ITEMS_BODY},
                    }
                ),
                "responses": {"200": _json("The items added", _ITEM_LIST), **_BUSY},
            },
        },
        "/conversations/{conversation_id}/items/{item_id}": {
            "get": {
                "summary": "Get an item of a conversation",
                "operationId": "getConversationItem",
                "parameters": [_CONVERSATION_ID, _ITEM_ID],
                "responses": {"200": _json("The item", _ITEM)},
            },
            "delete": {
                "summary": "Delete an item from a conversation",
                "operationId": "deleteConversationItem",
                "parameters": [_CONVERSATION_ID, _ITEM_ID],
                "responses": {"200": conversation},
            },
        },
    }


def _token_count_path() -> dict[str, Any]:
    return {
        "/responses/input_tokens": {
            "post": {
                "summary": "Count the input tokens of a create request (no model is called)",
                "description": "The upstream's own count where it has one, else an estimate; "
                "the header X-Orgate-Input-Tokens says which (upstream, estimate).",
                "operationId": "countInputTokens",
                "requestBody": _body({"type": "object", "required": ["model"]}),
                "responses": {
                    "200": _json(
                        "The count",
                        {
                            "type": "object",
                            "required": ["object", "input_tokens"],
                            "properties": {
                                "object": {"type": "string", "enum": ["response.input_tokens"]},
                                "input_tokens": {"type": "integer", "minimum": 0},
                            },
                        },
                    )
                },
            }
        }
    }


def _chat_path() -> dict[str, Any]:
    return {
        "/chat/completions": {
            "post": {
                "summary": "Chat Completions (legacy adapter)",
                "description": "The legacy OpenAI Chat Completions endpoint, "
                "mapped onto /responses. Not part of Open Responses; prefer /responses.",
                "operationId": "createChatCompletion",
                "deprecated": True,
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {"type": "object", "required": ["model", "messages"]}
                        }
                    },
                },
                "responses": {
                    "200": {
                        "description": "A chat.completion or a stream of chat.completion.chunk"
                    },
                    **_error_responses(*_COMMON),
                },
            }
        }
    }


def build_document(
    *,
    public_url: str | None = None,
    routed: set[str] | None = None,
    spec: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The document orgate serves, built from the spec (not modified in place).

    ``routed`` is the set of the app's route paths (``/v1/...``): only operations it
    serves are listed (None lists the spec's paths, the stored-response paths and
    ``/models``, without the legacy chat endpoint).
    """
    doc = copy.deepcopy(spec if spec is not None else load_spec())
    info = doc.setdefault("info", {})
    info["title"] = "orgate (Open Responses gateway)"
    info["x-open-responses-version"] = info.get("version")
    doc["servers"] = [
        {
            "url": (public_url.rstrip("/") if public_url else "") + "/v1",
            "description": "this orgate gateway",
        }
    ]
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    schemas.setdefault("ErrorResponse", ERROR_RESPONSE)
    _model_required(schemas.get("CreateResponseBody"))
    doc["components"]["securitySchemes"] = {SECURITY: {"type": "http", "scheme": "bearer"}}
    doc["components"]["x-orgate-error-codes"] = error_catalogue()
    doc["security"] = [{SECURITY: []}]
    candidates: dict[str, Any] = {
        **doc.get("paths", {}),
        **_stored_paths(),
        **_token_count_path(),
        **_conversation_paths(),
        **_chat_path(),
    }
    paths: dict[str, Any] = {}
    for path, item in candidates.items():
        if routed is None and path == "/chat/completions":
            continue
        if routed is None or "/v1" + path in routed:
            paths[path] = item
    for item in paths.values():
        for method, operation in item.items():
            if method in ("get", "post", "delete") and isinstance(operation, dict):
                extra = (413, 415, 502, 503, 504) if method == "post" else (503,)
                for status, answer in _error_responses(*_COMMON, *extra).items():
                    operation.setdefault("responses", {}).setdefault(status, answer)
    doc["paths"] = paths
    return doc


def _model_required(body: Any) -> None:
    """``model`` as orgate takes it: required, a string (never null)."""
    if not isinstance(body, dict) or "model" not in body.get("properties", {}):
        return
    model = body["properties"]["model"]
    strings = [
        s for s in model.get("anyOf", ()) if isinstance(s, dict) and s.get("type") == "string"
    ]
    if strings:
        body["properties"]["model"] = strings[0]
    required = body.setdefault("required", [])
    if "model" not in required:
        required.append("model")


def openapi_routes(services: Services) -> Sequence[BaseRoute]:
    """``GET /openapi.json``, built on first use from the routes the app really has."""
    public_url = services.settings.server.public_url
    built: list[bytes] = []

    async def openapi(request: Request) -> Response:
        if not built:
            routed = {
                path
                for route in request.app.routes
                if isinstance(path := getattr(route, "path", None), str)
            }
            built.append(orjson.dumps(build_document(public_url=public_url, routed=routed)))
        return Response(built[0], media_type="application/json")

    return [Route("/openapi.json", openapi, methods=["GET"])]


__all__ = ["build_document", "error_catalogue", "load_spec", "openapi_routes"]
