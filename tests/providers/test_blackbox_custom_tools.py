"""OpenAI's ``custom`` tools through a real ``orgate serve``, with the ``openai`` SDK as the client:
the built-in model, an ``openai-chat`` and an ``anthropic`` upstream (fakes: a function with one
string argument) and a native Responses upstream (a fake streaming OpenAI's ``custom_tool_call``
events, exactly).

Each runs a round trip: the model calls the tool (a ``custom_tool_call`` with ``input``, streamed
as ``response.custom_tool_call_input.*``), the client answers with a ``custom_tool_call_output``
(through ``previous_response_id``, and as full history with ``store: false``), the model answers.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from openai import BadRequestError, OpenAI
from tests.fakes import anthropic_upstream
from tests.fakes._base import Raw
from tests.fakes.anthropic_upstream import FakeAnthropic
from tests.fakes.openai_chat_upstream import FakeOpenAIChat, text, tool_calls
from tests.fakes.responses_upstream import FakeResponses
from tests.fakes.responses_upstream import text as responses_text
from tests.server_process import OrgateServer
from tests.support.configs import model_block

PATCH = "*** Begin Patch\n*** Add File: hello.txt\n+hi\n*** End Patch\n"
TOOL = {
    "type": "custom",
    "name": "apply_patch",
    "description": "Edit files with a patch.",
    "format": {
        "type": "grammar",
        "syntax": "lark",
        "definition": 'start: "*** Begin Patch" /(.|\\n)*/',
    },
}


def chat_brain(body: dict[str, Any]) -> Any:
    """The chat model: a tool's output is quoted; otherwise it calls the one tool with a patch."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return text(f"The tool said: {last['content']}")
    [tool] = body["tools"]
    return tool_calls((tool["function"]["name"], json.dumps({"input": PATCH})))


def anthropic_brain(body: dict[str, Any]) -> Any:
    """The Messages API model: a tool result is quoted; otherwise the one tool is used with a
    patch."""
    last = body["messages"][-1]
    results = [
        b
        for b in last["content"]
        if isinstance(last["content"], list) and b.get("type") == "tool_result"
    ]
    if results:
        content = results[0]["content"]
        said = (
            content
            if isinstance(content, str)
            else " ".join(part.get("text", "") for part in content)
        )
        return anthropic_upstream.text(f"The tool said: {said}")
    [tool] = body["tools"]
    return anthropic_upstream.tool_use((tool["name"], json.dumps({"input": PATCH})))


def frames(*events: dict[str, Any]) -> bytes:
    return b"".join(
        b"event: " + str(e["type"]).encode() + b"\ndata: " + orjson.dumps(e) + b"\n\n"
        for e in events
    )


def native_custom_call() -> Raw:
    """What OpenAI streams when the model calls a custom tool."""
    item = {
        "id": "ctc_up1",
        "type": "custom_tool_call",
        "status": "in_progress",
        "call_id": "call_up1",
        "name": "apply_patch",
        "input": "",
    }
    half = len(PATCH) // 2
    return Raw(
        [
            frames(
                {
                    "type": "response.created",
                    "sequence_number": 0,
                    "response": {
                        "id": "resp_up1",
                        "object": "response",
                        "status": "in_progress",
                        "output": [],
                    },
                },
                {
                    "type": "response.output_item.added",
                    "sequence_number": 1,
                    "output_index": 0,
                    "item": item,
                },
                {
                    "type": "response.custom_tool_call_input.delta",
                    "sequence_number": 2,
                    "output_index": 0,
                    "item_id": "ctc_up1",
                    "delta": PATCH[:half],
                },
                {
                    "type": "response.custom_tool_call_input.delta",
                    "sequence_number": 3,
                    "output_index": 0,
                    "item_id": "ctc_up1",
                    "delta": PATCH[half:],
                },
                {
                    "type": "response.custom_tool_call_input.done",
                    "sequence_number": 4,
                    "output_index": 0,
                    "item_id": "ctc_up1",
                    "input": PATCH,
                },
                {
                    "type": "response.output_item.done",
                    "sequence_number": 5,
                    "output_index": 0,
                    "item": {**item, "status": "completed", "input": PATCH},
                },
                {
                    "type": "response.completed",
                    "sequence_number": 6,
                    "response": {
                        "id": "resp_up1",
                        "object": "response",
                        "status": "completed",
                        "output": [],
                        "usage": {"input_tokens": 3, "output_tokens": 9},
                    },
                },
            )
        ]
    )


def native_brain(body: dict[str, Any]) -> Any:
    last = body["input"][-1]
    if last.get("type") == "custom_tool_call_output":
        return responses_text(f"The tool said: {last['output']}")
    return native_custom_call()


@pytest.fixture(scope="module")
def chat() -> Iterator[FakeOpenAIChat]:
    with FakeOpenAIChat.start_in_thread() as fake:
        fake.handler = chat_brain
        yield fake


@pytest.fixture(scope="module")
def native() -> Iterator[FakeResponses]:
    with FakeResponses.start_in_thread() as fake:
        fake.handler = native_brain
        yield fake


@pytest.fixture(scope="module")
def claude() -> Iterator[FakeAnthropic]:
    with FakeAnthropic.start_in_thread() as fake:
        fake.handler = anthropic_brain
        yield fake


@pytest.fixture(scope="module")
def server(
    chat: FakeOpenAIChat, native: FakeResponses, claude: FakeAnthropic
) -> Iterator[OrgateServer]:
    config = model_block("chat", "openai-chat", chat.base_url, "fake-model", read_timeout=30)
    config += model_block(
        "claude", "anthropic", claude.base_url, "claude-fake-1", api_key="k", read_timeout=30
    )
    config += model_block(
        "native", "openai-responses", native.base_url, "gpt-fake-1", read_timeout=30
    )
    with OrgateServer(config) as running:
        yield running


@pytest.fixture
def client(server: OrgateServer) -> OpenAI:
    return OpenAI(base_url=server.base_url, api_key=server.api_key, max_retries=0)


def streamed(client: OpenAI, **body: Any) -> tuple[list[Any], Any]:
    events = list(client.responses.create(stream=True, **body))
    assert events[-1].type == "response.completed", events[-1]
    return events, events[-1].response


MODELS = ["orgate/echo", "chat", "claude", "native"]


@pytest.mark.parametrize("model", MODELS)
def test_a_custom_tool_round_trip_streamed_then_chained(client: OpenAI, model: str) -> None:
    events, response = streamed(
        client, model=model, input="Apply a patch that adds hello.txt", tools=[TOOL]
    )
    [call] = response.output
    assert call.type == "custom_tool_call" and call.name == "apply_patch" and call.call_id
    assert call.id.startswith("ctc_") and call.status == "completed"
    kinds = [e.type for e in events]
    assert kinds[2:] == [
        "response.output_item.added",
        *["response.custom_tool_call_input.delta"]
        * kinds.count("response.custom_tool_call_input.delta"),
        "response.custom_tool_call_input.done",
        "response.output_item.done",
        "response.completed",
    ]
    deltas = "".join(e.delta for e in events if e.type == "response.custom_tool_call_input.delta")
    assert (
        deltas
        == call.input
        == next(e.input for e in events if e.type == "response.custom_tool_call_input.done")
    )
    if model != "orgate/echo":
        assert call.input == PATCH  # the built-in model fills it with prompt text
    answer = client.responses.create(
        model=model,
        previous_response_id=response.id,
        tools=[TOOL],
        input=[
            {
                "type": "custom_tool_call_output",
                "call_id": call.call_id,
                "output": "Done: added hello.txt",
            }
        ],
    )
    assert "Done: added hello.txt" in answer.output_text
    listed = client.responses.input_items.list(answer.id)
    assert [i.type for i in listed.data] == ["custom_tool_call_output"]


@pytest.mark.parametrize("model", MODELS)
def test_full_history_with_store_false_and_a_forced_custom_tool(client: OpenAI, model: str) -> None:
    first = client.responses.create(
        model=model,
        input="Apply a patch",
        tools=[TOOL],
        tool_choice={"type": "custom", "name": "apply_patch"},
        store=False,
    )
    [call] = first.output
    assert call.type == "custom_tool_call"
    assert first.tool_choice.type == "custom" and first.tool_choice.name == "apply_patch"
    history: list[Any] = [
        {"role": "user", "content": "Apply a patch"},
        {
            "type": "custom_tool_call",
            "call_id": call.call_id,
            "name": call.name,
            "input": call.input,
            "id": call.id,
            "status": "completed",
        },
        {"type": "custom_tool_call_output", "call_id": call.call_id, "output": "patched"},
    ]
    answer = client.responses.create(model=model, input=history, tools=[TOOL], store=False)
    assert answer.output[-1].type == "message" and "patched" in answer.output_text


def test_the_chat_upstream_got_a_function_and_function_history(
    client: OpenAI, chat: FakeOpenAIChat
) -> None:
    history = [
        {"role": "user", "content": "go"},
        {"type": "custom_tool_call", "call_id": "call_7", "name": "apply_patch", "input": PATCH},
        {"type": "custom_tool_call_output", "call_id": "call_7", "output": "ok"},
    ]
    client.responses.create(model="chat", input=history, tools=[TOOL], store=False)
    sent = chat.requests[-1].body
    assert sent["tools"][0]["function"]["parameters"]["properties"] == {
        "input": {"type": "string", "description": "The tool's free-form input."}
    }
    assert sent["messages"][-2]["tool_calls"][0]["function"] == {
        "name": "apply_patch",
        "arguments": json.dumps({"input": PATCH}, separators=(",", ":")),
    }
    assert sent["messages"][-1] == {"role": "tool", "tool_call_id": "call_7", "content": "ok"}


def test_the_native_upstream_got_the_tool_and_items_as_sent(
    client: OpenAI, native: FakeResponses
) -> None:
    history = [
        {"role": "user", "content": "go"},
        {
            "type": "custom_tool_call",
            "call_id": "call_7",
            "name": "apply_patch",
            "input": PATCH,
            "status": "completed",
        },
        {"type": "custom_tool_call_output", "call_id": "call_7", "output": "ok"},
    ]
    client.responses.create(model="native", input=history, tools=[TOOL], store=False)
    sent = native.requests[-1].body
    assert sent["tools"] == [TOOL]
    assert sent["input"][1:] == history[1:]


@pytest.mark.parametrize(
    ("items", "code"),
    [
        ([{"type": "custom_tool_call_output", "call_id": "nope", "output": "x"}], "orphan_output"),
        (
            [
                {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
                {"type": "custom_tool_call_output", "call_id": "c1", "output": "x"},
            ],
            "mismatched_output",
        ),
        (
            [
                {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": "x"},
                {"type": "function_call_output", "call_id": "c1", "output": "x"},
            ],
            "mismatched_output",
        ),
        (
            [
                {
                    "type": "custom_tool_call",
                    "call_id": "c1",
                    "name": "apply_patch",
                    "input": "x",
                    "status": "incomplete",
                },
                {"type": "custom_tool_call_output", "call_id": "c1", "output": "x"},
            ],
            "status",
        ),
    ],
)
def test_the_gate_pairs_custom_calls_and_outputs(
    client: OpenAI, items: list[Any], code: str
) -> None:
    with pytest.raises(BadRequestError) as caught:
        client.responses.create(
            model="orgate/echo", input=[{"role": "user", "content": "go"}, *items], tools=[TOOL]
        )
    assert caught.value.code == code, caught.value.body


def test_a_custom_choice_naming_no_custom_tool_is_refused(client: OpenAI) -> None:
    with pytest.raises(BadRequestError) as caught:
        client.responses.create(
            model="orgate/echo",
            input="hi",
            tools=[TOOL],
            tool_choice={"type": "custom", "name": "exec"},
        )
    assert (caught.value.code, caught.value.param) == ("invalid_value", "tool_choice.name")


# --------------------------------------------------------------------------- additional_tools


def test_tools_offered_by_an_additional_tools_item_reach_the_upstream(
    client: OpenAI, chat: FakeOpenAIChat, server: OrgateServer
) -> None:
    """OpenAI's ``additional_tools`` input item (Codex's newest models send every tool in one):
    its tools are offered as if they were in ``tools``; the item itself is kept in the stored
    input, and reaches no upstream as an item."""
    item = {
        "type": "additional_tools",
        "id": "at_1",
        "role": "developer",
        "tools": [TOOL, {"type": "namespace", "name": "ns", "tools": []}],
    }
    res = client.responses.with_raw_response.create(
        model="chat", input=[item, {"role": "user", "content": "go"}], stream=False
    )  # type: ignore[list-item]
    response = res.parse()
    assert [o.type for o in response.output] == ["custom_tool_call"] and response.output[
        0
    ].input == PATCH
    sent = chat.requests[-1].body
    assert [t["function"]["name"] for t in sent["tools"]] == ["apply_patch"]
    assert [m["role"] for m in sent["messages"]] == ["user"]
    assert (
        "input[0].tools[1]: dropped tool of type namespace" in res.headers["x-orgate-gate-warnings"]
    )
    listed = client.responses.input_items.list(response.id, order="asc")
    assert [i.type for i in listed.data] == ["additional_tools", "message"]
    # The next turn, chained: the stored item offers its tools again.
    answer = client.responses.create(
        model="chat",
        previous_response_id=response.id,
        input=[
            {
                "type": "custom_tool_call_output",
                "call_id": response.output[0].call_id,
                "output": "fine",
            }
        ],
    )
    assert answer.output_text == "The tool said: fine"
    assert [t["function"]["name"] for t in chat.requests[-1].body["tools"]] == ["apply_patch"]


def test_a_native_upstream_gets_the_additional_tools_as_tools(
    client: OpenAI, native: FakeResponses
) -> None:
    item = {
        "type": "additional_tools",
        "role": "developer",
        "tools": [TOOL, {"type": "namespace", "name": "ns", "description": "d", "tools": []}],
    }
    client.responses.create(
        model="native", input=[item, {"role": "user", "content": "go"}], tools=[], store=False
    )  # type: ignore[list-item]
    sent = native.requests[-1].body
    assert sent["tools"] == [
        TOOL,
        {"type": "namespace", "name": "ns", "description": "d", "tools": []},
    ]
    assert [i.get("type", "message") for i in sent["input"]] == ["message"]


def test_a_call_of_a_namespaced_tool_reaches_the_client_with_its_namespace(
    client: OpenAI, native: FakeResponses
) -> None:
    """Codex's newest models offer their tools in namespaces (a native Responses upstream runs
    them): the model's call names its namespace, the tool guard lets it through (it has no
    definition to check it by), and the client gets the namespace to find the tool."""
    call = {
        "id": "fc_up",
        "type": "function_call",
        "status": "completed",
        "call_id": "call_ns",
        "namespace": "functions",
        "name": "wait",
        "arguments": '{"ms":1}',
    }
    native.handler = lambda body: Raw(
        [
            frames(
                {
                    "type": "response.output_item.added",
                    "output_index": 0,
                    "item": {**call, "status": "in_progress", "arguments": ""},
                },
                {"type": "response.output_item.done", "output_index": 0, "item": call},
                {
                    "type": "response.completed",
                    "response": {
                        "id": "r",
                        "object": "response",
                        "status": "completed",
                        "output": [],
                    },
                },
            )
        ]
    )
    try:
        namespace = {
            "type": "namespace",
            "name": "functions",
            "description": "d",
            "tools": [{"type": "function", "name": "wait", "parameters": {"type": "object"}}],
        }
        item = {"type": "additional_tools", "role": "developer", "tools": [namespace]}
        # A function tool beside it: the tool guard checks this request's calls.
        lookup = {"type": "function", "name": "lookup", "parameters": {"type": "object"}}
        response = client.responses.create(
            model="native",
            input=[item, {"role": "user", "content": "wait"}],
            tools=[lookup],
            store=False,
        )  # type: ignore[list-item]
    finally:
        native.handler = native_brain
    [out] = response.output
    assert (out.type, out.name, out.arguments, getattr(out, "namespace", None)) == (
        "function_call",
        "wait",
        '{"ms":1}',
        "functions",
    )
