"""Black-box regressions for POST /v1/responses/compact (shapes, error params, chains,
metrics label)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from orgate.engine.compaction import core as compaction
from tests.support.spec import validate, validator
from tests.ws.inproc import InProcessServer


@pytest.fixture
def http(app_server: InProcessServer) -> Any:
    with httpx.Client(base_url=app_server.url, headers=app_server.headers(), timeout=20) as client:
        yield client


def user(text: Any) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text}],
    }


def turns(n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(n):
        out += [user(f"question {i}"), assistant(f"answer {i}")]
    return out


def compact(http: httpx.Client, **body: Any) -> dict[str, Any]:
    assert not list(validator("CompactResponseMethodPublicBody").iter_errors(body))
    response = http.post("/v1/responses/compact", json=body)
    assert response.status_code == 200, response.text
    data = response.json()
    validate("CompactResource", data)
    return data


def test_kept_image_parts_have_the_response_item_shape(http: httpx.Client) -> None:
    """InputImageContent requires image_url (nullable) and detail:
    a kept image sent without them is filled in."""
    images = [
        {"type": "input_text", "text": "look"},
        {"type": "input_image", "image_url": "https://example.com/a.png"},
        {"type": "input_image", "file_id": "file_1", "detail": "low"},
    ]
    tool_output = [
        {"type": "input_text", "text": "r"},
        {"type": "input_image", "image_url": "https://example.com/b.png"},
    ]
    conversation = [
        *turns(2),
        user(images),
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": tool_output},
        assistant("done"),
        user("last"),
    ]
    data = compact(http, model="orgate/echo", input=conversation)
    parts = [
        p
        for item in data["output"]
        for p in (item.get("content") or item.get("output") or [])
        if isinstance(p, dict) and p["type"] == "input_image"
    ]
    assert len(parts) == 3
    assert all(p["detail"] in ("auto", "low") and "image_url" in p for p in parts)
    again = http.post(
        "/v1/responses", json={"model": "orgate/echo", "input": [*data["output"], user("next")]}
    )
    assert again.status_code == 200, again.text


def test_a_tampered_kept_item_is_named_by_its_input_index(http: httpx.Client) -> None:
    data = compact(http, model="orgate/echo", input=[*turns(3), user("last")])
    output = data["output"]
    token = output[-1]["encrypted_content"]
    output[-1]["encrypted_content"] = token[:-6] + ("A" if token[-6] != "A" else "B") + token[-5:]
    conversation = [user("first"), *output]  # the compaction item is input[len(output)]
    response = http.post(
        "/v1/responses/compact", json={"model": "orgate/echo", "input": conversation}
    )
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["code"] == "invalid_compaction"
    assert error["param"] == f"input[{len(output)}].encrypted_content"


def test_a_tampered_older_item_is_named_by_its_input_index(http: httpx.Client) -> None:
    data = compact(http, model="orgate/echo", input=[*turns(3), user("last")])
    sealed = dict(data["output"][-1])
    sealed["encrypted_content"] = sealed["encrypted_content"][:-6] + "AAAAAA"
    conversation = [{"type": "message", "role": "developer", "content": "rules"}, sealed, *turns(3)]
    response = http.post(
        "/v1/responses/compact", json={"model": "orgate/echo", "input": conversation}
    )
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == "input[1].encrypted_content"


def test_an_earlier_summary_reached_through_previous_response_id_is_summarised_again(
    http: httpx.Client,
) -> None:
    """The stored input holds the expanded summary (a developer message):
    it is conversation, not instructions."""
    data = compact(http, model="orgate/echo", input=[*turns(3), user("last")])
    first = http.post(
        "/v1/responses", json={"model": "orgate/echo", "input": [*data["output"], user("after")]}
    )
    assert first.status_code == 200, first.text
    second = http.post(
        "/v1/responses",
        json={"model": "orgate/echo", "previous_response_id": first.json()["id"], "input": "more"},
    )
    assert second.status_code == 200, second.text
    again = compact(
        http, model="orgate/echo", previous_response_id=second.json()["id"], input=[user("newest")]
    )
    texts = [
        p.get("text", "")
        for item in again["output"]
        if item["type"] == "message"
        for p in item["content"]
    ]
    assert not any(
        t.startswith(compaction.SUMMARY_HEADER) for t in texts
    )  # not kept as an unsealed developer message
    assert [item["type"] for item in again["output"]].count("compaction") == 1


def test_compact_requests_carry_the_model_label(http: httpx.Client) -> None:
    compact(http, model="orgate/echo", input="nothing older: no model call")
    http.post("/v1/responses/compact", json={"model": "no-such-model-zz", "input": "x"})
    metrics = http.get("/metrics").text
    lines = [
        line
        for line in metrics.splitlines()
        if line.startswith("orgate_http_requests_total{")
        and 'route="/v1/responses/compact"' in line
    ]
    assert any('model="orgate/echo"' in line and 'status="200"' in line for line in lines), lines
    assert any('model="other"' in line and 'status="404"' in line for line in lines), lines
    assert "no-such-model-zz" not in metrics
