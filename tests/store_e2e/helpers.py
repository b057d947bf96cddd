"""Helpers shared by the store end-to-end tests: configs, request shortcuts, assertions."""

from __future__ import annotations

import os
import uuid
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.support.samples import output_text
from tests.support.spec import check_sse, validate
from tests.support.waiting import PATIENCE, wait_until

TWO_TENANTS = (
    '[auth]\napi_keys = [{ name = "a", key = "key-a" }, { name = "b", key = "key-b" }]\n\n'
)
PG_URL = os.environ.get("ORGATE_TEST_PG_URL")
PG_SKIP = (
    'ORGATE_TEST_PG_URL is unset: run `eval "$(bash .ci/postgres.sh)"` first (CI always sets it)'
)
TERMINAL = ("completed", "failed", "incomplete", "cancelled")


def uid() -> str:
    return uuid.uuid4().hex[:10]


def create(
    client: httpx.Client, expect: int = 200, headers: dict[str, str] | None = None, **body: Any
) -> dict[str, Any]:
    """POST /v1/responses (non-streaming); check the status; validate a successful body against the
    spec."""
    body.setdefault("model", "orgate/echo")
    r = client.post("/v1/responses", json=body, headers=headers)
    assert r.status_code == expect, r.text
    data = r.json()
    if expect == 200:
        validate("ResponseResource", data)
    return data


def create_stream(
    client: httpx.Client, headers: dict[str, str] | None = None, **body: Any
) -> tuple[bytes, list[dict[str, Any]]]:
    """POST /v1/responses with stream=true; return the raw SSE and its (grammar-checked) events."""
    body.setdefault("model", "orgate/echo")
    body["stream"] = True
    r = client.post("/v1/responses", json=body, headers=headers)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/event-stream")
    return r.content, check_sse(r.content)


def assert_error(
    r: httpx.Response, status: int, code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    """The spec's error shape, with the given status (and code / param when given)."""
    assert r.status_code == status, f"{r.status_code} {r.text}"
    body = r.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert {"message", "type", "param", "code"} <= set(error), error
    assert isinstance(error["message"], str) and error["message"]
    if code is not None:
        assert error["code"] == code, error
    if param is not None:
        assert error["param"] == param, error
    return error


text_of = output_text


def poll(
    client: httpx.Client,
    response_id: str,
    until: tuple[str, ...] = TERMINAL,
    timeout: float = PATIENCE,
) -> dict[str, Any]:
    """GET the response until its status is one of ``until``."""
    last: dict[str, Any] = {}

    def reached() -> bool:
        nonlocal last
        r = client.get(f"/v1/responses/{response_id}")
        assert r.status_code == 200, r.text
        last = r.json()
        return last["status"] in until

    assert wait_until(reached, timeout, every=0.05), (
        f"{response_id} still {last.get('status')!r} after {timeout}s"
    )
    validate("ResponseResource", last)
    return last


def calls_in_flight(client: httpx.Client, deployment: str) -> float:
    """The model calls of ``deployment`` running now (the server's in-flight gauge)."""
    text = client.get("/metrics").text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "orgate_upstream_requests_in_flight"
        and sample.labels.get("deployment") == deployment
    )


def messages_of(body: dict[str, Any]) -> list[tuple[str, str]]:
    """The (role, text) pairs of a chat completion request the fake upstream received."""
    out = []
    for message in body["messages"]:
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content)
        out.append((message["role"], content or ""))
    return out
