"""Real MCP servers for the tests: the SDK's own server side (``MCPServer``, streamable HTTP)
under uvicorn, in a thread, on a free port of the loopback address (or of ``host``).

``tools_server()``: tools that answer (``add``, ``echo``), one slow (``slow``), one failing
(``fail``), one with a strict schema (``code``: three capitals, a count 1-5), one with a huge
result (``huge``); it records the calls it ran (``CALLS``). ``hostile_server()`` lists 300 tools.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import Annotated

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

CALLS: list[tuple[str, dict]] = []


def tools_server() -> MCPServer:
    server = MCPServer("orgate-test-tools")

    @server.tool(description="Add two integers.")
    def add(a: int, b: int) -> str:
        CALLS.append(("add", {"a": a, "b": b}))
        return str(a + b)

    @server.tool(description="Echo a text back.")
    def echo(text: str) -> str:
        CALLS.append(("echo", {"text": text}))
        return f"echo: {text}"

    @server.tool(description="Wait a number of seconds, then answer.")
    async def slow(seconds: float) -> str:
        CALLS.append(("slow", {"seconds": seconds}))
        await asyncio.sleep(seconds)
        return "done waiting"

    @server.tool(description="Always fails.")
    def fail(reason: str) -> str:
        CALLS.append(("fail", {"reason": reason}))
        raise ToolError(f"the tool failed on purpose: {reason}")

    @server.tool(description="Look up a code.")
    def code(
        code: Annotated[str, Field(pattern=r"^[A-Z]{3}$")], count: Annotated[int, Field(ge=1, le=5)]
    ) -> str:
        CALLS.append(("code", {"code": code, "count": count}))
        return f"{code} x{count}"

    @server.tool(description="Answer a huge text.")
    def huge(size: int) -> str:
        CALLS.append(("huge", {"size": size}))
        return "x" * size

    return server


def hostile_server(count: int = 300) -> MCPServer:
    server = MCPServer("orgate-test-hostile")
    for index in range(count):

        def tool(value: str) -> str:
            return value

        server.add_tool(tool, name=f"tool_{index}", description="d" * 200)
    return server


class Running:
    """An MCP server's ASGI app (streamable HTTP, or SSE) served by uvicorn in a thread;
    ``url`` is its endpoint."""

    def __init__(self, server: MCPServer, *, sse: bool = False, host: str = "127.0.0.1") -> None:
        self.app = (
            server.sse_app(host=host)
            if sse
            else server.streamable_http_app(stateless_http=True, json_response=True, host=host)
        )  # the host: the SDK accepts requests for it alone (its DNS rebinding protection)
        self.sock = socket.socket()
        self.sock.bind((host, 0))
        self.port = self.sock.getsockname()[1]
        self.url = f"http://{host}:{self.port}/{'sse' if sse else 'mcp'}"
        self.uvicorn = uvicorn.Server(uvicorn.Config(self.app, log_level="warning", lifespan="on"))
        self.thread = threading.Thread(
            target=self.uvicorn.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    def start(self) -> Running:
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.uvicorn.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the MCP test server did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.uvicorn.should_exit = True
        self.thread.join(timeout=30)
        self.sock.close()
