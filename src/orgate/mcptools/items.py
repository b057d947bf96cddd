"""MCP items in a conversation: what the model reads of them, and the approvals a client answered.

A model never sees an ``mcp_*`` item: every provider gets an executed (or
refused) ``mcp_call`` as the ``function_call`` + ``function_call_output`` pair it
was to the model (``<label>__<tool>``), and neither ``mcp_list_tools`` nor the
approval items (the tools are listed again; an approval becomes an ``mcp_call``).

``read_context`` returns the model's input and the ``Pending`` approvals: an
``mcp_approval_response`` of this request's own input naming an
``mcp_approval_request`` of the conversation whose call has not run yet. A
response naming no such request is a 400; an answered request that already has
its ``mcp_call`` is not run twice.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

import orjson

from orgate.mcptools.servers import SEPARATOR
from orgate.protocol import (
    FunctionCallItemParam,
    FunctionCallOutputItemParam,
    McpApprovalRequestItemParam,
    McpApprovalResponseItemParam,
    McpCallItemParam,
    McpListToolsItemParam,
)
from orgate.protocol.errors import invalid_value

_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")
_MCP_TYPES = (
    McpListToolsItemParam,
    McpCallItemParam,
    McpApprovalRequestItemParam,
    McpApprovalResponseItemParam,
)


@dataclass(frozen=True, slots=True)
class Pending:
    """An answered approval request whose call runs (or is refused) in this response."""

    request: McpApprovalRequestItemParam
    approve: bool
    reason: str | None
    param: str  # the answer's place in the client's input


def has_mcp_items(items: list[Any]) -> bool:
    return any(isinstance(item, _MCP_TYPES) for item in items)


def call_output(output: str | None, error: dict[str, Any] | None) -> str:
    """What the model reads of a call's result: its output, or its error said as such."""
    if error is None:
        return output or ""
    if error.get("type") == "mcp_tool_execution_error":
        return "The tool failed: " + orjson.dumps(error.get("content")).decode()
    return "The tool did not run: " + str(error.get("message", "error"))


def read_context(history: list[Any], new_input: list[Any]) -> tuple[list[Any], list[Pending]]:
    """(the items the model reads, the approvals to act on). Items are protocol models."""
    context = [*history, *new_input]
    requests = {item.id: item for item in context if type(item) is McpApprovalRequestItemParam}
    answered = {
        item.approval_request_id
        for item in context
        if type(item) is McpCallItemParam and item.approval_request_id
    }
    pending: list[Pending] = []
    seen: set[str] = set()
    offset = len(history)
    model_items: list[Any] = []
    for position, item in enumerate(context):
        kind = type(item)
        if kind is McpCallItemParam:
            model_items.extend(_as_function_pair(item))
        elif kind is McpApprovalResponseItemParam:
            if position < offset:
                continue  # answered in an earlier turn
            where = f"input[{position - offset}].approval_request_id"
            request = requests.get(item.approval_request_id)
            if request is None:
                raise invalid_value(
                    f"{where}: no mcp_approval_request '{item.approval_request_id}' in this conversation.",
                    param=where,
                )
            if item.approval_request_id in answered or item.approval_request_id in seen:
                continue
            seen.add(item.approval_request_id)
            pending.append(Pending(request, item.approve, item.reason, where))
        elif kind not in _MCP_TYPES:
            model_items.append(item)
    return model_items, pending


def _as_function_pair(item: McpCallItemParam) -> list[Any]:
    digest = hashlib.sha256(
        f"{item.server_label}\0{item.name}\0{item.arguments}".encode()
    ).hexdigest()[:24]
    call_id = (item.id or f"mcp_{digest}")[:64]
    name = _UNSAFE.sub("_", f"{item.server_label}{SEPARATOR}{item.name}")[:64]
    error = (
        item.error
        if isinstance(item.error, dict)
        else ({"type": "mcp_protocol_error", "message": str(item.error)} if item.error else None)
    )
    return [
        FunctionCallItemParam(
            call_id=call_id, name=name, arguments=item.arguments, status="completed"
        ),
        FunctionCallOutputItemParam(call_id=call_id, output=call_output(item.output, error)),
    ]
