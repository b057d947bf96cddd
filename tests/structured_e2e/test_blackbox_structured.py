"""Black-box audit of the safety net: a real ``orgate serve`` in front of a scripted upstream.

Each test pins a defect found by driving the server as a client would (raw
HTTP and the official ``openai`` SDK) and fails without its fix.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest

from tests.fakes.openai_chat_upstream import FakeOpenAIChat, Script, text
from tests.server_process import OrgateServer
from tests.structured_e2e.helpers import structured_counts
from tests.support.samples import output_text

PRODUCT = {
    "type": "object",
    "properties": {"sku": {"type": "string"}, "price": {"type": "number"}},
    "required": ["sku", "price"],
    "additionalProperties": False,
}
GOOD = '{"sku": "A1", "price": 12.5}'
WRONG_TYPE = '{"sku": 5, "price": 1}'


def body(name: str, schema: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "model": "fake-chat",
        "input": "Extract the product as JSON: A1 costs 12.5",
        "text": {"format": {"type": "json_schema", "name": name, "schema": schema or PRODUCT}},
        **extra,
    }


def feedback(fake: FakeOpenAIChat, index: int) -> str:
    value = fake.bodies[index]["messages"][-1]["content"]
    return value if isinstance(value, str) else "".join(p.get("text", "") for p in value)


# --------------------------------------------------------------------------- retries are capped


def test_exhausted_budget_tells_clients_not_to_retry(
    api: httpx.Client, fake: FakeOpenAIChat
) -> None:
    fake.enqueue(*(text(WRONG_TYPE) for _ in range(3)))
    r = api.post("/v1/responses", json=body("bb_noretry"))
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "structured_output_invalid"
    assert r.headers["x-should-retry"] == "false"


def test_openai_sdk_does_not_multiply_the_retry_budget(
    net_server: OrgateServer, api: httpx.Client, fake: FakeOpenAIChat
) -> None:
    """A spent budget is a 400 the SDK does not send again: 3 upstream calls, one review entry."""
    before = {item["id"] for item in api.get("/v1/orgate/review").json()["data"]}
    fake.enqueue(*(text(WRONG_TYPE) for _ in range(9)))
    client = openai.OpenAI(base_url=net_server.base_url, api_key=net_server.api_key, timeout=20)
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(
            model="fake-chat",
            input="A1 costs 12.5",
            text={"format": {"type": "json_schema", "name": "product_review", "schema": PRODUCT}},
        )
    assert caught.value.response.headers["x-orgate-structured-outcome"] == "review"
    assert len(fake.bodies) == 3
    after = {item["id"] for item in api.get("/v1/orgate/review").json()["data"]}
    assert len(after - before) == 1


# --------------------------------------------------------------------------- precise feedback


def test_format_is_enforced_with_precise_feedback(api: httpx.Client, fake: FakeOpenAIChat) -> None:
    """docs: unsupported formats are moved to the description "and enforced by validation"."""
    schema = {
        "type": "object",
        "properties": {
            "email": {"type": "string", "format": "email"},
            "site": {"type": "string", "format": "uri"},
        },
        "required": ["email", "site"],
        "additionalProperties": False,
    }
    good = '{"email": "a@b.co", "site": "https://example.com/"}'
    fake.enqueue(text('{"email": "nope", "site": "not a uri"}'), text(good))
    r = api.post("/v1/responses", json=body("bb_contact", schema))
    assert r.status_code == 200, r.text
    assert r.headers["x-orgate-structured-outcome"] == "recovered"
    assert json.loads(output_text(r.json())) == json.loads(good)
    assert feedback(fake, 1) == (
        "Your previous reply failed the schema check:\n"
        '- email: expected a string in format email, got "nope"\n'
        '- site: expected a string in format uri, got "not a uri"\n'
        "Reply again with the corrected JSON value only: no prose, no code fences."
    )


def test_size_constraints_feedback_says_what_was_expected(
    api: httpx.Client, fake: FakeOpenAIChat
) -> None:
    """maxLength/minItems are moved out of the strict schema: the feedback is the model's only
    hint."""
    schema = {
        "type": "object",
        "properties": {
            "sku": {"type": "string", "maxLength": 4},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2},
        },
        "required": ["sku", "tags"],
        "additionalProperties": False,
    }
    fake.enqueue(
        text('{"sku": "ABCDEFG", "tags": ["x"]}'), text('{"sku": "AB", "tags": ["x", "y"]}')
    )
    r = api.post("/v1/responses", json=body("bb_sizes", schema))
    assert r.status_code == 200, r.text
    assert r.headers["x-orgate-structured-mode"] == "json_schema_strict"
    lines = feedback(fake, 1).splitlines()
    assert '- sku: "ABCDEFG" is too long (expected at most 4 characters, got 7)' in lines
    assert '- tags: ["x"] is too short (expected at least 2 items, got 1)' in lines


# --------------------------------------------------------------------------- budget override


def test_null_structured_budget_means_not_given(api: httpx.Client, fake: FakeOpenAIChat) -> None:
    """README: `null` for an optional field means "not given"."""
    fake.enqueue(text(WRONG_TYPE), text(GOOD))
    r = api.post("/v1/responses", json=body("bb_nullbudget", structured_budget=None))
    assert r.status_code == 200, r.text
    assert r.headers["x-orgate-structured-outcome"] == "recovered"


# --------------------------------------------------------------------------- metrics


def test_tool_guard_retry_is_not_counted_as_a_json_recovery(
    api: httpx.Client, fake: FakeOpenAIChat
) -> None:
    """An invalid tool call rejected by the gate, then valid JSON at once:
    the JSON verdict is `ok`."""
    fmt = "bb_toolguard"
    tools = [
        {
            "type": "function",
            "name": "lookup",
            "parameters": {
                "type": "object",
                "properties": {"sku": {"type": "string"}},
                "required": ["sku"],
                "additionalProperties": False,
            },
        }
    ]
    before = structured_counts(api, fmt)
    fake.enqueue(Script(content=None, tool_calls=[("lookup", '{"sku": 5}')]), text(GOOD))
    r = api.post("/v1/responses", json=body(fmt, tools=tools))
    assert r.status_code == 200, r.text
    assert len(fake.bodies) == 2
    assert r.headers["x-orgate-structured-outcome"] == "ok"
    after = structured_counts(api, fmt)
    delta = {k: v - before.get(k, 0.0) for k, v in after.items() if v - before.get(k, 0.0)}
    assert delta.get("requests") == 1
    assert "recovered_by_retry" not in delta  # else the recovery rate exceeds 100 %
    assert "first_attempt_failures" not in delta
    assert delta.get("outcomes{outcome=ok}") == 1
    assert delta.get("mode{mode=json_schema_strict}") == 1


# --------------------------------------------------------------------------- review endpoints


def test_review_resolve_unknown_id_is_404_and_note_is_kept(
    api: httpx.Client, fake: FakeOpenAIChat
) -> None:
    missing = api.post(
        "/v1/orgate/review/rev_000000000000000000000000/resolve", json={"discard": True}
    )
    assert missing.status_code == 404, missing.text
    assert missing.json()["error"]["code"] == "not_found"

    fake.enqueue(*(text(WRONG_TYPE) for _ in range(3)))
    r = api.post("/v1/responses", json=body("product_review"))
    review_id = r.headers["x-orgate-review-id"]
    done = api.post(
        f"/v1/orgate/review/{review_id}/resolve", json={"discard": True, "note": "junk input"}
    )
    assert done.status_code == 200, done.text
    assert done.json()["status"] == "discarded"
    assert api.get(f"/v1/orgate/review/{review_id}").json()["note"] == "junk input"


def test_builtin_model_meets_constraints_strict_mode_cannot_express(api: httpx.Client) -> None:
    """The built-in model generates from the schema itself: it gets the client's schema, not the
    strict subset (which moves minItems/uniqueItems/maxLength into descriptions it does not
    read)."""
    schema = {
        "type": "object",
        "properties": {
            "sku": {"type": "string", "maxLength": 4},
            "tags": {
                "type": "array",
                "items": {"type": "string"},
                "minItems": 2,
                "uniqueItems": True,
            },
        },
        "required": ["sku", "tags"],
        "additionalProperties": False,
    }
    for strict in (None, True):
        fmt: dict[str, Any] = {"type": "json_schema", "name": "tagged", "schema": schema}
        if strict is not None:
            fmt["strict"] = strict
        r = api.post(
            "/v1/responses",
            json={"model": "orgate/echo", "input": "tag the blue kettle", "text": {"format": fmt}},
        )
        assert r.status_code == 200, r.text
        assert r.headers["x-orgate-structured-outcome"] == "ok"
        value = json.loads(output_text(r.json()))
        assert (
            len(value["sku"]) <= 4
            and len(value["tags"]) >= 2
            and len(set(value["tags"])) == len(value["tags"])
        )
