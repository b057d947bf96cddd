"""The spec's error model: the ``{"error": {...}}`` body, the exception that carries it,
and the named constructors that make one from the catalogue of codes (``error_codes.py``).

Every error orgate returns, over HTTP or inside a stream, is one ``ApiError``
rendered in one place. A construction site names its code through ``ErrorCode``
(a named constructor here, or ``ApiError.of``), never as a bare string. This
module imports nothing of orgate besides the catalogue.
"""

from __future__ import annotations

from typing import Any

from orgate.protocol.error_codes import (
    AUTHENTICATION,
    INVALID_REQUEST,
    MODEL_ERROR,
    NOT_FOUND,
    PERMISSION,
    RATE_LIMIT,
    SERVER_ERROR,
    ErrorCode,
)

#: Sent with an answer that sending the same request again cannot change (a spent budget of the
#: safety net or the tool guard): the OpenAI SDKs and the Agents SDK obey it.
NO_CLIENT_RETRY = {"x-should-retry": "false"}


class ApiError(Exception):
    """An error with an HTTP status and the spec's error body fields."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = INVALID_REQUEST,
        code: ErrorCode | str | None = None,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        # A plain string (``str`` of a member is its value): what an upstream sent passes
        # through too, and the wire, the logs and the store all see the same value.
        self.code = None if code is None else str(code)
        self.param = param
        self.headers = headers or {}

    @classmethod
    def of(
        cls,
        code: ErrorCode,
        message: str,
        *,
        param: str | None = None,
        headers: dict[str, str] | None = None,
        status: int | None = None,
    ) -> ApiError:
        """An error of catalogue ``code`` with the code's status and type. ``status`` is for
        the few sites that send a code with another status (an upstream's own 501, say)."""
        return cls(
            status or code.status, message, type=code.type, code=code, param=param, headers=headers
        )

    def payload(self) -> dict[str, Any]:
        """The inner error object: ``{"message", "type", "param", "code"}``."""
        return {"message": self.message, "type": self.type, "param": self.param, "code": self.code}

    def body(self) -> dict[str, Any]:
        """The whole error body: ``{"error": {...}}``."""
        return {"error": self.payload()}

    def __repr__(self) -> str:
        return (
            f"ApiError({self.status}, {self.type!r}, code={self.code!r}, "
            f"param={self.param!r}, {self.message!r})"
        )


# --------------------------------------------------------------------------- named constructors

INTERNAL_MESSAGE = "The server had an error while processing your request."


def invalid_request(
    message: str, *, param: str | None = None, code: ErrorCode | None = None
) -> ApiError:
    """A 400 ``invalid_request_error``; without ``code`` the body's code is null."""
    return ApiError(400, message, type=INVALID_REQUEST, code=code, param=param)


def not_found(
    message: str, *, param: str | None = None, code: ErrorCode = ErrorCode.NOT_FOUND
) -> ApiError:
    return ApiError(404, message, type=INVALID_REQUEST, code=code, param=param)


def invalid_value(message: str, *, param: str | None = None) -> ApiError:
    return ApiError.of(ErrorCode.INVALID_VALUE, message, param=param)


def invalid_type(message: str, *, param: str | None = None) -> ApiError:
    return ApiError.of(ErrorCode.INVALID_TYPE, message, param=param)


def missing_required_parameter(message: str, *, param: str | None = None) -> ApiError:
    return ApiError.of(ErrorCode.MISSING_REQUIRED_PARAMETER, message, param=param)


def unknown_parameter(name: str) -> ApiError:
    """A body parameter the endpoint does not define (``name``: its path, e.g. ``text.foo``)."""
    return ApiError.of(ErrorCode.UNKNOWN_PARAMETER, f"Unknown parameter: '{name}'.", param=name)


def translation_refused(code: str, kind: str, path: str, detail: str) -> ApiError:
    """A translation a deployment's policy refuses (``[translation] refuse``), naming it."""
    what = f" ({detail})" if detail else ""
    return ApiError.of(
        ErrorCode.TRANSLATION_REFUSED,
        f"'{path}'{what} would be {kind} on the way to this model's upstream "
        f"(translation {code}), which this deployment refuses ([translation] refuse).",
        param=path or None,
    )


def unsupported_parameter(message: str, *, param: str | None = None) -> ApiError:
    return ApiError.of(ErrorCode.UNSUPPORTED_PARAMETER, message, param=param)


def not_an_object() -> ApiError:
    """A request body that is JSON but not an object."""
    return invalid_type("The request body must be a JSON object.")


def model_not_found(model: str) -> ApiError:
    message = f"The model '{model}' does not exist or you do not have access to it."
    return ApiError.of(ErrorCode.MODEL_NOT_FOUND, message, param="model")


def review_not_found(review_id: str) -> ApiError:
    return ApiError.of(
        ErrorCode.NOT_FOUND, f"Review item '{review_id}' not found.", param="review_id"
    )


def method_not_allowed(method: str, path: str, allow: str) -> ApiError:
    """A 405 that names the methods the path serves (``Allow``, RFC 9110)."""
    message = f"Method {method} is not allowed on {path}."
    return ApiError.of(ErrorCode.METHOD_NOT_ALLOWED, message, headers={"Allow": allow})


def internal() -> ApiError:
    """The generic 500: what went wrong is in the server's log, never in the body."""
    return ApiError.of(ErrorCode.SERVER_ERROR, INTERNAL_MESSAGE)


def client_disconnected(before: str) -> ApiError:
    """What a stored response records when its client left before it ``before`` (started,
    finished)."""
    return ApiError.of(
        ErrorCode.CLIENT_DISCONNECTED, f"The client disconnected before the response {before}."
    )


def upstream_invalid_response(who: str, detail: str, *, what: str = "response") -> ApiError:
    """An upstream answer that is not its wire format. ``who`` names the upstream
    (``upstream 'name'``, with its kind or host), ``what`` is ``response`` or ``stream``."""
    return ApiError.of(
        ErrorCode.UPSTREAM_INVALID_RESPONSE, f"{who} sent an invalid {what}: {detail}"
    )


def upstream_without_events(name: str) -> ApiError:
    """An upstream stream of deployment ``name`` that ended before its first event."""
    message = f"upstream '{name}' ended its answer without any event"
    return ApiError.of(ErrorCode.UPSTREAM_INVALID_RESPONSE, message)


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


def _code_for(err_type: str) -> ErrorCode:
    if err_type in _MISSING:
        return ErrorCode.MISSING_REQUIRED_PARAMETER
    if err_type in {"json_invalid", "json_type"}:
        return ErrorCode.INVALID_JSON
    if err_type.endswith(("_type", "_parsing")) or err_type in {
        "invalid_union_member",
        "invalid_item",
        "string_or_array_type",
    }:
        return ErrorCode.INVALID_TYPE
    return ErrorCode.INVALID_VALUE


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


__all__ = [
    "AUTHENTICATION",
    "INTERNAL_MESSAGE",
    "INVALID_REQUEST",
    "MODEL_ERROR",
    "NOT_FOUND",
    "PERMISSION",
    "RATE_LIMIT",
    "SERVER_ERROR",
    "ApiError",
    "ErrorCode",
    "client_disconnected",
    "from_validation_error",
    "internal",
    "invalid_request",
    "invalid_type",
    "invalid_value",
    "method_not_allowed",
    "missing_required_parameter",
    "model_not_found",
    "not_an_object",
    "not_found",
    "param_from_loc",
    "review_not_found",
    "unknown_parameter",
    "translation_refused",
    "unsupported_parameter",
    "upstream_invalid_response",
    "upstream_without_events",
]
