"""Hypothesis strategies for Open Responses request bodies: mostly-valid shapes with hostile
values."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

MODELS = st.sampled_from(
    ["orgate/echo", "fake-chat", "", "no-such-model", "orgate/echo\x00", "ORGATE/ECHO"]
)
NASTY_TEXT = st.sampled_from(
    [
        "",
        " ",
        "\x00",
        "\ud7ff",
        "🙂" * 10,
        "a:b",
        "\\u003a",
        "orgate:fail",
        "orgate:fail-mid",
        "orgate:refuse",
        "orgate:bad-json",
        "orgate:bad-args",
        "orgate:reason",
        "\n\n",
        "data: [DONE]",
        "<script>",
    ]
)
TEXT = st.one_of(NASTY_TEXT, st.text(max_size=40))
JSON_LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    TEXT,
)
JSON = st.recursive(
    JSON_LEAF,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(TEXT, inner, max_size=4)),
    max_leaves=20,
)

ROLE = st.sampled_from(["user", "assistant", "system", "developer", "tool", "wizard", ""])
PART_TYPE = st.sampled_from(
    ["input_text", "output_text", "input_image", "input_file", "refusal", "summary_text", "bogus"]
)


@st.composite
def content_part(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(PART_TYPE)
    part: dict[str, Any] = {"type": kind}
    if kind in ("input_text", "output_text", "summary_text"):
        part["text"] = draw(TEXT)
    elif kind == "input_image":
        part["image_url"] = draw(
            st.sampled_from(
                [
                    "https://example.com/a.png",
                    "data:image/png;base64,iVBORw0KGgo=",
                    "",
                    "file:///etc/passwd",
                    "http://169.254.169.254/latest",
                ]
            )
        )
        if draw(st.booleans()):
            part["detail"] = draw(st.sampled_from(["low", "high", "auto", "ultra"]))
    elif kind == "refusal":
        part["refusal"] = draw(TEXT)
    if draw(st.integers(0, 5)) == 0:
        part[draw(TEXT)] = draw(JSON)
    return part


@st.composite
def item(draw: st.DrawFn) -> Any:
    kind = draw(
        st.sampled_from(
            [
                "message",
                "short",
                "function_call",
                "function_call_output",
                "reasoning",
                "item_reference",
                "junk",
            ]
        )
    )
    if kind == "short":
        return {
            "role": draw(ROLE),
            "content": draw(st.one_of(TEXT, st.lists(content_part(), max_size=3))),
        }
    if kind == "message":
        value: dict[str, Any] = {
            "type": "message",
            "role": draw(ROLE),
            "content": draw(st.lists(content_part(), max_size=3)),
        }
        if draw(st.booleans()):
            value["status"] = draw(
                st.sampled_from(["completed", "in_progress", "incomplete", "done"])
            )
        return value
    if kind == "function_call":
        return {
            "type": "function_call",
            "call_id": draw(TEXT),
            "name": draw(st.sampled_from(["get_weather", "f", "", "has space"])),
            "arguments": draw(st.one_of(TEXT, st.just('{"city": "Paris"}'), JSON)),
        }
    if kind == "function_call_output":
        return {
            "type": "function_call_output",
            "call_id": draw(TEXT),
            "output": draw(st.one_of(TEXT, st.lists(content_part(), max_size=2), JSON)),
        }
    if kind == "reasoning":
        return {
            "type": "reasoning",
            "summary": draw(st.lists(content_part(), max_size=2)),
            **({"encrypted_content": draw(TEXT)} if draw(st.booleans()) else {}),
        }
    if kind == "item_reference":
        return {"type": "item_reference", "id": draw(st.sampled_from(["msg_123", "", "resp_x"]))}
    return draw(JSON)


@st.composite
def tool(draw: st.DrawFn) -> Any:
    if draw(st.integers(0, 6)) == 0:
        return draw(JSON)
    value: dict[str, Any] = {
        "type": draw(
            st.sampled_from(["function", "function", "web_search", "openai:web_search", "custom"])
        ),
        "name": draw(st.sampled_from(["get_weather", "lookup", "x" * 70, "bad name", ""])),
    }
    if draw(st.booleans()):
        value["parameters"] = draw(
            st.one_of(
                st.just(
                    {
                        "type": "object",
                        "properties": {"city": {"type": "string"}},
                        "required": ["city"],
                    }
                ),
                st.just(
                    {
                        "type": "object",
                        "properties": {"n": {"type": "integer", "minimum": 3}},
                        "additionalProperties": False,
                    }
                ),
                st.just(
                    {
                        "$ref": "#/definitions/loop",
                        "definitions": {"loop": {"$ref": "#/definitions/loop"}},
                    }
                ),
                st.just({"type": "object", "pattern": "(a+)+$"}),
                JSON,
            )
        )
    if draw(st.booleans()):
        value["strict"] = draw(st.one_of(st.booleans(), JSON_LEAF))
    if draw(st.booleans()):
        value["description"] = draw(TEXT)
    return value


@st.composite
def request_body(draw: st.DrawFn) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if draw(st.integers(0, 10)) > 0:
        body["model"] = draw(st.one_of(MODELS, JSON_LEAF))
    if draw(st.integers(0, 10)) > 0:
        body["input"] = draw(st.one_of(TEXT, st.lists(item(), max_size=5), JSON_LEAF))
    optional: dict[str, st.SearchStrategy[Any]] = {
        "stream": st.one_of(st.booleans(), JSON_LEAF),
        "instructions": st.one_of(TEXT, JSON_LEAF),
        "tools": st.lists(tool(), max_size=4),
        "tool_choice": st.one_of(
            st.sampled_from(["auto", "none", "required", "sometimes"]),
            st.just({"type": "function", "name": "get_weather"}),
            st.just(
                {
                    "type": "allowed_tools",
                    "mode": "auto",
                    "tools": [{"type": "function", "name": "lookup"}],
                }
            ),
            JSON,
        ),
        "temperature": st.one_of(st.floats(allow_nan=False, allow_infinity=False), JSON_LEAF),
        "top_p": st.one_of(st.floats(allow_nan=False, allow_infinity=False), JSON_LEAF),
        "max_output_tokens": st.one_of(st.integers(min_value=-5, max_value=2**40), JSON_LEAF),
        "text": st.one_of(
            st.just({"format": {"type": "json_object"}}),
            st.just(
                {
                    "format": {
                        "type": "json_schema",
                        "name": "x",
                        "schema": {
                            "type": "object",
                            "properties": {"a": {"type": "integer"}},
                            "required": ["a"],
                        },
                    }
                }
            ),
            st.builds(
                lambda s: {"format": {"type": "json_schema", "name": "x", "schema": s}}, JSON
            ),
            JSON,
        ),
        "metadata": st.one_of(st.dictionaries(TEXT, TEXT, max_size=3), JSON),
        "previous_response_id": st.one_of(st.sampled_from(["resp_nope", ""]), JSON_LEAF),
        "store": st.one_of(st.booleans(), JSON_LEAF),
        "background": st.one_of(st.booleans(), JSON_LEAF),
        "truncation": st.one_of(st.sampled_from(["auto", "disabled", "sometimes"]), JSON_LEAF),
        "reasoning": st.one_of(st.just({"effort": "low"}), JSON),
        "parallel_tool_calls": st.one_of(st.booleans(), JSON_LEAF),
        "max_tool_calls": st.one_of(st.integers(min_value=-2, max_value=10), JSON_LEAF),
        "user": st.one_of(TEXT, JSON_LEAF),
        "include": st.one_of(st.lists(TEXT, max_size=2), JSON),
    }
    for name in draw(st.lists(st.sampled_from(sorted(optional)), max_size=6, unique=True)):
        body[name] = draw(optional[name])
    if draw(st.integers(0, 8)) == 0:
        body[draw(TEXT)] = draw(JSON)
    return body
