"""``POST /v1/responses/compact``: compact a conversation into kept items + one sealed ``compaction`` item.

The conversation is ``previous_response_id``'s context (from the store) followed
by ``input``. The policy (``engine/compaction.py``) keeps the last
``[compaction] keep_turns`` turns and every system/developer message verbatim; the
older items are summarised by the requested model itself: orgate runs one
ordinary, unstored response through ``services.responses`` with a summariser
prompt (so routing, auth scopes, gates and usage work as for any request). The
output lists the kept items (as response items) and then the ``compaction``
item, whose ``encrypted_content`` carries the summary sealed with the
compaction key (AES-256-GCM, bound to the caller's tenant).

An upstream's own items in the kept part (``web_search_call`` and the like,
kept in history for the upstream that made them; ``orgate.neutral.items``)
are not spec items: each run of them becomes, in place, a compaction item of
its own that holds them sealed (no summary), so the output stays spec-valid
and the next request gives them back to their upstream (``expand``). Older
ones are summarised like any older item (named in the transcript).

The compaction key (``compaction_key(settings)``):

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
import os
import secrets
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from orgate.config import CompactionSettings, ConfigError, Settings, resolve_secret
from orgate.datadir import private_dir
from orgate.engine import compaction, ids
from orgate.engine.builder import usage_dict
from orgate.engine.context import item_field_part, items_from_wire, normalize_input
from orgate.engine.input_gate import split_namespaced
from orgate.engine.service import Caller
from orgate.neutral import OpaqueItem
from orgate.protocol import (
    CompactionSummaryItemParam,
    CompactResponseMethodPublicBody,
    CreateResponseBody,
    UserMessageItemParam,
)
from orgate.protocol.errors import ApiError, from_validation_error, invalid_request, not_found
from orgate.server.body import read_json
from orgate.server.errors import error_response
from orgate.server.observability import note_model
from orgate.server.routes import authenticate, json_response
from orgate.store import default_sqlite_path, sqlite_path

if TYPE_CHECKING:
    from orgate.server.app import Services

log = logging.getLogger("orgate.server")

KEY_EXTRA = "compaction_key"
_HKDF_INFO = b"orgate compaction key v1"


def _derive(material: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_HKDF_INFO).derive(material)


def _default_key_file(settings: Settings) -> Path:
    url = settings.store.url
    if url and (url.startswith("sqlite:") or "://" not in url):
        path = sqlite_path(url)
        if path != ":memory:":
            return Path(path).parent / "compaction.key"
    return Path(default_sqlite_path()).parent / "compaction.key"


def _load_or_create(path: Path) -> bytes:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        try:
            private_dir(path.parent)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as exc:
            raise ConfigError(f"compaction.key_file {path}: cannot create it ({exc.strerror}); set [compaction] key_file or secret") from None
        try:
            os.write(fd, secrets.token_bytes(32))
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)  # atomic: a concurrent process that linked first wins, we read its key
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"compaction.key_file {path}: cannot read it ({exc.strerror})") from None
    if len(data) < 32:
        raise ConfigError(f"compaction.key_file {path}: holds {len(data)} bytes, expected at least 32 random bytes")
    return data


def compaction_key(settings: Settings) -> bytes:
    """The 32-byte sealing key (see the module docstring). Raises ``ConfigError``."""
    conf = settings.compaction
    secret = resolve_secret(conf.secret, where="compaction.secret", required=False)
    if secret:
        if len(secret) < 16:
            raise ConfigError("compaction.secret: use at least 16 characters (32 random bytes recommended)")
        return _derive(secret.encode())
    path = Path(conf.key_file).expanduser() if conf.key_file else _default_key_file(settings)
    if settings.store.url and settings.store.url.startswith(("postgres://", "postgresql://")):
        log.warning("compaction: no [compaction] secret; using the host-local key file %s (set ORGATE_COMPACTION_SECRET when several hosts serve one store)", path)
    return _derive(_load_or_create(path))


def key_for(services: Services) -> bytes:
    """The app's compaction key, computed once and kept in ``services.extras``."""
    key = services.extras.get(KEY_EXTRA)
    if key is None:
        key = compaction_key(services.settings)
        services.extras[KEY_EXTRA] = key
    return bytes(key)


# --------------------------------------------------------------------------- output items


def spec_fields(model: BaseModel) -> dict[str, Any]:
    """``model`` dumped with the spec's fields only, at every depth: request models keep the
    keys a client added (``extra="allow"``), and a compaction's output is not an echo of them."""
    dumped = model.model_dump(mode="json", exclude_none=True, by_alias=True)
    return _prune(model, dumped)


def _prune(value: Any, dumped: Any) -> Any:
    if isinstance(value, BaseModel) and isinstance(dumped, dict):
        for key in value.model_extra or {}:
            dumped.pop(key, None)
        for name, field in type(value).model_fields.items():
            key = field.serialization_alias or field.alias or name
            if key in dumped:
                dumped[key] = _prune(getattr(value, name), dumped[key])
    elif isinstance(value, (list, tuple)) and isinstance(dumped, list) and len(value) == len(dumped):
        return [_prune(v, d) for v, d in zip(value, dumped, strict=True)]
    return dumped


def _content_parts(content: Any, role: str) -> list[dict[str, Any]]:
    text_type = "output_text" if role == "assistant" else "input_text"
    if isinstance(content, str):
        parts: list[Any] = [{"type": text_type, "text": content}]
    else:
        parts = [spec_fields(p) if isinstance(p, BaseModel) else dict(p) for p in content or []]
    return [_output_part(part) for part in parts]


def _output_part(part: dict[str, Any]) -> dict[str, Any]:
    """A content part in the response-item shape (output text as the builder writes it)."""
    if part.get("type") == "output_text":
        return {"type": "output_text", "text": part.get("text", ""), "annotations": part.get("annotations") or [], "logprobs": part.get("logprobs") or []}
    return item_field_part(part)


def as_output_item(item: Any) -> dict[str, Any]:
    """A kept input item in the response-item (``ItemField``) shape, the spec's fields only."""
    wire = spec_fields(item)
    kind = wire.get("type") or "message"
    if "role" in wire and kind == "message":
        out = {
            "type": "message",
            "id": wire.get("id") or ids.message_id(),
            "status": "completed",
            "role": wire["role"],
            "content": _content_parts(getattr(item, "content", None), wire["role"]),
        }
        if wire.get("phase"):
            out["phase"] = wire["phase"]
        return out
    if kind == "function_call":
        return {"type": "function_call", "id": wire.get("id") or ids.function_call_id(), "call_id": wire["call_id"], "name": wire["name"], "arguments": wire["arguments"], "status": "completed"}
    if kind == "function_call_output":
        output = wire["output"]
        if isinstance(output, list):
            output = [_output_part(part) if isinstance(part, dict) else part for part in output]
        return {"type": "function_call_output", "id": wire.get("id") or ids.new_id("fco"), "call_id": wire["call_id"], "output": output, "status": "completed"}
    if kind == "reasoning":
        out = {"type": "reasoning", "id": wire.get("id") or ids.reasoning_id(), "summary": wire.get("summary", [])}
        if wire.get("encrypted_content"):
            out["encrypted_content"] = wire["encrypted_content"]
        return out
    if kind == "compaction":
        return {"type": "compaction", "id": wire.get("id") or ids.new_id("cmp"), "encrypted_content": wire["encrypted_content"]}
    raise invalid_request(f"items of type '{kind}' cannot be compacted", param="input", code="unsupported_item")


def kept_output(kept: list[Any], key: bytes, *, tenant: str, model: str | None) -> list[dict[str, Any]]:
    """The kept items as response items; each run of extension items sealed, in place, into a compaction item."""
    output: list[dict[str, Any]] = []
    run: list[OpaqueItem] = []
    for item in [*kept, None]:
        if type(item) is OpaqueItem:
            run.append(item)
            continue
        if run:
            sealed = compaction.seal(compaction.extensions_payload(run, model=model), key, context=tenant)
            output.append({"type": "compaction", "id": ids.new_id("cmp"), "encrypted_content": sealed})
            run = []
        if item is not None:
            output.append(as_output_item(item))
    return output


# --------------------------------------------------------------------------- the endpoint


def parse_compact_body(data: Any) -> CompactResponseMethodPublicBody:
    if not isinstance(data, dict):
        raise invalid_request("The request body must be a JSON object.", code="invalid_type")
    try:
        body = CompactResponseMethodPublicBody.model_validate(data)
    except ValidationError as exc:
        raise from_validation_error(exc) from None
    for name in body.model_extra or {}:
        raise invalid_request(f"Unknown parameter: '{name}'.", param=name, code="unknown_parameter")
    return body


async def conversation(services: Services, body: CompactResponseMethodPublicBody, caller: Caller) -> tuple[list[Any], int]:
    """``previous_response_id``'s context + ``input``, references resolved (compaction items still sealed),
    and the number of history items before ``input``."""
    history: list[Any] = []
    if body.previous_response_id:
        store = services.responses.store
        stored = await store.context(body.previous_response_id, caller.tenant) if store is not None else None
        if stored is None:
            raise not_found(f"Previous response with id '{body.previous_response_id}' not found.", param="previous_response_id", code="previous_response_not_found")
        history = items_from_wire(stored)
    new_input = await services.responses._resolve_references(normalize_input(body), caller)  # type: ignore[arg-type]
    items = [*history, *new_input]
    if not items:
        raise invalid_request("'input' is required (or a previous_response_id to compact).", param="input", code="missing_required_parameter")
    return items, len(history)


async def summarise(services: Services, body: CompactResponseMethodPublicBody, caller: Caller, older: list[Any]) -> tuple[str | None, dict[str, Any]]:
    """Ask the requested model for the summary of ``older``: one unstored response."""
    if not older:
        return None, usage_dict(None)
    request = CreateResponseBody(
        model=body.model,
        instructions=compaction.SUMMARISER_INSTRUCTIONS,
        input=[UserMessageItemParam(role="user", content=compaction.summariser_prompt(older, body.instructions))],
        store=False,
        prompt_cache_key=body.prompt_cache_key,
    )
    stream = await services.responses.create(request, caller, [])
    final = await stream.final()
    if stream.error is not None:
        raise stream.error
    texts = [
        part.get("text", "")
        for item in final.get("output", [])
        if item.get("type") == "message"
        for part in item.get("content", [])
        if part.get("type") == "output_text"
    ]
    summary = "".join(texts).strip()
    if not summary:
        raise ApiError(502, f"model '{body.model}' returned no summary text", type="server_error", code="compaction_failed")
    return summary, final.get("usage") or usage_dict(None)


async def compact_conversation(services: Services, body: CompactResponseMethodPublicBody, caller: Caller) -> dict[str, Any]:
    """The whole operation, as the ``CompactResource`` dict."""
    services.responses.resolve(body.model, caller)  # 400 without model, 404 unknown / not allowed
    key = key_for(services)
    items, offset = await conversation(services, body, caller)
    conf = services.settings.compaction
    # every compaction item must be genuine (kept ones stay sealed, older ones are expanded); checked
    # here, in conversation order, so the error names its index in the request's `input`
    for index, item in enumerate(items[offset:]):
        if isinstance(item, CompactionSummaryItemParam):
            compaction.open_sealed(item.encrypted_content, key, context=caller.tenant, param=f"input[{index}].encrypted_content")
    older, kept = compaction.partition(items, conf.keep_turns)
    older = compaction.expand(older, key, context=caller.tenant)
    summary, usage = await summarise(services, body, caller, older)
    result = compaction.compact(items, summary, keep_turns=conf.keep_turns, model=body.model)
    sealed = compaction.seal(result.payload, key, context=caller.tenant)
    output = kept_output(result.kept, key, tenant=caller.tenant, model=body.model)
    output.append({"type": "compaction", "id": ids.new_id("cmp"), "encrypted_content": sealed})
    return {"id": ids.response_id(), "object": "response.compaction", "created_at": int(time.time()), "output": output, "usage": usage}


def compact_routes(services: Services) -> Sequence[BaseRoute]:
    async def compact_endpoint(request: Request) -> Response:
        caller = authenticate(services, request)
        data = await read_json(request, services.settings.limits)
        if isinstance(data, dict):
            note_model(data.get("model"))  # the metrics' `model` label and the access log, as for /v1/responses
        if isinstance(data, dict) and isinstance(data.get("input"), list):
            limit = services.settings.limits.max_input_items
            if len(data["input"]) > limit:
                raise ApiError(400, f"'input' has {len(data['input'])} items, more than the limit of {limit} (limits.max_input_items).", code="too_many_items", param="input")
            data["input"] = split_namespaced(data["input"], services.settings.gate.policy, [])
        body = parse_compact_body(data)
        return json_response(await compact_conversation(services, body, caller))

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
        error = ApiError(405, f"Method {scope['method']} is not allowed on {scope['path']}.", code="method_not_allowed", headers={"Allow": "POST"})
        await error_response(error)(scope, receive, send)


__all__ = ["CompactionSettings", "compact_conversation", "compact_routes", "compaction_key", "key_for"]
