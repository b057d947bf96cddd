"""OpenAI's create fields that orgate takes beyond the spec: ``conversation``,
``context_management``
and ``generate``, read and checked from the body's extra fields.

They are not in the spec's ``CreateResponseBody``, so they arrive as extra fields; a body that
has none (the common one) costs one dictionary test (``PLAIN``). What each one does:

- ``conversation`` (a string, or ``{"id": …}``): the turn runs in that conversation, which
  must exist (``POST /v1/conversations``, or a session of the same name). Together with
  ``previous_response_id`` it is OpenAI's 400 ``mutually_exclusive_parameters``.
- ``context_management`` (``[{"type": "compaction", "compact_threshold": N}]``): the
  conversation is compacted before the model is called when it is estimated at more than
  ``N`` tokens (``engine/compaction/service.py``).
- ``generate`` (a boolean, default true): ``false`` stores a response with no output and
  calls no model (a client preparing a conversation, or warming a connection).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from orgate.protocol import CreateResponseBody
from orgate.protocol.errors import (
    ApiError,
    ErrorCode,
    invalid_type,
    invalid_value,
    missing_required_parameter,
    unknown_parameter,
)

#: The extra fields this module reads.
FIELDS = frozenset({"conversation", "context_management", "generate"})
#: The longest conversation id (a session key: the session header has the same bound).
MAX_CONVERSATION_ID = 256
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True, slots=True)
class CreateOptions:
    """What the extra create fields asked for (``PLAIN``: none of them)."""

    conversation: str | None = None
    #: ``context_management``'s compaction entry is there.
    compaction: bool = False
    #: Its ``compact_threshold`` (None: not given; the model's context window is the threshold).
    compact_threshold: int | None = None
    generate: bool = True


PLAIN = CreateOptions()


def create_options(body: CreateResponseBody) -> CreateOptions:
    """The body's extra create fields, checked (a 400 naming the param for a bad one)."""
    extra = body.model_extra
    if not extra or extra.keys().isdisjoint(FIELDS):
        return PLAIN
    conversation = conversation_id(extra.get("conversation"))
    if conversation is not None and body.previous_response_id is not None:
        raise ApiError.of(
            ErrorCode.MUTUALLY_EXCLUSIVE_PARAMETERS,
            "Mutually exclusive parameters. Ensure you are only providing one of: "
            "'previous_response_id' or 'conversation'.",
        )
    compaction, threshold = _context_management(extra.get("context_management"))
    generate = extra.get("generate")
    if generate is not None and not isinstance(generate, bool):
        raise invalid_type("Invalid 'generate': expected a boolean.", param="generate")
    return CreateOptions(conversation, compaction, threshold, generate is not False)


def conversation_id(value: Any, param: str = "conversation") -> str | None:
    """The id a ``conversation`` value names: a string, or an object with only ``id``."""
    if value is None:
        return None
    if isinstance(value, dict):
        for key in value:
            if key != "id":
                raise unknown_parameter(f"{param}.{key}")
        if "id" not in value:
            raise missing_required_parameter(
                f"Missing required parameter: '{param}.id'.", param=f"{param}.id"
            )
        param, value = f"{param}.id", value["id"]
    if not isinstance(value, str):
        raise invalid_type(
            f"Invalid '{param}': expected a string (or an object with an 'id').", param=param
        )
    if not value or len(value) > MAX_CONVERSATION_ID or _CONTROL.search(value):
        raise invalid_value(
            f"Invalid '{param}': a conversation id has 1 to {MAX_CONVERSATION_ID} characters, "
            "none of them a control character (it is a session key, echoed in X-Session-Id).",
            param=param,
        )
    return value


def _context_management(value: Any) -> tuple[bool, int | None]:
    """(compaction asked for, its threshold) of a ``context_management`` list."""
    if value is None:
        return False, None
    if not isinstance(value, list):
        raise invalid_type(
            "Invalid 'context_management': expected an array.", param="context_management"
        )
    compaction, threshold = False, None
    for index, entry in enumerate(value):
        param = f"context_management[{index}]"
        if not isinstance(entry, dict):
            raise invalid_type(f"Invalid '{param}': expected an object.", param=param)
        for key in entry:
            if key not in ("type", "compact_threshold"):
                raise unknown_parameter(f"{param}.{key}")
        kind = entry.get("type")
        if kind is None:
            raise missing_required_parameter(
                f"Missing required parameter: '{param}.type'.", param=f"{param}.type"
            )
        if kind != "compaction":
            raise invalid_value(
                f"Invalid '{param}.type': {kind!r}; the only context management entry type "
                "is 'compaction'.",
                param=f"{param}.type",
            )
        if compaction:
            raise invalid_value(
                f"'{param}': context_management has one compaction entry at most.", param=param
            )
        compaction, threshold = True, _threshold(entry.get("compact_threshold"), param)
    return compaction, threshold


def _threshold(value: Any, param: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid_type(
            f"Invalid '{param}.compact_threshold': expected an integer.",
            param=f"{param}.compact_threshold",
        )
    if value < 1:
        raise invalid_value(
            f"Invalid '{param}.compact_threshold': a number of tokens, at least 1.",
            param=f"{param}.compact_threshold",
        )
    return value


__all__ = ["FIELDS", "PLAIN", "CreateOptions", "conversation_id", "create_options"]
