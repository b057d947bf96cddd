"""Reading request items the same way in every provider mapping (pure).

Input items may be ``orgate.protocol`` Pydantic models, output models replayed
from history, or plain dicts: ``get_field`` reads either by name, ``plain``
turns a schema-ish value into JSON-ready data. ``allowed_tools`` reads an
``allowed_tools`` tool choice the same way for every chat-style upstream.
``check_refusals`` stops a request whose mapping noted a translation the deployment
refuses, before the upstream is called.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any

from orgate.neutral import ModelRequest
from orgate.protocol.errors import invalid_request, translation_refused

_SCALARS = frozenset({str, int, float, bool})


#: Whether a type is a ``Mapping``, per type: ``isinstance`` against the ABC (and against a
#: Pydantic model, whose metaclass is an ABC too) costs more than the rest of a field read,
#: and a mapping reads every field of every item of a conversation.
_IS_MAPPING: dict[type, bool] = {dict: True}


def get_field(obj: Any, name: str, default: Any = None) -> Any:
    """Attribute or key access; enum members become their value."""
    kind = type(obj)
    mapping = _IS_MAPPING.get(kind)
    if mapping is None:
        mapping = _IS_MAPPING[kind] = issubclass(kind, Mapping)
    value = obj.get(name, default) if mapping else getattr(obj, name, default)
    return value.value if isinstance(value, Enum) else value


def plain(value: Any, exclude_none: bool = True) -> Any:
    """A JSON-ready copy of a schema-ish value (Pydantic model, dict, list, enum).

    ``exclude_none`` drops the ``None`` fields of models (dicts keep theirs).
    """
    if value is None or type(value) in _SCALARS:
        return value
    dump = getattr(value, "model_dump", None)
    if dump is not None:
        return dump(mode="json", by_alias=True, exclude_none=exclude_none)
    if isinstance(value, Mapping):
        return {str(k): plain(v, exclude_none) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v, exclude_none) for v in value]
    if isinstance(value, Enum):
        return value.value
    return value


def allowed_tools(choice: Any, tools: list[Any]) -> tuple[list[Any], str]:
    """An ``allowed_tools`` tool choice: the request's tools it allows, and its mode (``auto``
    when unset). ``required`` with no allowed tool of the request is a client mistake (400)."""
    allowed = {get_field(t, "name") for t in get_field(choice, "tools") or ()}
    kept = [t for t in tools if get_field(t, "name") in allowed]
    mode = get_field(choice, "mode") or "auto"
    if not kept and mode == "required":
        raise invalid_request(
            "tool_choice.allowed_tools names no tool of this request", param="tool_choice"
        )
    return kept, mode


def check_refusals(request: ModelRequest) -> None:
    """400 for the first translation the deployment's ``[translation] refuse`` names, once the
    mapping noted its own (the engine checked its own before)."""
    ledger = request.ledger
    if ledger.refuse:
        entry = ledger.refused()
        if entry is not None:
            code = entry.code
            raise translation_refused(code.value, code.kind, entry.path, entry.detail)
