"""The MCP SDK's side of a connection: one SDK client per operation, over streamable HTTP (with
every response body capped) or SSE. Imported only when an MCP operation runs
(``client._transport``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx2
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from orgate.mcptools.servers import McpServer


class TooLarge(Exception):
    """A server sent more bytes than one operation may read."""


class _BoundedBody(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, limit: int) -> None:
        self.inner = inner
        self.limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        total = 0
        async for chunk in self.inner:
            total += len(chunk)
            if total > self.limit:
                raise TooLarge(f"the server sent more than {self.limit} bytes")
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


class _BoundedTransport(httpx2.AsyncBaseTransport):
    """HTTP with a cap on every response body: a JSON answer is read whole by the SDK, and the
    SDK's own bound covers SSE events only. A hostile server's endless body stops at the cap."""

    def __init__(self, limit: int) -> None:
        self.inner = httpx2.AsyncHTTPTransport()
        self.limit = limit

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self.inner.handle_async_request(request)
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        return httpx2.Response(
            response.status_code,
            headers=response.headers,
            stream=_BoundedBody(response.stream, self.limit),
            extensions=response.extensions,
            request=request,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


@asynccontextmanager
async def connect(server: McpServer) -> AsyncIterator[Client]:
    if server.transport == "sse":
        transport = sse_client(
            server.url,
            headers=server.headers,
            timeout=server.connect_timeout,
            sse_read_timeout=server.call_timeout,
        )
        async with Client(
            transport, read_timeout_seconds=server.call_timeout, cache=None
        ) as client:
            yield client
        return
    timeout = httpx2.Timeout(server.call_timeout, connect=server.connect_timeout)
    # What one operation may read: a listing or a result, JSON-escaped, with room for the envelope.
    limit = max(server.max_result_bytes, server.max_list_bytes) * 4 + 65_536
    http = httpx2.AsyncClient(
        headers=server.headers, timeout=timeout, transport=_BoundedTransport(limit)
    )
    async with http:
        transport = streamable_http_client(server.url, http_client=http, max_sse_event_size=limit)
        async with Client(
            transport, read_timeout_seconds=server.call_timeout, cache=None
        ) as client:
            yield client
