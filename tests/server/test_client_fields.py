"""What the clients people point at a Responses server send beyond the spec, against a real
``orgate serve`` in front of fake upstreams.

Codex sends ``client_metadata``, ``reasoning: {"summary": "auto"}`` to any model, and tools of
OpenAI's hosted types (``web_search``, ``namespace``). Generation-neutral fields are accepted and
reach no upstream; hosted tools reach a native Responses upstream, are dropped with a warning
(header, log, metric) elsewhere, or refused per model. Any other unknown field or tool type is
still a 400.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.fakes.openai_chat_upstream import FakeOpenAIChat
from tests.fakes.openai_chat_upstream import text as chat_text
from tests.fakes.responses_upstream import FakeResponses
from tests.fakes.responses_upstream import text as native_text
from tests.server_process import OrgateServer
from tests.support.configs import model_block

GATE_HEADER = "x-orgate-gate-warnings"
WEB_SEARCH = {"type": "web_search", "external_web_access": False}
NAMESPACE = {
    "type": "namespace",
    "name": "agents",
    "description": "sub-agents",
    "tools": [
        {"type": "function", "name": "spawn", "parameters": {"type": "object", "properties": {}}}
    ],
}
FUNCTION = {
    "type": "function",
    "name": "lookup",
    "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
}
CLIENT_METADATA = {"thread_id": "t-1", "turn_id": "u-1"}


@pytest.fixture(scope="module")
def upstreams() -> Iterator[tuple[FakeResponses, FakeOpenAIChat]]:
    with FakeResponses.start_in_thread() as native, FakeOpenAIChat.start_in_thread() as chat:
        yield native, chat


@pytest.fixture(scope="module")
def server(upstreams: tuple[FakeResponses, FakeOpenAIChat]) -> Iterator[OrgateServer]:
    native, chat = upstreams
    config = (
        model_block("native", "openai-responses", native.base_url, "gpt-fake-1")
        + model_block("chat", "openai-chat", chat.base_url, "fake-model")
        + model_block(
            "chat-strict",
            "openai-chat",
            chat.base_url,
            "fake-model",
            extra='hosted_tools = "refuse"',
        )
    )
    with OrgateServer(config) as running:
        yield running


@pytest.fixture
def http(
    server: OrgateServer, upstreams: tuple[FakeResponses, FakeOpenAIChat]
) -> Iterator[httpx.Client]:
    for fake in upstreams:
        fake.reset()
    with httpx.Client(base_url=server.url, headers=server.headers(), timeout=30) as client:
        yield client


def create(http: httpx.Client, **body: Any) -> httpx.Response:
    return http.post("/v1/responses", json={"input": "hi", **body})


@pytest.mark.parametrize("model", ["native", "chat", "orgate/echo"])
def test_generation_neutral_fields_are_accepted_and_sent_to_no_upstream(
    http: httpx.Client, upstreams: Any, model: str
) -> None:
    native, chat = upstreams
    native.enqueue(native_text("ok"))
    chat.enqueue(chat_text("ok"))
    reply = create(http, model=model, client_metadata=CLIENT_METADATA, prompt_cache_retention="24h")
    assert reply.status_code == 200, reply.text
    assert reply.json()["status"] == "completed"
    sent = [*native.bodies, *chat.bodies]
    assert len(sent) == (0 if model == "orgate/echo" else 1)
    for body in sent:
        assert "client_metadata" not in body and "prompt_cache_retention" not in body


@pytest.mark.parametrize(
    ("field", "value"), [("client_metadata", "not-an-object"), ("prompt_cache_retention", 24)]
)
def test_a_neutral_field_of_the_wrong_type_is_refused(
    http: httpx.Client, field: str, value: Any
) -> None:
    reply = create(http, model="orgate/echo", **{field: value})
    assert reply.status_code == 400
    assert reply.json()["error"]["param"] == field
    assert reply.json()["error"]["code"] == "invalid_type"


def test_other_unknown_fields_stay_refused(http: httpx.Client) -> None:
    reply = create(http, model="orgate/echo", client_metadata=CLIENT_METADATA, not_a_field=1)
    assert reply.status_code == 400
    assert reply.json()["error"] == {
        "message": "Unknown parameter: 'not_a_field'.",
        "type": "invalid_request_error",
        "param": "not_a_field",
        "code": "unknown_parameter",
    }


def test_a_reasoning_summary_alone_is_accepted_by_a_model_without_reasoning(
    http: httpx.Client, upstreams: Any
) -> None:
    _, chat = upstreams
    chat.enqueue(chat_text("ok"))
    reply = create(http, model="chat", reasoning={"summary": "auto"})
    assert reply.status_code == 200, reply.text
    assert "reasoning_effort" not in chat.bodies[0]
    effort = create(http, model="chat", reasoning={"effort": "high"})
    assert effort.status_code == 400
    assert effort.json()["error"]["param"] == "reasoning.effort"


def test_the_builtin_model_takes_reasoning_options(http: httpx.Client) -> None:
    reply = create(
        http,
        model="orgate/echo",
        input="orgate:reason think first",
        reasoning={"effort": "low", "summary": "auto"},
    )
    assert reply.status_code == 200, reply.text
    assert [item["type"] for item in reply.json()["output"]] == ["reasoning", "message"]


def test_hosted_tools_reach_a_native_responses_upstream(http: httpx.Client, upstreams: Any) -> None:
    native, _ = upstreams
    native.enqueue(native_text("ok"))
    reply = create(http, model="native", tools=[FUNCTION, WEB_SEARCH, NAMESPACE])
    assert reply.status_code == 200, reply.text
    assert GATE_HEADER not in reply.headers
    assert [t["type"] for t in native.bodies[0]["tools"]] == ["function", "web_search", "namespace"]
    assert native.bodies[0]["tools"][1:] == [WEB_SEARCH, NAMESPACE]
    # The response echoes the spec's tools only (the spec's Tool union has function tools alone).
    assert [t["type"] for t in reply.json()["tools"]] == ["function"]


def test_hosted_tools_are_dropped_with_a_warning_where_no_upstream_runs_them(
    http: httpx.Client, server: OrgateServer, upstreams: Any
) -> None:
    _, chat = upstreams
    chat.enqueue(chat_text("ok"))
    reply = create(http, model="chat", tools=[FUNCTION, WEB_SEARCH, NAMESPACE])
    assert reply.status_code == 200, reply.text
    assert [t["function"]["name"] for t in chat.bodies[0]["tools"]] == ["lookup"]
    warning = reply.headers[GATE_HEADER]
    assert (
        "tools[1]: dropped tool of type web_search" in warning
        and "tools[2]: dropped tool of type namespace" in warning
    )
    metrics = http.get("/metrics").text
    assert 'orgate_tools_dropped_total{model="chat",type="web_search"}' in metrics


def test_a_model_may_refuse_hosted_tools(http: httpx.Client, upstreams: Any) -> None:
    _, chat = upstreams
    reply = create(http, model="chat-strict", tools=[FUNCTION, WEB_SEARCH])
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert error["param"] == "tools[1].type" and error["code"] == "unsupported_tool_type"
    assert "hosted_tools" in error["message"]
    assert chat.bodies == []


def test_an_unknown_tool_type_stays_a_400(http: httpx.Client) -> None:
    reply = create(http, model="orgate/echo", tools=[{"type": "teleport"}])
    assert reply.status_code == 400
    assert reply.json()["error"]["param"] == "tools[0].type"
