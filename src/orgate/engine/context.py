"""From a validated ``CreateResponseBody`` to one turn: the model request and the response skeleton.

Owns the request-level rules: which fields are honoured or refused (never
dropped silently), the spec's defaults echoed in the response, what a
deployment can take (images, tools), and the conversion of stored history
into input items (an upstream's own stored items become ``OpaqueItem``s,
see ``orgate.neutral.items``). History itself comes from the caller (the
service reads the store); this module does no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from pydantic import TypeAdapter, ValidationError

from orgate.engine import ids
from orgate.engine.create_options import FIELDS as CREATE_FIELDS
from orgate.engine.output_fit import check_output_fits, output_schemas
from orgate.engine.router import RouteTrace
from orgate.neutral import (
    EXTENSION_ITEM_TYPE,
    Deployment,
    ModelRequest,
    OpaqueItem,
    TextFormat,
    Translation,
    extension_wire,
)
from orgate.neutral.items import ORIGIN_FIELD
from orgate.protocol import (
    AdditionalToolsItemParam,
    CreateResponseBody,
    FunctionToolParam,
    HostedToolParam,
    ItemParam,
    UserMessageItemParam,
)
from orgate.protocol.enums import LOGPROBS_INCLUDE
from orgate.protocol.errors import (
    ApiError,
    ErrorCode,
    from_validation_error,
    invalid_type,
    invalid_value,
    missing_required_parameter,
    not_an_object,
    unknown_parameter,
    unsupported_parameter,
)

# Top-level fields orgate accepts beyond the spec (extensions; OpenAI's create fields are read by
# engine/create_options.py). Anything else unknown is a 400.
EXTENSION_FIELDS = frozenset({"user", "stop"}) | CREATE_FIELDS
# Fields OpenAI accepts that change nothing about the generation (request tags, cache retention):
# accepted, checked for their type, and sent to no upstream (docs/configuration.md).
NEUTRAL_FIELDS = {"client_metadata": dict, "prompt_cache_retention": str}

_ITEMS = TypeAdapter(list[ItemParam])


class Turn(NamedTuple):
    """The plan of one response: what was asked, and what was decided before the upstream is called.

    Built once by ``build_turn`` (the service makes an adjusted copy with ``_replace`` while it
    prepares the turn) and never changed after; its lists are not changed either. What happens
    once the upstream is called is the turn's ``TurnRun``. ``base`` is the response skeleton,
    which the ``ResponseBuilder`` owns from the response's first event on. A named tuple: as
    immutable as a frozen dataclass, without its per-field ``object.__setattr__`` on every
    request (hot path — see bench/instructions.py)."""

    deployment: Deployment
    request: ModelRequest
    base: dict[str, Any]  # response skeleton (see ResponseBuilder)
    new_input: list[Any]  # this request's own input items (protocol models), references resolved
    history: list[Any]  # items from previous_response_id / session
    response_id: str
    dropped_tools: list[tuple[str, str]]  # (param path, type) of hosted tools not sent
    mcp_tools: list[tuple[int, dict[str, Any]]]  # (tools index, tool) of type mcp: orgate runs them
    stream: bool = False
    store: bool = True
    background: bool = False
    user: str | None = None
    history_unlinked: bool = (
        False  # history given by the caller (not the store): saved as input, unchained
    )
    session_id: str | None = None
    tenant: str = ""  # the caller's: a review queue entry the turn leaves is that tenant's
    opaque: tuple[
        Any, ...
    ] = ()  # the OpaqueItems of request.input (history items only one origin may take)
    mcp: Any = None  # the turn's MCP servers and approvals (engine/mcp_loop.py), set by the service
    # the stored response a conversation's turn continues (its echo names the conversation instead)
    parent: str | None = None
    # the compaction made before the model is called (context_management.ServerCompaction)
    compacted: Any = None


@dataclass(slots=True)
class TurnRun:
    """The record of a turn once it runs: which route served it, what the safety net did, and the
    warnings a client gets in ``X-Orgate-Gate-Warnings`` (the gate's findings, then the upstream's)."""

    warnings: list[str] = field(default_factory=list)
    route: RouteTrace | None = None  # which deployment served the turn (engine/router.py)
    outcome: Any = None  # what the safety net did (structured.Outcome), when it was in the pipeline


def items_from_wire(items: list[dict[str, Any]], *, param: str = "input") -> list[Any]:
    """Stored wire items (response or request shape) → input item models the providers take.

    Stored extension items (``orgate:extension_item``, an upstream's own output
    items) become ``OpaqueItem``s at their place. Only stored history comes
    through here: a client's own input never does (the input gate refuses
    namespaced types before parsing).
    """
    cleaned = []
    opaque: list[tuple[int, dict[str, Any]]] = []
    for index, item in enumerate(items):
        kind = item.get("type")
        if kind == "reasoning" and "content" in item:
            item = {k: v for k, v in item.items() if k != "content"}
        elif kind == EXTENSION_ITEM_TYPE:
            opaque.append((index, item))
            continue
        cleaned.append(item)
    try:
        models: list[Any] = _ITEMS.validate_python(cleaned)
        for index, item in opaque:  # ascending: each lands at its original index
            models.insert(index, OpaqueItem.model_validate(item))
    except ValidationError as exc:
        error = from_validation_error(exc)
        raise ApiError.of(
            ErrorCode.STORE_CORRUPT, f"stored history could not be read back: {error.message}"
        ) from None
    return models


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


def normalize_input(body: CreateResponseBody) -> list[Any]:
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
    """Content the routed deployment cannot take is a 400 naming the param, not an upstream error."""
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


def split_tools(
    tools: list[Any], deployment: Deployment, paths: list[str] | None = None
) -> tuple[list[Any], list[dict[str, Any]], list[tuple[str, str]]]:
    """``tools`` → (function and ``custom`` tools, hosted tools for the upstream, (param path, type)
    of those dropped); ``paths``: each tool's param path (default ``tools[i]``). Every upstream
    takes a ``custom`` tool (a function with one string argument where the upstream has no
    custom tools: ``orgate.providers.custom_tools``).

    Hosted tools go to a deployment that runs them; elsewhere the model's ``hosted_tools``
    policy drops them (the caller warns) or refuses the request, naming the tool. Tools of
    type ``mcp`` are none of these: orgate runs them itself, for every model (``mcp_tools``)."""
    functions = [t for t in tools if type(t) is not HostedToolParam]
    if len(functions) == len(tools):
        return tools, [], []
    paths = paths or [f"tools[{i}]" for i in range(len(tools))]
    hosted = [(i, t) for i, t in enumerate(tools) if type(t) is HostedToolParam and t.type != "mcp"]
    if not hosted:
        return functions, [], []
    if deployment.capabilities.hosted_tools:
        return functions, [t.wire() for _, t in hosted], []
    if deployment.hosted_tools == "refuse":
        index, tool = hosted[0]
        raise ApiError.of(
            ErrorCode.UNSUPPORTED_TOOL_TYPE,
            f"Model '{deployment.name}' cannot run tools of type '{tool.type}' (its upstream does not host them;"
            ' set hosted_tools = "drop" on the model to drop them with a warning).',
            param=f"{paths[index]}.type",
        )
    return functions, [], [(paths[i], t.type) for i, t in hosted]


def lift_additional_tools(
    items: list[Any], history: int = 0
) -> tuple[list[Any], list[Any], list[str]]:
    """The context without its ``additional_tools`` items, their tools (in order, a name already
    offered left out) and each tool's param path. Every upstream gets them as offered tools:
    the items themselves reach none. An ``mcp`` tool there is not run (only ``tools`` names
    the MCP servers a request uses): the caller drops it like a hosted tool. ``history``: how
    many of ``items`` came before the request's own input (their paths say ``history``)."""
    kept: list[Any] = []
    tools: list[Any] = []
    paths: list[str] = []
    seen: set[tuple[str, str]] = set()
    for i, item in enumerate(items):
        if type(item) is not AdditionalToolsItemParam:
            kept.append(item)
            continue
        where = f"input[{i - history}]" if i >= history else f"history[{i}]"
        for j, tool in enumerate(item.tools):
            key = (
                tool.type,
                str(getattr(tool, "name", None) or (tool.model_extra or {}).get("name")),
            )
            if key in seen:  # the same tool again (a replayed history carries its item each turn)
                continue
            seen.add(key)
            tools.append(tool)
            paths.append(f"{where}.tools[{j}]")
    return kept, tools, paths


def mcp_tools(tools: list[Any]) -> list[tuple[int, dict[str, Any]]]:
    """The request's tools of type ``mcp`` (index, fields as sent): orgate runs them itself."""
    return [
        (i, t.wire()) for i, t in enumerate(tools) if type(t) is HostedToolParam and t.type == "mcp"
    ]


def wants_logprobs(body: CreateResponseBody) -> bool:
    """Token log probabilities asked for: ``include`` names them, or ``top_logprobs`` > 0
    (the alternatives only exist inside them)."""
    return bool(body.top_logprobs) or (
        body.include is not None and LOGPROBS_INCLUDE in body.include
    )


def check_tool_choice(choice: Any, tools: list[Any], *, mcp: bool = False) -> None:
    """A forced or allowed tool must be one of ``tools`` (a client mistake, not a model failure).
    ``mcp``: the request has MCP tools, which count for ``required`` (their names are known once listed)."""
    if choice is None or isinstance(choice, str):
        if choice == "required" and not tools and not mcp:
            raise invalid_value(
                "tool_choice 'required' needs at least one tool in 'tools'.", param="tool_choice"
            )
        return
    # A function choice names a function tool, a custom choice a custom tool (OpenAI's rule).
    names = {(t.type, t.name) for t in tools}
    what = {"function": "function", "custom": "custom tool"}
    if choice.type in what:
        if (choice.type, choice.name) not in names:
            raise invalid_value(
                f"tool_choice names the {what[choice.type]} '{choice.name}', which is not in 'tools'.",
                param="tool_choice.name",
            )
        return
    for index, allowed in enumerate(choice.tools):
        if (allowed.type, allowed.name) not in names:
            raise invalid_value(
                f"tool_choice.tools[{index}] names the {what[allowed.type]} '{allowed.name}', which is not in 'tools'.",
                param=f"tool_choice.tools[{index}].name",
            )


def _tool_echo(tool: Any) -> dict[str, Any]:
    return {
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
        "strict": tool.strict,
    }


def _tool_choice_echo(choice: Any) -> Any:
    if choice is None:
        return "auto"
    if isinstance(choice, str):
        return choice
    if choice.type in (
        "function",
        "custom",
    ):  # ``custom``: OpenAI's extension, echoed as OpenAI does
        return {"type": choice.type, "name": choice.name}
    return {
        "type": "allowed_tools",
        "tools": [{"type": t.type, "name": t.name} for t in choice.tools],
        "mode": choice.mode or "auto",
    }


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
            "text.format.schema has a $ref cycle that never reaches a constraint: no value can be checked against it.",
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
    """True when a chain of local ``$ref``s comes back to itself through nodes that are only references."""

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


def _text_echo(body: CreateResponseBody, fmt: TextFormat | None) -> dict[str, Any]:
    if fmt is None:
        out: dict[str, Any] = {"format": {"type": "text"}}
    elif fmt.type == "json_object":
        out = {"format": {"type": "json_object"}}
    else:
        # The spec's JsonSchemaResponseFormat allows only `schema: null` in a response.
        out = {
            "format": {
                "type": "json_schema",
                "name": fmt.name,
                "description": fmt.description,
                "schema": None,
                "strict": bool(fmt.strict),
            }
        }
    if body.text is not None and body.text.verbosity is not None:
        out["verbosity"] = body.text.verbosity
    return out


def build_turn(
    body: CreateResponseBody,
    deployment: Deployment,
    new_input: list[Any],
    history: list[Any],
    *,
    store_enabled: bool,
    previous_response_id: str | None = None,
    history_unlinked: bool = False,
    session_id: str | None = None,
    tenant: str = "",
    response_id: str | None = None,
) -> Turn:
    """Assemble the model request and the echoed response skeleton (``previous_response_id``:
    the response the turn continues, the request's own or its session's latest; ``response_id``:
    a background response run again keeps its id, a new turn gets one)."""
    refuse_unknown_fields(body)
    context = [*history, *new_input]
    if not context:
        raise missing_required_parameter(
            "'input' is required (or a previous_response_id to continue).", param="input"
        )
    check_capabilities(deployment, new_input, body)
    sent = list(body.tools or ())
    lifted: list[Any] = []
    lifted_paths: list[str] = []
    if AdditionalToolsItemParam in map(type, context):  # compared in C: hot path
        context, lifted, lifted_paths = lift_additional_tools(context, len(history))
    if lifted:
        paths = [*(f"tools[{i}]" for i in range(len(sent))), *lifted_paths]
        tools, hosted_tools, dropped_tools = split_tools([*sent, *lifted], deployment, paths)
        dropped_tools += [
            (lifted_paths[i], "mcp")
            for i, t in enumerate(lifted)
            if getattr(t, "type", None) == "mcp"
        ]
    else:
        tools, hosted_tools, dropped_tools = split_tools(sent, deployment)
    requested_mcp = mcp_tools(sent) if sent else []
    check_tool_choice(body.tool_choice, tools, mcp=bool(requested_mcp))
    fmt = text_format_of(body)
    if (fmt is not None and fmt.schema is not None) or body.tools:
        check_output_fits(deployment, output_schemas(fmt.schema if fmt else None, body.tools))
    extra = body.model_extra or {}
    stop = extra.get("stop")
    reasoning = body.reasoning
    request = ModelRequest(
        model=deployment.upstream_model,
        input=context,
        instructions=body.instructions,
        tools=tools,
        hosted_tools=hosted_tools,
        tool_choice=body.tool_choice,
        temperature=body.temperature,
        top_p=body.top_p,
        presence_penalty=body.presence_penalty,
        frequency_penalty=body.frequency_penalty,
        max_output_tokens=body.max_output_tokens,
        parallel_tool_calls=body.parallel_tool_calls,
        max_tool_calls=body.max_tool_calls,
        text_format=fmt,
        reasoning_effort=reasoning.effort if reasoning else None,
        reasoning_summary=reasoning.summary
        if reasoning and deployment.capabilities.reasoning
        else None,
        user=extra.get("user"),
        safety_identifier=body.safety_identifier,
        prompt_cache_key=body.prompt_cache_key,
        verbosity=body.text.verbosity if body.text is not None else None,
        service_tier=body.service_tier if deployment.capabilities.service_tier else None,
        metadata=dict(body.metadata) if body.metadata else None,
        stop=[stop] if isinstance(stop, str) else stop,
        logprobs=wants_logprobs(body),
        top_logprobs=body.top_logprobs,
    )
    if dropped_tools or lifted_paths or request.service_tier != body.service_tier:
        _note_engine_translations(request, body, dropped_tools, lifted_paths)
    elif reasoning is not None and reasoning.summary and request.reasoning_summary is None:
        request.ledger.note(Translation.FIELD_DROPPED, "reasoning.summary", "no reasoning")
    store = store_enabled and body.store is not False
    base = {  # the response's fields in the spec's order; the builder sets its own (the None ones)
        "id": None,
        "object": "response",
        "created_at": None,
        "completed_at": None,
        "status": None,
        "incomplete_details": None,
        "model": body.model,
        "previous_response_id": previous_response_id,
        "instructions": body.instructions,
        "output": None,
        "error": None,
        # The spec's ``Tool`` union has function tools only: a ``custom`` tool is not echoed.
        "tools": [_tool_echo(t) for t in tools if type(t) is FunctionToolParam],
        "tool_choice": _tool_choice_echo(body.tool_choice),
        "truncation": body.truncation or "disabled",
        "parallel_tool_calls": body.parallel_tool_calls
        if body.parallel_tool_calls is not None
        else True,
        "text": _text_echo(body, fmt),
        "top_p": body.top_p if body.top_p is not None else 1.0,
        "presence_penalty": body.presence_penalty if body.presence_penalty is not None else 0.0,
        "frequency_penalty": body.frequency_penalty if body.frequency_penalty is not None else 0.0,
        "top_logprobs": body.top_logprobs or 0,
        "temperature": body.temperature if body.temperature is not None else 1.0,
        "reasoning": {"effort": reasoning.effort, "summary": reasoning.summary}
        if reasoning
        else None,
        "usage": None,
        "max_output_tokens": body.max_output_tokens,
        "max_tool_calls": body.max_tool_calls,
        "store": store,
        "background": bool(body.background),
        "service_tier": request.service_tier
        or "default",  # the tier used, not only the one asked for
        "metadata": dict(body.metadata) if body.metadata else {},
        "safety_identifier": body.safety_identifier,
        "prompt_cache_key": body.prompt_cache_key,
    }
    return Turn(
        deployment=deployment,
        request=request,
        base=base,
        new_input=new_input,
        history=history,
        response_id=response_id or ids.response_id(),
        stream=bool(body.stream),
        store=store,
        background=bool(body.background),
        user=extra.get("user"),
        history_unlinked=history_unlinked,
        session_id=session_id,
        tenant=tenant,
        dropped_tools=dropped_tools,
        mcp_tools=requested_mcp,
    )


def _note_engine_translations(
    request: ModelRequest,
    body: CreateResponseBody,
    dropped_tools: list[tuple[str, str]],
    lifted_paths: list[str],
) -> None:
    """The ledger entries of what the turn itself translated: hosted tools not sent, tools of
    ``additional_tools`` items offered as tools, settings the deployment does not take."""
    ledger = request.ledger
    for path, kind in dropped_tools:
        ledger.note(Translation.HOSTED_TOOL_DROPPED, path, kind)
    for path in lifted_paths:
        ledger.note(Translation.ADDITIONAL_TOOLS_OFFERED, path)
    if body.service_tier is not None and request.service_tier is None:
        ledger.note(Translation.FIELD_DROPPED, "service_tier", str(body.service_tier))
    reasoning = body.reasoning
    if reasoning is not None and reasoning.summary and request.reasoning_summary is None:
        ledger.note(Translation.FIELD_DROPPED, "reasoning.summary", "no reasoning")


def item_to_wire(item: Any) -> dict[str, Any]:
    """An input item model as stored/listed JSON (unset fields left out; an opaque item's raw item unchanged)."""
    if type(item) is OpaqueItem:
        return extension_wire(item.id or ids.new_id("ext"), item.origin, item.item)
    if (
        type(item) is UserMessageItemParam
        and type(item.content) is str
        and item.id is None
        and item.status is None
        and not item.model_extra
    ):
        # a string `input` (see normalize_input): what model_dump gives, without its cost on every stored turn
        return {"type": "message", "role": "user", "content": item.content}
    return item.model_dump(mode="json", exclude_none=True, by_alias=True)


def is_private(item: dict[str, Any]) -> bool:
    """True for a stored item a client must not see as is: an extension item wrapper, a marked reasoning item."""
    return item.get("type") == EXTENSION_ITEM_TYPE or ORIGIN_FIELD in item


def listed_item(item: dict[str, Any]) -> dict[str, Any] | None:
    """A stored item as a listing shows it (spec items only): None for an extension item wrapper
    (an upstream's own item, kept in history for that upstream), a reasoning item without its
    origin marker. The history itself keeps both (``items_from_wire``)."""
    if item.get("type") == EXTENSION_ITEM_TYPE:
        return None
    if ORIGIN_FIELD in item:
        return {k: v for k, v in item.items() if k != ORIGIN_FIELD}
    return item


_STATUSED = frozenset({"message", "function_call", "function_call_output", "custom_tool_call"})


def item_field_part(part: Any) -> Any:
    """A content part with the fields the spec's item shape requires (``OutputTextContent``:
    ``annotations``; ``InputImageContent``: ``image_url``, ``detail``)."""
    if not isinstance(part, dict):
        return part
    kind = part.get("type")
    if kind == "output_text" and "annotations" not in part:
        return {**part, "annotations": []}
    if kind == "input_image" and ("detail" not in part or "image_url" not in part):
        return {**part, "detail": part.get("detail") or "auto", "image_url": part.get("image_url")}
    return part


def as_item_field(item: dict[str, Any]) -> dict[str, Any]:
    """A listed input item in the spec's item shape (``ItemField``), as a response's output items are.

    Items are stored as the client sent them (``"content": "hi"``, no ``status``); a
    listing returns them as items: a message's content as parts (``input_text``, or
    ``output_text`` for the assistant), parts with their required fields, and the
    ``status`` of a message, function call and function call output (``completed``).
    The result is still a valid input item to send back.
    """
    kind = item.get("type")
    if kind not in _STATUSED:
        return item
    out = dict(item)
    if kind == "message":
        content = out.get("content")
        if isinstance(content, str):
            if out.get("role") == "assistant":
                content = [{"type": "output_text", "text": content, "annotations": []}]
            else:
                content = [{"type": "input_text", "text": content}]
        elif isinstance(content, list):
            content = [item_field_part(part) for part in content]
        out["content"] = content
    elif kind == "function_call_output" and isinstance(out.get("output"), list):
        out["output"] = [item_field_part(part) for part in out["output"]]
    if out.get("status") not in ("in_progress", "completed", "incomplete"):
        out["status"] = "completed"
    return out


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
    "Turn",
    "TurnRun",
    "as_item_field",
    "item_field_part",
    "build_turn",
    "is_private",
    "item_to_wire",
    "items_from_wire",
    "lift_additional_tools",
    "listed_item",
    "normalize_input",
    "parse_body",
    "text_format_of",
]
