"""Items between their stored (wire) form and the input item models the providers take.

Owns the conversion of stored history into input items (an upstream's own stored items
become ``OpaqueItem``s, see ``orgate.neutral.items``), an input item as it is stored, and
what a listing shows of a stored item (spec items only, in the spec's item shape). History
itself comes from the caller (the service reads the store); this module does no I/O.
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter, ValidationError

from orgate.engine import ids
from orgate.neutral import EXTENSION_ITEM_TYPE, OpaqueItem, extension_wire
from orgate.neutral.items import ORIGIN_FIELD
from orgate.protocol import ItemParam, UserMessageItemParam
from orgate.protocol.errors import ApiError, ErrorCode, from_validation_error

_ITEMS = TypeAdapter(list[ItemParam])


def items_from_wire(items: list[dict[str, Any]], *, param: str = "input") -> list[Any]:
    """Stored wire items (response or request shape) → input item models the providers take.

    Stored extension items (``orgate:extension_item``, an upstream's own output
    items) become ``OpaqueItem``s at their place. Only stored history comes
    through here: a client's own input never does (the input gate refuses
    namespaced types before parsing).
    """
    cleaned = []
    opaque: list[tuple[int, dict[str, Any]]] = []
    for index, item in enumerate(items):
        kind = item.get("type")
        if kind == "reasoning" and "content" in item:
            item = {k: v for k, v in item.items() if k != "content"}
        elif kind == EXTENSION_ITEM_TYPE:
            opaque.append((index, item))
            continue
        cleaned.append(item)
    try:
        models: list[Any] = _ITEMS.validate_python(cleaned)
        for index, item in opaque:  # ascending: each lands at its original index
            models.insert(index, OpaqueItem.model_validate(item))
    except ValidationError as exc:
        error = from_validation_error(exc)
        raise ApiError.of(
            ErrorCode.STORE_CORRUPT, f"stored history could not be read back: {error.message}"
        ) from None
    return models


def item_to_wire(item: Any) -> dict[str, Any]:
    """An input item model as stored/listed JSON (unset fields left out; an opaque item's raw
    item unchanged)."""
    if type(item) is OpaqueItem:
        return extension_wire(item.id or ids.new_id("ext"), item.origin, item.item)
    if (
        type(item) is UserMessageItemParam
        and type(item.content) is str
        and item.id is None
        and item.status is None
        and not item.model_extra
    ):
        # a string `input` (see normalize_input): what model_dump gives, without its cost on
        # every stored turn
        return {"type": "message", "role": "user", "content": item.content}
    wire: dict[str, Any] = item.model_dump(mode="json", exclude_none=True, by_alias=True)
    return wire


def is_private(item: dict[str, Any]) -> bool:
    """True for a stored item a client must not see as is: an extension item wrapper, a marked
    reasoning item."""
    return item.get("type") == EXTENSION_ITEM_TYPE or ORIGIN_FIELD in item


def listed_item(item: dict[str, Any]) -> dict[str, Any] | None:
    """A stored item as a listing shows it (spec items only): None for an extension item wrapper
    (an upstream's own item, kept in history for that upstream), a reasoning item without its
    origin marker. The history itself keeps both (``items_from_wire``)."""
    if item.get("type") == EXTENSION_ITEM_TYPE:
        return None
    if ORIGIN_FIELD in item:
        return {k: v for k, v in item.items() if k != ORIGIN_FIELD}
    return item


_STATUSED = frozenset({"message", "function_call", "function_call_output", "custom_tool_call"})


def item_field_part(part: Any) -> Any:
    """A content part with the fields the spec's item shape requires (``OutputTextContent``:
    ``annotations``; ``InputImageContent``: ``image_url``, ``detail``)."""
    if not isinstance(part, dict):
        return part
    kind = part.get("type")
    if kind == "output_text" and "annotations" not in part:
        return {**part, "annotations": []}
    if kind == "input_image" and ("detail" not in part or "image_url" not in part):
        return {**part, "detail": part.get("detail") or "auto", "image_url": part.get("image_url")}
    return part


def as_item_field(item: dict[str, Any]) -> dict[str, Any]:
    """A listed input item in the spec's item shape (``ItemField``), as a response's output
    items are.

    Items are stored as the client sent them (``"content": "hi"``, no ``status``); a
    listing returns them as items: a message's content as parts (``input_text``, or
    ``output_text`` for the assistant), parts with their required fields, and the
    ``status`` of a message, function call and function call output (``completed``).
    The result is still a valid input item to send back.
    """
    kind = item.get("type")
    if kind not in _STATUSED:
        return item
    out = dict(item)
    if kind == "message":
        content = out.get("content")
        if isinstance(content, str):
            if out.get("role") == "assistant":
                content = [{"type": "output_text", "text": content, "annotations": []}]
            else:
                content = [{"type": "input_text", "text": content}]
        elif isinstance(content, list):
            content = [item_field_part(part) for part in content]
        out["content"] = content
    elif kind == "function_call_output" and isinstance(out.get("output"), list):
        out["output"] = [item_field_part(part) for part in out["output"]]
    if out.get("status") not in ("in_progress", "completed", "incomplete"):
        out["status"] = "completed"
    return out


__all__ = [
    "as_item_field",
    "is_private",
    "item_field_part",
    "item_to_wire",
    "items_from_wire",
    "listed_item",
]
