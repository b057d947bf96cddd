"""Hosted MCP tools end to end: a real ``orgate serve`` in front of real MCP servers (the SDK's
own server side, tests/mcp/servers.py), through the built-in model and the openai-chat fake."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import openai
import pytest

from tests.fakes.anthropic_upstream import FakeAnthropic, tool_use
from tests.fakes.anthropic_upstream import text as claude_text
from tests.fakes.openai_chat_upstream import FakeOpenAIChat, text, tool_calls
from tests.mcp.servers import CALLS, Running, hostile_server, tools_server
from tests.server_process import OrgateServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def mcp_servers() -> Iterator[tuple[Running, Running, Running]]:
    tools, hostile, sse = (
        Running(tools_server()).start(),
        Running(hostile_server()).start(),
        Running(tools_server(), sse=True).start(),
    )
    yield tools, hostile, sse
    for running in (tools, hostile, sse):
        running.stop()


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAIChat]:
    upstream = FakeOpenAIChat.start_in_thread()
    yield upstream
    upstream.stop_thread()


def _config(tools_url: str, hostile_url: str, sse_url: str, fake_url: str) -> str:
    return f"""
[auth]
api_keys = [
  {{ name = "acme", key = "env:ORGATE_API_KEY" }},
  {{ name = "other", key = "other-key" }},
]

[mcp]
request_origins = ["{tools_url.rsplit("/", 1)[0]}"]

[[mcp_servers]]
label = "tools"
url = "{tools_url}"
require_approval = {{ "*" = "never", echo = "always" }}
tenants = ["acme"]
call_timeout = 4
max_result_bytes = 50000
headers = {{ X-Mcp-Token = "env:MCP_TEST_TOKEN" }}

[[mcp_servers]]
label = "hostile"
url = "{hostile_url}"
require_approval = "never"

[[mcp_servers]]
label = "patient"
url = "{tools_url}"
require_approval = "never"
call_timeout = 120

[[mcp_servers]]
label = "legacy"
url = "{sse_url}"
transport = "sse"
require_approval = "never"

[[mcp_servers]]
label = "dead"
url = "http://127.0.0.1:1/mcp"
require_approval = "never"
connect_timeout = 2
call_timeout = 2

[[models]]
name = "fake-chat"
provider = "openai-chat"
base_url = "{fake_url}"
api_key = "upstream-secret"
upstream_model = "fake-model"
read_timeout = 10
"""


@pytest.fixture(scope="module")
def anthropic() -> Iterator[FakeAnthropic]:
    upstream = FakeAnthropic.start_in_thread()
    yield upstream
    upstream.stop_thread()


@pytest.fixture(scope="module")
def server(
    mcp_servers: tuple[Running, Running, Running], fake: FakeOpenAIChat, anthropic: FakeAnthropic
) -> Iterator[OrgateServer]:
    tools, hostile, sse = mcp_servers
    config = (
        _config(tools.url, hostile.url, sse.url, fake.base_url)
        + f"""
[[models]]
name = "fake-claude"
provider = "anthropic"
base_url = "{anthropic.base_url}"
api_key = "upstream-secret"
upstream_model = "claude-test"
read_timeout = 10
"""
    )
    with OrgateServer(
        config, api_key="acme-key", env={"MCP_TEST_TOKEN": "sekrit-token-123"}
    ) as running:
        yield running


@pytest.fixture
def client(server: OrgateServer) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=server.base_url, api_key=server.api_key, max_retries=0, timeout=120
    )


def _post(server: OrgateServer, body: dict, key: str | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key or server.api_key}"}
    return httpx.post(f"{server.base_url}/responses", json=body, headers=headers, timeout=120)


MCP_TOOLS = {
    "type": "mcp",
    "server_label": "tools",
    "require_approval": "never",
    "allowed_tools": ["add", "slow", "fail", "code", "huge", "echo"],
}


def test_builtin_model_calls_an_mcp_tool_and_answers(client: openai.OpenAI) -> None:
    CALLS.clear()
    response = client.responses.create(
        model="orgate/echo", input="add two integers a and b", tools=[MCP_TOOLS]
    )
    kinds = [item.type for item in response.output]
    assert kinds == ["mcp_list_tools", "mcp_call", "message"], kinds
    listing, call, message = response.output
    assert {t.name for t in listing.tools} == {"add", "slow", "fail", "code", "huge", "echo"}
    assert call.name == "add" and call.server_label == "tools" and call.error is None
    assert CALLS and CALLS[-1][0] == "add"
    args = CALLS[-1][1]
    assert call.output == str(args["a"] + args["b"])
    # The model read the output as the untrusted data it is, and quoted it.
    said = message.content[0].text
    assert said.startswith("tools__add returned: ")
    marked = json.loads(said.removeprefix("tools__add returned: "))["untrusted_tool_output"]
    assert (marked["server"], marked["tool"], marked["content"]) == ("tools", "add", call.output)


def test_streaming_emits_openai_mcp_events_in_order(client: openai.OpenAI) -> None:
    events = list(
        client.responses.create(
            model="orgate/echo", input="add two integers", tools=[MCP_TOOLS], stream=True
        )
    )
    names = [e.type for e in events]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    expected = [
        "response.output_item.added",
        "response.mcp_list_tools.in_progress",
        "response.mcp_list_tools.completed",
        "response.output_item.done",
        "response.output_item.added",
        "response.mcp_call.in_progress",
        "response.mcp_call_arguments.delta",
        "response.mcp_call_arguments.done",
        "response.mcp_call.completed",
        "response.output_item.done",
    ]
    start = names.index("response.output_item.added")
    assert names[start : start + len(expected)] == expected
    assert names[-1] == "response.completed"
    final = events[-1].response
    assert [i.type for i in final.output] == ["mcp_list_tools", "mcp_call", "message"]


def test_failing_slow_and_huge_tools_are_mcp_call_errors(
    fake: FakeOpenAIChat, client: openai.OpenAI
) -> None:
    fake.reset()
    fake.enqueue(
        tool_calls(
            ("tools__fail", '{"reason": "because"}'),
            ("tools__slow", '{"seconds": 30}'),
            ("tools__huge", '{"size": 200000}'),
        ),
        text("all three failed"),
    )
    response = client.responses.create(model="fake-chat", input="run them", tools=[MCP_TOOLS])
    calls = [item for item in response.output if item.type == "mcp_call"]
    assert [c.name for c in calls] == ["fail", "slow", "huge"]
    assert calls[0].error.type == "mcp_tool_execution_error"
    assert "failed on purpose" in str(calls[0].error.content)
    assert (
        calls[1].error.type == "mcp_protocol_error"
        and calls[1].error.code == -32001
        and "timed out" in calls[1].error.message
    )
    assert (
        calls[2].error.type == "mcp_protocol_error" and "max_result_bytes" in calls[2].error.message
    )
    assert response.output[-1].type == "message" and response.status == "completed"
    # the model read each outcome as a function call output
    second = fake.bodies[1]["messages"]
    outputs = [m["content"] for m in second if m["role"] == "tool"]
    assert len(outputs) == 3 and "The tool failed" in outputs[0] and "timed out" in outputs[1]
    tools = {t["function"]["name"] for t in fake.bodies[0]["tools"]}
    assert "tools__add" in tools and "tools__code" in tools


def test_a_body_past_what_an_operation_may_read_stops_at_the_cap(
    fake: FakeOpenAIChat, client: openai.OpenAI
) -> None:
    fake.reset()
    fake.enqueue(tool_calls(("tools__huge", '{"size": 5000000}')), text("too big"))
    response = client.responses.create(model="fake-chat", input="huge", tools=[MCP_TOOLS])
    call = next(i for i in response.output if i.type == "mcp_call")
    assert call.error.code == -32002 and "more than" in call.error.message


def test_gate_refuses_a_call_that_breaks_the_strict_schema(
    fake: FakeOpenAIChat, client: openai.OpenAI, server: OrgateServer
) -> None:
    fake.reset()
    CALLS.clear()
    fake.enqueue(tool_calls(("tools__code", '{"code": "abcd", "count": 9}')), text("sorry"))
    response = _post(server, {"model": "fake-chat", "input": "code", "tools": [MCP_TOOLS]}).json()
    call = next(i for i in response["output"] if i["type"] == "mcp_call")
    assert (
        call["error"]["type"] == "mcp_protocol_error" and "replay gate" in call["error"]["message"]
    )
    assert not any(name == "code" for name, _ in CALLS), "a gate-refused call never runs"


def test_approval_round_trip_with_previous_response_id(
    fake: FakeOpenAIChat, client: openai.OpenAI
) -> None:
    fake.reset()
    CALLS.clear()
    fake.enqueue(tool_calls(("tools__echo", '{"text": "hello"}')), text("echoed"))
    first = client.responses.create(model="fake-chat", input="echo hello", tools=[MCP_TOOLS])
    request = first.output[-1]
    assert (
        request.type == "mcp_approval_request"
        and request.name == "echo"
        and request.arguments == '{"text": "hello"}'
    )
    assert not CALLS, "nothing runs before the approval"
    second = client.responses.create(
        model="fake-chat",
        previous_response_id=first.id,
        input=[
            {"type": "mcp_approval_response", "approval_request_id": request.id, "approve": True}
        ],
        tools=[MCP_TOOLS],
    )
    call = second.output[1]
    assert (
        call.type == "mcp_call"
        and call.approval_request_id == request.id
        and call.output == "echo: hello"
    )
    assert CALLS == [("echo", {"text": "hello"})]
    assert second.output[-1].type == "message"


def test_denied_approval_is_reported_never_run(fake: FakeOpenAIChat, client: openai.OpenAI) -> None:
    fake.reset()
    CALLS.clear()
    fake.enqueue(tool_calls(("tools__echo", '{"text": "no"}')), text("ok, not echoed"))
    first = client.responses.create(model="fake-chat", input="echo no", tools=[MCP_TOOLS])
    request = first.output[-1]
    history = [
        {"role": "user", "content": "echo no"},
        *(item.model_dump(exclude_none=True) for item in first.output),
    ]
    second = client.responses.create(
        model="fake-chat",
        input=[
            *history,
            {
                "type": "mcp_approval_response",
                "approval_request_id": request.id,
                "approve": False,
                "reason": "not today",
            },
        ],
        tools=[MCP_TOOLS],
        store=False,
    )
    call = next(i for i in second.output if i.type == "mcp_call")
    assert (
        call.error is not None
        and "denied" in call.error.message
        and "not today" in call.error.message
    )
    assert not CALLS


def test_unknown_label_other_tenant_and_request_origins_are_refused(
    server: OrgateServer, mcp_servers: tuple[Running, Running, Running]
) -> None:
    unknown = _post(
        server,
        {"model": "orgate/echo", "input": "hi", "tools": [{"type": "mcp", "server_label": "nope"}]},
    )
    assert (
        unknown.status_code == 400 and unknown.json()["error"]["param"] == "tools[0].server_label"
    )
    other = _post(
        server,
        {
            "model": "orgate/echo",
            "input": "hi",
            "tools": [{"type": "mcp", "server_label": "tools"}],
        },
        key="other-key",
    )
    assert other.status_code == 403 and other.json()["error"]["code"] == "mcp_server_forbidden"
    evil = _post(
        server,
        {
            "model": "orgate/echo",
            "input": "hi",
            "tools": [
                {"type": "function", "name": "f"},
                {"type": "mcp", "server_label": "x", "server_url": "http://169.254.169.254/mcp"},
            ],
        },
    )
    assert evil.status_code == 400 and evil.json()["error"]["param"] == "tools[1].server_url"
    # an origin the operator lists may be named by a request (approval asked before every call)
    allowed = _post(
        server,
        {
            "model": "orgate/echo",
            "input": "add two integers",
            "tools": [{"type": "mcp", "server_label": "adhoc", "server_url": mcp_servers[0].url}],
        },
    )
    assert allowed.status_code == 200, allowed.text
    assert [i["type"] for i in allowed.json()["output"]] == [
        "mcp_list_tools",
        "mcp_approval_request",
    ]


def test_hostile_and_dead_servers_are_listing_failures(server: OrgateServer) -> None:
    response = _post(
        server,
        {
            "model": "orgate/echo",
            "input": "hello there",
            "tools": [
                {"type": "mcp", "server_label": "hostile", "require_approval": "never"},
                {"type": "mcp", "server_label": "dead", "require_approval": "never"},
            ],
        },
    )
    assert response.status_code == 200, response.text
    listings = [i for i in response.json()["output"] if i["type"] == "mcp_list_tools"]
    assert "max_tools" in listings[0]["error"] and listings[0]["tools"] == []
    assert "could not list" in listings[1]["error"]
    assert response.json()["output"][-1]["type"] == "message"


def test_metrics_and_audit_log(server: OrgateServer, client: openai.OpenAI) -> None:
    client.responses.create(model="orgate/echo", input="add two integers", tools=[MCP_TOOLS])
    metrics = httpx.get(
        f"{server.url}/metrics", headers={"Authorization": f"Bearer {server.api_key}"}
    ).text
    assert 'orgate_mcp_calls_total{outcome="ok",server="tools",tool="add"}' in metrics
    assert 'orgate_mcp_list_tools_total{outcome="failed",server="hostile"}' in metrics
    # the request-named server of test_unknown_label_other_tenant_and_request_origins_are_refused
    assert (
        'orgate_mcp_calls_total{outcome="approval_requested",server="_request",tool="_request"}'
        in metrics
    )
    assert "adhoc" not in metrics
    log = server.output()
    assert "mcp call tenant=acme server=tools tool=add arguments_sha256=" in log
    assert "sekrit-token-123" not in log


def test_sse_transport(client: openai.OpenAI) -> None:
    response = client.responses.create(
        model="orgate/echo",
        input="add two integers",
        tools=[{"type": "mcp", "server_label": "legacy", "require_approval": "never"}],
    )
    call = next(i for i in response.output if i.type == "mcp_call")
    assert call.error is None and call.output is not None and call.output.lstrip("-").isdigit()


def test_max_tool_calls_ends_the_loop(fake: FakeOpenAIChat, client: openai.OpenAI) -> None:
    fake.reset()
    CALLS.clear()
    fake.enqueue(
        tool_calls(
            ("tools__add", '{"a": 1, "b": 1}'),
            ("tools__add", '{"a": 2, "b": 2}'),
            ("tools__add", '{"a": 3, "b": 3}'),
        ),
        text("never asked"),
    )
    response = client.responses.create(
        model="fake-chat", input="add", tools=[MCP_TOOLS], max_tool_calls=2
    )
    calls = [i for i in response.output if i.type == "mcp_call"]
    assert [c.output for c in calls[:2]] == ["2", "4"]
    assert calls[2].error is not None and "max_tool_calls" in calls[2].error.message
    assert len(fake.bodies) == 1 and len(CALLS) == 2
    assert response.status == "completed"


def test_approval_in_a_session(fake: FakeOpenAIChat, server: OrgateServer) -> None:
    fake.reset()
    CALLS.clear()
    fake.enqueue(tool_calls(("tools__echo", '{"text": "in session"}')), text("done"))
    headers = {"X-Session-Id": "mcp-session-1"}
    client = openai.OpenAI(
        base_url=server.base_url,
        api_key=server.api_key,
        max_retries=0,
        timeout=120,
        default_headers=headers,
    )
    first = client.responses.create(model="fake-chat", input="echo", tools=[MCP_TOOLS])
    ask = first.output[-1]
    assert ask.type == "mcp_approval_request"
    second = client.responses.create(
        model="fake-chat",
        input=[{"type": "mcp_approval_response", "approval_request_id": ask.id, "approve": True}],
        tools=[MCP_TOOLS],
    )
    assert (
        second.output[0].type == "mcp_list_tools" and second.output[1].output == "echo: in session"
    )
    assert CALLS == [("echo", {"text": "in session"})]


def test_an_approval_naming_nothing_is_a_400(server: OrgateServer) -> None:
    response = _post(
        server,
        {
            "model": "fake-chat",
            "input": [
                {
                    "type": "mcp_approval_response",
                    "approval_request_id": "mcpr_nope",
                    "approve": True,
                }
            ],
            "tools": [MCP_TOOLS],
        },
    )
    assert (
        response.status_code == 400
        and response.json()["error"]["param"] == "input[0].approval_request_id"
    )


def test_client_disconnect_cancels_the_running_call(
    fake: FakeOpenAIChat, server: OrgateServer
) -> None:
    fake.reset()
    fake.enqueue(tool_calls(("patient__slow", '{"seconds": 60}')), text("late"))
    body = {
        "model": "fake-chat",
        "input": "wait",
        "stream": True,
        "tools": [{"type": "mcp", "server_label": "patient", "require_approval": "never"}],
    }
    with httpx.stream(
        "POST",
        f"{server.base_url}/responses",
        json=body,
        headers={"Authorization": f"Bearer {server.api_key}"},
        timeout=120,
    ) as stream:
        for line in stream.iter_lines():
            if "response.mcp_call.in_progress" in line:
                break
    assert wait_until(lambda: "tool=slow" in _audit(server, "patient"), every=0.1)
    assert "outcome=cancelled" in _audit(server, "patient")


def _audit(server: OrgateServer, label: str) -> str:
    return "\n".join(line for line in server.output().splitlines() if f"server={label} " in line)


def test_through_the_anthropic_provider(anthropic: FakeAnthropic, client: openai.OpenAI) -> None:
    anthropic.reset()
    CALLS.clear()
    anthropic.enqueue(tool_use(("tools__add", '{"a": 20, "b": 22}')), claude_text("It is 42."))
    response = client.responses.create(
        model="fake-claude", input="add 20 and 22", tools=[MCP_TOOLS]
    )
    assert [i.type for i in response.output] == ["mcp_list_tools", "mcp_call", "message"]
    assert response.output[1].output == "42" and CALLS == [("add", {"a": 20, "b": 22})]
    assert "tools__add" in {t["name"] for t in anthropic.bodies[0]["tools"]}
    results = [
        b
        for m in anthropic.bodies[1]["messages"]
        for b in (m["content"] if isinstance(m["content"], list) else [])
        if b.get("type") == "tool_result"
    ]
    assert len(results) == 1 and "42" in str(results[0]["content"])


def test_streamed_failures_use_the_failed_events(
    fake: FakeOpenAIChat, client: openai.OpenAI
) -> None:
    fake.reset()
    fake.enqueue(tool_calls(("tools__fail", '{"reason": "streamed"}')), text("it failed"))
    tools = [MCP_TOOLS, {"type": "mcp", "server_label": "dead", "require_approval": "never"}]
    events = list(
        client.responses.create(model="fake-chat", input="fail", tools=tools, stream=True)
    )
    names = [e.type for e in events]
    assert (
        names.count("response.mcp_list_tools.completed") == 1
        and names.count("response.mcp_list_tools.failed") == 1
    )
    assert "response.mcp_call.failed" in names and "response.mcp_call.completed" not in names
    assert names[-1] == "response.completed"
    failed = next(e for e in events if e.type == "response.mcp_call.failed")
    done = next(
        e for e in events if e.type == "response.output_item.done" and e.item.id == failed.item_id
    )
    assert done.item.status == "failed" and done.item.error.type == "mcp_tool_execution_error"


def test_tool_choice_required_with_only_mcp_tools(client: openai.OpenAI) -> None:
    response = client.responses.create(
        model="orgate/echo", input="add two integers", tools=[MCP_TOOLS], tool_choice="required"
    )
    assert [i.type for i in response.output] == ["mcp_list_tools", "mcp_call", "message"]


def test_the_model_reads_back_what_it_said_before_its_calls(
    fake: FakeOpenAIChat, client: openai.OpenAI
) -> None:
    fake.reset()
    fake.enqueue(
        tool_calls(("tools__add", '{"a": 5, "b": 6}'), content="Let me add them."), text("Eleven.")
    )
    response = client.responses.create(model="fake-chat", input="add 5 and 6", tools=[MCP_TOOLS])
    assert [i.type for i in response.output] == ["mcp_list_tools", "message", "mcp_call", "message"]
    second = fake.bodies[1]["messages"]
    assistant = [m for m in second if m["role"] == "assistant"]
    assert (
        assistant
        and "Let me add them." in str(assistant[0].get("content"))
        and assistant[-1]["tool_calls"][0]["function"]["name"] == "tools__add"
    )
