"""The app's MCP runtime: the configured servers, the SDK client, and their ``/metrics`` counters.

Every MCP call decision (run, refused by the gate, denied, waiting for approval,
over budget) is counted by server, tool and outcome, and each listing by server
and outcome; the audit log line itself is the engine's (``orgate.mcp.audit``).
"""

from __future__ import annotations

import logging

from prometheus_client import CollectorRegistry, Counter, Histogram

from orgate.config import Settings, mcp_registry
from orgate.engine.mcp_loop import CallRecord, McpRuntime
from orgate.mcptools.client import McpClient
from orgate.server.body import schema_bounds
from orgate.server.log_redaction import REDACTOR

#: The ``server`` and ``tool`` label of the calls to servers a request named by ``server_url``.
REQUEST_NAMED = "_request"


def build_mcp_runtime(settings: Settings, registry: CollectorRegistry) -> McpRuntime:
    """The runtime ``ResponsesService`` runs MCP tools with (``ConfigError`` on an unset secret)."""
    # The SDK's HTTP client logs every request at INFO (several per call);
    # the audit line says what matters.
    logging.getLogger("httpx2").setLevel(logging.WARNING)
    servers = mcp_registry(settings)
    REDACTOR.add_secrets(
        value for server in servers.servers.values() for value in server.headers.values()
    )
    REDACTOR.add_headers(name for server in servers.servers.values() for name in server.headers)
    calls = Counter(
        "orgate_mcp_calls",
        "MCP tool call decisions, by server, tool and outcome.",
        ["server", "tool", "outcome"],
        registry=registry,
    )
    seconds = Histogram(
        "orgate_mcp_call_seconds",
        "Duration of the MCP tool calls that ran, by server.",
        ["server"],
        registry=registry,
    )
    lists = Counter(
        "orgate_mcp_list_tools",
        "MCP tool listings, by server and outcome.",
        ["server", "outcome"],
        registry=registry,
    )

    configured = servers.servers

    def on_call(entry: CallRecord) -> None:
        # A server a request named by URL has a label and tools its client chose:
        # one series for all of them.
        server, tool = (
            (entry.server, entry.tool)
            if entry.server in configured
            else (REQUEST_NAMED, REQUEST_NAMED)
        )
        calls.labels(server, tool, entry.outcome).inc()
        if entry.duration:
            seconds.labels(server).observe(entry.duration)

    def on_list(server: str, outcome: str) -> None:
        lists.labels(server if server in configured else REQUEST_NAMED, outcome).inc()

    return McpRuntime(
        servers,
        McpClient(bounds=schema_bounds(settings.limits)),
        max_tool_calls=settings.mcp.max_tool_calls,
        on_call=on_call,
        on_list=on_list,
    )
