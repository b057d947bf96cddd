"""The compaction use case: a conversation compacted into kept items + one sealed
``compaction`` item.

``CompactionService.compact(body, caller)`` is what ``POST /v1/responses/compact``
does (the route, ``server/compact.py``, only parses the request and answers). The
conversation is ``previous_response_id``'s context (from the store) followed by
``input``. The policy (``core.py``) keeps the last ``keep_turns`` turns and
every system/developer message verbatim; the older items are summarised by the
requested model itself: one ordinary, unstored response through the
``ResponsesService`` with a summariser prompt (so routing, model scopes, gates and
usage work as for any request). The output lists the kept items (as response
items) and then the ``compaction`` item, whose ``encrypted_content`` carries the
summary sealed with the compaction key (AES-256-GCM, bound to the caller's tenant).

An upstream's own items in the kept part (``web_search_call`` and the like, kept
in history for the upstream that made them; ``orgate.neutral.items``) are not
spec items: each run of them becomes, in place, a compaction item of its own that
holds them sealed (no summary), so the output stays spec-valid and the next
request gives them back to their upstream (``expand``). Older ones are summarised
like any older item (named in the transcript).

The ids of a compaction's result (``response.compaction`` and the items it writes)
are made here, from ``ids.py``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from orgate.engine import ids
from orgate.engine.builder import usage_dict
from orgate.engine.compaction import core as compaction
from orgate.engine.compaction.on_create import ServerCompaction
from orgate.engine.history_items import item_field_part, item_to_wire, items_from_wire
from orgate.engine.request_body import normalize_input
from orgate.neutral import OpaqueItem, Usage
from orgate.protocol import (
    CompactionSummaryItemParam,
    CompactResponseMethodPublicBody,
    CreateResponseBody,
    UserMessageItemParam,
)
from orgate.protocol.errors import (
    ApiError,
    ErrorCode,
    missing_required_parameter,
)

if TYPE_CHECKING:  # the responses service is given (server/services.py), never imported here
    from orgate.engine.service import Caller, ResponsesService


class CompactionService:
    """Compacts conversations with the app's responses service, sealing key and policy."""

    def __init__(self, responses: ResponsesService, key: bytes, keep_turns: int) -> None:
        self.responses = responses
        self.key = key
        self.keep_turns = keep_turns

    async def compact(
        self, body: CompactResponseMethodPublicBody, caller: Caller
    ) -> dict[str, Any]:
        """The whole operation, as the ``CompactResource`` dict."""
        self.responses.resolve(body.model, caller)  # 400 without model, 404 unknown / not allowed
        key = self.key
        items, offset = await self.conversation(body, caller)
        # every compaction item must be genuine (kept ones stay sealed, older ones are expanded);
        # checked here, in conversation order, so the error names its index in the request's
        # `input`
        for index, item in enumerate(items[offset:]):
            if isinstance(item, CompactionSummaryItemParam):
                compaction.open_sealed(
                    item.encrypted_content,
                    key,
                    context=caller.tenant,
                    param=f"input[{index}].encrypted_content",
                )
        older, _ = compaction.partition(items, self.keep_turns)
        older = compaction.expand(older, key, context=caller.tenant)
        summary, usage = await self.summarise(body, caller, older)
        result = compaction.compact(items, summary, keep_turns=self.keep_turns, model=body.model)
        sealed = compaction.seal(result.payload, key, context=caller.tenant)
        output = kept_output(result.kept, key, tenant=caller.tenant, model=body.model)
        output.append({"type": "compaction", "id": ids.new_id("cmp"), "encrypted_content": sealed})
        return {
            "id": ids.response_id(),
            "object": "response.compaction",
            "created_at": int(time.time()),
            "output": output,
            "usage": usage,
        }

    async def conversation(
        self, body: CompactResponseMethodPublicBody, caller: Caller
    ) -> tuple[list[Any], int]:
        """``previous_response_id``'s context + ``input``, references resolved (compaction items
        still sealed), and the number of history items before ``input``."""
        history: list[Any] = []
        if body.previous_response_id:
            store = self.responses.store
            stored = (
                await store.context(body.previous_response_id, caller.tenant)
                if store is not None
                else None
            )
            if stored is None:
                raise ApiError.of(
                    ErrorCode.PREVIOUS_RESPONSE_NOT_FOUND,
                    f"Previous response with id '{body.previous_response_id}' not found.",
                    param="previous_response_id",
                )
            history = items_from_wire(stored)
        new_input = await self.responses.resolve_references(normalize_input(body), caller)
        # from the latest compaction made on create on, as the model would read it
        history, new_input = compaction.model_view(
            history, new_input, self.key, context=caller.tenant, read=items_from_wire
        )
        items = [*history, *new_input]
        if not items:
            raise missing_required_parameter(
                "'input' is required (or a previous_response_id to compact).", param="input"
            )
        return items, len(history)

    async def compact_context(
        self, items: list[Any], body: CreateResponseBody, caller: Caller
    ) -> ServerCompaction | None:
        """A compaction on create (``context_management``): the older turns of ``items`` (the
        model's context) summarised, the rest kept; sealed into one item that stands for the
        whole context. None when no turn is older than the kept ones."""
        older, kept = compaction.partition(items, self.keep_turns)
        if not older:
            return None
        summary, usage = await self.summarise(body, caller, older)
        assert summary is not None
        payload = compaction.whole_payload(
            summary, [item_to_wire(item) for item in kept], covered=len(older), model=body.model
        )
        return ServerCompaction(
            items=[compaction.summary_message(summary), *kept],
            encrypted_content=compaction.seal(payload, self.key, context=caller.tenant),
            usage=neutral_usage(usage),
        )

    async def summarise(
        self,
        body: CompactResponseMethodPublicBody | CreateResponseBody,
        caller: Caller,
        older: list[Any],
    ) -> tuple[str | None, dict[str, Any]]:
        """Ask the requested model for the summary of ``older``: one unstored response."""
        if not older:
            return None, usage_dict(None)
        request = CreateResponseBody(
            model=body.model,
            instructions=compaction.SUMMARISER_INSTRUCTIONS,
            input=[
                UserMessageItemParam(
                    role="user", content=compaction.summariser_prompt(older, body.instructions)
                )
            ],
            store=False,
            prompt_cache_key=body.prompt_cache_key,
        )
        stream = await self.responses.create(request, caller, [])
        final = await stream.final()
        if stream.error is not None:
            raise stream.error
        summary = "".join(_output_texts(final)).strip()
        if not summary:
            raise ApiError.of(
                ErrorCode.COMPACTION_FAILED, f"model '{body.model}' returned no summary text"
            )
        return summary, final.get("usage") or usage_dict(None)


def neutral_usage(usage: dict[str, Any]) -> Usage:
    """A response's ``usage`` (wire shape) as the neutral ``Usage`` a ``Finish`` carries."""
    return Usage(
        input_tokens=usage.get("input_tokens") or 0,
        output_tokens=usage.get("output_tokens") or 0,
        cached_tokens=(usage.get("input_tokens_details") or {}).get("cached_tokens") or 0,
        reasoning_tokens=(usage.get("output_tokens_details") or {}).get("reasoning_tokens") or 0,
    )


def _output_texts(final: dict[str, Any]) -> list[str]:
    return [
        part.get("text", "")
        for item in final.get("output", [])
        if item.get("type") == "message"
        for part in item.get("content", [])
        if part.get("type") == "output_text"
    ]


# --------------------------------------------------------------------------- output items


def spec_fields(model: BaseModel) -> dict[str, Any]:
    """``model`` dumped with the spec's fields only, at every depth: request models keep the
    keys a client added (``extra="allow"``), and a compaction's output is not an echo of them."""
    dumped = model.model_dump(mode="json", exclude_none=True, by_alias=True)
    pruned: dict[str, Any] = _prune(model, dumped)
    return pruned


def _prune(value: Any, dumped: Any) -> Any:
    if isinstance(value, BaseModel) and isinstance(dumped, dict):
        for key in value.model_extra or {}:
            dumped.pop(key, None)
        for name, field in type(value).model_fields.items():
            key = field.serialization_alias or field.alias or name
            if key in dumped:
                dumped[key] = _prune(getattr(value, name), dumped[key])
    elif (
        isinstance(value, (list, tuple)) and isinstance(dumped, list) and len(value) == len(dumped)
    ):
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
        return {
            "type": "output_text",
            "text": part.get("text", ""),
            "annotations": part.get("annotations") or [],
            "logprobs": part.get("logprobs") or [],
        }
    shaped: dict[str, Any] = item_field_part(part)
    return shaped


def as_output_item(item: Any) -> dict[str, Any]:
    """A kept input item in the response-item (``ItemField``) shape, the spec's fields only."""
    wire = spec_fields(item)
    kind = wire.get("type") or "message"
    shape = _OUTPUT_SHAPES.get(kind)
    if shape is None or (kind == "message" and "role" not in wire):
        raise ApiError.of(
            ErrorCode.UNSUPPORTED_ITEM, f"items of type '{kind}' cannot be compacted", param="input"
        )
    return shape(item, wire)


def _message_item(item: Any, wire: dict[str, Any]) -> dict[str, Any]:
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


def _function_call_item(item: Any, wire: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": wire.get("id") or ids.function_call_id(),
        "call_id": wire["call_id"],
        "name": wire["name"],
        "arguments": wire["arguments"],
        "status": "completed",
    }


def _function_call_output_item(item: Any, wire: dict[str, Any]) -> dict[str, Any]:
    output = wire["output"]
    if isinstance(output, list):
        output = [_output_part(part) if isinstance(part, dict) else part for part in output]
    return {
        "type": "function_call_output",
        "id": wire.get("id") or ids.new_id("fco"),
        "call_id": wire["call_id"],
        "output": output,
        "status": "completed",
    }


# OpenAI's free-form tool call and its output, as OpenAI shapes them.
def _custom_tool_call_item(item: Any, wire: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "custom_tool_call",
        "id": wire.get("id") or ids.new_id("ctc"),
        "call_id": wire["call_id"],
        "name": wire["name"],
        "input": wire["input"],
        "status": "completed",
    }


def _custom_tool_call_output_item(item: Any, wire: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "custom_tool_call_output",
        "id": wire.get("id") or ids.new_id("ctco"),
        "call_id": wire["call_id"],
        "output": wire["output"],
    }


def _reasoning_item(item: Any, wire: dict[str, Any]) -> dict[str, Any]:
    out = {
        "type": "reasoning",
        "id": wire.get("id") or ids.reasoning_id(),
        "summary": wire.get("summary", []),
    }
    if wire.get("encrypted_content"):
        out["encrypted_content"] = wire["encrypted_content"]
    return out


def _compaction_item(item: Any, wire: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "compaction",
        "id": wire.get("id") or ids.new_id("cmp"),
        "encrypted_content": wire["encrypted_content"],
    }


# Each item type that can be kept, and its response-item shape (from the item and its spec fields).
_OUTPUT_SHAPES: dict[str, Callable[[Any, dict[str, Any]], dict[str, Any]]] = {
    "message": _message_item,
    "function_call": _function_call_item,
    "function_call_output": _function_call_output_item,
    "custom_tool_call": _custom_tool_call_item,
    "custom_tool_call_output": _custom_tool_call_output_item,
    "reasoning": _reasoning_item,
    "compaction": _compaction_item,
}


def kept_output(
    kept: list[Any], key: bytes, *, tenant: str, model: str | None
) -> list[dict[str, Any]]:
    """The kept items as response items; each run of extension items sealed, in place, into a
    compaction item."""
    output: list[dict[str, Any]] = []
    run: list[OpaqueItem] = []
    for item in [*kept, None]:
        if type(item) is OpaqueItem:
            run.append(item)
            continue
        if run:
            sealed = compaction.seal(
                compaction.extensions_payload(run, model=model), key, context=tenant
            )
            output.append(
                {"type": "compaction", "id": ids.new_id("cmp"), "encrypted_content": sealed}
            )
            run = []
        if item is not None:
            output.append(as_output_item(item))
    return output
