"""The one translation between the chat wire models and the Responses protocol.

- ``to_create_response_body``: a validated ``ChatCompletionRequest`` →
  ``CreateResponseBody`` (``stop`` and ``user`` ride along as the engine's
  extension fields of the same names).
- ``to_chat_completion``: a final Responses ``response`` object (wire JSON) →
  ``ChatCompletion``.
- Small shared mappings used by the stream translator: ids, finish reason,
  usage and errors.

Pure functions, no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, assert_never

from pydantic import ValidationError

from orgate.legacy_chat import wire
from orgate.protocol.enums import LOGPROBS_INCLUDE
from orgate.protocol.errors import (
    AUTHENTICATION,
    INVALID_REQUEST,
    NOT_FOUND,
    PERMISSION,
    RATE_LIMIT,
    ApiError,
    from_validation_error,
)
from orgate.protocol.request import CreateResponseBody

# --------------------------------------------------------------------------- request


def to_create_response_body(req: wire.ChatCompletionRequest) -> CreateResponseBody:
    """Translate a validated chat request (see ``validate.parse_request``)."""
    return translate_request(req)[0]


def translate_request(req: wire.ChatCompletionRequest) -> tuple[CreateResponseBody, ParamMap]:
    """The ``CreateResponseBody`` and the map of its params back to chat params."""
    items, sources = _input_items(req.messages)
    max_tokens = (
        req.max_completion_tokens if req.max_completion_tokens is not None else req.max_tokens
    )
    params = ParamMap(
        sources,
        "max_tokens" if req.max_tokens is not None else "max_completion_tokens",
    )
    try:
        parsed = CreateResponseBody.model_validate(_request_body(req, items, max_tokens))
    except ValidationError as exc:
        err = from_validation_error(exc)
        err.param = params.to_chat(err.param)
        raise err from None
    if max_tokens is not None:
        parsed.max_output_tokens = max_tokens  # no re-validation: below 16 is fine here
    return parsed, params


def _input_items(messages: list[wire.ChatMessage]) -> tuple[list[dict[str, Any]], list[str]]:
    """The Responses input items of the chat messages, and the chat path of each (for error
    params: a tool call is its own item)."""
    items: list[dict[str, Any]] = []
    sources: list[str] = []
    for i, msg in enumerate(messages):
        calls = 0
        for item in _message_items(msg):
            items.append(item)
            if item["type"] == "function_call":
                sources.append(f"messages[{i}].tool_calls[{calls}]")
                calls += 1
            else:
                sources.append(f"messages[{i}]")
    return items, sources


# Chat fields sent under the same name when set, before and after ``max_output_tokens``.
_SAME_NAME = (
    "temperature",
    "top_p",
    "presence_penalty",
    "frequency_penalty",
    "parallel_tool_calls",
    "metadata",
    "prompt_cache_key",
    "service_tier",
)
# ``user`` is an extension field, passed to ModelRequest.user.
_SAME_NAME_AFTER = ("safety_identifier", "user")


def _request_body(
    req: wire.ChatCompletionRequest, items: list[dict[str, Any]], max_tokens: int | None
) -> dict[str, Any]:
    """The ``/v1/responses`` body, as JSON, before validation."""
    # Chat Completions does not store by default; /v1/responses does.
    body: dict[str, Any] = {
        "model": req.model,
        "input": items,
        "store": req.store if req.store is not None else False,
    }
    if req.stream:
        body["stream"] = True
    _copy_set(req, _SAME_NAME, body)
    if max_tokens is not None:
        # /v1/responses wants at least 16; chat allows 1 (health checks send it): validated as
        # 16, then set to the client's value (translate_request).
        body["max_output_tokens"] = max(max_tokens, RESPONSES_MIN_OUTPUT_TOKENS)
    _copy_set(req, _SAME_NAME_AFTER, body)
    if req.reasoning_effort is not None:
        # "minimal" is the chat name of the lowest non-zero effort; Responses has "low".
        effort = "low" if req.reasoning_effort == "minimal" else req.reasoning_effort
        body["reasoning"] = {"effort": effort}
    body.update(_text_fields(req))
    body.update(_tool_fields(req))
    body.update(_logprob_fields(req))
    body.update(_stop_field(req.stop))
    return body


def _copy_set(source: Any, names: tuple[str, ...], into: dict[str, Any]) -> None:
    """Copy ``source``'s attributes ``names`` that are set (not ``None``) under the same names."""
    for name in names:
        value = getattr(source, name)
        if value is not None:
            into[name] = value


def _text_fields(req: wire.ChatCompletionRequest) -> dict[str, Any]:
    text: dict[str, Any] = {}
    if req.response_format is not None:
        text["format"] = _text_format(req.response_format)
    if req.verbosity is not None:
        text["verbosity"] = req.verbosity
    return {"text": text} if text else {}


def _tool_fields(req: wire.ChatCompletionRequest) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    if req.tools is not None:
        fields["tools"] = [_tool(t) for t in req.tools]
    if req.tool_choice is not None:
        fields["tool_choice"] = _tool_choice(req.tool_choice)
    return fields


def _logprob_fields(req: wire.ChatCompletionRequest) -> dict[str, Any]:
    if not req.logprobs:
        return {}
    if req.top_logprobs is None:
        return {"include": [LOGPROBS_INCLUDE]}
    return {"include": [LOGPROBS_INCLUDE], "top_logprobs": req.top_logprobs}


def _stop_field(stop: str | list[str] | None) -> dict[str, Any]:
    """``stop`` as a list (an extension field, passed to ModelRequest.stop); none when empty."""
    if stop is None:
        return {}
    stops = [stop] if isinstance(stop, str) else list(stop)
    return {"stop": stops} if stops else {}


#: The smallest ``max_output_tokens`` ``/v1/responses`` accepts (chat's ``max_tokens`` may be less).
RESPONSES_MIN_OUTPUT_TOKENS = 16

_INDEXED = re.compile(r"^(input|tools)\[(\d+)\](.*)$")

# Field renames inside one translated item, by item kind: Responses → chat.
_ITEM_FIELDS = {
    "call": {"arguments": "function.arguments", "name": "function.name", "call_id": "id"},
    "output": {"call_id": "tool_call_id", "output": "content"},
}
_TOP_LEVEL = {
    "text.format.schema": "response_format.json_schema.schema",
    "text.format.name": "response_format.json_schema.name",
    "text.format.strict": "response_format.json_schema.strict",
    "text.format.description": "response_format.json_schema.description",
    "text.format": "response_format",
    "text.verbosity": "verbosity",
    "text": "response_format",
    "reasoning.effort": "reasoning_effort",
    "reasoning": "reasoning_effort",
    "tool_choice.name": "tool_choice.function.name",
    "tool_choice.mode": "tool_choice.allowed_tools.mode",
    "input": "messages",
    "include": "logprobs",
}
# ``allowed_tools`` is flat in Responses (``tool_choice.tools[0].name``) and nested in chat
# (``tool_choice.allowed_tools.tools[0].function.name``).
_ALLOWED_TOOL = re.compile(r"^tool_choice\.tools(?:\[(\d+)\](?:\.(\w+))?)?(.*)$")


@dataclass(frozen=True, slots=True)
class ParamMap:
    """Maps a ``/v1/responses`` error ``param`` back to the chat field it came from."""

    sources: list[str]  # chat path of each input item
    max_tokens: str  # which chat field set max_output_tokens

    def to_chat(self, param: str | None) -> str | None:
        if not param:
            return param
        if param == "max_output_tokens":
            return self.max_tokens
        allowed = _ALLOWED_TOOL.match(param)
        if allowed is not None:
            return _allowed_tool_param(*allowed.groups())
        m = _INDEXED.match(param)
        if m is None:
            return _top_level_param(param)
        kind, index, rest = m.group(1), int(m.group(2)), m.group(3)
        if kind == "tools":
            return _tool_param(param, index, rest)
        return self._item_param(index, rest)

    def _item_param(self, index: int, rest: str) -> str:
        """``input[index]<rest>`` → the chat message (or tool call) the item came from."""
        if index >= len(self.sources):
            return "messages"
        source = self.sources[index]
        field = rest.removeprefix(".")
        head, dot, tail = field.partition(".")
        name, bracket, after = head.partition("[")
        item_kind = "call" if ".tool_calls[" in source else "output"
        renamed = _ITEM_FIELDS[item_kind].get(name)
        if renamed is not None:
            field = renamed + bracket + after + dot + tail
        return f"{source}.{field}" if field else source


def _allowed_tool_param(index: str | None, field: str | None, rest: str) -> str:
    """``tool_choice.tools[i].name`` (flat) →
    ``tool_choice.allowed_tools.tools[i].function.name``."""
    chat = "tool_choice.allowed_tools.tools"
    if index is not None:
        chat += f"[{index}]"
        if field is not None:
            chat += f".{field}" if field == "type" else f".function.{field}"
    return chat + rest


def _top_level_param(param: str) -> str:
    for prefix, chat in _TOP_LEVEL.items():
        if param == prefix or param.startswith(prefix + "."):
            return chat + param[len(prefix) :]
    return param


def _tool_param(param: str, index: int, rest: str) -> str:
    """``tools[i].<field>`` → ``tools[i].function.<field>`` (``type`` stays where it is)."""
    field = rest.removeprefix(".")
    if field and field != "type":
        return f"tools[{index}].function.{field}"
    return param


def _text(content: str | list[wire.TextPart]) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    return [{"type": "input_text", "text": p.text} for p in content]


def _user_part(part: wire.UserPart) -> dict[str, Any]:
    match part:
        case wire.TextPart():
            return {"type": "input_text", "text": part.text}
        case wire.ImagePart():
            image: dict[str, Any] = {"type": "input_image", "image_url": part.image_url.url}
            image["detail"] = part.image_url.detail or "auto"
            return image
        case wire.FilePart():
            file: dict[str, Any] = {"type": "input_file", "file_data": part.file.file_data}
            if part.file.filename is not None:
                file["filename"] = part.file.filename
            return file
        case wire.InputAudioPart():  # refused by validate.check_supported
            raise AssertionError("input_audio reached translation")
        case _:
            assert_never(part)


def _message_items(msg: wire.ChatMessage) -> list[dict[str, Any]]:
    match msg:
        case wire.SystemMessage() | wire.DeveloperMessage():
            return [{"type": "message", "role": msg.role, "content": _text(msg.content)}]
        case wire.UserMessage():
            content: Any = (
                msg.content
                if isinstance(msg.content, str)
                else [_user_part(p) for p in msg.content]
            )
            return [{"type": "message", "role": "user", "content": content}]
        case wire.AssistantMessage():
            return _assistant_items(msg)
        case wire.ToolMessage():
            output = (
                msg.content
                if isinstance(msg.content, str)
                else "".join(p.text for p in msg.content)
            )
            return [{"type": "function_call_output", "call_id": msg.tool_call_id, "output": output}]
        case wire.FunctionMessage():  # refused by validate.check_supported
            raise AssertionError("function message reached translation")
        case _:
            assert_never(msg)


def _assistant_items(msg: wire.AssistantMessage) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    if isinstance(msg.content, str):
        if msg.content or not msg.tool_calls:
            annotations = [
                {
                    "type": "url_citation",
                    "url": a.url_citation.url,
                    "title": a.url_citation.title,
                    "start_index": a.url_citation.start_index,
                    "end_index": a.url_citation.end_index,
                }
                for a in msg.annotations or ()
            ]
            parts.append({"type": "output_text", "text": msg.content, "annotations": annotations})
    elif msg.content is not None:
        for p in msg.content:
            if isinstance(p, wire.TextPart):
                parts.append({"type": "output_text", "text": p.text, "annotations": []})
            else:
                parts.append({"type": "refusal", "refusal": p.refusal})
    if msg.refusal is not None:
        parts.append({"type": "refusal", "refusal": msg.refusal})
    if parts:
        items.append({"type": "message", "role": "assistant", "content": parts})
    for call in msg.tool_calls or ():
        items.append(
            {
                "type": "function_call",
                "call_id": call.id,
                "name": call.function.name,
                "arguments": call.function.arguments,
            }
        )
    return items


def _text_format(fmt: wire.ResponseFormat) -> dict[str, Any]:
    match fmt:
        case wire.TextFormat():
            return {"type": "text"}
        case wire.JsonObjectFormat():
            return {"type": "json_object"}
        case wire.JsonSchemaFormat():
            spec = fmt.json_schema
            out: dict[str, Any] = {"type": "json_schema", "name": spec.name}
            if spec.description is not None:
                out["description"] = spec.description
            if spec.schema_ is not None:
                out["schema"] = spec.schema_
            if spec.strict is not None:
                out["strict"] = spec.strict
            return out
        case _:
            assert_never(fmt)


def _tool(tool: wire.FunctionTool) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "function", "name": tool.function.name}
    _copy_set(tool.function, ("description", "parameters", "strict"), out)
    return out


def _tool_choice(choice: wire.ToolChoice) -> Any:
    match choice:
        case str():
            return choice
        case wire.NamedToolChoice():
            return {"type": "function", "name": choice.function.name}
        case wire.AllowedToolsChoice():
            return {
                "type": "allowed_tools",
                "mode": choice.allowed_tools.mode,
                "tools": [
                    {"type": "function", "name": t.function.name}
                    for t in choice.allowed_tools.tools
                ],
            }
        case _:
            assert_never(choice)


# --------------------------------------------------------------------------- response


def completion_id(response_id: str) -> str:
    """``resp_abc`` → ``chatcmpl-abc``: one id both APIs can be traced by."""
    return "chatcmpl-" + response_id.removeprefix("resp_")


def finish_reason(response: dict[str, Any], *, saw_tool_call: bool) -> wire.FinishReason:
    """The chat finish reason of a final Responses ``response`` object."""
    if response.get("status") == "incomplete":
        reason = (response.get("incomplete_details") or {}).get("reason")
        if reason == "content_filter":
            return "content_filter"
        return "length"
    return "tool_calls" if saw_tool_call else "stop"


def usage(response: dict[str, Any]) -> wire.CompletionUsage | None:
    u = response.get("usage")
    if not u:
        return None
    inp = int(u.get("input_tokens") or 0)
    out = int(u.get("output_tokens") or 0)
    return wire.CompletionUsage(
        prompt_tokens=inp,
        completion_tokens=out,
        total_tokens=int(u.get("total_tokens") or inp + out),
        prompt_tokens_details=wire.PromptTokensDetails(
            cached_tokens=int((u.get("input_tokens_details") or {}).get("cached_tokens") or 0)
        ),
        completion_tokens_details=wire.CompletionTokensDetails(
            reasoning_tokens=int(
                (u.get("output_tokens_details") or {}).get("reasoning_tokens") or 0
            )
        ),
    )


def to_chat_completion(response: dict[str, Any], *, logprobs: bool = False) -> wire.ChatCompletion:
    """A completed or incomplete Responses ``response`` → ``chat.completion``.

    Assistant message text parts are concatenated into ``content`` (null when
    there is none), refusals into ``refusal``; ``function_call`` items become
    ``tool_calls``. Reasoning and provider-specific items have no chat field.
    ``logprobs`` (asked for): the text parts' token log probabilities, in order.
    """
    tokens: list[dict[str, Any]] = []
    texts: list[str] = []
    refusals: list[str] = []
    annotations: list[wire.AnnotationOut] = []
    calls: list[wire.ToolCallOut] = []
    for item in response.get("output") or ():
        kind = item.get("type")
        if kind == "message" and item.get("role", "assistant") == "assistant":
            for part in item.get("content") or ():
                if part.get("type") == "output_text":
                    offset = sum(len(t) for t in texts)
                    annotations.extend(_annotations(part, offset))
                    texts.append(part.get("text", ""))
                    tokens += part.get("logprobs") or ()
                elif part.get("type") == "refusal":
                    refusals.append(part.get("refusal", ""))
        elif kind == "function_call":
            calls.append(
                wire.ToolCallOut(
                    id=item["call_id"],
                    function=wire.FunctionCallOut(
                        name=item["name"], arguments=item.get("arguments", "")
                    ),
                )
            )
    message = wire.AssistantMessageOut(
        content="".join(texts) if texts else None,
        refusal="".join(refusals) if refusals else None,
        tool_calls=calls or None,
        annotations=annotations,
    )
    return wire.ChatCompletion(
        id=completion_id(response["id"]),
        created=int(response.get("created_at") or 0),
        model=response.get("model", ""),
        choices=[
            wire.Choice(
                message=message,
                finish_reason=finish_reason(response, saw_tool_call=bool(calls)),
                logprobs=choice_logprobs(tokens) if logprobs else None,
            )
        ],
        usage=usage(response),
        service_tier=response.get("service_tier"),
    )


def choice_logprobs(tokens: list[dict[str, Any]]) -> wire.ChoiceLogprobs:
    """A choice's ``logprobs`` from Responses ``LogProb`` dicts (the same fields as chat's)."""
    return wire.ChoiceLogprobs(content=[wire.TokenLogprobOut.model_validate(t) for t in tokens])


def _annotations(part: dict[str, Any], offset: int) -> list[wire.AnnotationOut]:
    out = []
    for a in part.get("annotations") or ():
        if a.get("type") == "url_citation":
            out.append(
                wire.AnnotationOut(
                    url_citation=wire.UrlCitation(
                        start_index=int(a.get("start_index", 0)) + offset,
                        end_index=int(a.get("end_index", 0)) + offset,
                        title=a.get("title", ""),
                        url=a.get("url", ""),
                    )
                )
            )
    return out


# --------------------------------------------------------------------------- errors

_STATUS_BY_TYPE = {
    INVALID_REQUEST: 400,
    AUTHENTICATION: 401,
    PERMISSION: 403,
    NOT_FOUND: 404,
    RATE_LIMIT: 429,
}


def error_from_payload(payload: dict[str, Any]) -> ApiError:
    """An ``ApiError`` from a stream ``error`` event's payload or a failed response's ``error``."""
    kind = str(payload.get("type") or "server_error")
    headers = payload.get("headers") or {}
    return ApiError(
        _STATUS_BY_TYPE.get(kind, 500),
        str(payload.get("message") or "The model failed to produce a response."),
        type=kind,
        code=payload.get("code"),
        param=payload.get("param"),
        headers={str(k): str(v) for k, v in headers.items()},
    )


def error_envelope(err: ApiError) -> dict[str, Any]:
    """``{"error": {...}}`` in the chat (OpenAI) shape."""
    return wire.ErrorEnvelope(
        error=wire.ErrorBody(message=err.message, type=err.type, param=err.param, code=err.code)
    ).model_dump(mode="json")
