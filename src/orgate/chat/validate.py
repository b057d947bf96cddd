"""Parse a Chat Completions request body and refuse what the adapter cannot honour.

Everything here raises ``ApiError`` (400) with a ``param`` that names the CHAT
field (``messages[2].content[0].type``), before anything is translated to the
Responses protocol. Nothing is dropped silently: unknown fields fail in the wire
models, known-but-unsupported ones fail in ``check_supported``.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from orgate.chat import wire
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
    """Refuse fields that are valid Chat Completions but have no honest translation."""
    if req.n is not None and req.n > 1:
        raise _unsupported(
            "n", "n > 1 is not supported by this gateway; send one request per choice."
        )
    if req.top_logprobs and not req.logprobs:
        raise invalid_value(
            "top_logprobs needs logprobs: true.",
            param="top_logprobs",
        )
    if req.logit_bias:
        raise _unsupported("logit_bias", "logit_bias is not supported by this gateway.")
    if req.seed is not None:
        raise _unsupported("seed", "seed is not supported: /v1/responses has no seed parameter.")
    if req.audio is not None:
        raise _unsupported("audio", "Audio output is not supported by this gateway.")
    if req.modalities is not None and any(m != "text" for m in req.modalities):
        raise _unsupported("modalities", "Only the 'text' modality is supported.")
    if req.prediction is not None:
        raise _unsupported("prediction", "Predicted outputs are not supported by this gateway.")
    if req.functions is not None:
        raise _unsupported(
            "functions", "The legacy 'functions' parameter is not supported; use 'tools'."
        )
    if req.function_call is not None:
        raise _unsupported(
            "function_call",
            "The legacy 'function_call' parameter is not supported; use 'tool_choice'.",
        )
    if req.web_search_options is not None:
        raise _unsupported("web_search_options", "Web search is not supported by this gateway.")
    if req.moderation is not None:
        raise _unsupported("moderation", "moderation is not supported by this gateway.")
    if req.prompt_cache_retention is not None:
        raise _unsupported("prompt_cache_retention", "prompt_cache_retention is not supported.")
    if req.prompt_cache_options is not None:
        raise _unsupported("prompt_cache_options", "prompt_cache_options is not supported.")
    if req.max_tokens is not None and req.max_completion_tokens is not None:
        raise _unsupported(
            "max_tokens", "Set only one of 'max_tokens' and 'max_completion_tokens'."
        )
    if req.stream_options is not None and not req.stream:
        raise _unsupported(
            "stream_options", "'stream_options' is only allowed when 'stream' is true."
        )
    if req.modalities is not None and not req.modalities:
        raise invalid_request("'modalities' must not be empty.", param="modalities")
    for name in ("safety_identifier", "prompt_cache_key"):
        value = getattr(req, name)
        if value is not None and len(value) > 64:
            raise ApiError.of(
                ErrorCode.STRING_ABOVE_MAX_LENGTH,
                f"'{name}' must be at most 64 characters.",
                param=name,
            )
    if req.service_tier is not None and req.service_tier not in (
        "auto",
        "default",
        "flex",
        "priority",
    ):
        raise _unsupported(
            "service_tier",
            f"service_tier {req.service_tier!r} is not supported; use auto, default, flex or priority.",
        )
    if req.metadata is not None:
        _check_metadata(req.metadata)
    for i, msg in enumerate(req.messages):
        _check_message(i, msg)


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
    at = f"messages[{i}]"
    if isinstance(msg, wire.FunctionMessage):
        raise _unsupported(
            f"{at}.role",
            "The legacy 'function' role is not supported; use 'tool' messages with a tool_call_id.",
        )
    if getattr(msg, "name", None) is not None:
        raise _unsupported(
            f"{at}.name",
            "Message 'name' is not supported: /v1/responses messages carry no participant name.",
        )
    if isinstance(msg, wire.UserMessage) and isinstance(msg.content, list):
        for j, part in enumerate(msg.content):
            if isinstance(part, wire.InputAudioPart):
                raise _unsupported(
                    f"{at}.content[{j}]", "Audio input is not supported by this gateway."
                )
            if isinstance(part, wire.FilePart):
                if part.file.file_id is not None:
                    raise _unsupported(
                        f"{at}.content[{j}].file.file_id",
                        "File ids are not supported (there is no files API); send file_data.",
                    )
                if part.file.file_data is None:
                    raise missing_required_parameter(
                        "A file part needs 'file_data'.",
                        param=f"{at}.content[{j}].file.file_data",
                    )
    if isinstance(msg, wire.AssistantMessage):
        if msg.audio is not None:
            raise _unsupported(f"{at}.audio", "Assistant audio is not supported by this gateway.")
        if msg.function_call is not None:
            raise _unsupported(
                f"{at}.function_call",
                "The legacy assistant 'function_call' is not supported; use 'tool_calls'.",
            )
        if msg.annotations and not isinstance(msg.content, str):
            raise invalid_value(
                "Assistant 'annotations' need a string 'content' to refer to.",
                param=f"{at}.annotations",
            )
        if msg.content is None and not msg.tool_calls and msg.refusal is None:
            raise missing_required_parameter(
                "An assistant message needs 'content', 'refusal' or 'tool_calls'.",
                param=f"{at}.content",
            )
