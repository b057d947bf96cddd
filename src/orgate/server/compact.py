"""``POST /v1/responses/compact``: the HTTP edge of compaction.

The route takes the caller the edge authenticated, reads the body with the
server's limits, checks the request and answers with what the engine's ``CompactionService``
(``engine/compaction/service.py``: the use case, its ids and its sealing) made.
The sealing key comes from the configuration (``compaction_key(settings)``):

- ``[compaction] secret`` (default ``"env:ORGATE_COMPACTION_SECRET"``) when it
  resolves: the key is HKDF-SHA256 of it. Give every process and host the same
  secret; rotating it invalidates compaction items made before.
- otherwise a random key kept in ``[compaction] key_file`` (default:
  ``compaction.key`` next to the SQLite store file), created once, atomically
  (processes on one host that share the data directory share the key). With a
  PostgreSQL store (several hosts) set the secret instead.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from orgate.config import ConfigError, Settings, resolve_secret
from orgate.engine.compaction.key import KeyFileError, derive_key, load_or_create_key
from orgate.engine.input_gate import split_namespaced
from orgate.protocol import CompactResponseMethodPublicBody
from orgate.protocol.errors import (
    ApiError,
    ErrorCode,
    from_validation_error,
    method_not_allowed,
    not_an_object,
    unknown_parameter,
)
from orgate.server.auth import caller_of
from orgate.server.body import read_json
from orgate.server.errors import error_response
from orgate.server.request_state import request_state
from orgate.server.routes import json_response
from orgate.store import default_sqlite_path, sqlite_path

if TYPE_CHECKING:
    from orgate.server.services import Services

log = logging.getLogger("orgate.server")


def _default_key_file(settings: Settings) -> Path:
    url = settings.store.url
    if url and (url.startswith("sqlite:") or "://" not in url):
        path = sqlite_path(url)
        if path != ":memory:":
            return Path(path).parent / "compaction.key"
    return Path(default_sqlite_path()).parent / "compaction.key"


def compaction_key(settings: Settings) -> bytes:
    """The 32-byte sealing key (see the module docstring). Raises ``ConfigError``."""
    conf = settings.compaction
    secret = resolve_secret(conf.secret, where="compaction.secret", required=False)
    if secret:
        if len(secret) < 16:
            raise ConfigError(
                "compaction.secret: use at least 16 characters (32 random bytes recommended)"
            )
        return derive_key(secret.encode())
    path = Path(conf.key_file).expanduser() if conf.key_file else _default_key_file(settings)
    if settings.store.url and settings.store.url.startswith(("postgres://", "postgresql://")):
        log.warning(
            "compaction: no [compaction] secret; using the host-local key file %s (set "
            "ORGATE_COMPACTION_SECRET when several hosts serve one store)",
            path,
        )
    try:
        return load_or_create_key(path)
    except KeyFileError as exc:
        raise ConfigError(str(exc)) from None


# --------------------------------------------------------------------------- the endpoint


def parse_compact_body(data: Any) -> CompactResponseMethodPublicBody:
    if not isinstance(data, dict):
        raise not_an_object()
    try:
        body = CompactResponseMethodPublicBody.model_validate(data)
    except ValidationError as exc:
        raise from_validation_error(exc) from None
    for name in body.model_extra or {}:
        raise unknown_parameter(name)
    return body


def compact_routes(services: Services) -> Sequence[BaseRoute]:
    async def compact_endpoint(request: Request) -> Response:
        caller = caller_of(request.scope)
        data = await read_json(request, services.settings.limits)
        if isinstance(data, dict):
            request_state(request.scope).note_model(
                data.get("model")
            )  # the metrics' `model` label and the access log, as for /v1/responses
        if isinstance(data, dict) and isinstance(data.get("input"), list):
            limit = services.settings.limits.max_input_items
            if len(data["input"]) > limit:
                raise ApiError.of(
                    ErrorCode.TOO_MANY_ITEMS,
                    f"'input' has {len(data['input'])} items, more than the limit of "
                    f"{limit} (limits.max_input_items).",
                    param="input",
                )
            data["input"] = split_namespaced(data["input"], services.settings.gate.policy, [])
        body = parse_compact_body(data)
        return json_response(await services.compaction.compact(body, caller))

    return [
        Route("/v1/responses/compact", compact_endpoint, methods=["POST"]),
        Route("/v1/responses/compact", OnlyPost()),  # every other method; before the stored routes
    ]


class OnlyPost:
    """405 with ``Allow: POST`` for any other method, as an ASGI app (a route of every method).

    Without it, GET and DELETE reached ``/v1/responses/{response_id}`` (a 404 for a response
    named "compact") and a 405 listed that route's methods too.
    """

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        error = method_not_allowed(scope["method"], scope["path"], "POST")
        await error_response(error)(scope, receive, send)


__all__ = ["compact_routes", "compaction_key", "parse_compact_body"]
