"""Hypothesis over request bodies and items: no input produces a 5xx or an error outside the spec
shape."""

from __future__ import annotations

import json
import os
from urllib.parse import quote

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.conftest import check_answer
from tests.fuzz.strategies import JSON, item, request_body
from tests.hardening.conftest import sse_events

SCALE = int(
    os.environ.get("ORGATE_FUZZ_EXAMPLES", "80")
)  # examples per test; raise for a long local run
FUZZ = settings(
    max_examples=SCALE,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
)
TERMINAL = {"response.completed", "response.failed", "response.incomplete"}


def _dumps(body: object) -> bytes:
    return json.dumps(body, ensure_ascii=False).encode("utf-8", "surrogatepass")


def _post(http: httpx.Client, body: object) -> httpx.Response:
    return http.post(
        "/v1/responses", content=_dumps(body), headers={"Content-Type": "application/json"}
    )


def _check_stream(res: httpx.Response) -> None:
    if res.status_code == 200 and res.headers["content-type"].startswith("text/event-stream"):
        assert res.text.endswith("data: [DONE]\n\n"), res.text[-300:]
        events = sse_events(res.text)
        assert events[-1]["type"] in TERMINAL, events[-1]
        numbers = [e["sequence_number"] for e in events]
        assert numbers == sorted(set(numbers))
        if events[-1]["type"] == "response.failed":
            assert events[-2]["type"] == "error"


@FUZZ
@given(body=request_body())
def test_request_bodies(fuzz_http: httpx.Client, body: dict) -> None:
    res = _post(fuzz_http, body)
    check_answer(res)
    _check_stream(res)


@FUZZ
@given(items=st.lists(item(), min_size=1, max_size=6), stream=st.booleans())
def test_input_items(fuzz_http: httpx.Client, items: list, stream: bool) -> None:
    res = _post(fuzz_http, {"model": "orgate/echo", "input": items, "stream": stream})
    check_answer(res)
    _check_stream(res)


@settings(
    max_examples=max(1, SCALE * 3 // 4),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    derandomize=True,
)
@given(body=JSON)
def test_any_json(fuzz_http: httpx.Client, body: object) -> None:
    for path in ("/v1/responses", "/v1/chat/completions", "/v1/responses/compact"):
        check_answer(
            fuzz_http.post(path, content=_dumps(body), headers={"Content-Type": "application/json"})
        )


@settings(
    max_examples=max(1, SCALE * 3 // 4),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    derandomize=True,
)
@given(raw=st.binary(max_size=300))
def test_any_bytes(fuzz_http: httpx.Client, raw: bytes) -> None:
    check_answer(
        fuzz_http.post("/v1/responses", content=raw, headers={"Content-Type": "application/json"})
    )


@settings(
    max_examples=max(1, SCALE // 2),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    derandomize=True,
)
@given(
    response_id=st.text(max_size=80),
    query=st.dictionaries(
        st.sampled_from(["limit", "order", "after", "stream"]), st.text(max_size=10), max_size=3
    ),
)
def test_stored_paths(fuzz_http: httpx.Client, response_id: str, query: dict) -> None:
    quoted = quote(response_id, safe="") or "x"
    for method, suffix in (
        ("GET", ""),
        ("GET", "/input_items"),
        ("DELETE", ""),
        ("POST", "/cancel"),
    ):
        url = f"/v1/responses/{quoted}{suffix}"
        check_answer(fuzz_http.request(method, url, params=query))
