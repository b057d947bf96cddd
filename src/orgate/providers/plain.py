"""Reading request items the same way in every provider mapping (pure).

Input items may be ``orgate.protocol`` Pydantic models, output models replayed
from history, or plain dicts: ``get_field`` reads either by name, ``plain``
turns a schema-ish value into JSON-ready data.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any

_SCALARS = frozenset({str, int, float, bool})


def get_field(obj: Any, name: str, default: Any = None) -> Any:
    """Attribute or key access; enum members become their value."""
    value = obj.get(name, default) if isinstance(obj, Mapping) else getattr(obj, name, default)
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
