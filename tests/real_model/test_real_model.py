"""orgate in front of a real model (SmolLM2-135M on llama-cpp-python's server): the wire, not
the wisdom. Every body and event is checked against the spec; JSON formats end valid or say
they did not; tool calls pass the gate or are refused with its codes.

Requests are few and short (``max_output_tokens`` small): the one model serves them in turn.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
from jsonschema import Draft202012Validator
from prometheus_client.parser import text_string_to_metric_families

from tests.real_model.conftest import MODEL
from tests.support.spec import check_sse, validate

SHORT = 24  # output tokens per answer: enough for a sentence, quick on a slow machine


def create(api: httpx.Client, **body: Any) -> httpx.Response:
    body.setdefault("max_output_tokens", SHORT)
    return api.post("/v1/responses", json={"model": MODEL, **body})


def completed_or_cut(response: dict[str, Any]) -> None:
    """A text answer ends completed, or incomplete at the token limit (a small model rambles)."""
    validate("ResponseResource", response)
    assert response["status"] in ("completed", "incomplete"), response
    if response["status"] == "incomplete":
        assert response["incomplete_details"] == {"reason": "max_output_tokens"}
    # (usage may be zero: llama-cpp-python's server sends no usage chunk in a stream)
    assert any(item["type"] == "message" for item in response["output"]), response["output"]


def stream(api: httpx.Client, **body: Any) -> list[dict[str, Any]]:
    body.setdefault("max_output_tokens", SHORT)
    with api.stream("POST", "/v1/responses", json={"model": MODEL, "stream": True, **body}) as res:
        raw = res.read()
        assert res.status_code == 200, raw[:500]
        assert res.headers["content-type"].startswith("text/event-stream")
    return check_sse(raw)


def message(role: str, text: str) -> dict[str, Any]:
    kind = "output_text" if role == "assistant" else "input_text"
    return {"type": "message", "role": role, "content": [{"type": kind, "text": text}]}


def test_string_input(api: httpx.Client) -> None:
    res = create(api, input="Say hello.")
    assert res.status_code == 200, res.text
    completed_or_cut(res.json())


def test_typed_multi_turn_input_streams(api: httpx.Client) -> None:
    """Content as typed parts, several turns: what chat templates that only take strings broke
    on."""
    events = stream(
        api,
        input=[
            message("user", "My name is Ada."),
            message("assistant", "Nice to meet you, Ada."),
            message("user", "What is my name?"),
        ],
    )
    completed_or_cut(events[-1]["response"])
    assert any(e["type"] == "response.output_text.delta" for e in events)


def test_system_prompt_and_developer_message(api: httpx.Client) -> None:
    res = create(
        api,
        instructions="You are a terse assistant.",
        input=[
            {"type": "message", "role": "developer", "content": "Answer in one word."},
            message("user", "Name a colour."),
        ],
    )
    assert res.status_code == 200, res.text
    completed_or_cut(res.json())


def test_previous_response_id_chain_is_stored_and_continued(api: httpx.Client) -> None:
    first = create(api, input="Remember the number 7.", store=True)
    assert first.status_code == 200, first.text
    completed_or_cut(first.json())
    second = create(api, input="Which number?", previous_response_id=first.json()["id"], store=True)
    assert second.status_code == 200, second.text
    body = second.json()
    completed_or_cut(body)
    assert body["previous_response_id"] == first.json()["id"]
    stored = api.get(f"/v1/responses/{body['id']}")
    assert stored.status_code == 200
    validate("ResponseResource", stored.json())
    assert stored.json()["output"] == body["output"]


def test_max_output_tokens_cuts_the_answer(api: httpx.Client) -> None:
    events = stream(api, input="Count from 1 to 200, separated by commas.", max_output_tokens=16)
    final = events[-1]
    assert final["type"] == "response.incomplete", [e["type"] for e in events][-3:]
    assert final["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
    validate("ResponseResource", final["response"])


WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
    "strict": True,
}
GATE_CODES = ("invalid_tool_arguments", "tool_choice_violation")


def test_a_tool_call_attempt_passes_the_gate_or_is_refused_with_its_code(api: httpx.Client) -> None:
    res = create(
        api,
        input="What is the weather in Paris? Use the tool.",
        tools=[WEATHER],
        max_output_tokens=64,
    )
    body = res.json()
    if res.status_code != 200:  # the gate refused the model's calls before any output
        assert body["error"]["code"] in GATE_CODES, body
        return
    validate("ResponseResource", body)
    if body["status"] == "failed":
        assert body["error"]["code"] in GATE_CODES, body
        return
    assert body["status"] in ("completed", "incomplete")
    validator = Draft202012Validator(WEATHER["parameters"])
    for item in body["output"]:
        if item["type"] == "function_call":
            assert item["name"] == "get_weather"
            validator.validate(json.loads(item["arguments"]))


PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer", "minimum": 0},
        "city": {"type": "string"},
    },
    "required": ["name", "age", "city"],
    "additionalProperties": False,
}
NET_OUTCOMES = ("ok", "recovered", "default", "review", "error")


def _json_answer(res: httpx.Response, schema: dict[str, Any]) -> str:
    """What the safety net promises: valid JSON, or an explicit failure — never completed
    with invalid JSON. Returns the outcome."""
    body = res.json()
    outcome = res.headers.get("x-orgate-structured-outcome")
    if res.status_code != 200:
        assert body["error"]["code"] == "structured_output_invalid", body
        assert outcome in ("error", "review"), res.headers
        return outcome
    validate("ResponseResource", body)
    assert outcome in NET_OUTCOMES, res.headers
    if body["status"] == "completed":
        text = "".join(
            part["text"]
            for item in body["output"]
            if item["type"] == "message"
            for part in item["content"]
            if part["type"] == "output_text"
        )
        Draft202012Validator(schema).validate(json.loads(text))
    else:
        assert body["status"] in ("failed", "incomplete"), body["status"]
        if body["status"] == "failed":
            assert body["error"]["code"] == "structured_output_invalid", body
    return outcome


def metric_counts(api: httpx.Client) -> dict[str, float]:
    counts: dict[str, float] = {}
    for family in text_string_to_metric_families(api.get("/metrics").text):
        if family.name.startswith("orgate_structured_"):
            for sample in family.samples:
                if sample.name.endswith("_total") and sample.labels.get("model") == MODEL:
                    key = sample.name.removeprefix("orgate_structured_").removesuffix("_total")
                    counts[key] = counts.get(key, 0.0) + sample.value
    return counts


def test_json_formats_end_valid_or_explicitly_failed_and_the_rates_come_from_metrics(
    api: httpx.Client,
) -> None:
    schema_format = {"type": "json_schema", "name": "person", "schema": PERSON, "strict": True}
    asks = [
        (schema_format, PERSON, "Ada Lovelace, 36, lives in London. Extract the person."),
        ({"type": "json_object"}, {"type": "object"}, "Give a JSON object with a key 'ok'."),
        ({"type": "json_object"}, {"type": "object"}, "Describe a cat as an object."),
    ]
    outcomes = []
    for fmt, schema, prompt in asks:
        res = create(api, input=prompt, text={"format": fmt}, max_output_tokens=64)
        outcomes.append(_json_answer(res, schema))
        refused = res.headers.get("x-orgate-structured-downgrade")
        if refused is not None:  # the server refused a response format: it says which
            assert set(refused.split(",")) <= {"json_schema", "json_object"}
    counts = metric_counts(api)
    # every verdict is counted once; the three rates are ratios of these counters
    assert counts["requests"] == sum(o in NET_OUTCOMES for o in outcomes) == len(asks)
    first_failures = counts.get("first_attempt_failures", 0.0)
    assert 0 <= first_failures <= counts["requests"]
    assert 0 <= counts.get("recovered_by_retry", 0.0) <= first_failures
    exhausted = counts.get("budget_exhausted", 0.0)
    assert exhausted == sum(o not in ("ok", "recovered") for o in outcomes)
