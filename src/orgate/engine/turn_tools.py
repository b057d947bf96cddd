"""The tools of one turn: which go upstream, which are hosted or dropped, and the tool choice.

``split_tools`` parts a request's tools into function (and ``custom``) tools, hosted tools an
upstream runs and hosted tools dropped by the model's ``hosted_tools`` policy;
``lift_additional_tools`` offers the tools of ``additional_tools`` items as tools;
``mcp_tools`` are the tools orgate runs itself; ``check_tool_choice`` refuses a choice that
names no offered tool. No I/O.
"""

from __future__ import annotations

from typing import Any

from orgate.neutral import Deployment
from orgate.protocol import AdditionalToolsItemParam, HostedToolParam
from orgate.protocol.errors import ApiError, ErrorCode, invalid_value


def split_tools(
    tools: list[Any], deployment: Deployment, paths: list[str] | None = None
) -> tuple[list[Any], list[dict[str, Any]], list[tuple[str, str]]]:
    """``tools`` → (function and ``custom`` tools, hosted tools for the upstream, (param path,
    type) of those dropped); ``paths``: each tool's param path (default ``tools[i]``). Every
    upstream takes a ``custom`` tool (a function with one string argument where the upstream
    has no custom tools: ``orgate.providers.custom_tools``).

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
            f"Model '{deployment.name}' cannot run tools of type '{tool.type}' (its upstream does"
            " not host them;"
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


def check_tool_choice(choice: Any, tools: list[Any], *, mcp: bool = False) -> None:
    """A forced or allowed tool must be one of ``tools`` (a client mistake, not a model failure).
    ``mcp``: the request has MCP tools, which count for ``required`` (their names are known once
    listed)."""
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
                f"tool_choice names the {what[choice.type]} '{choice.name}', which is not in"
                " 'tools'.",
                param="tool_choice.name",
            )
        return
    for index, allowed in enumerate(choice.tools):
        if (allowed.type, allowed.name) not in names:
            raise invalid_value(
                f"tool_choice.tools[{index}] names the {what[allowed.type]} '{allowed.name}',"
                " which is not in 'tools'.",
                param=f"tool_choice.tools[{index}].name",
            )


__all__ = ["check_tool_choice", "lift_additional_tools", "mcp_tools", "split_tools"]
