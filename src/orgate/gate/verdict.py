"""Verdict values of the replay gate: the codes, one schema error, one verdict.

A verdict is a value, never an exception: ``check()`` always returns one.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Code(StrEnum):
    """The gate's verdict codes, in the order the checks run (first failure wins)."""

    NAMESPACED = "namespaced"
    HOSTED_CALL = "hosted_call"
    NOT_FUNCTION_CALL = "not_function_call"
    STATUS = "status"
    ARGUMENTS_TYPE = "arguments_type"
    ARGUMENTS_PARSE = "arguments_parse"
    UNKNOWN_TOOL = "unknown_tool"
    ARGUMENTS_SCHEMA = "arguments_schema"
    OK = "ok"


#: Every code, in check order (``ok`` last).
CODES: tuple[Code, ...] = tuple(Code)

NAMESPACED = Code.NAMESPACED
HOSTED_CALL = Code.HOSTED_CALL
NOT_FUNCTION_CALL = Code.NOT_FUNCTION_CALL
STATUS = Code.STATUS
ARGUMENTS_TYPE = Code.ARGUMENTS_TYPE
ARGUMENTS_PARSE = Code.ARGUMENTS_PARSE
UNKNOWN_TOOL = Code.UNKNOWN_TOOL
ARGUMENTS_SCHEMA = Code.ARGUMENTS_SCHEMA
OK = Code.OK


@dataclass(frozen=True, slots=True)
class SchemaError:
    """One JSON Schema failure: where in the arguments (a JSON path such as
    ``$.region`` or ``$.items[0]``) and what is wrong. ``keyword`` is the schema
    keyword that failed (``enum``, ``type``, ...) when the validator says so."""

    path: str
    message: str
    keyword: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "message": self.message, "keyword": self.keyword}


@dataclass(frozen=True, slots=True)
class Verdict:
    """The gate's answer for one item.

    ``name``, ``call_id`` and ``id`` are copied from the item when they are
    strings (``None`` otherwise); ``errors`` is non-empty only for
    ``arguments_schema`` and holds every schema error.
    """

    code: Code
    message: str
    errors: tuple[SchemaError, ...] = ()
    name: str | None = None
    call_id: str | None = None
    id: str | None = None

    @property
    def ok(self) -> bool:
        return self.code is Code.OK

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "call_id": self.call_id,
            "name": self.name,
            "code": self.code.value,
            "message": self.message,
            "errors": [e.to_dict() for e in self.errors],
        }
