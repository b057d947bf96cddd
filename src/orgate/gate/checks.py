"""``check(item, tools)``: may this logged item be replayed as a generic function call?

The checks run in a fixed order and the first failure wins:

1. ``type`` missing, not a string, or containing ``:`` → ``namespaced``
   (an item with no ``type`` but a string ``role`` is the spec's shorthand
   message and counts as ``message``);
2. ``type`` is not ``function_call`` → ``not_function_call``;
3. ``status`` is not ``completed`` → ``status``;
4. ``arguments`` is not a string → ``arguments_type``;
5. ``arguments`` does not parse as JSON → ``arguments_parse``;
6. the named tool is not in the catalogue → ``unknown_tool``;
7. the parsed arguments fail the tool's JSON Schema → ``arguments_schema``;
8. otherwise ``ok``.

With ``tools=None`` there is no tool catalogue and steps 6–7 are skipped (a
call must still carry a string ``name``). With a catalogue, even an empty one,
a name that is not in it is ``unknown_tool``. The gate never edits the item.
"""

from __future__ import annotations

from typing import Any

import orjson

from orgate.gate.tools import ToolCatalog, load_tools
from orgate.gate.verdict import (
    ARGUMENTS_PARSE,
    ARGUMENTS_SCHEMA,
    ARGUMENTS_TYPE,
    HOSTED_CALL,
    NAMESPACED,
    NOT_FUNCTION_CALL,
    OK,
    STATUS,
    UNKNOWN_TOOL,
    Verdict,
)

# Items of OpenAI's hosted tools: calls the upstream ran itself, and their results. Not in the
# spec; a native Responses upstream returns them (Codex replays them in its history).
HOSTED_CALL_TYPES = frozenset(
    {
        "web_search_call",
        "file_search_call",
        "code_interpreter_call",
        "image_generation_call",
        "computer_call",
        "computer_call_output",
        "mcp_call",
        "mcp_list_tools",
        "mcp_approval_request",
        "mcp_approval_response",
        "local_shell_call",
        "local_shell_call_output",
        "shell_call",
        "shell_call_output",
        "apply_patch_call",
        "apply_patch_call_output",
        "tool_search_call",
        "tool_search_output",
    }
)
_loads = orjson.loads


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def check(
    item: Any,
    tools: Any = None,
    *,
    require_status: bool = True,
    every_error: bool = True,
) -> Verdict:
    """The gate's verdict for one item (any JSON value; never raises for one).

    ``tools`` is ``None`` (no catalogue), a ``ToolCatalog``, or anything
    ``load_tools`` accepts (converting it on every call — pass a ``ToolCatalog``
    in loops). ``require_status=False`` lets a call with no ``status`` at all
    through step 3 (request inputs often omit it); a present status other than
    ``completed`` still fails. ``every_error=False``: step 7 reports the first schema error
    only (``CompiledSchema.validate``), for arguments too large to word every error of.
    """
    if not isinstance(item, dict):
        return Verdict(NAMESPACED, f"item is {_kind(item)}, not an object with a type")
    name = item.get("name")
    if name.__class__ is not str:
        name = None
    call_id = item.get("call_id")
    if call_id.__class__ is not str:
        call_id = None
    id_ = item.get("id")
    if id_.__class__ is not str:
        id_ = None
    typ = item.get("type")
    # 1.-2. a function_call (the common case, tested first) or the verdict for any other type
    if typ != "function_call" or typ.__class__ is not str:
        return _other_type(item, typ, name, call_id, id_, require_status)
    # 3. status
    status = item.get("status")
    if status != "completed" and (require_status or "status" in item):
        return Verdict(STATUS, _status_problem(item, status), (), name, call_id, id_)
    # 4. arguments must be a JSON string
    arguments = item.get("arguments")
    if arguments.__class__ is not str:
        what = "missing" if "arguments" not in item else f"{_kind(arguments)}"
        return Verdict(
            ARGUMENTS_TYPE, f"arguments is {what}, not a JSON string", (), name, call_id, id_
        )
    # 5. arguments must parse
    try:
        parsed = _loads(arguments)
    except ValueError as exc:  # orjson.JSONDecodeError
        return Verdict(
            ARGUMENTS_PARSE, f"arguments are not valid JSON: {exc}", (), name, call_id, id_
        )
    return _tool_verdict(parsed, tools, name, call_id, id_, every_error)


def check_first_error(item: Any, tools: Any) -> Verdict:
    """``check`` reporting the first schema error only: a job of a schema work process
    (``orgate.gate.work``) for a call whose arguments are not small work."""
    return check(item, tools, every_error=False)


def _other_type(
    item: dict[str, Any],
    typ: Any,
    name: str | None,
    call_id: str | None,
    id_: str | None,
    require_status: bool,
) -> Verdict:
    """Steps 1 and 2 for an item whose ``type`` is not ``function_call``: namespaced (or no
    string type), a hosted tool's item, a ``custom_tool_call`` (checked on), or not a call."""
    if typ.__class__ is not str:
        if typ is None and "type" not in item and isinstance(item.get("role"), str):
            return Verdict(
                NOT_FUNCTION_CALL,
                "message (role shorthand), not a function_call",
                (),
                name,
                call_id,
                id_,
            )
        msg = "item has no type" if "type" not in item else f"type is {_kind(typ)}, not a string"
        return Verdict(NAMESPACED, msg, (), name, call_id, id_)
    if ":" in typ:
        return Verdict(
            NAMESPACED,
            f"{typ!r} is a provider extension: keep it in its original session",
            (),
            name,
            call_id,
            id_,
        )
    # 1b. a hosted tool's call: run by whoever hosts the tool (an upstream, or orgate for MCP),
    # never by a client
    if typ in HOSTED_CALL_TYPES:
        return Verdict(
            HOSTED_CALL,
            f"{typ!r} is a hosted tool's item (run by the upstream or the gateway, not "
            "by a client): keep it in its original session",
            (),
            name,
            call_id,
            id_,
        )
    # 2. function_call (and custom_tool_call: free-form input) only
    if typ == "custom_tool_call":
        return _custom_call(item, name, call_id, id_, require_status)
    return Verdict(NOT_FUNCTION_CALL, f"{typ!r} is not a function_call", (), name, call_id, id_)


def _status_problem(item: dict[str, Any], status: Any) -> str:
    """Why a function call's status (not ``completed``) fails step 3."""
    if status == "in_progress":
        return "status is 'in_progress': the call is still streaming"
    if status == "incomplete":
        return "status is 'incomplete': the arguments may be truncated"
    if "status" not in item:
        return "status is missing (must be 'completed')"
    return f"status is {status!r}, not 'completed'"


def _tool_verdict(
    parsed: Any,
    tools: Any,
    name: str | None,
    call_id: str | None,
    id_: str | None,
    every_error: bool = True,
) -> Verdict:
    """Steps 6 to 8 for a call whose arguments parsed: the named tool, then its schema."""
    # 6. the named tool must exist
    if name is None:
        return Verdict(
            UNKNOWN_TOOL, "the call names no tool (name is not a string)", (), name, call_id, id_
        )
    if tools is None:
        return Verdict(
            OK, "ok (no tool catalogue: name and schema not checked)", (), name, call_id, id_
        )
    catalog = tools if isinstance(tools, ToolCatalog) else load_tools(tools)
    tool = catalog.get(name)
    if tool is None:
        return Verdict(UNKNOWN_TOOL, f"no tool named {name!r} is defined", (), name, call_id, id_)
    # 7. the arguments must match the tool's schema (never "fixed")
    errors = tool.schema.validate(parsed, every=every_error)
    if errors:
        first = errors[0]
        return Verdict(
            ARGUMENTS_SCHEMA, f"{first.path}: {first.message}", errors, name, call_id, id_
        )
    return Verdict(OK, "ok", (), name, call_id, id_)


def _custom_call(
    item: dict[str, Any],
    name: str | None,
    call_id: str | None,
    id_: str | None,
    require_status: bool,
) -> Verdict:
    """A ``custom_tool_call``: its ``input`` is free-form text, with no schema to check. The
    status and the input's type are checked as a function call's are; a string input is ``ok``."""
    status = item.get("status")
    if status != "completed" and (require_status or "status" in item):
        return Verdict(
            STATUS,
            f"status is {status!r}, not 'completed'"
            if "status" in item
            else "status is missing (must be 'completed')",
            (),
            name,
            call_id,
            id_,
        )
    value = item.get("input")
    if value.__class__ is not str:
        what = "missing" if "input" not in item else _kind(value)
        return Verdict(ARGUMENTS_TYPE, f"input is {what}, not a string", (), name, call_id, id_)
    if name is None:
        return Verdict(
            UNKNOWN_TOOL, "the call names no tool (name is not a string)", (), name, call_id, id_
        )
    return Verdict(
        OK, "ok (custom tool: free-form input, no schema to check)", (), name, call_id, id_
    )
