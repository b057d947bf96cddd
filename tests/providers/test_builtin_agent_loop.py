"""``orgate/echo`` as a model an agent can loop with (Codex ``exec --output-schema``): over HTTP
against the session's ``orgate serve``.

After a tool's output with a JSON format asked for, it answers schema-valid JSON (not prose the
safety net would retry); tool arguments hold the required properties and only the optional ones
the prompt names; every answer to a format carries the ``X-Orgate-Structured-*`` headers, a
passed-through tool call included.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import jsonschema

SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}, "count": {"type": "integer"}},
    "required": ["answer", "count"],
    "additionalProperties": False,
}
FORMAT = {"format": {"type": "json_schema", "name": "result", "schema": SCHEMA, "strict": True}}
SHELL = {
    "type": "function",
    "name": "exec_command",
    "parameters": {
        "type": "object",
        "properties": {
            "cmd": {"type": "string"},
            "workdir": {"type": "string"},
            "login": {"type": "boolean"},
        },
        "required": ["cmd"],
        "additionalProperties": False,
    },
}


def create(http: httpx.Client, **body: Any) -> httpx.Response:
    reply = http.post("/v1/responses", json={"model": "orgate/echo", **body})
    assert reply.status_code == 200, reply.text
    return reply


def test_optional_arguments_are_left_out_unless_the_prompt_names_them(http: httpx.Client) -> None:
    [call] = create(http, input="echo hi", tools=[SHELL]).json()["output"]
    assert json.loads(call["arguments"]) == {"cmd": "echo hi"}
    [named] = create(http, input="ls with a workdir", tools=[SHELL]).json()["output"]
    assert set(json.loads(named["arguments"])) == {"cmd", "workdir"}


def test_after_a_tool_output_a_json_format_gets_schema_valid_json_in_one_attempt(
    http: httpx.Client,
) -> None:
    history = [
        {"type": "message", "role": "user", "content": "echo hi"},
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "exec_command",
            "arguments": '{"cmd": "echo hi"}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "hi"},
    ]
    reply = create(http, input=history, tools=[SHELL], text=FORMAT)
    [message] = reply.json()["output"]
    jsonschema.validate(json.loads(message["content"][0]["text"]), SCHEMA)
    assert reply.headers["x-orgate-structured-outcome"] == "ok"
    assert reply.headers["x-orgate-structured-attempts"] == "1"


def test_a_tool_call_answering_a_format_carries_the_structured_headers(http: httpx.Client) -> None:
    reply = create(http, input="echo hi", tools=[SHELL], text=FORMAT)
    assert reply.json()["output"][0]["type"] == "function_call"
    assert reply.headers["x-orgate-structured-outcome"] == "passthrough"
    assert "x-orgate-structured-mode" in reply.headers
