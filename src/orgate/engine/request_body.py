"""What a ``POST /v1/responses`` body may hold, and what its settings ask for.

Owns the request-level rules: parsing a JSON body into ``CreateResponseBody``, which fields
are honoured or refused (never dropped silently), what the routed deployment can take
(images, tools, log probabilities, reasoning options), a string ``input`` as a user message,
and ``text.format`` as the provider contract's ``TextFormat`` (a ``$ref`` cycle refused).
No I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from pydantic import ValidationError

from orgate.engine.create_options import FIELDS as CREATE_FIELDS
from orgate.neutral import Deployment, TextFormat
from orgate.protocol import CreateResponseBody, HostedToolParam, UserMessageItemParam
from orgate.protocol.enums import LOGPROBS_INCLUDE
from orgate.protocol.errors import (
    ApiError,
    ErrorCode,
    from_validation_error,
    invalid_type,
    missing_required_parameter,
    not_an_object,
    unknown_parameter,
    unsupported_parameter,
)

if TYPE_CHECKING:
    from orgate.protocol.items import InputParam

# Top-level fields orgate accepts beyond the spec (extensions; OpenAI's create fields are read by
# engine/create_options.py). Anything else unknown is a 400.
EXTENSION_FIELDS = frozenset({"user", "stop"}) | CREATE_FIELDS
# Fields OpenAI accepts that change nothing about the generation (request tags, cache retention):
# accepted, checked for their type, and sent to no upstream (docs/configuration.md).
NEUTRAL_FIELDS = {"client_metadata": dict, "prompt_cache_retention": str}


def _settings_objects(body: CreateResponseBody) -> list[tuple[str, Any]]:
    """The request's setting objects (not its input items) with their param paths."""
    found: list[tuple[str, Any]] = [
        ("text", body.text),
        ("reasoning", body.reasoning),
        ("stream_options", body.stream_options),
    ]
    if body.text is not None:
        found.append(("text.format", body.text.format))
    found += [
        (f"tools[{i}]", tool)
        for i, tool in enumerate(body.tools or ())
        if type(tool) is not HostedToolParam
    ]
    choice = body.tool_choice
    if choice is not None and not isinstance(choice, str):
        found.append(("tool_choice", choice))
        found += [
            (f"tool_choice.tools[{i}]", t)
            for i, t in enumerate(getattr(choice, "tools", None) or ())
        ]
    return found


def refuse_unknown_fields(body: CreateResponseBody) -> None:
    """Refuse, the first found in this order: a top-level field the body does not define (or a
    neutral one of the wrong type), an unknown key in a setting object, an extension field
    (``user``, ``stop``) of the wrong type."""
    # Every request comes through here: the common body (no extra field, no setting object)
    # costs a few attribute reads and no function call; the detailed checks run only when needed.
    extra = body.model_extra
    error = _unknown_top_level(extra) if extra else None
    if error is None and (
        body.text is not None
        or body.reasoning is not None
        or body.stream_options is not None
        or body.tools
        or body.tool_choice is not None
    ):
        error = _unknown_in_settings(body)
    if error is None and extra:
        error = _extension_of_wrong_type(extra)
    if error is not None:
        raise error


def _unknown_top_level(extra: dict[str, Any]) -> ApiError | None:
    """A top-level field that is neither spec, neutral nor extension, or a neutral one of the
    wrong type."""
    for name, value in extra.items():
        neutral = NEUTRAL_FIELDS.get(name)
        if neutral is not None:
            if value is not None and not isinstance(value, neutral):
                kind = "an object" if neutral is dict else "a string"
                return invalid_type(f"Invalid '{name}': expected {kind}.", param=name)
        elif name not in EXTENSION_FIELDS:
            return unknown_parameter(name)
    return None


def _unknown_in_settings(body: CreateResponseBody) -> ApiError | None:
    """An unknown key in a setting object: it would be dropped silently, so it is refused like a
    top-level one, by its path."""
    for path, obj in _settings_objects(body):
        for name in getattr(obj, "model_extra", None) or {}:
            return unknown_parameter(f"{path}.{name}")
    return None


def _extension_of_wrong_type(extra: dict[str, Any]) -> ApiError | None:
    """``user`` that is not a string, ``stop`` that is neither a string nor a list of them."""
    user = extra.get("user")
    if user is not None and not isinstance(user, str):
        return invalid_type("Invalid 'user': expected a string.", param="user")
    stop = extra.get("stop")
    if stop is not None and not (
        isinstance(stop, str) or (isinstance(stop, list) and all(isinstance(s, str) for s in stop))
    ):
        return invalid_type("Invalid 'stop': expected a string or a list of strings.", param="stop")
    return None


class HasInput(Protocol):
    """A request body with an ``input``: a response's, a compaction's."""

    @property
    def input(self) -> InputParam | None: ...


def normalize_input(body: HasInput) -> list[Any]:
    raw = body.input
    if raw is None:
        return []
    if isinstance(raw, str):
        # Validated by pydantic-core: less than half the cost of model_construct's Python loop.
        return [
            UserMessageItemParam.model_validate({"type": "message", "role": "user", "content": raw})
        ]
    return list(raw)


def check_capabilities(deployment: Deployment, items: list[Any], body: CreateResponseBody) -> None:
    """Content the routed deployment cannot take is a 400 naming the param, not an upstream
    error."""
    caps = deployment.capabilities
    if body.tools and not caps.tools:
        raise unsupported_parameter(
            f"Model '{deployment.name}' does not support tools.", param="tools"
        )
    if not caps.images:
        for i, item in enumerate(items):
            content = getattr(item, "content", None)
            if isinstance(content, list):
                for j, part in enumerate(content):
                    if getattr(part, "type", None) == "input_image":
                        raise ApiError.of(
                            ErrorCode.UNSUPPORTED_CONTENT,
                            f"Model '{deployment.name}' does not accept images.",
                            param=f"input[{i}].content[{j}].type",
                        )
    if not caps.logprobs and wants_logprobs(body):
        param = "top_logprobs" if body.top_logprobs else "include"
        raise unsupported_parameter(
            f"Model '{deployment.name}' does not return log probabilities.", param=param
        )
    # A summary only asks to see reasoning if there is any (OpenAI accepts it for every model).
    if body.reasoning is not None and body.reasoning.effort and not caps.reasoning:
        raise unsupported_parameter(
            f"Model '{deployment.name}' does not support reasoning options.",
            param="reasoning.effort",
        )


def wants_logprobs(body: CreateResponseBody) -> bool:
    """Token log probabilities asked for: ``include`` names them, or ``top_logprobs`` > 0
    (the alternatives only exist inside them)."""
    return bool(body.top_logprobs) or (
        body.include is not None and LOGPROBS_INCLUDE in body.include
    )


def text_format_of(body: CreateResponseBody) -> TextFormat | None:
    fmt = body.text.format if body.text is not None else None
    if fmt is None or fmt.type == "text":
        return None
    if fmt.type == "json_object":
        return TextFormat(type="json_object")
    if fmt.schema_ is None:
        raise missing_required_parameter(
            "text.format of type json_schema needs a 'schema'.", param="text.format.schema"
        )
    if not fmt.name:
        raise missing_required_parameter(
            "text.format of type json_schema needs a 'name'.", param="text.format.name"
        )
    if _ref_cycle(fmt.schema_):
        raise ApiError.of(
            ErrorCode.INVALID_JSON_SCHEMA,
            "text.format.schema has a $ref cycle that never reaches a constraint: no value can be"
            " checked against it.",
            param="text.format.schema",
        )
    return TextFormat(
        type="json_schema",
        name=fmt.name,
        schema=fmt.schema_,
        strict=fmt.strict,
        description=fmt.description,
    )


_ANNOTATIONS = frozenset(
    {"$ref", "$defs", "definitions", "description", "title", "$comment", "$schema", "$id"}
)


def _ref_cycle(schema: Any) -> bool:
    """True when a chain of local ``$ref``s comes back to itself through nodes that are only
    references."""

    def resolve(ref: str) -> Any:
        node: Any = schema
        for part in ref[1:].split("/"):
            if not part:
                continue
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, dict) or part not in node:
                return None
            node = node[part]
        return node

    stack: list[Any] = [schema]
    seen_nodes = 0
    acyclic: set[int] = (
        set()
    )  # nodes whose reference chain ends: each chain is followed once (O(size), not O(size²))
    while stack and seen_nodes < 10_000:
        node = stack.pop()
        seen_nodes += 1
        if isinstance(node, list):
            stack.extend(node)
            continue
        if not isinstance(node, dict):
            continue
        stack.extend(v for v in node.values() if isinstance(v, dict | list))
        ref = node.get("$ref")
        chain: set[int] = set()
        while (
            isinstance(ref, str)
            and ref.startswith("#")
            and set(node) <= _ANNOTATIONS
            and id(node) not in acyclic
        ):
            if id(node) in chain:
                return True
            chain.add(id(node))
            node = resolve(ref)
            if not isinstance(node, dict):
                break
            ref = node.get("$ref")
        acyclic |= chain
    return False


def parse_body(data: Any) -> CreateResponseBody:
    """Validate a parsed JSON body; errors become a 400 naming the offending path."""
    if not isinstance(data, dict):
        raise not_an_object()
    try:
        return CreateResponseBody.model_validate(data)
    except ValidationError as exc:
        raise from_validation_error(exc) from None


__all__ = [
    "EXTENSION_FIELDS",
    "NEUTRAL_FIELDS",
    "check_capabilities",
    "normalize_input",
    "parse_body",
    "refuse_unknown_fields",
    "text_format_of",
    "wants_logprobs",
]
