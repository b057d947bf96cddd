"""Pure mapping: a neutral ``ModelRequest`` → an Open Responses / OpenAI Responses request body.

No I/O. The upstream speaks the same protocol as orgate's clients, so input
items go out as their own wire JSON (``model_dump(mode="json",
exclude_none=True)`` of the protocol models, or a copy of plain dicts) with
these changes only:

- ``id`` is removed from every item but opaque ones (below): ids are orgate's
  (the builder re-creates them), the upstream does not know them and
  ``store`` is false;
- ``reasoning`` items from history marked with the origin that made their
  ``encrypted_content`` (``orgate:origin``, see ``orgate.neutral.items``) are
  sent, without the marker, only when that origin is this deployment's
  (``origin``); to any other upstream the whole item is left out, as the
  anthropic and chat mappings leave out reasoning they cannot read (its
  ``encrypted_content`` means nothing there, and a summary alone is not a
  replayable reasoning item). Unmarked reasoning items (client input, history
  stored before origins were recorded) go as before, except those carrying an
  anthropic thinking envelope, which only go back to the anthropic provider;
- an ``OpaqueItem`` (an upstream's own item from history, see
  ``orgate.neutral.items``) is sent as its raw item, unchanged and with its own
  ``id``, when its origin is this deployment's (``origin``); otherwise it is
  dropped (the engine reports the drop);
- every other item, including namespaced dicts (``openai:...``), passes
  through unchanged — the replay gate decides upstream of this module what may
  be sent.

The body always has ``store: false`` (orgate keeps the state) and, when asked,
``stream: true``. ``include: ["reasoning.encrypted_content"]`` is added for
reasoning deployments so reasoning can be replayed statelessly, and
``message.output_text.logprobs`` (with ``top_logprobs``) when the request asks for
token log probabilities. ``stop`` (only
set by the chat adapter) has no Responses equivalent and is refused with a 400.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from orgate.neutral import ModelRequest, OpaqueItem, TextFormat, Translation
from orgate.neutral.items import reasoning_origin
from orgate.protocol.enums import LOGPROBS_INCLUDE
from orgate.protocol.errors import invalid_request, unsupported_parameter
from orgate.providers.anthropic.envelope import is_anthropic_reasoning
from orgate.providers.plain import plain as _plain


def map_item(item: Any, param: str, origin: str | None = None) -> dict[str, Any] | None:
    """One input item as upstream wire JSON, or None when it is not sent.

    ``origin`` is this deployment's (``origin_of``): the only origin whose opaque
    items, and marked reasoning items, are sent.
    """
    if type(item) is OpaqueItem:
        return dict(item.item) if item.origin == origin else None
    data = _plain(item)
    if not isinstance(data, dict):
        raise invalid_request("input items must be objects", param=param)
    kind = data.get("type")
    if kind == "item_reference":
        raise invalid_request(
            "item_reference must be resolved before the provider call", param=param
        )
    if kind == "reasoning":
        made_by = reasoning_origin(data)
        if made_by is not None:
            if made_by != origin:
                return None
        elif is_anthropic_reasoning(data.get("encrypted_content")):
            return None
    data.pop("id", None)
    return data


def map_input(request: ModelRequest, origin: str | None = None) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for i, item in enumerate(request.input):
        mapped = map_item(item, f"input[{i}]", origin)
        if mapped is not None:
            items.append(mapped)
        elif type(item) is not OpaqueItem:  # reasoning another origin made (opaque: the engine's)
            request.ledger.note(Translation.REASONING_ITEM_DROPPED, f"input[{i}]")
    return items


def map_text_format(fmt: TextFormat | None) -> dict[str, Any] | None:
    """The ``text.format`` object, or None for plain text."""
    if fmt is None or fmt.type == "text":
        return None
    if fmt.type == "json_object":
        return {"type": "json_object"}
    out: dict[str, Any] = {"type": "json_schema", "name": fmt.name or "response"}
    if fmt.description is not None:
        out["description"] = fmt.description
    out["schema"] = fmt.schema if fmt.schema is not None else {}
    if fmt.strict is not None:
        out["strict"] = fmt.strict
    return out


def map_tool_choice(choice: Any) -> Any:
    if choice is None:
        return None
    if isinstance(choice, Enum):
        return choice.value
    if isinstance(choice, str):
        return choice
    return _plain(choice)


_SCALARS = (
    "temperature",
    "top_p",
    "presence_penalty",
    "frequency_penalty",
    "max_output_tokens",
    "max_tool_calls",
    "user",
    "safety_identifier",
    "prompt_cache_key",
    "service_tier",
)


def _tool_fields(request: ModelRequest) -> dict[str, Any]:
    """``tools``, ``parallel_tool_calls`` and ``tool_choice``: none of them without a tool."""
    if not (request.tools or request.hosted_tools):
        return {}
    fields: dict[str, Any] = {"tools": [*(_plain(t) for t in request.tools), *request.hosted_tools]}
    if request.parallel_tool_calls is not None:
        fields["parallel_tool_calls"] = request.parallel_tool_calls
    choice = map_tool_choice(request.tool_choice)
    if choice is not None:
        fields["tool_choice"] = choice
    return fields


def _text(request: ModelRequest) -> dict[str, Any]:
    """The ``text`` object (format and verbosity); empty when neither is asked."""
    text: dict[str, Any] = {}
    fmt = map_text_format(request.text_format)
    if fmt is not None:
        text["format"] = fmt
    if request.verbosity is not None:
        text["verbosity"] = request.verbosity
    return text


def _reasoning(request: ModelRequest) -> dict[str, Any]:
    """The ``reasoning`` object (effort and summary); empty when neither is asked."""
    reasoning: dict[str, Any] = {}
    if request.reasoning_effort is not None:
        reasoning["effort"] = request.reasoning_effort
    if request.reasoning_summary is not None:
        reasoning["summary"] = request.reasoning_summary
    return reasoning


def _include(request: ModelRequest, encrypted_reasoning: bool) -> list[str]:
    include = ["reasoning.encrypted_content"] if encrypted_reasoning else []
    if request.logprobs:
        include.append(LOGPROBS_INCLUDE)
    return include


def build_body(
    request: ModelRequest,
    *,
    stream: bool = True,
    include_encrypted_reasoning: bool = False,
    origin: str | None = None,
) -> dict[str, Any]:
    """The ``/responses`` request body for ``request`` (a dict ready for ``orjson.dumps``).

    ``origin``: the deployment's ``origin_of``; opaque items and marked reasoning
    items of another origin (or of any origin when None) are left out.
    """
    if request.stop:
        raise unsupported_parameter(
            "'stop' is not supported by this model's upstream (openai-responses)",
            param="stop",
        )
    body: dict[str, Any] = {"model": request.model, "input": map_input(request, origin)}
    if request.instructions:
        body["instructions"] = request.instructions
    body.update(_tool_fields(request))
    for name in _SCALARS:
        value = getattr(request, name)
        if value is not None:
            body[name] = value
    # the key order is the bytes' order: text, reasoning, top_logprobs, include
    text = _text(request)
    if text:
        body["text"] = text
    reasoning = _reasoning(request)
    if reasoning:
        body["reasoning"] = reasoning
    if request.logprobs and request.top_logprobs:
        body["top_logprobs"] = request.top_logprobs
    include = _include(request, include_encrypted_reasoning)
    if include:
        body["include"] = include
    body["store"] = False
    if stream:
        body["stream"] = True
    return body
