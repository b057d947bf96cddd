"""Issue #4 end to end: every layer, retry, budget and outcome of the safety net over HTTP.

A real ``orgate serve`` (see ``conftest.py``) in front of the fake Chat
Completions upstream, scripted to fail in each way; plus the built-in model.
Each test checks what the client sees (status, body, ``X-Orgate-Structured-*``
headers, SSE events) and what reached the upstream (request bodies).
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import orjson
import pytest

from tests.fakes.openai_chat_upstream import FakeOpenAIChat, Script, text
from tests.server_process import OrgateServer
from tests.structured_e2e.conftest import DEFAULT_PRODUCT
from tests.structured_e2e.helpers import structured_counts
from tests.support.samples import output_text
from tests.support.spec import check_sse, validate

PRODUCT = {
    "type": "object",
    "properties": {"sku": {"type": "string"}, "price": {"type": "number"}},
    "required": ["sku", "price"],
    "additionalProperties": False,
}
GOOD = '{"sku": "A1", "price": 12.5}'
WRONG_TYPE = '{"sku": "A1", "price": "12.5"}'
MISSING_SKU = '{"price": 3}'


def body(
    name: str = "product", schema: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    return {
        "model": "fake-chat",
        "input": "Extract the product as JSON: A1 costs 12.5",
        "text": {"format": {"type": "json_schema", "name": name, "schema": schema or PRODUCT}},
        **extra,
    }


def messages(fake: FakeOpenAIChat, index: int) -> list[dict[str, Any]]:
    return list(fake.bodies[index]["messages"])


def content(message: dict[str, Any]) -> str:
    value = message.get("content")
    if isinstance(value, str):
        return value
    return "".join(part.get("text", "") for part in value or [])


def headers_of(r: httpx.Response) -> dict[str, str]:
    return {k: v for k, v in r.headers.items() if k.lower().startswith("x-orgate")}


def assert_structured_error(r: httpx.Response, status: str) -> dict[str, Any]:
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["type"] == "model_error"
    assert error["code"] == "structured_output_invalid"
    assert error["param"] == "text.format"
    assert r.headers["x-orgate-structured-outcome"] == status
    return error


# --------------------------------------------------------------------------- truncation


def test_truncated_json_is_asked_again_with_more_tokens_and_no_feedback(
    api: httpx.Client, fake: FakeOpenAIChat
) -> None:
    fake.enqueue(text('{"sku": "A1", "pri', finish_reason="length"), text(GOOD))
    r = api.post("/v1/responses", json=body(max_output_tokens=16))
    assert r.status_code == 200, r.text
    validate("ResponseResource", r.json())
    assert r.json()["status"] == "completed"
    assert json.loads(output_text(r.json())) == {"sku": "A1", "price": 12.5}
    assert r.headers["x-orgate-structured-outcome"] == "recovered"
    assert r.headers["x-orgate-structured-attempts"] == "2"
    first, second = fake.bodies
    assert first["max_tokens"] == 16
    assert second["max_tokens"] > first["max_tokens"]
    assert second["messages"] == first["messages"]  # the same request: no feedback message
    assert not any("previous reply" in content(m) for m in second["messages"])


def test_truncation_with_the_builtin_model(api: httpx.Client) -> None:
    r = api.post(
        "/v1/responses",
        json={
            "model": "orgate/echo",
            "input": "a product with a fairly long name for the catalogue of the shop that "
            "sells many kettles and toasters in blue and red",
            "max_output_tokens": 16,
            "text": {"format": {"type": "json_schema", "name": "product", "schema": PRODUCT}},
        },
    )
    assert r.status_code == 200, r.text
    assert r.headers["x-orgate-structured-outcome"] == "recovered"
    assert int(r.headers["x-orgate-structured-attempts"]) >= 2
    value = json.loads(output_text(r.json()))
    assert set(value) == {"sku", "price"}


# --------------------------------------------------------------------------- schema / parse retries


def test_wrong_type_then_right_with_precise_feedback(
    api: httpx.Client, fake: FakeOpenAIChat
) -> None:
    fake.enqueue(text(WRONG_TYPE), text(GOOD))
    r = api.post("/v1/responses", json=body())
    assert r.status_code == 200, r.text
    assert headers_of(r) == {
        "x-orgate-structured-outcome": "recovered",
        "x-orgate-structured-attempts": "2",
        "x-orgate-structured-mode": "json_schema_strict",
    }
    assert json.loads(output_text(r.json())) == {"sku": "A1", "price": 12.5}
    retry = messages(fake, 1)
    first = messages(fake, 0)
    assert retry[: len(first)] == first
    assistant, feedback = retry[len(first) :]
    assert assistant["role"] == "assistant" and content(assistant) == WRONG_TYPE
    assert feedback["role"] == "user"
    assert content(feedback) == (
        "Your previous reply failed the schema check:\n"
        '- price: expected number, got string "12.5"\n'
        "Reply again with the corrected JSON value only: no prose, no code fences."
    )


def test_missing_key_twice_then_recovered_at_retry_two(
    api: httpx.Client, fake: FakeOpenAIChat
) -> None:
    fake.enqueue(text(MISSING_SKU), text(MISSING_SKU), text(GOOD))
    r = api.post("/v1/responses", json=body())
    assert r.status_code == 200, r.text
    assert r.headers["x-orgate-structured-outcome"] == "recovered"
    assert r.headers["x-orgate-structured-attempts"] == "3"
    assert len(fake.bodies) == 3
    base = len(messages(fake, 0))
    for index in (1, 2):  # only the latest failed attempt is replayed
        assert len(messages(fake, index)) == base + 2
        assert "- missing required key sku" in content(messages(fake, index)[-1])


def test_invalid_json_is_a_parse_failure_with_position(
    api: httpx.Client, fake: FakeOpenAIChat
) -> None:
    fake.enqueue(text('{"sku": "A1" "price": 1}'), text(GOOD))
    r = api.post("/v1/responses", json=body())
    assert r.status_code == 200, r.text
    feedback = content(messages(fake, 1)[-1])
    assert feedback.startswith("Your previous reply is not valid JSON:\n- line 1, column 14")


def test_builtin_bad_json_directive_recovers(api: httpx.Client) -> None:
    r = api.post(
        "/v1/responses",
        json={
            "model": "orgate/echo",
            "input": "a product please orgate:bad-json",
            "text": {"format": {"type": "json_schema", "name": "product", "schema": PRODUCT}},
        },
    )
    assert r.status_code == 200, r.text
    assert r.headers["x-orgate-structured-outcome"] == "recovered"
    assert r.headers["x-orgate-structured-attempts"] == "2"


# --------------------------------------------------------------------------- semantic


def test_semantic_failure_is_retried_with_the_checks_messages(
    api: httpx.Client, fake: FakeOpenAIChat
) -> None:
    fake.enqueue(text('{"sku": "A1", "price": -3}'), text(GOOD))
    r = api.post("/v1/responses", json=body("priced"))
    assert r.status_code == 200, r.text
    assert r.headers["x-orgate-structured-outcome"] == "recovered"
    assert content(messages(fake, 1)[-1]) == (
        "Your previous reply failed the domain checks:\n"
        "- price: must be >= 0, got -3\n"
        "Reply again with the corrected JSON value only: no prose, no code fences."
    )


def test_semantic_failures_have_their_own_budget(api: httpx.Client, fake: FakeOpenAIChat) -> None:
    fake.enqueue(*(text('{"sku": "A1", "price": -3}') for _ in range(3)))
    r = api.post("/v1/responses", json=body("priced"))
    error = assert_structured_error(r, "error")
    assert "semantic retry budget is spent" in error["message"]
    assert "Last failure at stage semantic: price: must be >= 0, got -3" in error["message"]
    assert len(fake.bodies) == 2  # semantic_retries = 1


# --------------------------------------------------------------------------- exhaustion


def test_never_valid_exhausts_the_budget_and_fails(api: httpx.Client, fake: FakeOpenAIChat) -> None:
    fake.enqueue(*(text(MISSING_SKU) for _ in range(3)))
    r = api.post("/v1/responses", json=body())
    error = assert_structured_error(r, "error")
    assert error["message"] == (
        "The model's output failed the structured-output checks after 3 attempt(s): "
        "the retry budget is spent. Last failure at stage schema: missing required key sku."
    )
    assert len(fake.bodies) == 3


def test_exhaustion_returns_the_configured_default_clearly_marked(
    api: httpx.Client, fake: FakeOpenAIChat
) -> None:
    fake.enqueue(*(text(WRONG_TYPE) for _ in range(3)))
    r = api.post("/v1/responses", json=body("product_default"))
    assert r.status_code == 200, r.text
    validate("ResponseResource", r.json())
    assert r.headers["x-orgate-structured-outcome"] == "default"
    assert json.loads(output_text(r.json())) == DEFAULT_PRODUCT
    assert "12.5" not in output_text(r.json())


def test_exhaustion_to_review_queue_survives_a_restart(
    api: httpx.Client, fake: FakeOpenAIChat, net_server: OrgateServer
) -> None:
    fake.enqueue(*(text(WRONG_TYPE) for _ in range(3)))
    r = api.post("/v1/responses", json=body("product_review"))
    error = assert_structured_error(r, "review")
    review_id = r.headers["x-orgate-review-id"]
    assert review_id.startswith("rev_") and f"Queued for review as {review_id}." in error["message"]

    listed = api.get("/v1/orgate/review").json()["data"]
    entry = next(item for item in listed if item["id"] == review_id)
    assert entry["status"] == "pending" and entry["format_name"] == "product_review"
    assert entry["model"] == "fake-chat"
    assert [a["text"] for a in entry["attempts"]] == [WRONG_TYPE] * 3

    api.close()  # no idle keep-alive connection holds the graceful shutdown
    net_server.stop()
    net_server.start()
    with httpx.Client(base_url=net_server.url, headers=net_server.headers(), timeout=30) as again:
        assert any(i["id"] == review_id for i in again.get("/v1/orgate/review").json()["data"])
        bad = again.post(f"/v1/orgate/review/{review_id}/resolve", json={"value": {"sku": 1}})
        assert bad.status_code == 400  # validated against the stored schema
        ok = again.post(
            f"/v1/orgate/review/{review_id}/resolve", json={"value": {"sku": "A1", "price": 12.5}}
        )
        assert ok.status_code == 200, ok.text
        assert ok.json()["status"] == "resolved"
        assert again.get(f"/v1/orgate/review/{review_id}").json()["status"] == "resolved"
        assert all(i["id"] != review_id for i in again.get("/v1/orgate/review").json()["data"])
        resolved = again.get("/v1/orgate/review", params={"status": "resolved"}).json()["data"]
        assert any(i["id"] == review_id for i in resolved)


# --------------------------------------------------------------------------- modes


def test_json_object_gets_the_json_word(api: httpx.Client, fake: FakeOpenAIChat) -> None:
    fake.enqueue(text('{"colour": "blue"}'))
    r = api.post(
        "/v1/responses",
        json={
            "model": "fake-chat",
            "input": "Name a colour.",
            "text": {"format": {"type": "json_object"}},
        },
    )
    assert r.status_code == 200, r.text
    assert r.headers["x-orgate-structured-mode"] == "json_object"
    sent = fake.bodies[0]
    assert sent["response_format"] == {"type": "json_object"}
    assert any("json" in content(m).lower() for m in sent["messages"])


def test_json_object_rejects_a_non_object(api: httpx.Client, fake: FakeOpenAIChat) -> None:
    fake.enqueue(text('["blue"]'), text('{"colour": "blue"}'))
    r = api.post(
        "/v1/responses",
        json={
            "model": "fake-chat",
            "input": "Name a colour in JSON.",
            "text": {"format": {"type": "json_object"}},
        },
    )
    assert r.status_code == 200, r.text
    assert r.headers["x-orgate-structured-outcome"] == "recovered"


def test_non_strict_schema_is_sent_non_strict_and_validated(
    api: httpx.Client, fake: FakeOpenAIChat
) -> None:
    levels = {
        "type": "object",
        "properties": {"levels": {"type": "object", "additionalProperties": {"type": "integer"}}},
        "required": ["levels"],
    }
    fake.enqueue(text('{"levels": {"berlin": "many"}}'), text('{"levels": {"berlin": 3}}'))
    r = api.post("/v1/responses", json=body("stock", levels))
    assert r.status_code == 200, r.text
    assert r.headers["x-orgate-structured-mode"] == "json_schema"
    sent = fake.bodies[0]["response_format"]["json_schema"]
    assert sent["strict"] is False
    assert sent["schema"] == levels
    assert '- levels.berlin: expected integer, got string "many"' in content(messages(fake, 1)[-1])
    assert json.loads(output_text(r.json())) == {"levels": {"berlin": 3}}


def test_strictifiable_schema_is_sent_strict(api: httpx.Client, fake: FakeOpenAIChat) -> None:
    schema = {
        "type": "object",
        "properties": {"sku": {"type": "string"}, "note": {"type": "string"}},
        "required": ["sku"],
    }
    fake.enqueue(text('{"sku": "A1", "note": null}'))
    r = api.post("/v1/responses", json=body("noted", schema))
    assert r.status_code == 200, r.text
    sent = fake.bodies[0]["response_format"]["json_schema"]
    assert sent["strict"] is True
    assert sent["schema"]["additionalProperties"] is False
    assert sorted(sent["schema"]["required"]) == ["note", "sku"]
    assert json.loads(output_text(r.json())) == {"sku": "A1"}  # strict-mode null removed again


# --------------------------------------------------------------------------- streaming


def stream_events(
    api: httpx.Client, payload: dict[str, Any], **kw: Any
) -> tuple[httpx.Response, list[dict[str, Any]]]:
    with api.stream("POST", "/v1/responses", json={**payload, "stream": True}, **kw) as r:
        raw = r.read()
    assert r.status_code == 200, raw
    events = check_sse(raw)
    return r, events


def test_stream_releases_only_the_valid_attempt(api: httpx.Client, fake: FakeOpenAIChat) -> None:
    fake.enqueue(text(WRONG_TYPE), text(GOOD))
    r, events = stream_events(api, body())
    deltas = [e["delta"] for e in events if e["type"] == "response.output_text.delta"]
    assert "".join(deltas) == GOOD
    assert not any('"12.5"' in d for d in deltas)
    done = [e for e in events if e["type"] == "response.output_text.done"]
    assert [d["text"] for d in done] == [GOOD]
    assert events[-1]["type"] == "response.completed"
    assert output_text(events[-1]["response"]) == GOOD
    assert len(fake.bodies) == 2


def test_a_streamed_exhaustion_is_a_400_before_the_stream(
    api: httpx.Client, fake: FakeOpenAIChat
) -> None:
    """No ``response.failed`` in a 200 stream (Codex sends that again on its own): the spent
    budget is a 400 before any event, with the outcome headers and ``x-should-retry: false``."""
    fake.enqueue(*(text(WRONG_TYPE) for _ in range(3)))
    with api.stream("POST", "/v1/responses", json={**body(), "stream": True}) as r:
        raw = r.read()
    assert r.status_code == 400 and r.headers["content-type"].startswith("application/json")
    assert r.headers["x-should-retry"] == "false"
    assert r.headers["x-orgate-structured-outcome"] == "error"
    assert r.headers["x-orgate-structured-attempts"] == "3"
    assert orjson.loads(raw)["error"]["code"] == "structured_output_invalid"
    assert len(fake.bodies) == 3


def test_stream_never_completes_with_truncated_json(
    api: httpx.Client, fake: FakeOpenAIChat
) -> None:
    """What holds whatever the wire: the client gets the structured error, and no event (no
    byte) of an invalid attempt."""
    fake.enqueue(*(text('{"sku": "A1", "pri', finish_reason="length") for _ in range(3)))
    with api.stream(
        "POST", "/v1/responses", json={**body(max_output_tokens=16), "stream": True}
    ) as r:
        raw = r.read()
    assert_structured_error(r, "error")
    assert b'"sku"' not in raw and b"response.completed" not in raw


# --------------------------------------------------------------------------- budget overrides


def test_budget_header_lowers_the_retries(api: httpx.Client, fake: FakeOpenAIChat) -> None:
    fake.enqueue(text(MISSING_SKU), text(GOOD))
    r = api.post("/v1/responses", json=body(), headers={"X-Orgate-Structured-Budget": "retries=0"})
    assert_structured_error(r, "error")
    assert len(fake.bodies) == 1


def test_budget_body_field_raises_the_retries(api: httpx.Client, fake: FakeOpenAIChat) -> None:
    fake.enqueue(*(text(MISSING_SKU) for _ in range(3)), text(GOOD))
    r = api.post("/v1/responses", json=body(structured_budget={"retries": 3}))
    assert r.status_code == 200, r.text
    assert r.headers["x-orgate-structured-attempts"] == "4"
    assert "structured_budget" not in fake.bodies[0]


def test_budget_header_wins_over_the_body_field(api: httpx.Client, fake: FakeOpenAIChat) -> None:
    fake.enqueue(*(text(MISSING_SKU) for _ in range(3)), text(GOOD))
    r = api.post(
        "/v1/responses",
        json=body(structured_budget={"retries": 3}),
        headers={"X-Orgate-Structured-Budget": "retries=1"},
    )
    assert_structured_error(r, "error")
    assert len(fake.bodies) == 2


@pytest.mark.parametrize(
    ("header", "payload"),
    [("retries=lots", None), ("tries=1", None), (None, {"retries": -1}), (None, "retries=1")],
)
def test_malformed_budget_is_a_400(
    api: httpx.Client, fake: FakeOpenAIChat, header: str | None, payload: Any
) -> None:
    extra = {} if payload is None else {"structured_budget": payload}
    headers = {} if header is None else {"X-Orgate-Structured-Budget": header}
    r = api.post("/v1/responses", json=body(**extra), headers=headers)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["code"] == "invalid_structured_budget"
    assert fake.bodies == []


def test_truncation_budget_override(api: httpx.Client, fake: FakeOpenAIChat) -> None:
    fake.enqueue(text('{"sku": "A1", "pri', finish_reason="length"), text(GOOD))
    r = api.post(
        "/v1/responses",
        json=body(max_output_tokens=16),
        headers={"X-Orgate-Structured-Budget": "truncation_retries=0"},
    )
    error = assert_structured_error(r, "error")
    assert "the output kept being cut at max_output_tokens" in error["message"]
    assert len(fake.bodies) == 1


# --------------------------------------------------------------------------- metrics


def test_metrics_give_the_three_rates_exactly(api: httpx.Client, fake: FakeOpenAIChat) -> None:
    fmt = "metrics_probe"
    before = structured_counts(api, fmt)
    script: list[Script] = []
    script += [text(GOOD)] * 6  # first try ok
    script += [text(WRONG_TYPE), text(GOOD)] * 2  # recovered at retry 1
    script += [text(MISSING_SKU), text(MISSING_SKU), text(GOOD)]  # recovered at retry 2
    script += [text(MISSING_SKU)] * 3  # exhausted
    fake.enqueue(*script)
    statuses = [api.post("/v1/responses", json=body(fmt)).status_code for _ in range(10)]
    assert statuses == [200] * 9 + [400]
    after = structured_counts(api, fmt)
    delta = {k: v - before.get(k, 0.0) for k, v in after.items() if v - before.get(k, 0.0)}

    requests = delta["requests"]
    first_failures = delta["first_attempt_failures"]
    recovered = delta["recovered_by_retry"]
    exhausted = delta["budget_exhausted"]
    assert (requests, first_failures, recovered, exhausted) == (10, 4, 3, 1)
    assert first_failures / requests == pytest.approx(0.4)
    assert recovered / first_failures == pytest.approx(0.75)
    assert exhausted / requests == pytest.approx(0.1)
    assert delta["failures{stage=schema}"] == 2 + 2 + 3
    assert delta["retries{stage=schema}"] == 2 + 2 + 2
    assert delta["outcomes{outcome=ok}"] == 6
    assert delta["outcomes{outcome=recovered}"] == 3
    assert delta["outcomes{outcome=error}"] == 1
    assert delta["mode{mode=json_schema_strict}"] == 10
