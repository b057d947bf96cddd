"""Black-box regressions for ``/v1/chat/completions`` found by an audit against the OpenAI wire
format.

Each test drives the running server (``server`` / ``client`` / ``http`` fixtures from
``tests/conftest.py``) the way a Chat Completions client does, with the offline
``orgate/echo`` model, and fails without its fix.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest

from orgate.legacy_chat import translate, validate

ECHO = "orgate/echo"
USER = [{"role": "user", "content": "hello there"}]
TOOLS = [
    {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "g", "parameters": {"type": "object"}}},
]


def _sse_chunks(text: str) -> list[Any]:
    lines = [line.removeprefix("data: ") for line in text.splitlines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    return [json.loads(line) for line in lines[:-1]]


# -- allowed_tools errors name the chat field --------------------------------------------


def test_allowed_tools_error_names_the_chat_param(client: openai.OpenAI) -> None:
    """``tool_choice.tools[1].name`` is a Responses path; chat clients sent
    ``tool_choice.allowed_tools.tools[1].function.name``."""
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(
            model=ECHO,
            messages=USER,
            tools=TOOLS,
            tool_choice={
                "type": "allowed_tools",
                "allowed_tools": {
                    "mode": "auto",
                    "tools": [
                        {"type": "function", "function": {"name": "f"}},
                        {"type": "function", "function": {"name": "missing"}},
                    ],
                },
            },
        )
    error = info.value.body
    assert isinstance(error, dict)
    assert error["param"] == "tool_choice.allowed_tools.tools[1].function.name"


def test_allowed_tools_params_map_back_to_chat_paths() -> None:
    req = validate.parse_request(
        {
            "model": ECHO,
            "messages": USER,
            "tools": TOOLS,
            "tool_choice": {
                "type": "allowed_tools",
                "allowed_tools": {
                    "mode": "required",
                    "tools": [{"type": "function", "function": {"name": "f"}}],
                },
            },
        }
    )
    to_chat = translate.translate_request(req)[1].to_chat
    assert (
        to_chat("tool_choice.tools[0].name") == "tool_choice.allowed_tools.tools[0].function.name"
    )
    assert to_chat("tool_choice.tools[0].type") == "tool_choice.allowed_tools.tools[0].type"
    assert to_chat("tool_choice.tools[0]") == "tool_choice.allowed_tools.tools[0]"
    assert to_chat("tool_choice.tools") == "tool_choice.allowed_tools.tools"
    assert to_chat("tool_choice.mode") == "tool_choice.allowed_tools.mode"
    # the named-function and plain cases are unchanged
    assert to_chat("tool_choice.name") == "tool_choice.function.name"
    assert to_chat("tool_choice") == "tool_choice"


# -- documented refusals carry code unsupported_parameter -----------------------------------


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"max_tokens": 64, "max_completion_tokens": 64}, "max_tokens"),
        ({"stream_options": {"include_usage": True}}, "stream_options"),
    ],
)
def test_documented_refusals_are_unsupported_parameter(
    http: httpx.Client, fields: dict[str, Any], param: str
) -> None:
    """docs/chat-completions.md lists these under "refused with code: unsupported_parameter"."""
    r = http.post("/v1/chat/completions", json={"model": ECHO, "messages": USER, **fields})
    assert r.status_code == 400
    assert r.json()["error"] == {
        "message": r.json()["error"]["message"],
        "type": "invalid_request_error",
        "param": param,
        "code": "unsupported_parameter",
    }


@pytest.mark.parametrize("field", ["max_tokens", "max_completion_tokens"])
def test_max_tokens_below_the_responses_minimum_is_honoured(http: httpx.Client, field: str) -> None:
    """Chat allows ``max_tokens: 1`` (health checks send it); it was refused with 400 because
    /v1/responses wants at least 16 for ``max_output_tokens``."""
    long = [{"role": "user", "content": " ".join(f"word{i}" for i in range(40))}]
    for n in (1, 3, 15):
        r = http.post("/v1/chat/completions", json={"model": ECHO, "messages": long, field: n})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["choices"][0]["finish_reason"] == "length"
        assert body["usage"]["completion_tokens"] == n
    r = http.post("/v1/chat/completions", json={"model": ECHO, "messages": USER, field: 0})
    assert r.status_code == 400 and r.json()["error"]["param"] == field


# -- stream chunks carry service_tier, like the chat.completion ------------------------------


@pytest.mark.parametrize("include_usage", [False, True])
def test_stream_chunks_carry_service_tier(http: httpx.Client, include_usage: bool) -> None:
    body: dict[str, Any] = {"model": ECHO, "messages": USER, "service_tier": "flex"}
    whole = http.post("/v1/chat/completions", json=body).json()
    assert whole["service_tier"] == "flex"
    body["stream"] = True
    if include_usage:
        body["stream_options"] = {"include_usage": True}
    r = http.post("/v1/chat/completions", json=body)
    assert r.status_code == 200
    chunks = _sse_chunks(r.text)
    assert chunks and all(c["service_tier"] == "flex" for c in chunks)
    if include_usage:
        assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] > 0


def test_sdk_stream_helper_final_completion_keeps_service_tier(client: openai.OpenAI) -> None:
    whole = client.chat.completions.create(model=ECHO, messages=USER)  # type: ignore[arg-type]
    with client.chat.completions.stream(model=ECHO, messages=USER) as stream:  # type: ignore[arg-type]
        for _ in stream:
            pass
        final = stream.get_final_completion()
    assert final.service_tier == whole.service_tier == "default"
    assert final.choices[0].message.content == whole.choices[0].message.content
