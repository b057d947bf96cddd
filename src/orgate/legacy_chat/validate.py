"""Parse a Chat Completions request body and refuse what the adapter cannot honour.

Everything here raises ``ApiError`` (400) with a ``param`` that names the CHAT
field (``messages[2].content[0].type``), before anything is translated to the
Responses protocol. Nothing is dropped silently: unknown fields fail in the wire
models, known-but-unsupported ones fail in ``check_supported``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from orgate.legacy_chat import wire
from orgate.protocol.errors import (
    ApiError,
    ErrorCode,
    invalid_request,
    invalid_value,
    missing_required_parameter,
    unsupported_parameter,
)


def parse_request(data: Any) -> wire.ChatCompletionRequest:
    """Validate ``data`` (decoded JSON) into the chat wire model, then check support."""
    if not isinstance(data, dict):
        raise invalid_request("The request body must be a JSON object.")
    try:
        req = wire.ChatCompletionRequest.model_validate(data)
    except ValidationError as exc:
        raise _from_validation_error(exc) from None
    check_supported(req)
    return req


def _from_validation_error(exc: ValidationError) -> ApiError:
    """The first pydantic error as one ApiError with a chat param path."""
    err = exc.errors(include_url=False)[0]
    loc = list(err["loc"])
    kind = err["type"]
    if kind == "extra_forbidden":
        param = wire.param_from_loc(loc)
        field = str(loc[-1])
        where = "" if len(loc) == 1 else f" in '{wire.param_from_loc(loc[:-1])}'"
        return ApiError.of(
            ErrorCode.UNKNOWN_PARAMETER,
            f"Unrecognized request argument supplied: {field}{where}",
            param=param,
        )
    if kind in ("chat_union_type", "chat_union_role"):
        message = err["msg"]
        value = err.get("input")
        if isinstance(value, dict):
            field = kind.removeprefix("chat_union_")
            loc.append(field)
            message += f"; got {value.get(field)!r}"
        return invalid_value(message, param=wire.param_from_loc(loc))
    if kind == "missing":
        return missing_required_parameter(
            f"Missing required parameter: '{wire.param_from_loc(loc)}'.",
            param=wire.param_from_loc(loc),
        )
    param = wire.param_from_loc(loc)
    msg = err["msg"]
    wrong_type = kind.endswith(("_type", "_parsing")) or kind == "chat_str_or_list"
    return ApiError.of(
        ErrorCode.INVALID_TYPE if wrong_type else ErrorCode.INVALID_VALUE,
        f"Invalid value for '{param}': {msg}." if param else f"Invalid request: {msg}.",
        param=param or None,
    )


def _unsupported(param: str, message: str) -> ApiError:
    return unsupported_parameter(message, param=param)


def check_supported(req: wire.ChatCompletionRequest) -> None:
    """Refuse fields that are valid Chat Completions but have no honest translation.

    The first refusal wins, in this order: the request's options, then its metadata, then each
    message."""
    refusal = _option_refusal(req)
    if refusal is not None:
        raise refusal
    if req.metadata is not None:
        _check_metadata(req.metadata)
    for i, msg in enumerate(req.messages):
        _check_message(i, msg)


def _option_refusal(req: wire.ChatCompletionRequest) -> ApiError | None:
    """The first request option the adapter refuses, or ``None``."""
    return (
        _untranslatable_option(req)
        or _conflicting_options(req)
        or _string_too_long(req)
        or _unknown_service_tier(req.service_tier)
    )


def _is_set(value: Any) -> bool:
    return True


def _has_non_text(modalities: list[str]) -> bool:
    return any(m != "text" for m in modalities)


# Options with no translation to /v1/responses, in the order they are reported: the field, when
# a value (never ``None``) is refused, and why.
_UNTRANSLATABLE: tuple[tuple[str, Callable[[Any], bool], str], ...] = (
    ("logit_bias", bool, "logit_bias is not supported by this gateway."),
    ("seed", _is_set, "seed is not supported: /v1/responses has no seed parameter."),
    ("audio", _is_set, "Audio output is not supported by this gateway."),
    ("modalities", _has_non_text, "Only the 'text' modality is supported."),
    ("prediction", _is_set, "Predicted outputs are not supported by this gateway."),
    ("functions", _is_set, "The legacy 'functions' parameter is not supported; use 'tools'."),
    (
        "function_call",
        _is_set,
        "The legacy 'function_call' parameter is not supported; use 'tool_choice'.",
    ),
    ("web_search_options", _is_set, "Web search is not supported by this gateway."),
    ("moderation", _is_set, "moderation is not supported by this gateway."),
    ("prompt_cache_retention", _is_set, "prompt_cache_retention is not supported."),
    ("prompt_cache_options", _is_set, "prompt_cache_options is not supported."),
)


def _untranslatable_option(req: wire.ChatCompletionRequest) -> ApiError | None:
    if req.n is not None and req.n > 1:
        return _unsupported(
            "n", "n > 1 is not supported by this gateway; send one request per choice."
        )
    if req.top_logprobs and not req.logprobs:
        return invalid_value("top_logprobs needs logprobs: true.", param="top_logprobs")
    for name, refused, message in _UNTRANSLATABLE:
        value = getattr(req, name)
        if value is not None and refused(value):
            return _unsupported(name, message)
    return None


def _conflicting_options(req: wire.ChatCompletionRequest) -> ApiError | None:
    if req.max_tokens is not None and req.max_completion_tokens is not None:
        return _unsupported(
            "max_tokens", "Set only one of 'max_tokens' and 'max_completion_tokens'."
        )
    if req.stream_options is not None and not req.stream:
        return _unsupported(
            "stream_options", "'stream_options' is only allowed when 'stream' is true."
        )
    if req.modalities is not None and not req.modalities:
        return invalid_request("'modalities' must not be empty.", param="modalities")
    return None


def _string_too_long(req: wire.ChatCompletionRequest) -> ApiError | None:
    for name in ("safety_identifier", "prompt_cache_key"):
        value = getattr(req, name)
        if value is not None and len(value) > 64:
            return ApiError.of(
                ErrorCode.STRING_ABOVE_MAX_LENGTH,
                f"'{name}' must be at most 64 characters.",
                param=name,
            )
    return None


_SERVICE_TIERS = ("auto", "default", "flex", "priority")


def _unknown_service_tier(tier: str | None) -> ApiError | None:
    if tier is None or tier in _SERVICE_TIERS:
        return None
    return _unsupported(
        "service_tier",
        f"service_tier {tier!r} is not supported; use auto, default, flex or priority.",
    )


def _check_metadata(metadata: dict[str, str]) -> None:
    if len(metadata) > 16:
        raise invalid_request("'metadata' may hold at most 16 keys.", param="metadata")
    for key, value in metadata.items():
        if len(key) > 64:
            raise invalid_request("metadata keys must be at most 64 characters.", param="metadata")
        if len(value) > 512:
            raise invalid_request(
                "metadata values must be at most 512 characters.", param=f"metadata.{key}"
            )


def _check_message(i: int, msg: wire.ChatMessage) -> None:
    refusal = _message_refusal(f"messages[{i}]", msg)
    if refusal is not None:
        raise refusal


def _message_refusal(at: str, msg: wire.ChatMessage) -> ApiError | None:
    """Why the message at ``at`` cannot be translated, or ``None``."""
    if isinstance(msg, wire.FunctionMessage):
        return _unsupported(
            f"{at}.role",
            "The legacy 'function' role is not supported; use 'tool' messages with a tool_call_id.",
        )
    if getattr(msg, "name", None) is not None:
        return _unsupported(
            f"{at}.name",
            "Message 'name' is not supported: /v1/responses messages carry no participant name.",
        )
    if isinstance(msg, wire.UserMessage) and isinstance(msg.content, list):
        return _user_parts_refusal(at, msg.content)
    if isinstance(msg, wire.AssistantMessage):
        return _assistant_refusal(at, msg)
    return None


def _user_parts_refusal(at: str, parts: list[wire.UserPart]) -> ApiError | None:
    for j, part in enumerate(parts):
        if isinstance(part, wire.InputAudioPart):
            return _unsupported(
                f"{at}.content[{j}]", "Audio input is not supported by this gateway."
            )
        if isinstance(part, wire.FilePart):
            if part.file.file_id is not None:
                return _unsupported(
                    f"{at}.content[{j}].file.file_id",
                    "File ids are not supported (there is no files API); send file_data.",
                )
            if part.file.file_data is None:
                return missing_required_parameter(
                    "A file part needs 'file_data'.",
                    param=f"{at}.content[{j}].file.file_data",
                )
    return None


def _assistant_refusal(at: str, msg: wire.AssistantMessage) -> ApiError | None:
    if msg.audio is not None:
        return _unsupported(f"{at}.audio", "Assistant audio is not supported by this gateway.")
    if msg.function_call is not None:
        return _unsupported(
            f"{at}.function_call",
            "The legacy assistant 'function_call' is not supported; use 'tool_calls'.",
        )
    if msg.annotations and not isinstance(msg.content, str):
        return invalid_value(
            "Assistant 'annotations' need a string 'content' to refer to.",
            param=f"{at}.annotations",
        )
    if msg.content is None and not msg.tool_calls and msg.refusal is None:
        return missing_required_parameter(
            "An assistant message needs 'content', 'refusal' or 'tool_calls'.",
            param=f"{at}.content",
        )
    return None
