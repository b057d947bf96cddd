"""Which configured MCP server a request may use, and the approval rule (the stricter side wins)."""

from __future__ import annotations

import pytest

from orgate.config import ConfigError, Settings, mcp_registry
from orgate.mcptools.servers import McpRegistry, McpServer
from orgate.protocol.errors import ApiError

SERVER = McpServer(
    label="docs",
    url="http://127.0.0.1:9/mcp",
    allowed_tools=("search", "delete"),
    require_approval="never",
    approval_per_tool={"delete": "always"},
    tenants=("acme",),
)
REGISTRY = McpRegistry(
    servers={"docs": SERVER}, request_origins=frozenset({"https://mcp.example.com:443"})
)


def test_operator_approval_is_a_floor_the_request_cannot_lower() -> None:
    (use,) = REGISTRY.resolve(
        [(0, {"type": "mcp", "server_label": "docs", "require_approval": "never"})], "acme"
    )
    assert not use.needs_approval("search") and use.needs_approval("delete")
    (strict,) = REGISTRY.resolve([(0, {"type": "mcp", "server_label": "docs"})], "acme")
    assert strict.needs_approval("search"), (
        "a request without require_approval asks, as OpenAI's default"
    )
    (some,) = REGISTRY.resolve(
        [
            (
                0,
                {
                    "type": "mcp",
                    "server_label": "docs",
                    "require_approval": {"always": {"tool_names": ["search"]}},
                },
            )
        ],
        "acme",
    )
    assert some.needs_approval("search") and some.needs_approval("delete")


def test_allowed_tools_only_narrow() -> None:
    (use,) = REGISTRY.resolve(
        [(0, {"type": "mcp", "server_label": "docs", "allowed_tools": ["search", "drop_db"]})],
        "acme",
    )
    assert use.offers("search") and not use.offers("delete") and not use.offers("drop_db")


@pytest.mark.parametrize(
    ("tool", "tenant", "status", "param"),
    [
        ({"server_label": "nope"}, "acme", 400, "tools[3].server_label"),
        ({"server_label": "docs"}, "other", 403, "tools[3].server_label"),
        (
            {"server_label": "docs", "headers": {"Authorization": "x"}},
            "acme",
            400,
            "tools[3].headers",
        ),
        (
            {"server_label": "x", "server_url": "http://169.254.169.254/latest"},
            "acme",
            400,
            "tools[3].server_url",
        ),
        (
            {"server_label": "x", "server_url": "https://mcp.example.com.evil.io/mcp"},
            "acme",
            400,
            "tools[3].server_url",
        ),
        ({"server_label": "bad label"}, "acme", 400, "tools[3].server_label"),
        (
            {"server_label": "docs", "require_approval": "sometimes"},
            "acme",
            400,
            "tools[3].require_approval",
        ),
    ],
)
def test_refusals_name_the_field(tool: dict, tenant: str, status: int, param: str) -> None:
    with pytest.raises(ApiError) as refused:
        REGISTRY.resolve([(3, {"type": "mcp", **tool})], tenant)
    assert refused.value.status == status and refused.value.param == param


def test_a_listed_origin_may_be_named_and_always_asks_by_default() -> None:
    (use,) = REGISTRY.resolve(
        [
            (
                0,
                {
                    "type": "mcp",
                    "server_label": "adhoc",
                    "server_url": "https://MCP.example.com/mcp",
                },
            )
        ],
        "anyone",
    )
    assert use.server.url == "https://MCP.example.com/mcp" and use.needs_approval("anything")


def test_configuration_resolves_header_secrets_and_per_tool_approval() -> None:
    settings = Settings.model_validate(
        {
            "mcp_servers": [
                {
                    "label": "docs",
                    "url": "http://127.0.0.1:9/mcp",
                    "headers": {"Authorization": "env:TOKEN"},
                    "require_approval": {"*": "never", "delete": "always"},
                }
            ]
        }
    )
    registry = mcp_registry(settings, environ={"TOKEN": "Bearer s3cret"})
    server = registry.servers["docs"]
    assert server.headers == {"Authorization": "Bearer s3cret"}
    assert server.approval_for("search") == "never" and server.approval_for("delete") == "always"
    with pytest.raises(ConfigError, match="TOKEN"):
        mcp_registry(settings, environ={})


def test_a_listing_past_the_schema_bounds_fails_as_a_whole() -> None:
    from mcp import types

    from orgate.gate.bounds import SchemaBounds
    from orgate.mcptools.client import McpClient

    deep: dict = {"type": "string"}
    for _ in range(40):
        deep = {"type": "object", "properties": {"x": deep}}
    client = McpClient(bounds=SchemaBounds())
    tools = [
        types.Tool(name="fine", input_schema={"type": "object"}),
        types.Tool(name="deep", input_schema=deep),
    ]
    listed = client._bounded(SERVER, tools)
    assert listed.tools == () and listed.error is not None and "'deep'" in listed.error
    big = [
        types.Tool(name=f"t{i}", description="d" * 10_000, input_schema={"type": "object"})
        for i in range(5)
    ]
    small = McpServer(label="s", url="http://127.0.0.1:9/mcp", max_list_bytes=20_000)
    assert "max_list_bytes" in (client._bounded(small, big).error or "")
    assert [t.name for t in client._bounded(SERVER, tools[:1]).tools] == ["fine"]
