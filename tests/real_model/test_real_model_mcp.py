"""A real model in the MCP loop: whatever a 135M model makes of the tools, the response keeps
the loop's guarantees — a listing, then calls that either ran with a valid schema or carry the
error that kept them from running — and it ends; never a 500 or a stall."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from jsonschema import Draft202012Validator

from tests.mcp.servers import CALLS, Running, tools_server
from tests.real_model.conftest import MODEL, REQUEST_TIMEOUT, model_config
from tests.server_process import OrgateServer


@pytest.fixture(scope="module")
def mcp_gateway() -> Iterator[OrgateServer]:
    tools = Running(tools_server()).start()
    config = (
        model_config()
        + f"""
[[mcp_servers]]
label = "calc"
url = "{tools.url}"
allowed_tools = ["add"]
require_approval = "never"
"""
    )
    with OrgateServer(config) as running:
        yield running
    tools.stop()


def test_a_real_model_in_the_mcp_loop(mcp_gateway: OrgateServer) -> None:
    CALLS.clear()
    body = {
        "model": MODEL,
        "input": "What is 2 + 3? Use the add tool.",
        "tools": [{"type": "mcp", "server_label": "calc", "require_approval": "never"}],
        "max_output_tokens": 64,
        "max_tool_calls": 2,
    }
    with httpx.Client(
        base_url=mcp_gateway.url, headers=mcp_gateway.headers(), timeout=REQUEST_TIMEOUT
    ) as api:
        res = api.post("/v1/responses", json=body)
    assert res.status_code in (200, 400), (
        res.text
    )  # 400: the gate refused the model's calls (tool guard, enforce)
    out = res.json()
    if res.status_code == 400:
        assert out["error"]["code"] in ("invalid_tool_arguments", "tool_choice_violation"), out
        return
    assert out["status"] in ("completed", "incomplete", "failed"), out["status"]
    if out["status"] == "failed":  # the model never called validly, within the gate's retries
        assert out["error"]["code"] in ("invalid_tool_arguments", "tool_choice_violation"), out
    listing = out["output"][0]
    assert listing["type"] == "mcp_list_tools" and [t["name"] for t in listing["tools"]] == ["add"]
    schema = Draft202012Validator(listing["tools"][0]["input_schema"])
    calls = [item for item in out["output"] if item["type"] == "mcp_call"]
    assert len(calls) <= 3
    for call in calls:
        if call["error"] is None:
            schema.validate(json.loads(call["arguments"]))
    assert len(CALLS) == sum(
        1
        for c in calls
        if c["error"] is None or c["error"].get("type") == "mcp_tool_execution_error"
    )
