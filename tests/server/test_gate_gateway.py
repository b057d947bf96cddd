"""The replay gate enforced inside the gateway, end to end over HTTP."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.conftest import chat_model_config
from tests.fakes.openai_chat_upstream import FakeOpenAIChat, text, tool_calls
from tests.server.test_conformance import WEATHER_TOOL
from tests.server_process import OrgateServer
from tests.support.spec import check_sse

CALL = {
    "type": "function_call",
    "call_id": "call_1",
    "name": "get_weather",
    "arguments": '{"city":"Paris","unit":"c"}',
    "status": "completed",
}
OUTPUT = {"type": "function_call_output", "call_id": "call_1", "output": "sunny"}
USER = {"role": "user", "content": "What is the weather in Paris?"}


def _post(http: httpx.Client, **body: Any) -> httpx.Response:
    return http.post(
        "/v1/responses", json={"model": "orgate/echo", "tools": [WEATHER_TOOL], **body}
    )


@pytest.mark.parametrize(
    ("items", "code", "param"),
    [
        ([USER, OUTPUT], "orphan_output", "input[1].call_id"),
        ([USER, CALL, OUTPUT, OUTPUT], "duplicate_output", "input[3].call_id"),
        ([USER, OUTPUT, CALL], "orphan_output", "input[1].call_id"),
        ([USER, CALL | {"status": "in_progress"}, OUTPUT], "status", "input[1]"),
        ([USER, CALL | {"status": "incomplete"}, OUTPUT], "status", "input[1]"),
        ([USER, CALL | {"arguments": '{"city": "Par'}, OUTPUT], "arguments_parse", "input[1]"),
        (
            [USER, {"type": "openai:web_search_call", "id": "ws_1", "status": "completed"}],
            "non_portable_item",
            "input[1].type",
        ),
    ],
)
def test_input_gate_refuses(
    http: httpx.Client, items: list[dict[str, Any]], code: str, param: str
) -> None:
    res = _post(http, input=items)
    assert res.status_code == 400, res.text
    error = res.json()["error"]
    assert (error["code"], error["param"]) == (code, param), error


def test_call_without_status_counts_as_completed(http: httpx.Client) -> None:
    call = {k: v for k, v in CALL.items() if k != "status"}
    res = _post(http, input=[USER, call, OUTPUT])
    assert res.status_code == 200, res.text
    assert res.json()["output"][0]["content"][0]["text"] == "get_weather returned: sunny"


def test_output_pairs_with_a_call_from_the_previous_response(http: httpx.Client) -> None:
    first = _post(http, input="What is the weather in Paris?").json()
    call = first["output"][0]
    assert call["type"] == "function_call"
    second = _post(
        http,
        previous_response_id=first["id"],
        input=[{"type": "function_call_output", "call_id": call["call_id"], "output": "rain"}],
    )
    assert second.status_code == 200, second.text
    assert second.json()["output"][0]["content"][0]["text"] == "get_weather returned: rain"


def test_invalid_arguments_are_retried_with_feedback(
    http: httpx.Client, fake: FakeOpenAIChat
) -> None:
    fake.enqueue(
        tool_calls(("get_weather", '{"city": "Paris", "unit": "kelvin"}')),
        tool_calls(("get_weather", '{"city": "Paris", "unit": "c"}')),
    )
    res = _post(http, model="fake-chat", input="What is the weather in Paris?")
    assert res.status_code == 200, res.text
    calls = [i for i in res.json()["output"] if i["type"] == "function_call"]
    assert [json.loads(c["arguments"]) for c in calls] == [{"city": "Paris", "unit": "c"}]
    assert len(fake.bodies) == 2
    feedback = fake.bodies[1]["messages"][-1]
    assert feedback["role"] == "tool"
    assert "unit" in feedback["content"] and "kelvin" in feedback["content"]


def test_invalid_arguments_never_pass_as_valid(http: httpx.Client, fake: FakeOpenAIChat) -> None:
    bad = '{"city": "Paris", "unit": "global"}'
    fake.enqueue(tool_calls(("get_weather", bad)), tool_calls(("get_weather", bad)))
    res = _post(http, model="fake-chat", input="What is the weather in Paris?")
    assert res.status_code == 400
    error = res.json()["error"]
    assert error["code"] == "invalid_tool_arguments" and error["type"] == "model_error"
    fake.enqueue(tool_calls(("get_weather", bad)), tool_calls(("get_weather", bad)))
    streamed = _post(http, model="fake-chat", input="What is the weather in Paris?", stream=True)
    if streamed.status_code == 200:
        events = check_sse(streamed.text)
        assert events[-1]["type"] == "response.failed"
        assert all(
            e["item"]["type"] != "function_call"
            for e in events
            if e["type"] == "response.output_item.done"
        )
    else:
        assert streamed.json()["error"]["code"] == "invalid_tool_arguments"


def test_builtin_bad_args_are_caught(http: httpx.Client) -> None:
    res = _post(http, input="What is the weather in Paris? orgate:bad-args")
    assert res.status_code == 200, res.text
    output = res.json()["output"]
    # The retry answers the rejection in text; no invalid call is ever shown.
    assert [i["type"] for i in output] == ["message"]
    assert "rejected" in output[0]["content"][0]["text"]


@pytest.mark.parametrize(
    ("tool_choice", "reply"),
    [
        ("none", lambda: tool_calls(("get_weather", '{"city": "Oslo", "unit": "c"}'))),
        (
            {
                "type": "allowed_tools",
                "mode": "auto",
                "tools": [{"type": "function", "name": "other_tool"}],
            },
            lambda: tool_calls(("get_weather", '{"city": "Oslo", "unit": "c"}')),
        ),
        ("required", lambda: text("I will not call anything")),
    ],
)
def test_tool_choice_is_a_hard_constraint(
    http: httpx.Client, fake: FakeOpenAIChat, tool_choice: Any, reply: Any
) -> None:
    fake.handler = lambda body: reply()
    tools = [
        WEATHER_TOOL,
        {"type": "function", "name": "other_tool", "parameters": {"type": "object"}},
    ]
    res = http.post(
        "/v1/responses",
        json={
            "model": "fake-chat",
            "input": "Weather in Oslo?",
            "tools": tools,
            "tool_choice": tool_choice,
        },
    )
    assert res.status_code == 400, res.text
    assert res.json()["error"]["code"] == "tool_choice_violation"


def test_max_tool_calls_is_enforced(http: httpx.Client, fake: FakeOpenAIChat) -> None:
    fake.enqueue(
        tool_calls(
            ("get_weather", '{"city": "Paris", "unit": "c"}'),
            ("get_weather", '{"city": "Oslo", "unit": "c"}'),
        )
    )
    res = _post(http, model="fake-chat", input="Weather in Paris and Oslo?", max_tool_calls=1)
    calls = [i for i in res.json()["output"] if i["type"] == "function_call"]
    assert len(calls) == 1


def test_warn_policy_drops_non_portable_items_with_a_header(fake_chat: FakeOpenAIChat) -> None:
    config = '[gate]\npolicy = "warn"\n' + chat_model_config(fake_chat.base_url)
    with OrgateServer(config) as server:
        res = httpx.post(
            f"{server.base_url}/responses",
            headers=server.headers(),
            json={
                "model": "orgate/echo",
                "input": [
                    {"type": "openai:web_search_call", "id": "ws_1"},
                    {"role": "user", "content": "hi"},
                ],
            },
        )
        assert res.status_code == 200, res.text
        assert "non-portable" in res.headers["x-orgate-gate-warnings"]
        assert res.json()["output"][0]["content"][0]["text"] == "hi"
