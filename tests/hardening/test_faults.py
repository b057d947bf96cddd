"""Upstream and client faults: bounded by the configured timeouts, spec-shaped errors,
upstream cancelled,
stored response marked failed, and a concurrent healthy request unaffected. Plus graceful
shutdown."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import orjson
import pytest

from tests.fakes.openai_chat_upstream import FakeOpenAIChat, Raw, Script, cut, garbage, stall, text
from tests.hardening.conftest import READ_TIMEOUT, assert_error, raw_request, server_env, sse_events
from tests.server_process import OrgateServer
from tests.support.ports import closed_port
from tests.support.waiting import PATIENCE, wait_until

CHUNK = (
    b"data: "
    b'{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"%s"},"finish_reason":null}]}\n\n'
)
FINISH = (
    b"data: "
    b'{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
)
#: Nothing may hang past the read timeout (1.5 s) for long: the upstreams here stall for 30 s,
#: and what a loaded machine adds to the read timeout is seconds, not fifteen.
BOUND = 15.0


def _healthy_meanwhile(server: OrgateServer) -> Callable[[], None]:
    """Start a healthy built-in stream now; the returned function asserts it completed."""
    result: dict[str, Any] = {}

    def run() -> None:
        res = httpx.post(
            f"{server.url}/v1/responses",
            json={
                "model": "orgate/echo",
                "input": "healthy one two three orgate:delay=100",
                "stream": True,
            },
            headers=server.headers(),
            timeout=30,
        )
        result["status"] = res.status_code
        result["last"] = sse_events(res.text)[-1]["type"] if res.status_code == 200 else res.text

    thread = threading.Thread(target=run)
    thread.start()

    def check() -> None:
        thread.join(30)
        assert result == {"status": 200, "last": "response.completed"}, result

    return check


def _stream(http: httpx.Client, **extra: Any) -> tuple[httpx.Response, list[dict[str, Any]], float]:
    started = time.monotonic()
    res = http.post(
        "/v1/responses", json={"model": "fake-chat", "input": "hi", "stream": True, **extra}
    )
    elapsed = time.monotonic() - started
    return res, (sse_events(res.text) if res.status_code == 200 else []), elapsed


def _assert_failed(
    http: httpx.Client, res: httpx.Response, events: list[dict[str, Any]], code: str
) -> None:
    """A fault found before the first event is an HTTP 502; after it,
    ``error`` + ``response.failed``."""
    if res.status_code != 200:
        assert_error(res, 502, code)
    else:
        _assert_failed_stream(http, events, code)


def _assert_failed_stream(
    http: httpx.Client, events: list[dict[str, Any]], code: str | None = None
) -> dict[str, Any]:
    types = [e["type"] for e in events]
    assert types[-2:] == ["error", "response.failed"], types
    error = events[-2]["error"] if "error" in events[-2] else events[-2]
    if code is not None:
        assert code in orjson.dumps(events[-2]).decode(), events[-2]
    response_id = events[0]["response"]["id"]
    stored = http.get(f"/v1/responses/{response_id}")
    assert stored.status_code == 200
    assert stored.json()["status"] == "failed", stored.json()
    assert stored.json()["error"] is not None
    return error


def test_connection_refused(hardened: OrgateServer, upstream: FakeOpenAIChat) -> None:
    with closed_port() as port:
        dead = f"http://127.0.0.1:{port}/v1"
        config = (
            '[[models]]\nname = "dead"\nprovider = "openai-chat"\n'
            f'base_url = "{dead}"\napi_key = "upstream-secret"\nread_timeout = '
            "1.5\nconnect_timeout = 1\n"
        )
        with (
            OrgateServer(config, env=server_env()) as server,
            httpx.Client(base_url=server.url, headers=server.headers(), timeout=20) as http,
        ):
            for stream in (False, True):
                started = time.monotonic()
                res = http.post(
                    "/v1/responses", json={"model": "dead", "input": "hi", "stream": stream}
                )
                assert time.monotonic() - started < BOUND
                error = assert_error(res, 502, "upstream_unavailable")
                assert "upstream-secret" not in error["message"]
            assert (
                http.post("/v1/responses", json={"model": "orgate/echo", "input": "hi"}).status_code
                == 200
            )


@pytest.mark.parametrize("stream", [False, True])
def test_stall_before_headers(
    hardened: OrgateServer, http: httpx.Client, fake: FakeOpenAIChat, stream: bool
) -> None:
    check = _healthy_meanwhile(hardened)
    fake.enqueue(Script(stall_before_headers=30))
    started = time.monotonic()
    res = http.post("/v1/responses", json={"model": "fake-chat", "input": "hi", "stream": stream})
    assert time.monotonic() - started < BOUND
    assert_error(res, 504, "upstream_timeout")
    assert fake.requests[-1].disconnected or wait_until(lambda: fake.requests[-1].disconnected)
    check()


def test_stall_during_stream(
    hardened: OrgateServer, http: httpx.Client, fake: FakeOpenAIChat
) -> None:
    check = _healthy_meanwhile(hardened)
    fake.enqueue(stall(30, after=2))
    res, events, elapsed = _stream(http)
    assert res.status_code == 200 and elapsed < BOUND
    _assert_failed_stream(http, events, "upstream_timeout")
    assert wait_until(lambda: fake.requests[-1].disconnected)
    check()


def test_stall_during_non_streamed_answer(http: httpx.Client, fake: FakeOpenAIChat) -> None:
    fake.enqueue(stall(30, after=2))
    started = time.monotonic()
    res = http.post("/v1/responses", json={"model": "fake-chat", "input": "hi"})
    assert time.monotonic() - started < BOUND
    assert_error(res, 504, "upstream_timeout")


def test_garbage_line(hardened: OrgateServer, http: httpx.Client, fake: FakeOpenAIChat) -> None:
    check = _healthy_meanwhile(hardened)
    fake.enqueue(garbage(after=2))
    res, events, _ = _stream(http)
    # The garbage may arrive in the same read as the first chunks (before any event):
    # then it is an HTTP 502.
    _assert_failed(http, res, events, "upstream_invalid_response")
    check()


def test_truncated_json_body(http: httpx.Client, fake: FakeOpenAIChat) -> None:
    fake.enqueue(
        Raw(
            [b'{"id": "chatcmpl-1", "object": "chat.completion", "choi'],
            content_type="application/json",
        )
    )
    assert_error(
        http.post("/v1/responses", json={"model": "fake-chat", "input": "hi"}),
        502,
        "upstream_invalid_response",
    )


def test_truncated_json_in_a_stream(http: httpx.Client, fake: FakeOpenAIChat) -> None:
    fake.enqueue(
        Raw([CHUNK % b"one", b'data: {"id":"c","object":"chat.completion.chunk","choi\n\n'])
    )
    res, events, _ = _stream(http)
    _assert_failed(http, res, events, "upstream_invalid_response")


def test_cut_without_done(hardened: OrgateServer, http: httpx.Client, fake: FakeOpenAIChat) -> None:
    """The connection drops mid-stream: no finish_reason, no [DONE]."""
    check = _healthy_meanwhile(hardened)
    fake.enqueue(cut(after=2))
    res, events, _ = _stream(http)
    _assert_failed(http, res, events, "upstream_stream_truncated")
    check()


def test_stream_ends_cleanly_without_done_or_finish(
    http: httpx.Client, fake: FakeOpenAIChat
) -> None:
    """The upstream closes the body normally but never sent finish_reason nor [DONE]."""
    fake.enqueue(Raw([CHUNK % b"one", CHUNK % b" two"]))
    res, events, _ = _stream(http)
    _assert_failed(http, res, events, "upstream_stream_truncated")


def test_finish_without_done_is_tolerated(http: httpx.Client, fake: FakeOpenAIChat) -> None:
    fake.enqueue(Script(content="one two", done=False))
    res, events, _ = _stream(http)
    assert events[-1]["type"] == "response.completed"


def test_enormous_chunk(hardened: OrgateServer, http: httpx.Client, fake: FakeOpenAIChat) -> None:
    """One 5 MB data line: either passed through or refused cleanly, never a hang or a 500."""
    check = _healthy_meanwhile(hardened)
    big = CHUNK % (b"a" * 5_000_000)
    fake.enqueue(Raw([big[: len(big) // 2], big[len(big) // 2 :], FINISH, b"data: [DONE]\n\n"]))
    res, events, _ = _stream(http)  # a hang fails by the client's timeout
    assert res.status_code == 200
    assert events[-1]["type"] in ("response.completed", "response.failed")
    if events[-1]["type"] == "response.completed":
        assert len(events[-1]["response"]["output"][0]["content"][0]["text"]) == 5_000_000
    check()


def test_slow_upstream_within_timeout(http: httpx.Client, fake: FakeOpenAIChat) -> None:
    """Chunks every second (below read_timeout): the stream completes, however long it takes."""
    fake.enqueue(text("one two three", delay=READ_TIMEOUT * 0.6))
    res, events, elapsed = _stream(http)
    assert events[-1]["type"] == "response.completed"
    assert elapsed >= READ_TIMEOUT


def _first_events(sock: socket.socket) -> bytes:
    data = b""
    while b"response.created" not in data or b"\n\n" not in data.split(b"response.created", 1)[1]:
        data += sock.recv(65536)
    return data


def test_client_disconnects_mid_stream(
    hardened: OrgateServer, http: httpx.Client, fake: FakeOpenAIChat
) -> None:
    check = _healthy_meanwhile(hardened)
    fake.enqueue(text("one two three four five six seven eight nine ten", delay=0.3))
    sock = socket.create_connection(("127.0.0.1", hardened.port), timeout=10)
    sock.sendall(
        raw_request(
            "POST",
            "/v1/responses",
            orjson.dumps({"model": "fake-chat", "input": "hi", "stream": True}),
            hardened.api_key,
        )
    )
    data = _first_events(sock)
    response_id = _id_of(data)
    sock.close()
    assert wait_until(lambda: fake.requests[-1].disconnected), (
        "the upstream request was not cancelled"
    )
    assert not fake.requests[-1].completed
    assert wait_until(
        lambda: http.get(f"/v1/responses/{response_id}").json().get("status") == "failed"
    )
    stored = http.get(f"/v1/responses/{response_id}").json()
    assert stored["error"]["code"] == "client_disconnected"
    check()


def _id_of(data: bytes) -> str:
    marker = b'"id":"resp_'
    start = data.index(marker) + len(b'"id":"')
    return data[start : data.index(b'"', start)].decode()


def test_slow_reader_does_not_block_upstream_of_others(
    hardened: OrgateServer, http: httpx.Client, fake: FakeOpenAIChat
) -> None:
    """A client that stops reading a big upstream stream: others are still served quickly."""
    fake.enqueue(text(" ".join(["word"] * 20000)))
    sock = socket.create_connection(("127.0.0.1", hardened.port), timeout=10)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    try:
        sock.sendall(
            raw_request(
                "POST",
                "/v1/responses",
                orjson.dumps({"model": "fake-chat", "input": "hi", "stream": True}),
                hardened.api_key,
            )
        )
        sock.recv(1024)
        # The stuck reader never reads on: a server blocked by it would never answer, and the
        # client's timeout (30 s) fails the call. Answered at all is the claim, not how fast.
        for _ in range(5):
            res = http.post("/v1/responses", json={"model": "orgate/echo", "input": "quick"})
            assert res.status_code == 200
    finally:
        sock.close()


def test_graceful_shutdown_drains_in_flight_stream(tmp_path: Any) -> None:
    """SIGTERM while a slow stream runs: the stream completes, the process exits 0,
    the response is stored."""
    # a drain time far beyond the stream's (its end, not the drain's, ends the process)
    server = OrgateServer(
        '[server]\ndrain_timeout = 600\nlog_format = "json"\n',
        env=server_env(),
        workdir=str(tmp_path),
    ).start()
    result: dict[str, Any] = {}
    started = threading.Event()

    def run() -> None:
        with httpx.stream(
            "POST",
            f"{server.url}/v1/responses",
            json={
                "model": "orgate/echo",
                # 6 s: time for a loaded machine to see new connections refused meanwhile
                "input": "a b c d e f g h i j k l m n o p q r s t orgate:delay=300",
                "stream": True,
            },
            headers=server.headers(),
            timeout=30,
        ) as res:
            body = b""
            for chunk in res.iter_bytes():
                body += chunk
                started.set()
            result["events"] = sse_events(body.decode())

    thread = threading.Thread(target=run)
    thread.start()
    assert started.wait(PATIENCE)
    assert server.proc is not None
    server.proc.send_signal(__import__("signal").SIGTERM)

    def refused() -> str | None:
        try:
            httpx.get(f"{server.url}/healthz", timeout=5)
        except httpx.HTTPError:
            # by the draining process, or by none (it has exited)
            return "draining" if server.proc is not None and server.proc.poll() is None else "gone"
        return None

    # no new connections are accepted while draining
    assert wait_until(refused) == "draining"
    code = server.proc.wait(PATIENCE)
    thread.join(PATIENCE)
    assert code == 0, server.output()[-3000:]
    events = result["events"]
    assert events[-1]["type"] == "response.completed", events[-1]
    response_id = events[-1]["response"]["id"]
    text_out = events[-1]["response"]["output"][0]["content"][0]["text"]
    # restart on the same database: the response is there, complete
    again = OrgateServer("", env=server_env(), workdir=str(tmp_path)).start()
    try:
        stored = httpx.get(
            f"{again.url}/v1/responses/{response_id}", headers=again.headers(), timeout=10
        ).json()
        assert (
            stored["status"] == "completed"
            and stored["output"][0]["content"][0]["text"] == text_out
        )
    finally:
        again.stop()
