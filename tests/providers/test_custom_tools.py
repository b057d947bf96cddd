"""OpenAI's ``custom`` tools per upstream: the request mapping (exact wire bodies), the decoding
of the model's call back into a custom call, and the builder's ``custom_tool_call`` item."""

from __future__ import annotations

import orjson
import pytest

from orgate.engine.builder import ResponseBuilder
from orgate.neutral import Finish, ModelRequest, TextDelta, ToolCallDelta, ToolCallStart
from orgate.protocol import CreateResponseBody
from orgate.providers.anthropic.mapping import build_body as anthropic_body
from orgate.providers.custom_tools import CustomCalls, input_of
from orgate.providers.openai_chat.mapping import build_body as chat_body
from orgate.providers.openai_responses import StreamDecoder
from orgate.providers.openai_responses.mapping import build_body as responses_body

GRAMMAR = "start: /[a-z]+/"
PATCH_TOOL = {
    "type": "custom",
    "name": "apply_patch",
    "description": "Edit files.",
    "format": {"type": "grammar", "syntax": "lark", "definition": GRAMMAR},
}
HISTORY = [
    {"role": "user", "content": "patch it"},
    {
        "type": "custom_tool_call",
        "call_id": "call_1",
        "name": "apply_patch",
        "input": "*** Begin Patch\n",
        "status": "completed",
    },
    {"type": "custom_tool_call_output", "call_id": "call_1", "output": "Done!"},
]
AS_FUNCTION = {
    "name": "apply_patch",
    "description": "Edit files.\n\nPut the whole free-form input in the string argument 'input' "
    "(plain text, not JSON);"
    f" it must match this Lark grammar:\n{GRAMMAR}",
    "parameters": {
        "type": "object",
        "properties": {"input": {"type": "string", "description": "The tool's free-form input."}},
        "required": ["input"],
        "additionalProperties": False,
    },
}


def request(**body: object) -> ModelRequest:
    parsed = CreateResponseBody.model_validate(
        {"model": "m", "input": HISTORY, "tools": [PATCH_TOOL], **body}
    )
    return ModelRequest(
        model="up",
        input=list(parsed.input),
        tools=list(parsed.tools or ()),
        tool_choice=parsed.tool_choice,
    )  # type: ignore[arg-type]


def test_openai_chat_gets_a_function_with_one_string_argument_and_function_history() -> None:
    body = chat_body(request(tool_choice={"type": "custom", "name": "apply_patch"}), stream=True)
    assert body["tools"] == [{"type": "function", "function": {**AS_FUNCTION, "strict": True}}]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "apply_patch"}}
    assert body["messages"][1:] == [
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {
                        "name": "apply_patch",
                        "arguments": '{"input":"*** Begin Patch\\n"}',
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "Done!"},
    ]


def test_anthropic_gets_a_tool_with_one_string_property_and_tool_use_history() -> None:
    body = anthropic_body(request(tool_choice={"type": "custom", "name": "apply_patch"}))
    [tool] = body["tools"]
    assert (tool["name"], tool["description"], tool["input_schema"]) == (
        AS_FUNCTION["name"],
        AS_FUNCTION["description"],
        AS_FUNCTION["parameters"],
    )
    assert body["tool_choice"]["type"] == "tool" and body["tool_choice"]["name"] == "apply_patch"
    assert body["messages"][1]["content"] == [
        {
            "type": "tool_use",
            "id": "call_1",
            "name": "apply_patch",
            "input": {"input": "*** Begin Patch\n"},
        }
    ]
    assert body["messages"][2]["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "call_1",
        "content": "Done!",
    }


def test_a_native_responses_upstream_gets_the_tool_items_and_choice_as_sent() -> None:
    body = responses_body(
        request(
            tool_choice={
                "type": "allowed_tools",
                "tools": [{"type": "custom", "name": "apply_patch"}],
                "mode": "required",
            }
        )
    )
    assert body["tools"] == [PATCH_TOOL]
    assert body["input"][1:] == HISTORY[1:]
    assert body["tool_choice"] == {
        "type": "allowed_tools",
        "tools": [{"type": "custom", "name": "apply_patch"}],
        "mode": "required",
    }


def test_a_text_format_is_described_without_a_grammar() -> None:
    body = chat_body(
        request(
            tools=[{"type": "custom", "name": "note"}], input=[{"role": "user", "content": "hi"}]
        ),
        stream=True,
    )
    assert (
        body["tools"][0]["function"]["description"]
        == "Put the whole free-form input in the string argument 'input' (plain text, not JSON)."
    )


# --------------------------------------------------------------------------- decoding


def test_a_function_call_of_a_custom_tool_becomes_a_custom_call_with_its_input() -> None:
    calls = CustomCalls(frozenset({"apply_patch"}))
    first = calls.feed(
        [TextDelta("ok"), ToolCallStart(0, "call_9", "apply_patch"), ToolCallDelta(0, '{"inp')]
    )
    rest = calls.feed(
        [
            ToolCallDelta(0, 'ut": "a\\nb \\u00e9"}'),
            ToolCallStart(1, "call_10", "exec"),
            ToolCallDelta(1, "{}"),
            Finish("tool_calls"),
        ]
    )
    assert first == [TextDelta("ok"), ToolCallStart(0, "call_9", "apply_patch", custom=True)]
    assert rest == [
        ToolCallDelta(0, "a\nb é"),
        ToolCallStart(1, "call_10", "exec"),
        ToolCallDelta(1, "{}"),
        Finish("tool_calls"),
    ]


@pytest.mark.parametrize(
    ("arguments", "text"),
    [
        ('{"input": "x"}', "x"),
        ('{"patch": "y"}', "y"),
        ("not json", "not json"),
        ('{"a": 1, "b": "2"}', '{"a": 1, "b": "2"}'),
        ("", ""),
    ],
)
def test_input_of_arguments(arguments: str, text: str) -> None:
    assert input_of(arguments) == text


def frames(*events: dict[str, object]) -> bytes:
    return b"".join(
        b"event: " + str(e["type"]).encode() + b"\ndata: " + orjson.dumps(e) + b"\n\n"
        for e in events
    )


# What OpenAI streams for a custom tool call (openai-python's ResponseCustomToolCall* event types).
CUSTOM_STREAM = frames(
    {
        "type": "response.created",
        "sequence_number": 0,
        "response": {"id": "resp_up", "status": "in_progress", "output": []},
    },
    {
        "type": "response.output_item.added",
        "sequence_number": 1,
        "output_index": 0,
        "item": {
            "id": "ctc_up",
            "type": "custom_tool_call",
            "status": "in_progress",
            "call_id": "call_up",
            "name": "apply_patch",
            "input": "",
        },
    },
    {
        "type": "response.custom_tool_call_input.delta",
        "sequence_number": 2,
        "output_index": 0,
        "item_id": "ctc_up",
        "delta": "*** Begin",
    },
    {
        "type": "response.custom_tool_call_input.delta",
        "sequence_number": 3,
        "output_index": 0,
        "item_id": "ctc_up",
        "delta": " Patch\n",
    },
    {
        "type": "response.custom_tool_call_input.done",
        "sequence_number": 4,
        "output_index": 0,
        "item_id": "ctc_up",
        "input": "*** Begin Patch\n",
    },
    {
        "type": "response.output_item.done",
        "sequence_number": 5,
        "output_index": 0,
        "item": {
            "id": "ctc_up",
            "type": "custom_tool_call",
            "status": "completed",
            "call_id": "call_up",
            "name": "apply_patch",
            "input": "*** Begin Patch\n",
        },
    },
    {
        "type": "response.completed",
        "sequence_number": 6,
        "response": {
            "id": "resp_up",
            "status": "completed",
            "output": [],
            "usage": {"input_tokens": 5, "output_tokens": 7},
        },
    },
)


def test_the_responses_decoder_reads_openai_custom_tool_call_events() -> None:
    decoder = StreamDecoder("native")
    events = decoder.feed(CUSTOM_STREAM)
    assert events[:3] == [
        ToolCallStart(0, "call_up", "apply_patch", custom=True),
        ToolCallDelta(0, "*** Begin"),
        ToolCallDelta(0, " Patch\n"),
    ]
    assert isinstance(events[3], Finish) and events[3].reason == "tool_calls" and len(events) == 4


def test_the_responses_decoder_reads_a_custom_call_given_only_whole() -> None:
    item = {
        "id": "ctc_up",
        "type": "custom_tool_call",
        "call_id": "call_up",
        "name": "apply_patch",
        "input": "x",
    }
    decoder = StreamDecoder("native")
    events = decoder.feed(
        frames(
            {"type": "response.output_item.done", "output_index": 0, "item": item},
            {"type": "response.completed", "response": {"status": "completed", "output": []}},
        )
    )
    assert events[:2] == [
        ToolCallStart(0, "call_up", "apply_patch", custom=True),
        ToolCallDelta(0, "x"),
    ]


# --------------------------------------------------------------------------- builder


def test_the_builder_emits_a_custom_tool_call_item_and_its_input_events() -> None:
    builder = ResponseBuilder({}, response_id="resp_1")
    builder.start()
    for event in (
        ToolCallStart(0, "call_1", "apply_patch", custom=True),
        ToolCallDelta(0, "a"),
        ToolCallDelta(0, "b"),
        Finish("tool_calls"),
    ):
        builder.feed(event)
    events = builder.drain()
    kinds = [e["type"] for e in events]
    assert kinds == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.custom_tool_call_input.delta",
        "response.custom_tool_call_input.delta",
        "response.custom_tool_call_input.done",
        "response.output_item.done",
        "response.completed",
    ]
    added, done = events[2]["item"], events[6]["item"]
    assert added == {
        "id": added["id"],
        "type": "custom_tool_call",
        "status": "in_progress",
        "call_id": "call_1",
        "name": "apply_patch",
        "input": "",
    }
    assert added["id"].startswith("ctc_")
    assert events[5] == {
        "type": "response.custom_tool_call_input.done",
        "item_id": added["id"],
        "output_index": 0,
        "input": "ab",
        "sequence_number": 5,
    }
    assert done == {**added, "status": "completed", "input": "ab"}
    assert events[-1]["response"]["output"] == [done]


def test_a_namespaced_call_keeps_its_namespace_from_a_native_upstream_to_the_client() -> None:
    """A tool offered inside a ``namespace`` tool (Codex's ``functions`` namespace, its code-mode
    ``exec``): the call names its namespace, which the client needs to find the tool."""
    item = {
        "id": "ctc_up",
        "type": "custom_tool_call",
        "call_id": "call_up",
        "name": "exec",
        "namespace": "functions",
        "input": "text(1)",
    }
    decoder = StreamDecoder("native")
    events = decoder.feed(
        frames(
            {"type": "response.output_item.done", "output_index": 0, "item": item},
            {"type": "response.completed", "response": {"status": "completed", "output": []}},
        )
    )
    assert events[0] == ToolCallStart(0, "call_up", "exec", custom=True, namespace="functions")
    builder = ResponseBuilder({}, response_id="resp_1")
    builder.start()
    for event in events:
        builder.feed(event)
    [done] = [e["item"] for e in builder.drain() if e["type"] == "response.output_item.done"]
    assert (done["type"], done["name"], done["namespace"], done["input"]) == (
        "custom_tool_call",
        "exec",
        "functions",
        "text(1)",
    )
