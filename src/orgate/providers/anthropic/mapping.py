"""Pure mapping: a neutral ``ModelRequest`` → an Anthropic Messages API request body.

No I/O. Input items are read by attribute or key (protocol models, replayed
output models and plain dicts all work). Rules:

- ``system``: ``instructions``, then every ``system`` / ``developer`` message in
  input order (wherever it stands), joined with blank lines; a JSON
  ``text_format`` adds an instruction (Anthropic has no JSON mode).
- ``user`` / ``assistant`` messages become turns; consecutive turns of one role
  merge (Anthropic requires alternation). ``function_call`` → an assistant
  ``tool_use`` block (``id`` = ``call_id``, ``input`` = parsed arguments);
  ``function_call_output`` → a user ``tool_result`` block, placed before any
  other block of its user turn.
- ``reasoning`` items whose ``encrypted_content`` is an anthropic envelope
  (see ``envelope``) → ``thinking`` / ``redacted_thinking`` blocks (the
  envelope names its origin itself; a history item's ``orgate:origin`` marker
  is not read here); other reasoning items (e.g. an OpenAI
  ``encrypted_content``) and ``compaction`` items are dropped (not portable here), and
  so are opaque items (another upstream's own items from history,
  ``orgate.neutral.items``; the engine reports the drop).
- Images: URL → ``url`` source, data URL → ``base64`` source. Files: PDF (URL or
  base64) → ``document``; plain text → a ``text`` document. Anything else → 400.
- ``max_tokens`` is required: ``max_output_tokens`` or the default given.
- ``presence_penalty`` / ``frequency_penalty`` have no Anthropic equivalent: a
  non-zero value is refused with a 400 rather than dropped.
- ``prompt_cache`` (the model's ``anthropic = { prompt_cache = true }``): cache breakpoints
  (``cache_control: {"type": "ephemeral"}``) on the system prompt, the last tool and the
  last cacheable block of the last message — the prefix a conversation's next turn
  repeats, read back at a tenth of the input price (Anthropic caches prefixes of 1,024
  tokens and more; writing one costs a quarter more, hence opt-in).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from enum import Enum
from typing import Any

import orjson

from orgate.neutral import EXTENSION_ITEM_TYPE, ModelRequest, TextFormat, Translation
from orgate.neutral.dialects import FORCED_TOOL_NAME
from orgate.protocol.errors import ApiError, ErrorCode, invalid_request
from orgate.providers.anthropic.envelope import decode_blocks
from orgate.providers.custom_tools import functions_only
from orgate.providers.forced_tool import answer_tool
from orgate.providers.plain import allowed_tools
from orgate.providers.plain import get_field as _get
from orgate.providers.plain import plain as _plain

DEFAULT_MAX_TOKENS = 4096
MIN_THINKING_BUDGET = 1024
THINKING_BUDGETS: dict[str, int] = {
    "minimal": 1024,
    "low": 2048,
    "medium": 8192,
    "high": 16384,
    "xhigh": 32768,
}

Block = dict[str, Any]


def _unsupported(
    what: str, param: str, code: ErrorCode = ErrorCode.UNSUPPORTED_CONTENT
) -> Exception:
    return invalid_request(
        f"{what} is not supported by this model's upstream (anthropic)", param=param, code=code
    )


# --- content -----------------------------------------------------------------------------------


def _split_data_url(url: str, param: str) -> tuple[str, str]:
    """``data:<media>;base64,<data>`` → (media type, base64 data)."""
    header, sep, data = url[5:].partition(",")
    media, _, encoding = header.partition(";")
    if not sep or encoding.lower() != "base64" or not media:
        raise ApiError.of(
            ErrorCode.INVALID_DATA_URL,
            "data URLs must have the form data:<media type>;base64,<data>",
            param=param,
        )
    return media.lower(), data


def _image_block(part: Any, param: str) -> Block:
    url = _get(part, "image_url")
    if not url:
        raise _unsupported("an input_image without image_url", f"{param}.image_url")
    if url.startswith("data:"):
        media, data = _split_data_url(url, f"{param}.image_url")
        return {"type": "image", "source": {"type": "base64", "media_type": media, "data": data}}
    return {"type": "image", "source": {"type": "url", "url": url}}


_TEXT_SUFFIXES = (".txt", ".md", ".csv", ".json", ".xml", ".html", ".py", ".log", ".yaml", ".yml")


def _file_block(part: Any, param: str) -> Block:
    file_url = _get(part, "file_url")
    file_data = _get(part, "file_data")
    filename = _get(part, "filename") or ""
    block: Block
    if file_data:
        if file_data.startswith("data:"):
            media, data = _split_data_url(file_data, f"{param}.file_data")
        else:
            lower = filename.lower()
            media = (
                "application/pdf"
                if lower.endswith(".pdf")
                else "text/plain"
                if lower.endswith(_TEXT_SUFFIXES)
                else ""
            )
            data = file_data
        if media == "application/pdf":
            block = {
                "type": "document",
                "source": {"type": "base64", "media_type": media, "data": data},
            }
        elif media.startswith("text/") or media == "application/json":
            try:
                text = base64.b64decode(data, validate=False).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError) as exc:
                raise invalid_request(
                    "file_data is not base64 UTF-8 text", param=f"{param}.file_data"
                ) from exc
            block = {
                "type": "document",
                "source": {"type": "text", "media_type": "text/plain", "data": text},
            }
        else:
            raise _unsupported(
                f"an input_file of media type '{media or 'unknown'}' (only PDF and text)",
                f"{param}.file_data",
            )
    elif file_url:
        block = {"type": "document", "source": {"type": "url", "url": file_url}}
    else:
        raise _unsupported("an input_file without file_data or file_url (file_id)", param)
    if filename:
        block["title"] = filename
    return block


def _content_blocks(content: Any, param: str, *, assistant: bool = False) -> list[Block]:
    """Message content (a string or parts) → Anthropic content blocks; empty text is left out."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    blocks: list[Block] = []
    for j, part in enumerate(content or ()):
        kind = _get(part, "type")
        where = f"{param}.content[{j}]"
        if kind in ("input_text", "output_text", "text"):
            text = _get(part, "text") or ""
            if text:
                blocks.append({"type": "text", "text": text})
        elif kind == "refusal":
            text = _get(part, "refusal") or ""
            if text:
                blocks.append({"type": "text", "text": text})
        elif kind == "input_image" and not assistant:
            blocks.append(_image_block(part, where))
        elif kind == "input_file" and not assistant:
            blocks.append(_file_block(part, where))
        else:
            raise _unsupported(f"content of type '{kind}'", f"{where}.type")
    return blocks


def _plain_text(content: Any, param: str) -> str:
    """System / developer content as one string."""
    if isinstance(content, str):
        return content
    pieces: list[str] = []
    for j, part in enumerate(content or ()):
        kind = _get(part, "type")
        if kind in ("input_text", "output_text", "text"):
            pieces.append(_get(part, "text") or "")
        else:
            raise _unsupported(
                f"content of type '{kind}' in a system message", f"{param}.content[{j}].type"
            )
    return "".join(pieces)


def _tool_use(item: Any, param: str) -> Block:
    arguments = _get(item, "arguments") or ""
    try:
        parsed = orjson.loads(arguments) if arguments.strip() else {}
    except orjson.JSONDecodeError as exc:
        raise ApiError.of(
            ErrorCode.INVALID_FUNCTION_ARGUMENTS,
            "function_call.arguments is not valid JSON",
            param=f"{param}.arguments",
        ) from exc
    if not isinstance(parsed, dict):
        raise ApiError.of(
            ErrorCode.INVALID_FUNCTION_ARGUMENTS,
            "function_call.arguments must be a JSON object for this model's upstream (anthropic)",
            param=f"{param}.arguments",
        )
    return {
        "type": "tool_use",
        "id": _get(item, "call_id"),
        "name": _get(item, "name"),
        "input": parsed,
    }


def _tool_result(item: Any, param: str) -> Block:
    block: Block = {"type": "tool_result", "tool_use_id": _get(item, "call_id")}
    output = _get(item, "output")
    if isinstance(output, str):
        if output:
            block["content"] = output
    elif output:
        blocks = _content_blocks(output, param.replace(".content", ".output"))
        if blocks:
            block["content"] = blocks
    return block


# --- conversation ------------------------------------------------------------------------------

# What one input item adds to the request: (where, content). ``where`` is a turn's role
# ("user" / "assistant", content a list of blocks), ``_SYSTEM`` (content a string for the
# system prompt), ``_THINKING`` (thinking blocks for the assistant turn), or None (nothing).
_SYSTEM = "system"
_THINKING = "thinking"
Piece = tuple[str | None, Any]
_NOTHING: Piece = (None, None)


def _function_call(item: Any, param: str) -> Piece:
    return "assistant", [_tool_use(item, param)]


def _function_call_output(item: Any, param: str) -> Piece:
    return "user", [_tool_result(item, param)]


def _reasoning(item: Any, param: str) -> Piece:
    """Thinking blocks from an anthropic envelope; other reasoning is not portable here."""
    return _THINKING, decode_blocks(_get(item, "encrypted_content"))


def _dropped(item: Any, param: str) -> Piece:
    """Compaction and opaque items: not portable here (the engine reports the drop)."""
    return _NOTHING


def _item_reference(item: Any, param: str) -> Piece:
    raise invalid_request("item_reference must be resolved before the provider call", param=param)


def _message(item: Any, param: str) -> Piece:
    role = _get(item, "role")
    if role is None:
        return _unknown_item(item, param)
    content = _get(item, "content")
    if role == "user":
        return "user", _content_blocks(content, param)
    if role == "assistant":
        return "assistant", _content_blocks(content, param, assistant=True)
    if role in ("system", "developer"):
        return _SYSTEM, _plain_text(content, param)
    raise invalid_request(f"unsupported message role '{role}'", param=f"{param}.role")


def _unknown_item(item: Any, param: str) -> Piece:
    kind = _get(item, "type")
    raise _unsupported(f"input items of type '{kind}'", param, code=ErrorCode.UNSUPPORTED_ITEM)


_ITEMS: dict[Any, Callable[[Any, str], Piece]] = {
    "message": _message,
    None: _message,  # a message without its optional type
    "function_call": _function_call,
    "function_call_output": _function_call_output,
    "reasoning": _reasoning,
    "compaction": _dropped,
    EXTENSION_ITEM_TYPE: _dropped,
    "item_reference": _item_reference,
}


def _append(turns: list[tuple[str, list[Block]]], role: str, blocks: list[Block]) -> None:
    if not blocks:
        return
    if turns and turns[-1][0] == role:
        turns[-1][1].extend(blocks)
    else:
        turns.append((role, list(blocks)))


def _append_thinking(turns: list[tuple[str, list[Block]]], blocks: list[Block]) -> None:
    # an envelope holds its whole run of thinking blocks: skip ones already sent
    if blocks and turns and turns[-1][0] == "assistant":
        blocks = [b for b in blocks if b not in turns[-1][1]]
    _append(turns, "assistant", blocks)


def _tool_results_first(blocks: list[Block]) -> list[Block]:
    """A user turn's blocks with its ``tool_result`` blocks first, as Anthropic requires."""
    return [b for b in blocks if b["type"] == "tool_result"] + [
        b for b in blocks if b["type"] != "tool_result"
    ]


def map_conversation(request: ModelRequest) -> tuple[list[str], list[dict[str, Any]]]:
    """The system prompt pieces and the ``messages`` array for the request's input items."""
    system: list[str] = [request.instructions] if request.instructions else []
    turns: list[tuple[str, list[Block]]] = []
    for i, item in enumerate(request.input):
        # one table look-up and one call per item: this runs over the whole conversation
        kind = _get(item, "type")
        where, content = _ITEMS.get(kind, _unknown_item)(item, f"input[{i}]")
        if where == _SYSTEM:
            if content:
                system.append(content)
            request.ledger.note(Translation.SYSTEM_MESSAGE_TO_SYSTEM_PROMPT, f"input[{i}]")
        elif where == _THINKING:
            if not content:
                request.ledger.note(Translation.REASONING_ITEM_DROPPED, f"input[{i}]")
            _append_thinking(turns, content)
        elif where is not None:
            _append(turns, where, content)
        elif kind == "compaction":
            request.ledger.note(Translation.COMPACTION_ITEM_DROPPED, f"input[{i}]")
    messages = [
        {"role": role, "content": _tool_results_first(blocks) if role == "user" else blocks}
        for role, blocks in turns
    ]
    return system, messages


def json_instruction(fmt: TextFormat | None) -> str | None:
    """The system-prompt addition for a JSON ``text_format`` sent without a schema dialect
    (Anthropic has no JSON mode; ``map_output_format`` sends the dialects)."""
    if fmt is None or fmt.type == "text" or fmt.dialect is not None:
        return None
    text = (
        "Respond with a single valid JSON value and nothing else: no prose, no Markdown "
        "code fences."
    )
    if fmt.type == "json_object":
        return text.replace("JSON value", "JSON object")
    if fmt.schema is not None:
        text += " The JSON must conform to this JSON Schema:\n" + orjson.dumps(fmt.schema).decode()
    return text


def map_output_format(request: ModelRequest, body: dict[str, Any]) -> None:
    """A ``json_schema`` format in its schema dialect: structured outputs
    (``output_config.format``), or a tool whose input schema is the format, forced
    (``forced_tool``: providers/forced_tool.py turns its call back into text)."""
    fmt = request.text_format
    if fmt is None or fmt.schema is None:
        return
    if fmt.dialect == "output_config":
        body["output_config"] = {"format": {"type": "json_schema", "schema": fmt.schema}}
        request.ledger.note(Translation.JSON_SCHEMA_IN_DIALECT, "text.format", fmt.dialect)
    elif fmt.dialect == "forced_tool":
        body["tools"] = [*body.get("tools", ()), answer_tool(request)]
        body["tool_choice"] = {"type": "tool", "name": FORCED_TOOL_NAME}
        request.ledger.note(Translation.JSON_FORMAT_AS_FORCED_TOOL, "text.format")


# --- tools -------------------------------------------------------------------------------------


def _tool(tool: Any, param: str) -> dict[str, Any]:
    kind = _get(tool, "type", "function")
    if kind != "function":
        raise _unsupported(f"tools of type '{kind}'", param, code=ErrorCode.UNSUPPORTED_TOOL)
    out: dict[str, Any] = {"name": _get(tool, "name")}
    description = _get(tool, "description")
    if description:
        out["description"] = description
    schema = _plain(_get(tool, "parameters")) or {}
    if not isinstance(schema, dict):
        raise invalid_request(
            "function parameters must be a JSON Schema object", param=f"{param}.parameters"
        )
    if "type" not in schema:
        schema = {"type": "object", **schema}
    if schema.get("type") == "object" and "properties" not in schema:
        schema["properties"] = {}
    out["input_schema"] = schema
    return out


_MODES = {"auto": "auto", "required": "any", "none": "none"}
Choice = tuple[list[Any], dict[str, Any] | None]  # (the tools sent, the tool_choice or None)


def _mode_choice(mode: str, tools: list[Any]) -> Choice:
    if mode not in _MODES:
        raise invalid_request(f"unknown tool_choice '{mode}'", param="tool_choice")
    return tools, {"type": _MODES[mode]}


def _function_choice(choice: Any, tools: list[Any]) -> Choice:
    return tools, {"type": "tool", "name": _get(choice, "name")}


def _allowed_tools_choice(choice: Any, tools: list[Any]) -> Choice:
    """Only the allowed tools are sent; the mode applies to them (unknown modes: auto)."""
    tools, mode = allowed_tools(choice, tools)
    return tools, {"type": _MODES.get(mode, "auto")}


_CHOICES: dict[Any, Callable[[Any, list[Any]], Choice]] = {
    "function": _function_choice,
    "allowed_tools": _allowed_tools_choice,
}


def _map_choice(choice: Any, tools: list[Any]) -> Choice:
    if choice is None:
        return tools, None
    if isinstance(choice, Enum):
        return _mode_choice(choice.value, tools)
    if isinstance(choice, str):
        return _mode_choice(choice, tools)
    kind = _get(choice, "type")
    mapper = _CHOICES.get(kind)
    if mapper is None:
        raise _unsupported(
            f"tool_choice of type '{kind}'", "tool_choice", code=ErrorCode.UNSUPPORTED_TOOL_CHOICE
        )
    return mapper(choice, tools)


def _with_parallel(request: ModelRequest, mapped: dict[str, Any] | None) -> dict[str, Any] | None:
    """``disable_parallel_tool_use`` when the request turns parallel calls off (and may call)."""
    if request.parallel_tool_calls is False and (mapped is None or mapped["type"] != "none"):
        return {**(mapped or {"type": "auto"}), "disable_parallel_tool_use": True}
    return mapped


def map_tools(request: ModelRequest, body: dict[str, Any]) -> None:
    """Set ``tools`` and ``tool_choice`` on ``body``."""
    tools, mapped = _map_choice(request.tool_choice, list(request.tools))
    if not tools:
        return
    if len(tools) != len(request.tools):
        request.ledger.note(Translation.ALLOWED_TOOLS_AS_SUBSET, "tool_choice")
    body["tools"] = [_tool(t, f"tools[{i}]") for i, t in enumerate(tools)]
    mapped = _with_parallel(request, mapped)
    if mapped is not None:
        body["tool_choice"] = mapped


# --- the body ----------------------------------------------------------------------------------


def _thinking(
    request: ModelRequest, max_tokens: int, cap: int | None, explicit: bool
) -> tuple[int, int | None]:
    """(max_tokens, thinking budget or None) for the request's reasoning effort."""
    effort = request.reasoning_effort
    if effort is None or effort == "none":
        return max_tokens, None
    budget = THINKING_BUDGETS.get(effort, THINKING_BUDGETS["medium"])
    if not explicit and budget >= max_tokens:
        max_tokens = budget + DEFAULT_MAX_TOKENS
        if cap is not None:
            max_tokens = min(max_tokens, cap)
    budget = min(budget, max_tokens - 1)
    return max_tokens, budget if budget >= MIN_THINKING_BUDGET else None


UNTHOUGHT_TOOL_USE_NOTICE = (
    "reasoning left off: the last assistant turn called a tool without its thinking "
    "blocks (reasoning items), which Anthropic requires with extended thinking"
)


def _unthought_tool_use(messages: list[dict[str, Any]]) -> bool:
    """Whether the last assistant message uses a tool but does not open with a thinking block
    (Anthropic: with thinking on, that message must start with ``thinking`` or
    ``redacted_thinking``)."""
    last = next((m for m in reversed(messages) if m["role"] == "assistant"), None)
    if last is None:
        return False
    blocks = last["content"]
    uses_tool = any(b.get("type") == "tool_use" for b in blocks)
    thought = bool(blocks) and blocks[0].get("type") in ("thinking", "redacted_thinking")
    return uses_tool and not thought


def _check_thinking_compatible(request: ModelRequest, body: dict[str, Any]) -> None:
    """Extended thinking refuses other sampling and forced tool use:
    a clear 400 here, not the upstream's."""
    with_thinking = "with reasoning (Anthropic extended thinking)"
    if request.temperature is not None and request.temperature != 1:
        raise _unsupported(
            f"'temperature' other than 1 {with_thinking}",
            "temperature",
            code=ErrorCode.UNSUPPORTED_PARAMETER,
        )
    if request.top_p is not None and request.top_p < 0.95:
        raise _unsupported(
            f"'top_p' below 0.95 {with_thinking}", "top_p", code=ErrorCode.UNSUPPORTED_PARAMETER
        )
    forced = body.get("tool_choice", {}).get("type")
    if forced in ("any", "tool"):
        raise _unsupported(
            f"a tool_choice that forces a tool call {with_thinking}",
            "tool_choice",
            code=ErrorCode.UNSUPPORTED_TOOL_CHOICE,
        )


def build_body(
    request: ModelRequest,
    *,
    stream: bool = True,
    max_tokens_cap: int | None = None,
    prompt_cache: bool = False,
) -> dict[str, Any]:
    """The Messages API body for ``request`` (a dict ready for ``orjson.dumps``).

    ``max_tokens_cap`` is the model's output cap (``Capabilities.max_output_tokens``):
    it is the default ``max_tokens`` when the request sets no ``max_output_tokens``
    (else ``DEFAULT_MAX_TOKENS``). ``prompt_cache``: cache breakpoints (module docstring).
    """
    request = functions_only(request)  # custom tools: functions with one string argument
    for name in ("presence_penalty", "frequency_penalty"):
        if getattr(request, name):
            raise _unsupported(f"'{name}'", name, code=ErrorCode.UNSUPPORTED_PARAMETER)
    if request.verbosity not in (None, "medium"):  # medium is the default: no change asked
        raise _unsupported(
            "'text.verbosity' other than 'medium'",
            "text.verbosity",
            code=ErrorCode.UNSUPPORTED_PARAMETER,
        )
    system, messages = map_conversation(request)
    instruction = json_instruction(request.text_format)
    if instruction:
        system.append(instruction)
        request.ledger.note(Translation.JSON_FORMAT_AS_INSTRUCTION, "text.format")
    explicit = request.max_output_tokens is not None
    max_tokens = request.max_output_tokens if explicit else None
    if max_tokens is None:
        max_tokens = max_tokens_cap or DEFAULT_MAX_TOKENS
    max_tokens, budget = _thinking(request, max_tokens, max_tokens_cap, explicit)
    body: dict[str, Any] = {"model": request.model, "max_tokens": max_tokens, "messages": messages}
    if system:
        body["system"] = "\n\n".join(system)
    map_tools(request, body)
    if request.text_format is not None and request.text_format.dialect is not None:
        map_output_format(request, body)
    if budget is not None and _unthought_tool_use(messages):
        # Anthropic refuses thinking when the assistant turn the request continues used a
        # tool without its thinking blocks (a client that replays calls without their
        # reasoning items, a conversation begun on another provider): its docs say to send
        # such a request without thinking.
        budget = None
        request.ledger.note(
            Translation.REASONING_LEFT_OFF, "reasoning.effort", UNTHOUGHT_TOOL_USE_NOTICE
        )
    if budget is not None:
        _check_thinking_compatible(request, body)
        body["thinking"] = {"type": "enabled", "budget_tokens": budget}
        request.ledger.note(
            Translation.REASONING_EFFORT_AS_BUDGET, "reasoning.effort", f"{budget} tokens"
        )
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.top_p is not None:
        body["top_p"] = request.top_p
    if request.stop:
        body["stop_sequences"] = list(request.stop)
    user = request.user or request.safety_identifier
    if user:
        body["metadata"] = {"user_id": user}
    if request.safety_identifier or request.max_tool_calls is not None or request.prompt_cache_key:
        _note_settings(request)
    if prompt_cache:
        _cache_breakpoints(body)
    if stream:
        body["stream"] = True
    return body


def _note_settings(request: ModelRequest) -> None:
    """The ledger entries of settings Anthropic has no field of its own for."""
    ledger = request.ledger
    if not request.user and request.safety_identifier:
        ledger.note(Translation.SAFETY_IDENTIFIER_AS_USER, "safety_identifier")
    if request.max_tool_calls is not None:
        ledger.note(Translation.FIELD_DROPPED, "max_tool_calls", str(request.max_tool_calls))
    if request.prompt_cache_key:
        ledger.note(Translation.FIELD_DROPPED, "prompt_cache_key")


_EPHEMERAL = {"type": "ephemeral"}
# Blocks a breakpoint may stand on (thinking blocks cannot carry one).
_CACHEABLE = frozenset({"text", "image", "document", "tool_use", "tool_result"})


def _cache_breakpoints(body: dict[str, Any]) -> None:
    """``cache_control`` on the system prompt, the last tool and the last message's last
    cacheable block: three of the four breakpoints Anthropic allows. The tools and blocks
    are the body's own (made by this module), so they are marked in place."""
    system = body.get("system")
    if system:
        body["system"] = [{"type": "text", "text": system, "cache_control": _EPHEMERAL}]
    if body.get("tools"):
        body["tools"][-1]["cache_control"] = _EPHEMERAL
    if body["messages"]:
        for block in reversed(body["messages"][-1]["content"]):
            if block.get("type") in _CACHEABLE:
                block["cache_control"] = _EPHEMERAL
                break
