"""HTTP-level behaviour of a running ``orgate serve``, black-box:
framing, headers, encodings, load, abrupt clients.

Bugs an audit found (each test failed before its fix):

- an endless request header (or URL) was buffered whole by httptools, with quadratic copying that
  blocked the event loop (64 MB: ~9 s during which nobody was served): now 431 past 64 KiB;
- malformed HTTP got uvicorn's ``text/plain`` 400: now the spec's error shape;
- a ``Content-Encoding: gzip`` body was parsed as JSON (a confusing "not valid UTF-8" 400; a plain
  body labelled gzip was served): now decompressed, a plain body labelled gzip 400
  ``invalid_compressed_body``, a coding orgate does not decode 415
  ``unsupported_content_encoding`` (tests/hardening/test_compressed_bodies.py: zstd, bombs);
- two different ``Authorization`` headers: the fast path took the last one, every other route and
  the rate limiter the first one: now 401;
- ``/v1/responses/`` answered a 307 redirect (to ``http://`` even behind a TLS proxy): now served.

The rest pins behaviours under load and with odd but valid HTTP: every 4xx/5xx in the spec's
shape on a kept-alive connection, HTTP/1.0, chunked bodies, ``Expect: 100-continue``, hundreds of
concurrent streams, a client that stops reading, clients that reset mid-stream.
"""

from __future__ import annotations

import asyncio
import gzip
import os
import select
import socket
import struct
import time
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from tests.fakes._base import Raw
from tests.fakes.openai_chat_upstream import FakeOpenAIChat
from tests.hardening.conftest import (
    assert_error,
    hardened_config,
    raw_request,
    read_responses,
    server_env,
    sse_events,
)
from tests.server_process import OrgateServer
from tests.support.waiting import PATIENCE, wait_until

OK = {"model": "orgate/echo", "input": "hi"}
OK_BYTES = orjson.dumps(OK)


def _exchange(port: int, data: bytes, timeout: float = 10.0) -> bytes:
    """Send raw bytes, read until the server closes (or goes quiet)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        return _read_until_closed(sock)


def _read_until_closed(sock: socket.socket) -> bytes:
    """What the server sends until it closes the connection (or goes quiet, or resets it)."""
    out = b""
    try:
        while chunk := sock.recv(65536):
            out += chunk
    except OSError:
        pass
    return out


def _split(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {
        name.strip().lower(): value.strip()
        for name, _, value in (line.partition(":") for line in lines[1:])
    }
    return int(lines[0].split()[1]), headers, body


def _assert_error_bytes(raw: bytes, status: int, code: str | None = None) -> dict[str, Any]:
    got, headers, body = _split(raw)
    assert got == status, raw[:500]
    assert headers["content-type"].startswith("application/json"), headers
    error = orjson.loads(body[: int(headers["content-length"])])
    assert set(error) == {"error"} and set(error["error"]) == {
        "message",
        "type",
        "param",
        "code",
    }, error
    if code is not None:
        assert error["error"]["code"] == code, error
    return dict(error["error"])


def _request(
    method: str, path: str, key: str, body: bytes = b"", extra: str = "", version: str = "HTTP/1.1"
) -> bytes:
    head = (
        f"{method} {path} {version}\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "
        f"{key}\r\nConnection: close\r\n{extra}"
    )
    if body or method == "POST":
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    return (head + "\r\n").encode() + body


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def _pid(server: OrgateServer) -> int:
    assert server.proc is not None
    return server.proc.pid


# --- the request head is bounded ---------------------------------------------------------------


def test_an_endless_header_is_refused_with_431_without_stalling_others(
    hardened: OrgateServer, http: httpx.Client
) -> None:
    """16 MiB of one header value: a 431 in the spec's shape; the server neither buffers nor
    stalls."""
    before = _rss_kib(_pid(hardened))
    # a server that stalled would fail the reads below by this timeout
    with socket.create_connection(("127.0.0.1", hardened.port), timeout=PATIENCE) as sock:
        sock.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Big: ")
        chunk = b"a" * 65536
        sent = 0
        try:
            while sent < 16 * 1024 * 1024:
                if select.select([sock], [], [], 0)[0]:
                    break  # answered already: stop sending
                sock.sendall(chunk)
                sent += len(chunk)
                if sent % (2 * 1024 * 1024) == 0:  # others are served meanwhile
                    assert http.get("/healthz").status_code == 200
            else:
                sock.sendall(b"\r\n\r\n")
        except OSError:
            pass  # the server may stop listening to the rest: what matters is its answer
        answer = _read_until_closed(sock)
    _assert_error_bytes(answer, 431, "request_header_fields_too_large")
    assert _rss_kib(_pid(hardened)) - before < 16 * 1024, "the header was buffered"
    assert http.get("/healthz").status_code == 200


@pytest.fixture(scope="module")
def quick_heads(upstream: FakeOpenAIChat) -> Iterator[OrgateServer]:
    """A server whose request heads must arrive within one second (``[limits] header_timeout``)."""
    env = {**server_env(), "ORGATE_LIMITS__HEADER_TIMEOUT": "1"}
    with OrgateServer(
        hardened_config(upstream.base_url), api_key="client-secret-key", env=env
    ) as running:
        yield running


def _open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_connections_that_send_nothing_are_closed(quick_heads: OrgateServer) -> None:
    """Idle connections (nothing sent, ever) are closed after header_timeout:
    they held a socket forever."""
    pid = _pid(quick_heads)
    baseline = _open_fds(pid)
    opened = time.monotonic()
    socks = [
        socket.create_connection(("127.0.0.1", quick_heads.port), timeout=PATIENCE)
        for _ in range(50)
    ]
    try:
        assert _read_until_closed(socks[0]) == b""  # closed without a word: no request to answer
        first = time.monotonic() - opened
        # By the 1 s timer: not before it (real time from below), and long before the 30 s of
        # the default header_timeout (a loaded machine adds a second or two, not twenty).
        # Connections never closed would fail by the sockets' timeout.
        assert 0.8 < first < 15, first
        for sock in socks[1:]:
            assert _read_until_closed(sock) == b""
        assert time.monotonic() - opened < 15
    finally:
        for sock in socks:
            sock.close()
    assert wait_until(lambda: _open_fds(pid) <= baseline + 2), (_open_fds(pid), baseline)


@pytest.mark.parametrize("head", [b"POST /v1/responses HTTP/1.1\r\nHost: x\r\n", b"GET /v1/mod"])
def test_a_head_that_never_ends_gets_408(quick_heads: OrgateServer, head: bytes) -> None:
    """Slowloris: a started request head that stalls is answered 408 in the spec's shape and
    closed."""
    with socket.create_connection(("127.0.0.1", quick_heads.port), timeout=PATIENCE) as sock:
        started = time.monotonic()
        sock.sendall(head)
        answer = _read_until_closed(sock)
    # the 1 s timer, not the 30 s default (the bounds as in the test above)
    assert 0.8 < time.monotonic() - started < 15
    body = _assert_error_bytes(answer, 408, "request_timeout")
    assert "header_timeout" in body["message"]


def test_a_slow_head_within_the_timeout_and_keep_alive_requests_are_served(
    quick_heads: OrgateServer,
) -> None:
    """The timeout is per head: a head sent in pieces within it is served,
    and so are later requests on
    the connection, each with its own time (a connection is not limited by its age)."""
    request = (
        f"GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {quick_heads.api_key}\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", quick_heads.port), timeout=10) as sock:
        for _ in range(3):
            # a head in three reads, 40 ms from first to last: far within the 1 s (a client
            # slowed down many times still makes it); the idle waits below add up past it
            for piece in (request[:10], request[10:30], request[30:]):
                sock.sendall(piece)
                time.sleep(0.02)
            reply = b""
            while b"\r\n\r\n" not in reply:
                chunk = sock.recv(65536)
                assert chunk, reply
                reply += chunk
            status, headers, body = _split(reply)
            while len(body) < int(headers["content-length"]):
                chunk = sock.recv(65536)
                assert chunk, reply
                body += chunk
            assert status == 200, reply[:300]
            assert orjson.loads(body)["object"] == "list"
            time.sleep(0.6)  # idle between requests: under the keep-alive timeout


def test_a_long_url_is_refused_with_431(hardened: OrgateServer) -> None:
    answer = _exchange(
        hardened.port, _request("GET", "/v1/models?q=" + "a" * 300_000, hardened.api_key)
    )
    _assert_error_bytes(answer, 431, "request_header_fields_too_large")


def test_headers_of_ordinary_size_are_served(hardened: OrgateServer) -> None:
    extra = "".join(f"X-Pad-{i}: {'v' * 1000}\r\n" for i in range(16))  # 16 KB of headers
    status, _, _ = _split(
        _exchange(
            hardened.port, _request("POST", "/v1/responses", hardened.api_key, OK_BYTES, extra)
        )
    )
    assert status == 200


@pytest.mark.parametrize(
    "data",
    [
        b"POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
        b"POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Length: "
        b"3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"BREW /v1/responses HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /v1/models/\u00e9 HTTP/1.1\r\nHost: x\r\n\r\n".encode(),
    ],
    ids=["bad_content_length", "length_and_chunked", "unknown_method", "non_ascii_path"],
)
def test_malformed_http_gets_a_400_in_the_error_shape(
    hardened: OrgateServer, http: httpx.Client, data: bytes
) -> None:
    answer = _exchange(hardened.port, data)
    _assert_error_bytes(answer, 400, "invalid_http_request")
    assert _split(answer)[1].get("connection") == "close"
    assert http.get("/healthz").status_code == 200


# --- request bodies: encodings, media types -------------------------------------------------------


@pytest.mark.parametrize("path", ["/v1/responses", "/v1/responses/compact"])
def test_a_gzip_body_is_decompressed(http: httpx.Client, path: str) -> None:
    res = http.post(
        path,
        content=gzip.compress(OK_BYTES),
        headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
    )
    assert res.status_code == 200, res.text


@pytest.mark.parametrize("path", ["/v1/responses", "/v1/responses/compact"])
def test_a_plain_body_labelled_gzip_is_400(http: httpx.Client, path: str) -> None:
    res = http.post(
        path,
        content=OK_BYTES,
        headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
    )
    error = assert_error(res, 400, "invalid_compressed_body")
    assert "gzip" in error["message"] or "header" in error["message"]


@pytest.mark.parametrize("path", ["/v1/responses", "/v1/responses/compact"])
@pytest.mark.parametrize("encoding", ["br", "gzip, zstd", "compress"])
def test_a_coding_not_decoded_is_415_naming_those_that_are(
    http: httpx.Client, path: str, encoding: str
) -> None:
    res = http.post(
        path,
        content=OK_BYTES,
        headers={"Content-Type": "application/json", "Content-Encoding": encoding},
    )
    error = assert_error(res, 415, "unsupported_content_encoding")
    assert encoding in error["message"]
    assert res.headers["accept-encoding"] == "zstd, gzip, deflate, identity"


def test_identity_content_encoding_is_accepted(http: httpx.Client) -> None:
    res = http.post(
        "/v1/responses",
        content=OK_BYTES,
        headers={"Content-Type": "application/json", "Content-Encoding": "identity"},
    )
    assert res.status_code == 200


@pytest.mark.parametrize(
    ("content_type", "body", "status", "code"),
    [
        ("application/json; charset=utf-8", OK_BYTES, 200, None),
        ("application/json;charset=UTF-8", OK_BYTES, 200, None),
        ("text/plain", OK_BYTES, 200, None),  # curl -d style labels: accepted when the body is JSON
        ("", OK_BYTES, 200, None),
        ("text/plain", b"model=orgate/echo", 415, "unsupported_media_type"),
        (
            "application/json",
            b"\xef\xbb\xbf" + OK_BYTES,
            400,
            "invalid_json",
        ),  # a UTF-8 BOM: named in the message
        (
            "application/json",
            b'{"model": "orgate/echo", "input": "h\xff\xfei"}',
            400,
            "invalid_json",
        ),
        ("application/json", OK_BYTES.decode().encode("utf-16"), 400, "invalid_json"),
    ],
    ids=[
        "charset",
        "charset_upper",
        "text_plain",
        "none",
        "form_body",
        "bom",
        "invalid_utf8",
        "utf16",
    ],
)
def test_media_types_and_byte_encodings(
    http: httpx.Client, content_type: str, body: bytes, status: int, code: str | None
) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    res = http.post("/v1/responses", content=body, headers=headers)
    if status == 200:
        assert res.status_code == 200, res.text
        assert res.json()["output"][0]["content"][0]["text"] == "hi"
    else:
        error = assert_error(res, status, code)
        if body.startswith(b"\xef\xbb\xbf"):
            assert "BOM" in error["message"]


# --- credentials ----------------------------------------------------------------------------------


@pytest.mark.parametrize("order", ["valid_first", "valid_last"])
@pytest.mark.parametrize(
    ("method", "path"),
    [("POST", "/v1/responses"), ("GET", "/v1/models"), ("GET", "/v1/responses/resp_x")],
)
def test_two_different_authorization_headers_are_refused(
    hardened: OrgateServer, order: str, method: str, path: str
) -> None:
    good, bad = (
        f"Authorization: Bearer {hardened.api_key}\r\n",
        "Authorization: Bearer not-the-key\r\n",
    )
    auth = good + bad if order == "valid_first" else bad + good
    body = OK_BYTES if method == "POST" else b""
    data = (
        f"{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{auth}Content-Type: "
        f"application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    error = _assert_error_bytes(
        _exchange(hardened.port, data.encode() + body), 401, "invalid_api_key"
    )
    assert error["type"] == "authentication_error"


def test_the_same_authorization_header_twice_and_a_lowercase_scheme_are_accepted(
    hardened: OrgateServer,
) -> None:
    auth = f"Authorization: bearer {hardened.api_key}\r\n"
    data = (
        "POST /v1/responses HTTP/1.1\r\nHost: x\r\nConnection: "
        f"close\r\n{auth}{auth}Content-Type: application/json\r\nContent-Length: "
        f"{len(OK_BYTES)}\r\n\r\n"
    )
    assert _split(_exchange(hardened.port, data.encode() + OK_BYTES))[0] == 200


# --- paths, methods, query strings ----------------------------------------------------------------


def test_trailing_slash_paths_are_served_not_redirected(http: httpx.Client) -> None:
    res = http.post("/v1/responses/", json=OK)
    assert res.status_code == 200, (res.status_code, res.headers)
    assert res.json()["status"] == "completed"
    assert http.get("/v1/models/").json()["object"] == "list"
    assert http.get("/v1/models/orgate/echo/").json()["id"] == "orgate/echo"
    assert_error(http.get("/v1/nope/"), 404, "not_found")


def test_head_options_and_query_strings(http: httpx.Client) -> None:
    head = http.head("/v1/models")
    assert head.status_code == 200 and head.content == b""
    res = http.options("/v1/responses")
    assert_error(res, 405, "method_not_allowed")
    assert "POST" in res.headers["allow"]
    head = http.head("/v1/responses")
    assert head.status_code == 405 and head.content == b""
    assert_error(http.options("/v1/models"), 405, "method_not_allowed")
    # a query string on POST changes nothing (stream is a body field)
    res = http.post("/v1/responses?stream=true&x=1", json=OK)
    assert res.status_code == 200 and res.headers["content-type"] == "application/json"


# --- framing --------------------------------------------------------------------------------------


def test_http_1_0_request(hardened: OrgateServer) -> None:
    status, headers, body = _split(
        _exchange(
            hardened.port,
            _request("POST", "/v1/responses", hardened.api_key, OK_BYTES, version="HTTP/1.0"),
        )
    )
    assert status == 200 and headers["connection"] == "close"
    assert orjson.loads(body)["status"] == "completed"


def test_chunked_request_body(hardened: OrgateServer) -> None:
    chunks = b"".join(
        b"%x\r\n%s\r\n" % (len(OK_BYTES[i : i + 7]), OK_BYTES[i : i + 7])
        for i in range(0, len(OK_BYTES), 7)
    )
    head = (
        "POST /v1/responses HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
        f"{hardened.api_key}\r\nContent-Type: application/json\r\nTransfer-Encoding: "
        "chunked\r\nConnection: close\r\n\r\n"
    )
    status, _, body = _split(_exchange(hardened.port, head.encode() + chunks + b"0\r\n\r\n"))
    assert status == 200
    # a chunked body over max_body_bytes (no Content-Length to check first): 413 while reading
    big = orjson.dumps({**OK, "input": "x" * 70_000})
    chunks = b"".join(
        b"%x\r\n%s\r\n" % (len(big[i : i + 4096]), big[i : i + 4096])
        for i in range(0, len(big), 4096)
    )
    _assert_error_bytes(
        _exchange(hardened.port, head.encode() + chunks + b"0\r\n\r\n"), 413, "request_too_large"
    )


def test_expect_100_continue(hardened: OrgateServer) -> None:
    key = hardened.api_key
    with socket.create_connection(("127.0.0.1", hardened.port), timeout=10) as sock:
        head = raw_request("POST", "/v1/responses", b"", key, extra="Expect: 100-continue\r\n")
        sock.sendall(head.replace(b"Content-Length: 0", b"Content-Length: %d" % len(OK_BYTES)))
        assert sock.recv(1024).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
        sock.sendall(OK_BYTES)
        [(status, body)] = read_responses(sock, 1)
    assert status == 200 and orjson.loads(body)["status"] == "completed"
    # refused before the body: the final answer comes without a 100 Continue
    for extra, status, code in [
        ("Content-Length: 99999999\r\n", 413, "request_too_large"),
        ("", 401, "missing_api_key"),
    ]:
        data = (
            b"POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: "
            b"application/json\r\nExpect: 100-continue\r\nConnection: close\r\n"
        )
        if status != 401:
            data += f"Authorization: Bearer {key}\r\n".encode()
        data += (extra or "Content-Length: 10\r\n").encode() + b"\r\n"
        answer = _exchange(hardened.port, data, timeout=3)
        assert not answer.startswith(b"HTTP/1.1 100"), answer[:100]
        _assert_error_bytes(answer, status, code)


def test_every_error_status_keeps_the_connection_alive(hardened: OrgateServer) -> None:
    """One kept-alive connection through 400/401/404/405/413/415/429/500 and 200s:
    each error in the spec's shape."""
    sockets: set[Any] = set()

    def note(res: httpx.Response) -> None:
        sockets.add(res.extensions["network_stream"].get_extra_info("socket").getsockname())

    requests: list[tuple[str, str, dict[str, Any], int]] = [
        ("POST", "/v1/responses", {"json": OK}, 200),
        (
            "POST",
            "/v1/responses",
            {"content": b"{bad", "headers": {"Content-Type": "application/json"}},
            400,
        ),
        ("POST", "/v1/responses", {"json": OK, "headers": {"Authorization": "Bearer nope"}}, 401),
        ("GET", "/v1/nope", {}, 404),
        ("PUT", "/v1/responses", {}, 405),
        (
            "POST",
            "/v1/responses",
            {"content": b"x" * 70_000, "headers": {"Content-Type": "application/json"}},
            413,
        ),
        (
            "POST",
            "/v1/responses",
            {"content": b"{}", "headers": {"Content-Type": "application/xml"}},
            415,
        ),
        ("POST", "/v1/responses", {"json": {**OK, "input": "orgate:rate-limit"}}, 429),
        ("POST", "/v1/responses", {"json": {**OK, "input": "orgate:fail"}}, 500),
        ("POST", "/v1/responses", {"json": {**OK, "stream": True}}, 200),
        ("GET", "/v1/models", {}, 200),
    ]
    with httpx.Client(
        base_url=hardened.url,
        headers=hardened.headers(),
        timeout=30,
        event_hooks={"response": [note]},
    ) as client:
        for _ in range(20):
            for method, path, kwargs, status in requests:
                res = client.request(method, path, **kwargs)
                if status >= 400:
                    assert_error(res, status)
                else:
                    assert res.status_code == status, res.text[:300]
    assert len(sockets) == 1, "a connection was closed by an error answer"


# --- load and abrupt clients ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def crowded(upstream: FakeOpenAIChat) -> Iterator[OrgateServer]:
    """The hardened server with a body deadline a saturated machine cannot miss: 250 bodies
    arriving at once may wait seconds for a loaded machine's event loop, and the deadline
    itself is what the 408 tests check, not the crowd's."""
    config = hardened_config(upstream.base_url).replace("body_timeout = 2", "body_timeout = 120")
    assert "body_timeout = 120" in config
    with OrgateServer(config, api_key="client-secret-key", env=server_env()) as running:
        yield running


def test_hundreds_of_concurrent_streams(crowded: OrgateServer) -> None:
    """250 concurrent streams of the built-in model: all complete with [DONE];
    memory stays bounded."""
    pid = _pid(crowded)
    before = _rss_kib(pid)
    peak = before

    async def one(client: httpx.AsyncClient, i: int) -> str | None:
        body = {
            "model": "orgate/echo",
            "input": f"stream {i} " + "word " * 20 + "orgate:delay=2",
            "stream": True,
            "store": False,
        }
        async with client.stream("POST", "/v1/responses", json=body) as res:
            data = await res.aread()
        if res.status_code != 200:
            return f"{i}: status {res.status_code}"
        if not data.endswith(b"data: [DONE]\n\n"):
            return f"{i}: no [DONE]: {data[-200:]!r}"
        if sse_events(data.decode())[-1]["type"] != "response.completed":
            return f"{i}: not completed"
        return None

    async def run() -> list[str | None]:
        nonlocal peak
        limits = httpx.Limits(max_connections=300, max_keepalive_connections=300)
        async with httpx.AsyncClient(
            base_url=crowded.url, headers=crowded.headers(), timeout=60, limits=limits
        ) as client:
            tasks = [asyncio.create_task(one(client, i)) for i in range(250)]
            while not all(task.done() for task in tasks):
                peak = max(peak, _rss_kib(pid))
                await asyncio.sleep(0.05)
            return await asyncio.gather(*tasks)

    failures = [failure for failure in asyncio.run(run()) if failure]
    assert not failures, failures[:5]
    assert peak - before < 150 * 1024, (before, peak)
    with httpx.Client(base_url=crowded.url, headers=crowded.headers(), timeout=30) as http:
        assert http.post("/v1/responses", json=OK).status_code == 200  # still serving


def test_a_stream_nobody_reads_keeps_memory_bounded(
    hardened: OrgateServer, http: httpx.Client, fake: FakeOpenAIChat
) -> None:
    """An upstream streaming ~200 MB to a client that reads nothing:
    back-pressure, not buffering."""
    delta = {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "delta": {"content": "word " * 200}, "finish_reason": None}],
    }
    frames = b"".join(b"data: " + orjson.dumps(delta) + b"\n\n" for _ in range(64))  # ~70 KB
    fake.enqueue(Raw([frames] * 3000))
    pid = _pid(hardened)
    before = _rss_kib(pid)
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
        assert sock.recv(1024).startswith(b"HTTP/1.1 200")
        peak = before
        for _ in range(20):  # 2 s to watch the memory in: the upstream pushes meanwhile
            time.sleep(0.1)
            peak = max(peak, _rss_kib(pid))
        assert peak - before < 64 * 1024, (before, peak)
        assert not fake.requests[-1].completed, (
            "the whole upstream stream was read for a client that reads nothing"
        )
        # Others are served meanwhile: the stuck stream never ends, so a call held up behind it
        # would fail by the client's timeout (30 s).
        assert http.post("/v1/responses", json=OK).status_code == 200
    finally:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
    assert wait_until(lambda: fake.requests[-1].disconnected), (
        "the upstream call outlived its client"
    )
    assert http.get("/healthz").status_code == 200


def test_clients_resetting_mid_stream_leak_nothing(
    hardened: OrgateServer, http: httpx.Client
) -> None:
    """100 clients reset (SO_LINGER 0) their connection mid-stream: no leaked sockets, stored as
    failed, none of them still running after."""
    pid = _pid(hardened)
    errors_before = _server_errors(http)
    fds_before = len(os.listdir(f"/proc/{pid}/fd"))
    body = orjson.dumps(
        {"model": "orgate/echo", "input": "word " * 200 + "orgate:delay=20", "stream": True}
    )
    response_id = ""
    for _ in range(100):
        sock = socket.create_connection(("127.0.0.1", hardened.port), timeout=10)
        sock.sendall(raw_request("POST", "/v1/responses", body, hardened.api_key))
        data = b""
        while b'"id":"resp_' not in data or b"\n\n" not in data.split(b"response.created", 1)[-1]:
            data += sock.recv(65536)
        start = data.index(b'"id":"resp_') + 6
        response_id = data[start : data.index(b'"', start)].decode()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
    assert wait_until(lambda: len(os.listdir(f"/proc/{pid}/fd")) <= fds_before + 2), (
        fds_before,
        os.listdir(f"/proc/{pid}/fd"),
    )
    assert wait_until(
        lambda: http.get(f"/v1/responses/{response_id}").json().get("status") == "failed"
    )
    # nothing of the 100 streams runs on (4 s of words each): the scrape counts only itself
    assert wait_until(lambda: _in_flight(http) == 1), _in_flight(http)
    res = http.post("/v1/responses", json={**OK, "stream": True})
    assert res.status_code == 200 and res.text.endswith("data: [DONE]\n\n")
    assert _server_errors(http) == errors_before


def _in_flight(http: httpx.Client) -> float:
    """The HTTP requests /metrics counts in flight (itself among them)."""
    lines = http.get("/metrics").text.splitlines()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in lines
        if line.startswith("orgate_http_requests_in_flight ")
    )


def _server_errors(http: httpx.Client) -> float:
    """The 5xx answers counted in /metrics so far."""
    lines = http.get("/metrics").text.splitlines()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in lines
        if line.startswith("orgate_http_requests_total{") and 'status="5' in line
    )
