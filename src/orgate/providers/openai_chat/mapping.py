"""Pure mapping: a neutral ``ModelRequest`` → an OpenAI Chat Completions request body.

No I/O. Input items are read by attribute (``item.type``, ``item.role``,
``item.content``...), so the ``orgate.protocol`` Pydantic models, output
models replayed from history (``Message``, ``FunctionCall``) and plain dicts
all work. Every unset field is omitted: many OpenAI-compatible servers reject
unknown or ``null`` fields.

Rules:

- ``instructions`` first, as a system message; ``developer`` messages become
  ``system`` unless ``ChatOptions.developer_role`` says otherwise.
- Assistant ``output_text`` / ``refusal`` parts join into one content string;
  ``function_call`` items become ``tool_calls`` of one assistant message
  (consecutive calls merge, also into a directly preceding assistant message).
- User content: text-only parts join into one string (``ChatOptions.content_format``
  ``auto``, the default: many servers' chat templates concatenate content and fail on a
  list); parts are sent only where an image or file needs them (``parts``: always;
  ``string``: never, such content is refused with a 400).
- ``function_call_output`` → ``{"role": "tool", ...}``; array outputs become a
  string when text-only, else content parts.
- ``reasoning`` items are dropped (not portable to chat), and so are opaque
  items (another upstream's own items from history, ``orgate.neutral.items``;
  the engine reports the drop) — as if they were not there.
- ``input_file`` with ``file_data`` → a ``{"type": "file", "file": {"file_data", "filename"}}``
  part (OpenAI's chat file input; a bare base64 ``file_data`` becomes a data URL, its media
  type from the file name, else PDF). Chat has no file URLs: ``file_url`` is refused with a
  400 naming the offending ``input`` path, and so is ``input_video``.
"""

from __future__ import annotations

import mimetypes
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any
from urllib.parse import urlsplit

from orgate.neutral import (
    EXTENSION_ITEM_TYPE,
    Deployment,
    Ledger,
    ModelRequest,
    TextFormat,
    Translation,
)
from orgate.protocol.errors import ApiError, ErrorCode, invalid_request
from orgate.providers.custom_tools import functions_only
from orgate.providers.openai_chat.message_memo import MEMO, Mapping
from orgate.providers.plain import allowed_tools, plain
from orgate.providers.plain import get_field as _get


@dataclass(slots=True, frozen=True)
class ChatOptions:
    """Per-deployment quirks of an OpenAI-compatible upstream (``[models.chat]``)."""

    # "max_completion_tokens" for OpenAI (its reasoning models refuse "max_tokens") and newer
    # servers
    max_tokens_field: str = "max_tokens"
    developer_role: str = "system"  # "developer" for upstreams that accept it
    include_usage: bool = True  # ask for the usage chunk when streaming
    # "auto": text-only user content as one string (what every server takes; many chat
    # templates concatenate content and fail on a list), parts only where an image or file
    # needs them. "parts": always parts. "string": always a string (images/files refused).
    content_format: str = "auto"
    server: str = "auto"  # the server software (providers/servers.py); read by the configuration

    @classmethod
    def for_deployment(cls, deployment: Deployment) -> ChatOptions:
        """The deployment's configured options; ``max_tokens_field = "auto"`` (the default) is
        ``max_completion_tokens`` for OpenAI's and Azure OpenAI's hosts, else ``max_tokens``."""
        options = dict(deployment.options)
        if options.get("max_tokens_field", "auto") == "auto":
            # OpenAI deprecated max_tokens, and its reasoning models refuse it
            host = (urlsplit(deployment.base_url).hostname or "").lower()
            openai = host == "api.openai.com" or host.endswith(".openai.azure.com")
            options["max_tokens_field"] = "max_completion_tokens" if openai else "max_tokens"
        return cls(**options)


def _image_part(part: Any, param: str) -> dict[str, Any]:
    url = _get(part, "image_url")
    if not url:
        file_id = _get(part, "file_id")
        what = "file_id images are" if file_id else "an input_image without image_url is"
        raise ApiError.of(
            ErrorCode.UNSUPPORTED_CONTENT,
            f"{what} not supported by this model's upstream; send image_url (URL or data URL)",
            param=f"{param}.image_url",
        )
    image: dict[str, Any] = {"url": url}
    detail = _get(part, "detail")
    if detail:
        image["detail"] = detail
    return {"type": "image_url", "image_url": image}


def _file_part(part: Any, param: str) -> dict[str, Any]:
    data = _get(part, "file_data")
    filename = _get(part, "filename")
    if not data:
        url = bool(_get(part, "file_url"))
        what = "an input_file with file_url is" if url else "an input_file without file_data is"
        raise ApiError.of(
            ErrorCode.UNSUPPORTED_CONTENT,
            f"{what} not supported by this model's upstream (openai-chat); send "
            "file_data (base64 or a data URL)",
            param=f"{param}.file_url" if url else f"{param}.file_data",
        )
    if not data.startswith("data:"):
        media = (mimetypes.guess_type(filename)[0] if filename else None) or "application/pdf"
        data = f"data:{media};base64,{data}"
    file: dict[str, Any] = {"file_data": data}
    if filename:
        file["filename"] = filename
    return {"type": "file", "file": file}


def _unsupported(kind: str, part: str) -> Exception:
    """400 for a content part of a type this upstream cannot take; ``part``: its path."""
    return ApiError.of(
        ErrorCode.UNSUPPORTED_CONTENT,
        f"content of type '{kind}' is not supported by this model's upstream (openai-chat)",
        param=f"{part}.type",
    )


def _user_content(
    content: Any, param: str, content_format: str = "parts"
) -> str | list[dict[str, Any]]:
    """User content: a string stays a string; parts become chat parts, joined into one string
    when text-only and ``content_format`` is ``auto`` (or always, for ``string``)."""
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for j, part in enumerate(content or ()):
        kind = _get(part, "type")
        where = f"{param}.content[{j}]"
        if kind == "input_text" or kind == "output_text":
            parts.append({"type": "text", "text": _get(part, "text", "")})
        elif kind == "input_image":
            parts.append(_image_part(part, where))
        elif kind == "input_file":
            parts.append(_file_part(part, where))
        else:
            raise _unsupported(str(kind), where)
    if content_format == "parts":
        return parts
    text_only = all(p["type"] == "text" for p in parts)
    if text_only:
        return "".join(p["text"] for p in parts)
    if content_format == "string":
        first = next(j for j, p in enumerate(parts) if p["type"] != "text")
        raise ApiError.of(
            ErrorCode.UNSUPPORTED_CONTENT,
            "this model's upstream takes text-only message content (chat.content_format = "
            f"\"string\"); content of type '{_get(list(content)[first], 'type')}' cannot be sent",
            param=f"{param}.content[{first}].type",
        )
    return parts


def _text_content(content: Any, param: str) -> str:
    """System / developer / assistant content as one string (chat servers expect strings there)."""
    if isinstance(content, str):
        return content
    pieces: list[str] = []
    for j, part in enumerate(content or ()):
        kind = _get(part, "type")
        if kind in ("input_text", "output_text", "text", "summary_text", "reasoning_text"):
            pieces.append(_get(part, "text", ""))
        elif kind == "refusal":
            pieces.append(_get(part, "refusal", ""))
        else:
            raise _unsupported(str(kind), f"{param}.content[{j}]")
    return "".join(pieces)


def _tool_output(output: Any, param: str, content_format: str) -> str | list[dict[str, Any]]:
    """A tool message's content: a string unless an image or file needs parts (whatever the
    format: servers that take parts in tool messages are fewer still)."""
    if isinstance(output, str):
        return output
    if output is None:
        return ""
    where = param.replace(".content", ".output")
    return _user_content(output, where, "string" if content_format == "string" else "auto")


# Input items chat has no place for: left out, each with its ledger entry.
_NOT_SENT = {
    "reasoning": Translation.REASONING_ITEM_DROPPED,
    "compaction": Translation.COMPACTION_ITEM_DROPPED,
    "compaction_summary": Translation.COMPACTION_ITEM_DROPPED,
}


def map_messages(request: ModelRequest, options: ChatOptions) -> list[dict[str, Any]]:
    """The chat ``messages`` array for the request's instructions and input items."""
    messages: list[dict[str, Any]] = []
    if request.instructions:
        messages.append({"role": "system", "content": request.instructions})
    items, ledger = request.input, request.ledger
    kept = request.history_length  # the items whose mapping may be kept (checkpointed)
    if not kept:  # no history: nothing to resume or keep
        mapping = Mapping()
        for i, item in enumerate(items):
            _map_item(item, i, mapping, options, ledger)
        messages.extend(mapping.messages)
        return messages
    quirks = (options.content_format, options.developer_role)  # all the items' mapping reads
    mapping = MEMO.resume(items, quirks)  # a history's messages, mapped on an earlier turn
    for _, code, path in mapping.notes:
        ledger.note(code, path)
    for i in range(len(mapping.items), len(items)):
        item = items[i]
        _map_item(item, i, mapping, options, ledger)
        if i < kept:
            mapping.items.append(item)
            mapping.checkpoint()
    MEMO.keep(mapping, quirks, kept)
    messages.extend(mapping.messages)
    return messages


def _map_item(item: Any, i: int, mapping: Mapping, options: ChatOptions, ledger: Ledger) -> None:
    """Map one input item onto ``mapping``: a new message, a call joining the open assistant
    message, or nothing (with a ledger entry, also kept with the mapping)."""
    messages = mapping.messages
    param = f"input[{i}]"
    kind = _get(item, "type")
    if kind == EXTENSION_ITEM_TYPE:
        return
    if kind == "function_call":
        call = {
            "id": _get(item, "call_id"),
            "type": "function",
            "function": {
                "name": _get(item, "name"),
                "arguments": _get(item, "arguments") or "",
            },
        }
        if mapping.open_assistant is None:
            mapping.open_assistant = {"role": "assistant", "tool_calls": [call]}
            messages.append(mapping.open_assistant)
        else:
            mapping.open_assistant.setdefault("tool_calls", []).append(call)
        return
    mapping.open_assistant = None
    if kind == "function_call_output":
        messages.append(
            {
                "role": "tool",
                "tool_call_id": _get(item, "call_id"),
                "content": _tool_output(
                    _get(item, "output"), f"{param}.content", options.content_format
                ),
            }
        )
    elif kind in _NOT_SENT:
        ledger.note(_NOT_SENT[kind], param)
        mapping.notes.append((i, _NOT_SENT[kind], param))
    elif kind == "item_reference":
        raise invalid_request(
            "item_reference must be resolved before the provider call", param=param
        )
    # ``role`` read on messages only: a Pydantic item's missing attribute is slow to ask
    # for, and this runs over every item of a conversation
    elif kind in ("message", None) and (role := _get(item, "role")) is not None:
        content = _get(item, "content")
        if role == "user":
            user = _user_content(content, param, options.content_format)
            messages.append({"role": "user", "content": user})
        elif role == "assistant":
            mapping.open_assistant = {
                "role": "assistant",
                "content": _text_content(content, param),
            }
            messages.append(mapping.open_assistant)
        elif role == "system":
            messages.append({"role": "system", "content": _text_content(content, param)})
        elif role == "developer":
            messages.append(
                {"role": options.developer_role, "content": _text_content(content, param)}
            )
            if options.developer_role == "system":
                ledger.note(Translation.DEVELOPER_AS_SYSTEM, param)
                mapping.notes.append((i, Translation.DEVELOPER_AS_SYSTEM, param))
        else:
            raise invalid_request(f"unsupported message role '{role}'", param=f"{param}.role")
    else:
        raise ApiError.of(
            ErrorCode.UNSUPPORTED_ITEM,
            f"input items of type '{kind}' are not supported by this model's "
            "upstream (openai-chat)",
            param=param,
        )


def _tool(tool: Any) -> dict[str, Any]:
    kind = _get(tool, "type", "function")
    if kind != "function":
        raise ApiError.of(
            ErrorCode.UNSUPPORTED_TOOL,
            f"tools of type '{kind}' are not supported by this model's upstream (openai-chat)",
            param="tools",
        )
    function: dict[str, Any] = {"name": _get(tool, "name")}
    description = _get(tool, "description")
    if description is not None:
        function["description"] = description
    parameters = _get(tool, "parameters")
    if parameters is not None:
        function["parameters"] = plain(parameters, exclude_none=False)
    strict = _get(tool, "strict")
    if strict is not None:
        function["strict"] = strict
    return {"type": "function", "function": function}


def _named(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name}}


Choice = tuple[list[Any], Any]  # (the tools sent, the tool_choice or None)


def _function_choice(choice: Any, tools: list[Any]) -> Choice:
    return tools, _named(_get(choice, "name"))


def _allowed_tools_choice(choice: Any, tools: list[Any]) -> Choice:
    """Only the allowed tools are sent, with the mode; ``required`` of one tool names it."""
    tools, mode = allowed_tools(choice, tools)
    if len(tools) == 1 and mode == "required":
        return tools, _named(_get(tools[0], "name"))
    return tools, mode


_CHOICES: dict[Any, Callable[[Any, list[Any]], Choice]] = {
    "function": _function_choice,
    "allowed_tools": _allowed_tools_choice,
}


def _map_choice(choice: Any, tools: list[Any]) -> Choice:
    if choice is None:
        return tools, None
    if isinstance(choice, Enum):
        return tools, choice.value
    if isinstance(choice, str):
        return tools, choice
    kind = _get(choice, "type")
    mapper = _CHOICES.get(kind)
    if mapper is None:
        raise invalid_request(
            f"tool_choice of type '{kind}' is not supported by this model's upstream",
            param="tool_choice",
        )
    return mapper(choice, tools)


def map_tools(request: ModelRequest, body: dict[str, Any]) -> None:
    """Set ``tools``, ``tool_choice`` and ``parallel_tool_calls`` on ``body``."""
    tools, mapped_choice = _map_choice(request.tool_choice, request.tools)
    if not tools:
        return
    if tools is not request.tools:
        request.ledger.note(Translation.ALLOWED_TOOLS_AS_SUBSET, "tool_choice")
    body["tools"] = [_tool(t) for t in tools]
    if request.parallel_tool_calls is not None:
        body["parallel_tool_calls"] = request.parallel_tool_calls
    if mapped_choice is not None:
        body["tool_choice"] = mapped_choice


def map_response_format(fmt: TextFormat | None) -> dict[str, Any] | None:
    """The ``response_format`` for ``fmt`` (None for plain text, or for a dialect that sends
    the schema in a body field instead: ``map_schema_fields``)."""
    if fmt is None or fmt.type == "text":
        return None
    if fmt.type == "json_object":
        return {"type": "json_object"}
    if fmt.dialect == "json_object_schema":  # llama-cpp-python's and llama.cpp's grammar
        return {"type": "json_object", "schema": fmt.schema or {"type": "object"}}
    if fmt.dialect not in (None, "json_schema"):
        return None
    schema: dict[str, Any] = {"name": fmt.name or "response"}
    if fmt.description is not None:
        schema["description"] = fmt.description
    if fmt.schema is not None:
        schema["schema"] = fmt.schema
    if fmt.strict is not None:
        schema["strict"] = fmt.strict
    return {"type": "json_schema", "json_schema": schema}


def _note_settings(request: ModelRequest) -> None:
    """The ledger entries of settings chat has no field of its own for."""
    ledger = request.ledger
    if request.user is None and request.safety_identifier is not None:
        ledger.note(Translation.SAFETY_IDENTIFIER_AS_USER, "safety_identifier")
    if request.max_tool_calls is not None:
        ledger.note(Translation.FIELD_DROPPED, "max_tool_calls", str(request.max_tool_calls))
    if request.reasoning_summary is not None:
        ledger.note(Translation.FIELD_DROPPED, "reasoning.summary", request.reasoning_summary)


def map_schema_fields(fmt: TextFormat, body: dict[str, Any]) -> None:
    """The body fields of the dialects that are not a ``response_format`` (vLLM's guided
    decoding, llama-server's ``json_schema``)."""
    if fmt.type != "json_schema" or fmt.schema is None:
        return
    if fmt.dialect == "guided_json":
        body["guided_json"] = fmt.schema
    elif fmt.dialect == "structured_outputs":
        body["structured_outputs"] = {"json": fmt.schema}
    elif fmt.dialect == "json_schema_field":
        body["json_schema"] = fmt.schema


def build_body(
    request: ModelRequest, *, stream: bool = True, options: ChatOptions | None = None
) -> dict[str, Any]:
    """The Chat Completions request body for ``request`` (a dict ready for ``orjson.dumps``)."""
    options = options or ChatOptions()
    request = functions_only(request)  # custom tools: functions with one string argument
    body: dict[str, Any] = {"model": request.model, "messages": map_messages(request, options)}
    map_tools(request, body)
    for name in (
        "temperature",
        "top_p",
        "presence_penalty",
        "frequency_penalty",
        "verbosity",
        "service_tier",
    ):
        value = getattr(request, name)
        if value is not None:
            body[name] = value
    # Chat servers know ``user``; a safety identifier stands in for it when no ``user`` is given.
    user = request.user or request.safety_identifier
    if user is not None:
        body["user"] = user
    if (
        request.safety_identifier is not None
        or request.max_tool_calls is not None
        or request.reasoning_summary is not None
    ):
        _note_settings(request)
    if request.max_output_tokens is not None:
        body[options.max_tokens_field] = request.max_output_tokens
    response_format = map_response_format(request.text_format)
    if response_format is not None:
        body["response_format"] = response_format
    if request.text_format is not None and request.text_format.dialect is not None:
        map_schema_fields(request.text_format, body)
        request.ledger.note(
            Translation.JSON_SCHEMA_IN_DIALECT, "text.format", request.text_format.dialect
        )
    if request.stop:
        body["stop"] = list(request.stop)
    if request.reasoning_effort is not None:
        body["reasoning_effort"] = request.reasoning_effort
    if request.prompt_cache_key is not None:
        body["prompt_cache_key"] = request.prompt_cache_key
    if request.logprobs:
        body["logprobs"] = True
        if request.top_logprobs:
            body["top_logprobs"] = request.top_logprobs
    if stream:
        body["stream"] = True
        if options.include_usage:
            body["stream_options"] = {"include_usage": True}
    return body
