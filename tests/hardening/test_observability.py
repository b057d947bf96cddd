"""Request ids, one JSON log line per request, Prometheus metrics."""

from __future__ import annotations

import httpx
import orjson
import pytest

from tests.fakes.openai_chat_upstream import FakeOpenAIChat, http_error, text
from tests.hardening.conftest import UPSTREAM_KEY, hardened_config, server_env, sse_events
from tests.server_process import OrgateServer
from tests.support.waiting import wait_until


def _access_lines(server: OrgateServer) -> list[dict]:
    lines = []
    for line in server.output().splitlines():
        if line.startswith("{"):
            entry = orjson.loads(line)
            if entry.get("logger") == "orgate.access":
                lines.append(entry)
    return lines


def _wait_line(server: OrgateServer, request_id: str) -> dict:
    def written() -> dict | None:
        return next((e for e in _access_lines(server) if e["request_id"] == request_id), None)

    entry = wait_until(written, every=0.05)
    assert entry, f"no access log line for {request_id}:\n{server.output()[-2000:]}"
    return entry


def test_incoming_request_id_is_kept(http: httpx.Client) -> None:
    res = http.post(
        "/v1/responses",
        json={"model": "orgate/echo", "input": "hi"},
        headers={"X-Request-Id": "trace-abc.123:x"},
    )
    assert res.headers["x-request-id"] == "trace-abc.123:x"


@pytest.mark.parametrize("bad", ["", "has space", "x" * 200, "semi;colon", "ünïcode"])
def test_invalid_request_id_is_replaced(http: httpx.Client, bad: str) -> None:
    res = http.get("/healthz", headers={"X-Request-Id": bad.encode("utf-8")})
    assert res.headers["x-request-id"] != bad
    assert len(res.headers["x-request-id"]) == 32


def test_generated_ids_are_unique_and_on_errors_too(http: httpx.Client) -> None:
    ids = {http.get("/healthz").headers["x-request-id"] for _ in range(20)}
    assert len(ids) == 20
    res = http.post("/v1/responses", content=b"{nope", headers={"Content-Type": "application/json"})
    assert res.status_code == 400 and res.headers["x-request-id"]
    assert httpx.get(http.base_url.join("/v1/models")).headers["x-request-id"]  # 401
    assert http.get("/no/such/route").headers["x-request-id"]  # 404


def test_one_json_line_per_request_without_bodies_or_keys(
    hardened: OrgateServer, http: httpx.Client, fake: FakeOpenAIChat
) -> None:
    marker = "sensitive-prompt-words"
    res = http.post(
        "/v1/responses",
        json={"model": "fake-chat", "input": marker},
        headers={"X-Request-Id": "log-test-1"},
    )
    assert res.status_code == 200
    line = _wait_line(hardened, "log-test-1")
    assert line["method"] == "POST" and line["route"] == "/v1/responses" and line["status"] == 200
    assert line["model"] == "fake-chat" and line["deployment"] == "fake-chat"
    assert line["duration_ms"] > 0 and line["level"] == "info"
    assert [e["request_id"] for e in _access_lines(hardened)].count("log-test-1") == 1
    log = hardened.output()
    assert marker not in log
    assert hardened.api_key not in log and UPSTREAM_KEY not in log
    # route templates, not raw paths
    http.get("/v1/responses/resp_doesnotexist", headers={"X-Request-Id": "log-test-2"})
    assert _wait_line(hardened, "log-test-2")["route"] == "/v1/responses/{response_id}"
    http.get("/some/random/path", headers={"X-Request-Id": "log-test-3"})
    assert _wait_line(hardened, "log-test-3")["route"] == "unmatched"


def test_stream_log_line_has_first_chunk_time(hardened: OrgateServer, http: httpx.Client) -> None:
    res = http.post(
        "/v1/responses",
        json={"model": "orgate/echo", "input": "a b c orgate:delay=50", "stream": True},
        headers={"X-Request-Id": "log-stream"},
    )
    assert sse_events(res.text)[-1]["type"] == "response.completed"
    line = _wait_line(hardened, "log-stream")
    assert 0 < line["first_chunk_ms"] < line["duration_ms"]
    assert line["duration_ms"] >= 150  # three words 50 ms apart: from below only, as load adds


def _metric(text_: str, name: str, **labels: str) -> float:
    total = 0.0
    found = False
    for line in text_.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
            found = True
    assert found, f"{name} {labels} not in metrics"
    return total


def test_metrics(http: httpx.Client, fake: FakeOpenAIChat) -> None:
    fake.enqueue(text("one two three"), http_error(503, "down"))
    assert (
        http.post(
            "/v1/responses", json={"model": "fake-chat", "input": "hi", "stream": True}
        ).status_code
        == 200
    )
    assert http.post("/v1/responses", json={"model": "fake-chat", "input": "hi"}).status_code in (
        502,
        503,
    )
    http.post("/v1/responses", json={"model": "no-such-model-" + "x" * 20, "input": "hi"})
    metrics = http.get("/metrics").text
    assert (
        _metric(
            metrics,
            "orgate_http_requests_total",
            route="/v1/responses",
            method="POST",
            status="200",
            model="fake-chat",
        )
        >= 1
    )
    assert (
        _metric(
            metrics,
            "orgate_http_requests_total",
            route="/v1/responses",
            status="404",
            model="other",
        )
        >= 1
    )
    assert (
        _metric(
            metrics,
            "orgate_http_request_duration_seconds_count",
            route="/v1/responses",
            method="POST",
        )
        >= 2
    )
    assert (
        _metric(
            metrics,
            "orgate_stream_time_to_first_chunk_seconds_count",
            route="/v1/responses",
            model="fake-chat",
        )
        >= 1
    )
    assert (
        _metric(
            metrics, "orgate_upstream_duration_seconds_count", deployment="fake-chat", outcome="ok"
        )
        >= 1
    )
    assert (
        _metric(
            metrics, "orgate_upstream_time_to_first_event_seconds_count", deployment="fake-chat"
        )
        >= 1
    )
    assert _metric(metrics, "orgate_upstream_errors_total", deployment="fake-chat") >= 1
    assert _metric(metrics, "orgate_tokens_total", deployment="fake-chat", direction="output") >= 3
    assert _metric(metrics, "orgate_tokens_total", deployment="fake-chat", direction="input") >= 1
    assert "no-such-model" not in metrics  # client-chosen names never become labels


def test_bodies_logged_only_when_enabled(upstream: FakeOpenAIChat) -> None:
    config = hardened_config(upstream.base_url, "\n[logging]\nbodies = true\n")
    with OrgateServer(config, api_key="client-secret-key", env=server_env()) as server:
        res = httpx.post(
            f"{server.url}/v1/responses",
            json={"model": "orgate/echo", "input": "logged-words"},
            headers={**server.headers(), "X-Request-Id": "body-1"},
        )
        assert res.status_code == 200
        line = _wait_line(server, "body-1")
        assert "logged-words" in line["body"]
        assert "client-secret-key" not in server.output()


def test_text_log_format(upstream: FakeOpenAIChat) -> None:
    config = hardened_config(upstream.base_url).replace(
        'log_format = "json"', 'log_format = "text"'
    )
    with OrgateServer(config, env=server_env()) as server:
        httpx.get(f"{server.url}/healthz", headers={"X-Request-Id": "text-1"})
        assert wait_until(lambda: "request_id=text-1" in server.output())
        assert "GET /healthz 200" in server.output() and "request_id=text-1" in server.output()


def test_tracing_off_imports_no_opentelemetry() -> None:
    import subprocess
    import sys

    code = (
        "import sys; from orgate.config import Settings; from orgate.gateway import "
        "create_app; create_app(Settings()); print(any(m.startswith('opentelemetry') for m "
        "in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**__import__("os").environ, **server_env()},
        check=True,
    )
    assert out.stdout.strip() == "False"
