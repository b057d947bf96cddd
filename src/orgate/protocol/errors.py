"""The spec's error model: the ``{"error": {...}}`` body and the exception that carries it.

Every error orgate returns, over HTTP or inside a stream, is one ``ApiError``
rendered in one place. This module imports nothing of orgate.
"""

from __future__ import annotations

from typing import Any

# Error ``type`` values used by the spec / the OpenAI reference API.
INVALID_REQUEST = "invalid_request_error"
AUTHENTICATION = "authentication_error"
PERMISSION = "permission_error"
NOT_FOUND = "not_found_error"
RATE_LIMIT = "rate_limit_error"
SERVER_ERROR = "server_error"
MODEL_ERROR = "model_error"


class ApiError(Exception):
    """An error with an HTTP status and the spec's error body fields."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = INVALID_REQUEST,
        code: str | None = None,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.code = code
        self.param = param
        self.headers = headers or {}

    def payload(self) -> dict[str, Any]:
        """The inner error object: ``{"message", "type", "param", "code"}``."""
        return {"message": self.message, "type": self.type, "param": self.param, "code": self.code}

    def body(self) -> dict[str, Any]:
        """The whole error body: ``{"error": {...}}``."""
        return {"error": self.payload()}

    def __repr__(self) -> str:
        return f"ApiError({self.status}, {self.type!r}, code={self.code!r}, param={self.param!r}, {self.message!r})"


def invalid_request(message: str, *, param: str | None = None, code: str | None = None) -> ApiError:
    return ApiError(400, message, type=INVALID_REQUEST, code=code, param=param)


def not_found(message: str, *, param: str | None = None, code: str | None = "not_found") -> ApiError:
    return ApiError(404, message, type=INVALID_REQUEST, code=code, param=param)


# --------------------------------------------------------------------------- validation errors


def param_from_loc(loc: tuple[int | str, ...]) -> str | None:
    """The spec ``param`` of a Pydantic error location, e.g. ``input[2].content[0].type``.

    Union tags (CamelCase member class names such as ``UserMessageItemParam``,
    ``String``/``Array``) are dropped; list indexes become ``[i]``. An error in a
    mapping's key (``(..., "metadata", <key>, "[key]")``) names the mapping itself.
    """
    parts: list[str] = []
    for i, part in enumerate(loc):
        if isinstance(part, int):
            parts.append(f"[{part}]")
        elif part == "[key]" or (i + 1 < len(loc) and loc[i + 1] == "[key]"):
            continue  # a mapping's key and its marker: the offending key is not a path of its own
        elif part[:1].isupper() or part.startswith(("function-", "list[")):
            continue
        else:
            parts.append(f".{part}" if parts else part)
    return "".join(parts) or None


_MISSING = frozenset({"missing", "union_tag_not_found"})


def _code_for(err_type: str) -> str:
    if err_type in _MISSING:
        return "missing_required_parameter"
    if err_type in {"json_invalid", "json_type"}:
        return "invalid_json"
    if err_type.endswith(("_type", "_parsing")) or err_type in {
        "invalid_union_member",
        "invalid_item",
        "string_or_array_type",
    }:
        return "invalid_type"
    return "invalid_value"


def from_validation_error(exc: Any) -> ApiError:
    """A 400 ``ApiError`` for the first error of a ``pydantic.ValidationError``."""
    errors = exc.errors(include_url=False)
    if not errors:
        return invalid_request("Invalid request body.")
    first = errors[0]
    param = param_from_loc(tuple(first.get("loc", ())))
    message = str(first.get("msg", "Invalid value"))
    if param:
        message = f"Invalid '{param}': {message}"
    return invalid_request(message, param=param, code=_code_for(str(first.get("type", ""))))
