"""MCP tools over WebSocket mode: an approval round trip on a ``store: false`` chain, whose
history is the connection's own cache (the approval request is found there), and the same
answer sent again on the socket, which runs nothing a second time."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.openai_chat_upstream import FakeOpenAIChat, text, tool_calls
from tests.mcp.servers import CALLS, Running, tools_server
from tests.ws.conftest import create, ws_connect
from tests.ws.inproc import InProcessServer

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[InProcessServer, FakeOpenAIChat]]:
    tools = Running(tools_server()).start()
    with FakeOpenAIChat.start_in_thread() as fake:
        config = f"""
[[mcp_servers]]
label = "tools"
url = "{tools.url}"
require_approval = "always"

[[models]]
name = "fake-chat"
provider = "openai-chat"
base_url = "{fake.base_url}"
api_key = "k"
upstream_model = "fake-model"
"""
        with InProcessServer(config) as running:
            yield running, fake
    tools.stop()


async def test_approval_round_trip_on_a_connection_cache(
    server: tuple[InProcessServer, FakeOpenAIChat],
) -> None:
    running, fake = server
    CALLS.clear()
    fake.enqueue(tool_calls(("tools__add", '{"a": 4, "b": 5}')), text("nine"))
    tools = [{"type": "mcp", "server_label": "tools", "require_approval": "never"}]
    async with ws_connect(running) as ws:
        first = await create(ws, model="fake-chat", input="add", tools=tools, store=False)
        assert [e["sequence_number"] for e in first] == list(range(len(first)))
        ask = first[-1]["response"]["output"][-1]
        assert ask["type"] == "mcp_approval_request" and not CALLS
        answer = {
            "type": "mcp_approval_response",
            "approval_request_id": ask["id"],
            "approve": True,
        }
        second = await create(
            ws,
            model="fake-chat",
            input=[answer],
            tools=tools,
            store=False,
            previous_response_id=first[-1]["response"]["id"],
        )
        # The client sends the same answer again (a resend after a hiccup): the call it
        # approved ran once; the resend gets its outcome.
        fake.enqueue(text("nine, still"))
        resent = await create(
            ws,
            model="fake-chat",
            input=[answer],
            tools=tools,
            store=False,
            previous_response_id=first[-1]["response"]["id"],
        )
    output = second[-1]["response"]["output"]
    assert [i["type"] for i in output] == ["mcp_list_tools", "mcp_call", "message"]
    assert output[1]["output"] == "9" and output[1]["approval_request_id"] == ask["id"]
    again = resent[-1]["response"]["output"]
    assert [i["type"] for i in again] == ["mcp_list_tools", "mcp_call", "message"]
    assert again[1]["output"] == "9" and again[1]["approval_request_id"] == ask["id"]
    assert CALLS == [("add", {"a": 4, "b": 5})]
