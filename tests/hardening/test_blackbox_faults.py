"""Black-box faults found by an audit: each test failed before its fix.

- a client that leaves before the first event (or during a non-streamed answer) cancels the upstream
  call;
- huge upstream bodies are bounded: an error body or a non-streamed body is not read whole,
  an endless
  SSE line is refused quickly (not parsed in quadratic time) by every provider;
- a web page answered with 200 and a garbage Anthropic stream are ``upstream_invalid_response``
  (operations.md);
- a shutdown past ``drain_timeout`` ends a stream with ``error`` + ``response.failed`` + ``[DONE]``
  and
  answers a waiting non-streamed request with a 503, instead of cutting the connection.
"""

from __future__ import annotations

import signal
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from tests.fakes._base import LoopbackFake
from tests.fakes.openai_chat_upstream import Raw, Script, text
from tests.hardening.conftest import assert_error, raw_request, server_env, sse_events
from tests.server_process import OrgateServer
from tests.support.configs import model_block
from tests.support.upstreams import provider_models
from tests.support.waiting import PATIENCE, wait_until

MB = 1024 * 1024


@pytest.fixture(scope="module")
def server(fakes: dict[str, LoopbackFake]) -> Iterator[OrgateServer]:
    config = provider_models(fakes, api_key="upstream-secret", read_timeout=30, upstream_model="m")
    with OrgateServer(
        config, env={**server_env(), "ORGATE_ENDPOINTS__CHAT_COMPLETIONS__ENABLED": "true"}
    ) as running:
        yield running


@pytest.fixture
def http(server: OrgateServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, headers=server.headers(), timeout=30) as client:
        yield client


@pytest.mark.parametrize("stream", [True, False])
def test_client_leaving_before_the_first_event_cancels_the_upstream(
    server: OrgateServer, fx: dict[str, LoopbackFake], stream: bool
) -> None:
    """The upstream is silent (read_timeout 30 s); the client gives up after 0.5 s:
    the upstream sees it at once."""
    fake = fx["chat"]
    fake.enqueue(Script(stall_before_headers=30))
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    sock.sendall(
        raw_request(
            "POST",
            "/v1/responses",
            orjson.dumps({"model": "chat", "input": "hi", "stream": stream}),
            server.api_key,
        )
    )
    assert wait_until(lambda: len(fake.requests) == 1)  # orgate waits on the silent upstream
    sock.close()
    assert wait_until(lambda: fake.requests[-1].disconnected), (
        "the upstream call outlived its client"
    )


def test_client_leaving_a_long_non_streamed_answer_cancels_the_upstream(
    server: OrgateServer, http: httpx.Client, fx: dict[str, LoopbackFake]
) -> None:
    fake = fx["chat"]
    fake.enqueue(text(" ".join(["word"] * 200), delay=0.05))  # ~10 s of output
    with pytest.raises(httpx.ReadTimeout):
        http.post("/v1/responses", json={"model": "chat", "input": "hi"}, timeout=0.6)
    assert wait_until(lambda: fake.requests[-1].disconnected), (
        "the upstream call outlived its client"
    )
    assert not fake.requests[-1].completed
    # Metrics count it as the client's going (499), not as a server failure (500).
    metrics = http.get("/metrics").text
    assert wait_until(lambda: 'status="499"' in http.get("/metrics").text), metrics[:2000]


def test_chat_adapter_client_leaving_a_long_answer_cancels_the_upstream(
    http: httpx.Client, fx: dict[str, LoopbackFake]
) -> None:
    """The legacy /v1/chat/completions adapter, not streamed: the same as /v1/responses."""
    fake = fx["chat"]
    fake.enqueue(text(" ".join(["word"] * 200), delay=0.05))  # ~10 s of output
    with pytest.raises(httpx.ReadTimeout):
        http.post(
            "/v1/chat/completions",
            json={"model": "chat", "messages": [{"role": "user", "content": "hi"}]},
            timeout=0.6,
        )
    assert wait_until(lambda: fake.requests[-1].disconnected), (
        "the upstream call outlived its client"
    )
    assert not fake.requests[-1].completed


def _stream_or_error(http: httpx.Client, model: str) -> httpx.Response:
    return http.post("/v1/responses", json={"model": model, "input": "hi", "stream": True})


@pytest.mark.parametrize("model", ["chat", "anth", "resp"])
def test_endless_sse_line_is_refused_quickly(
    http: httpx.Client, fx: dict[str, LoopbackFake], model: str
) -> None:
    """64 MB without a line end: refused once past the line bound,
    not buffered (nor rescanned) to the end."""
    fake = fx[model]
    fake.enqueue(Raw([b'data: {"x": "'] + [b"a" * MB] * 64))
    res = _stream_or_error(http, model)
    assert_error(res, 502, "upstream_invalid_response")
    assert "longer than" in res.json()["error"]["message"]
    assert wait_until(lambda: fake.requests[-1].disconnected)  # orgate stopped reading
    # before the end: the 64 MB do not fit in the connection's buffers, so a fake that could
    # write them all was read to the end
    assert not fake.requests[-1].completed
    assert http.get("/healthz").status_code == 200


@pytest.mark.parametrize("model", ["chat", "anth", "resp"])
def test_huge_error_body_is_not_read_whole(
    http: httpx.Client, fx: dict[str, LoopbackFake], model: str
) -> None:
    fake = fx[model]
    fake.enqueue(
        Raw(
            [b'{"error": {"message": "' + b"x" * MB] + [b"x" * MB] * 63 + [b'"}}'],
            status=500,
            content_type="application/json",
        )
    )
    res = _stream_or_error(http, model)
    error = assert_error(res, 502)
    assert len(error["message"]) < 2000
    assert wait_until(lambda: fake.requests[-1].disconnected), "the whole 64 MB error body was read"
    assert not fake.requests[-1].completed


def test_huge_json_body_is_not_read_whole(http: httpx.Client, fx: dict[str, LoopbackFake]) -> None:
    fake = fx["chat"]
    fake.enqueue(Raw([b" " * MB] * 64, content_type="application/json"))
    res = _stream_or_error(http, "chat")
    assert_error(res, 502, "upstream_invalid_response")
    assert wait_until(lambda: fake.requests[-1].disconnected), "the whole 64 MB body was read"


@pytest.mark.parametrize("model", ["chat", "anth", "resp"])
def test_web_page_with_200_is_an_invalid_response(
    http: httpx.Client, fx: dict[str, LoopbackFake], model: str
) -> None:
    fx[model].enqueue(
        Raw([b"<html><body><h1>Welcome to nginx!</h1></body></html>\n"], content_type="text/html")
    )
    res = _stream_or_error(http, model)
    assert_error(res, 502, "upstream_invalid_response")


@pytest.mark.parametrize("model", ["anth", "resp"])
def test_garbage_sse_event_is_an_invalid_response(
    http: httpx.Client, fx: dict[str, LoopbackFake], model: str
) -> None:
    """operations.md: garbage / truncated JSON is 502 upstream_invalid_response
    (was upstream_error for these two)."""
    fx[model].enqueue(Raw([b"event: message_start\ndata: {not json\n\n"]))
    res = _stream_or_error(http, model)
    assert_error(res, 502, "upstream_invalid_response")


def test_shutdown_past_drain_timeout_ends_streams_cleanly(
    tmp_path: Any, fakes: dict[str, LoopbackFake]
) -> None:
    """SIGTERM with drain_timeout = 1: a stream still running gets error + response.failed + [DONE]
    and is
    stored failed; a non-streamed request still waiting gets a 503 in the error shape."""
    chat = fakes["chat"]
    chat.reset()
    chat.handler = lambda body: text(" ".join(["word"] * 400), delay=0.05)  # ~20 s each
    config = "[server]\ndrain_timeout = 1\n" + model_block(
        "chat", "openai-chat", chat.base_url, "m", api_key="upstream-secret", read_timeout=30
    )  # type: ignore[attr-defined]
    server = OrgateServer(config, env=server_env(), workdir=str(tmp_path)).start()
    results: dict[str, Any] = {}
    got_first = threading.Event()

    def streamed() -> None:
        body = b""
        with httpx.stream(
            "POST",
            f"{server.url}/v1/responses",
            json={"model": "chat", "input": "hi", "stream": True},
            headers=server.headers(),
            timeout=30,
        ) as res:
            for chunk in res.iter_bytes():
                body += chunk
                got_first.set()
        results["stream"] = body.decode()

    def plain() -> None:
        res = httpx.post(
            f"{server.url}/v1/responses",
            json={"model": "chat", "input": "hi"},
            headers=server.headers(),
            timeout=30,
        )
        results["plain"] = res

    threads = [threading.Thread(target=streamed), threading.Thread(target=plain)]
    try:
        for thread in threads:
            thread.start()
        assert got_first.wait(PATIENCE)
        assert wait_until(lambda: len(chat.requests) == 2)  # both calls are at the upstream
        assert server.proc is not None
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(PATIENCE) == 0
        for thread in threads:
            thread.join(PATIENCE)
    finally:
        server.kill()
        chat.reset()
    body = results["stream"]
    assert body.rstrip().endswith("data: [DONE]"), body[-300:]
    events = sse_events(body)
    assert [e["type"] for e in events[-2:]] == ["error", "response.failed"]
    assert events[-1]["response"]["error"]["code"] == "server_shutdown"
    assert_error(results["plain"], 503, "server_shutdown")
    again = OrgateServer("", env=server_env(), workdir=str(tmp_path)).start()
    try:
        stored = httpx.get(
            f"{again.url}/v1/responses/{events[0]['response']['id']}",
            headers=again.headers(),
            timeout=10,
        ).json()
        assert stored["status"] == "failed" and stored["error"]["code"] == "server_shutdown"
    finally:
        again.stop()
