"""Talking to MCP servers with the official ``mcp`` SDK: list tools (cached), call one.

Every outcome is a value: ``ToolList`` (tools, or the error that stopped the
listing) and ``CallResult`` (output, or an error in OpenAI's ``mcp_call.error``
shape). A timeout, a refused connection, a server that answers garbage, a
listing past its bounds (tool count, bytes, each ``inputSchema`` under the
client-schema bounds of ``orgate.gate.bounds`` and compilable by the gate) or a
result past ``max_result_bytes`` never raises.

Each operation opens its own connection (streamable HTTP, or SSE for servers
that still need it): nothing is held between responses but the cached tool
lists, which expire after the server's ``list_ttl``. Every HTTP response body is
capped (``_BoundedTransport``): a server cannot make the gateway read without end.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import orjson

from orgate.gate import ToolsError, load_tools
from orgate.gate.bounds import SchemaBounds, SchemaTooComplex, check_bounds
from orgate.mcptools.servers import McpServer

log = logging.getLogger("orgate.mcp")

#: JSON-RPC-style codes of the failures that are not the tool's own (``mcp_protocol_error``).
TIMEOUT = -32001
UNREACHABLE = -32000
TOO_LARGE = -32002
#: JSON-RPC "invalid params": orgate refused the call (the gate, a denial, the call budget, a
#: tool not offered) and the server was never asked.
REFUSED = -32602


@dataclass(frozen=True, slots=True)
class McpTool:
    name: str
    description: str | None
    input_schema: dict[str, Any]
    annotations: dict[str, Any] | None = None

    def wire(self) -> dict[str, Any]:
        """As in an ``mcp_list_tools`` item."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
            "annotations": self.annotations,
        }


@dataclass(frozen=True, slots=True)
class ToolList:
    tools: tuple[McpTool, ...] = ()
    error: str | None = None


@dataclass(frozen=True, slots=True)
class CallResult:
    output: str | None = None
    error: dict[str, Any] | None = None  # OpenAI's McpToolCallError shapes

    @property
    def outcome(self) -> str:
        if self.error is None:
            return "ok"
        return "tool_error" if self.error.get("type") == "mcp_tool_execution_error" else "failed"


def protocol_error(code: int, message: str) -> dict[str, Any]:
    return {"type": "mcp_protocol_error", "code": code, "message": message}


@dataclass(slots=True)
class McpClient:
    """Lists and calls tools; one instance per app (it holds the tool-list cache)."""

    bounds: SchemaBounds = field(default_factory=SchemaBounds)
    _lists: dict[tuple[str, str], tuple[float, ToolList]] = field(default_factory=dict)

    async def list_tools(self, server: McpServer) -> ToolList:
        key = (server.label, server.url)
        cached = self._lists.get(key)
        now = time.monotonic()
        if cached is not None and now - cached[0] < server.list_ttl:
            return cached[1]
        listed = await self._list(server)
        if listed.error is None:  # a failure is asked again next time
            self._lists[key] = (now, listed)
        return listed

    def forget(self, server: McpServer) -> None:
        self._lists.pop((server.label, server.url), None)

    async def _list(self, server: McpServer) -> ToolList:
        try:
            async with asyncio.timeout(server.connect_timeout + server.call_timeout):
                async with _transport().connect(server) as client:
                    raw: list[Any] = []
                    cursor: str | None = None
                    while True:
                        page = await client.list_tools(cursor=cursor)
                        raw.extend(page.tools)
                        if len(raw) > server.max_tools:
                            return ToolList(
                                error=f"the server lists more than {server.max_tools} tools "
                                "(max_tools)"
                            )
                        cursor = page.next_cursor
                        if not cursor:
                            break
        except TimeoutError:
            return ToolList(
                error="listing the tools timed out after "
                f"{server.connect_timeout + server.call_timeout:g}s"
            )
        except Exception as exc:  # noqa: BLE001 - any failure of a server is reported, not raised
            return ToolList(error=f"could not list the tools: {_describe(exc)}")
        return self._bounded(server, raw)

    def _bounded(self, server: McpServer, raw: list[Any]) -> ToolList:
        tools: list[McpTool] = []
        size = 0
        for tool in raw:
            schema = (
                tool.input_schema if isinstance(tool.input_schema, dict) else {"type": "object"}
            )
            annotations = (
                tool.annotations.model_dump(mode="json", exclude_none=True)
                if tool.annotations is not None
                else None
            )
            listed = McpTool(tool.name, tool.description, schema, annotations)
            size += len(orjson.dumps(listed.wire()))
            if size > server.max_list_bytes:
                return ToolList(
                    error=f"the tool list is larger than {server.max_list_bytes} bytes "
                    "(max_list_bytes)"
                )
            try:
                check_bounds(schema, self.bounds)
                load_tools({tool.name: schema})
            except (SchemaTooComplex, ToolsError) as exc:
                return ToolList(error=f"the inputSchema of tool {tool.name!r} is refused: {exc}")
            tools.append(listed)
        return ToolList(tuple(tools))

    async def call(self, server: McpServer, name: str, arguments: dict[str, Any]) -> CallResult:
        try:
            async with asyncio.timeout(server.connect_timeout + server.call_timeout):
                async with _transport().connect(server) as client:
                    result = await client.call_tool(
                        name, arguments, read_timeout_seconds=server.call_timeout
                    )
        except TimeoutError:
            return CallResult(
                error=protocol_error(
                    TIMEOUT,
                    f"the call timed out after {server.connect_timeout + server.call_timeout:g}s",
                )
            )
        except Exception as exc:  # noqa: BLE001 - any failure of a server is reported, not raised
            text = _describe(exc)
            if isinstance(_leaf(exc), _transport().TooLarge):
                return CallResult(error=protocol_error(TOO_LARGE, f"the call failed: {text}"))
            if (
                "timed out" in text.lower() or "Timeout" in text
            ):  # the SDK's read timeout, or the HTTP client's
                return CallResult(
                    error=protocol_error(
                        TIMEOUT, f"the call timed out after {server.call_timeout:g}s ({text})"
                    )
                )
            return CallResult(error=protocol_error(UNREACHABLE, f"the call failed: {text}"))
        content = [part.model_dump(mode="json", exclude_none=True) for part in result.content]
        output = _text_of(content, result.structured_content)
        if len(output.encode()) > server.max_result_bytes:
            return CallResult(
                error=protocol_error(
                    TOO_LARGE,
                    f"the result is larger than {server.max_result_bytes} bytes (max_result_bytes)",
                )
            )
        if result.is_error:
            return CallResult(error={"type": "mcp_tool_execution_error", "content": content})
        return CallResult(output=output)


def _text_of(content: list[dict[str, Any]], structured: Any) -> str:
    """A result as the text the model reads: its text parts, else its structured content,
    else the parts as JSON."""
    texts = [part.get("text", "") for part in content if part.get("type") == "text"]
    if texts and len(texts) == len(content):
        return "".join(texts)
    if structured is not None and not content:
        return orjson.dumps(structured).decode()
    return orjson.dumps(content).decode()


def _leaf(exc: BaseException) -> BaseException:
    """An exception group's first leaf (anyio wraps transport errors)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _describe(exc: BaseException) -> str:
    """An exception (a group's first leaf) in one line."""
    exc = _leaf(exc)
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"[:300] if text else type(exc).__name__


def _transport() -> Any:
    """The module that speaks to servers through the SDK, imported on the first MCP operation:
    the SDK (and what it imports, OpenTelemetry's API among it) costs a server that configures
    no MCP server nothing at start-up."""
    from orgate.mcptools import transport

    return transport
