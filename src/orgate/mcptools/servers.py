"""The MCP servers an operator allows, and which of them one request may use.

``McpServer`` is one ``[[mcp_servers]]`` entry with its secrets resolved;
``McpRegistry`` holds them (and the origins a request's own ``server_url`` may
name). ``resolve(tools, tenant)`` turns a request's ``{"type": "mcp", ...}``
tools into ``McpUse``s — the server, the tools allowed, the approval policy —
or refuses the request with a 400 naming the tool's field. Nothing here does I/O.

Approval is the stricter of the operator's and the request's word: a request
may ask for approval where the operator does not, never the reverse. A request's
``allowed_tools`` narrows the operator's list, never widens it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, Literal
from urllib.parse import urlsplit

from orgate.protocol.errors import (
    ApiError,
    ErrorCode,
    invalid_type,
    invalid_value,
    unsupported_parameter,
)

Approval = Literal["always", "never"]
LABEL = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
#: Separates a server's label from its tool's name in the function name the model sees.
SEPARATOR = "__"


@dataclass(frozen=True, slots=True)
class McpServer:
    """One operator-configured MCP server (secrets resolved)."""

    label: str
    url: str
    transport: Literal["streamable-http", "sse"] = "streamable-http"
    headers: dict[str, str] = field(default_factory=dict)
    allowed_tools: tuple[str, ...] | None = None  # None: every tool the server lists
    require_approval: Approval = "always"
    approval_per_tool: dict[str, Approval] = field(default_factory=dict)
    tenants: tuple[str, ...] = ("*",)
    connect_timeout: float = 10.0
    call_timeout: float = 60.0
    list_ttl: float = 300.0
    max_tools: int = 128
    max_result_bytes: int = 100_000
    max_list_bytes: int = 1_000_000
    #: The operator vouches for what the server returns: its results reach the model unmarked
    #: and are not untrusted output (docs/mcp.md). Never for a server a request names.
    trust_output: bool = False
    #: A call of this server's tools asks for approval once the model has read untrusted
    #: output in the same response, whatever ``require_approval`` says.
    approval_after_untrusted: bool = False

    def approval_for(self, tool: str) -> Approval:
        return self.approval_per_tool.get(tool, self.require_approval)

    def allows_tenant(self, tenant: str) -> bool:
        return "*" in self.tenants or tenant in self.tenants


@dataclass(frozen=True, slots=True)
class McpUse:
    """One ``mcp`` tool of a request, resolved: the server and what the request narrowed."""

    index: int  # in the request's ``tools``
    server: McpServer
    allowed_tools: frozenset[str] | None  # the request's list (None: the server's own)
    always: frozenset[str] | None  # tools the request wants approved (None: every tool)
    never: bool  # the request asked for no approval at all

    def offers(self, tool: str) -> bool:
        server_allows = self.server.allowed_tools is None or tool in self.server.allowed_tools
        return server_allows and (self.allowed_tools is None or tool in self.allowed_tools)

    def needs_approval(self, tool: str, *, after_untrusted: bool = False) -> bool:
        """The stricter of the operator's and the request's policy; ``after_untrusted``: the
        model has read untrusted output in this response (the server may then ask)."""
        if self.server.approval_for(tool) == "always":
            return True
        if after_untrusted and self.server.approval_after_untrusted:
            return True
        if self.never:
            return False
        return self.always is None or tool in self.always

    def function_name(self, tool: str) -> str:
        return f"{self.server.label}{SEPARATOR}{tool}"


def origin(url: str) -> str:
    parts = urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme, 0)
    return f"{parts.scheme}://{(parts.hostname or '').lower()}:{port}"


@dataclass(slots=True)
class McpRegistry:
    """The configured servers (by label) and the origins a request's ``server_url`` may name."""

    servers: dict[str, McpServer] = field(default_factory=dict)
    request_origins: frozenset[str] = frozenset()  # normalised by ``origin``
    request_defaults: McpServer | None = None  # timeouts and bounds of a request-named server

    def resolve(self, tools: list[tuple[int, dict[str, Any]]], tenant: str) -> list[McpUse]:
        uses: list[McpUse] = []
        labels: set[str] = set()
        for index, tool in tools:
            use = self._resolve_one(index, tool, tenant)
            if use.server.label in labels:
                raise invalid_value(
                    f"tools[{index}] names the MCP server '{use.server.label}' a second time.",
                    param=f"tools[{index}].server_label",
                )
            labels.add(use.server.label)
            uses.append(use)
        return uses

    def _resolve_one(self, index: int, tool: dict[str, Any], tenant: str) -> McpUse:
        where = f"tools[{index}]"
        label = tool.get("server_label")
        if not isinstance(label, str) or not LABEL.match(label):
            raise invalid_value(
                f"{where}.server_label must be 1-32 letters, digits, '_' or '-'.",
                param=f"{where}.server_label",
            )
        url = tool.get("server_url")
        server = self.servers.get(label)
        if url is not None:
            server = self._request_server(where, label, url, tool)
        elif server is None:
            raise ApiError.of(
                ErrorCode.UNKNOWN_MCP_SERVER,
                f"{where}.server_label: no MCP server '{label}' is configured.",
                param=f"{where}.server_label",
            )
        elif tool.get("headers") is not None:
            raise unsupported_parameter(
                f"{where}.headers: the MCP server '{label}' is configured by the "
                "operator, with its own headers.",
                param=f"{where}.headers",
            )
        if not server.allows_tenant(tenant):
            raise ApiError.of(
                ErrorCode.MCP_SERVER_FORBIDDEN,
                f"{where}.server_label: the MCP server '{label}' is not available to this API key.",
                param=f"{where}.server_label",
            )
        for key in ("connector_id", "authorization"):
            if tool.get(key) is not None:
                raise unsupported_parameter(
                    f"{where}.{key} is not supported: MCP servers are configured by the operator.",
                    param=f"{where}.{key}",
                )
        return McpUse(
            index,
            server,
            _allowed(where, tool.get("allowed_tools")),
            *_approval(where, tool.get("require_approval")),
        )

    def _request_server(self, where: str, label: str, url: Any, tool: dict[str, Any]) -> McpServer:
        """A server the request names by URL: only at an origin the operator allows."""
        if (
            not isinstance(url, str)
            or urlsplit(url).scheme not in ("http", "https")
            or origin(url) not in self.request_origins
        ):
            raise ApiError.of(
                ErrorCode.MCP_ORIGIN_NOT_ALLOWED,
                f"{where}.server_url: MCP servers are configured by the operator; this "
                "origin is not allowed for a request.",
                param=f"{where}.server_url",
            )
        if label in self.servers:
            raise invalid_value(
                f"{where}.server_label '{label}' is a configured server: leave out server_url.",
                param=f"{where}.server_url",
            )
        headers = tool.get("headers") or {}
        if not isinstance(headers, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
        ):
            raise invalid_type(
                f"{where}.headers must map names to strings.", param=f"{where}.headers"
            )
        # A server nobody configured asks before every call unless the request says otherwise.
        base = self.request_defaults or McpServer(label=label, url=url)
        return replace(
            base,
            label=label,
            url=url,
            headers=dict(headers),
            allowed_tools=None,
            require_approval="always",
            approval_per_tool={},
            tenants=("*",),
            trust_output=False,
        )


def _allowed(where: str, value: Any) -> frozenset[str] | None:
    if value is None:
        return None
    if isinstance(value, dict):  # OpenAI's filter form: {"tool_names": [...]}
        value = value.get("tool_names")
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise invalid_type(
            f"{where}.allowed_tools must be a list of tool names.", param=f"{where}.allowed_tools"
        )
    return frozenset(value)


def _approval(where: str, value: Any) -> tuple[frozenset[str] | None, bool]:
    """The request's ``require_approval``: (tools it wants approved or None for all, 'never')."""
    if value is None or value == "always":
        return None, False
    if value == "never":
        return frozenset(), True
    if isinstance(value, dict):  # {"always": {"tool_names": [...]}, "never": {"tool_names": [...]}}
        always = value.get("always") or {}
        names = always.get("tool_names") if isinstance(always, dict) else None
        if names is None or (isinstance(names, list) and all(isinstance(n, str) for n in names)):
            return frozenset(names or ()), False
    raise invalid_value(
        f"{where}.require_approval must be 'always', 'never' or {{\"always\": "
        f'{{"tool_names": [...]}}}}.',
        param=f"{where}.require_approval",
    )
