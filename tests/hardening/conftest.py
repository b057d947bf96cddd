"""Shared pieces of the hardening tests: a server with small limits and short timeouts,
raw sockets, error checks.

``hardened`` is one ``orgate serve`` for the module with small ``[limits]``,
JSON logs, ``read_timeout = 1.5`` towards the fake upstream (``fake-chat``) and
the built-in models. Tests that need other settings start their own server.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.conftest import chat_model_config  # noqa: E402
from tests.fakes.openai_chat_upstream import FakeOpenAIChat  # noqa: E402
from tests.server_process import OrgateServer  # noqa: E402
from tests.support.waiting import PATIENCE  # noqa: E402

READ_TIMEOUT = 1.5
LIMITS = """
[limits]
max_body_bytes = 65536
max_input_items = 50
max_json_depth = 16
max_tools = 8
max_string_bytes = 8192
max_schema_bytes = 2048
body_timeout = 2
"""
UPSTREAM_KEY = "upstream-secret"


def server_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The subprocess environment (``ORGATE_TEST_PYTHONPATH`` lets a patched tree be tested)."""
    env = dict(extra or {})
    override = os.environ.get("ORGATE_TEST_PYTHONPATH")
    if override:
        env["PYTHONPATH"] = override
    return env


def hardened_config(upstream_url: str, extra: str = "") -> str:
    model = chat_model_config(upstream_url).replace(
        "read_timeout = 3", f"read_timeout = {READ_TIMEOUT}"
    )
    return '[server]\nlog_format = "json"\naccess_log = true\n' + LIMITS + extra + "\n" + model


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeOpenAIChat]:
    with FakeOpenAIChat.start_in_thread() as fake:
        yield fake


@pytest.fixture
def fake(upstream: FakeOpenAIChat) -> Iterator[FakeOpenAIChat]:
    upstream.reset()
    yield upstream
    upstream.reset()


@pytest.fixture(scope="module")
def hardened(upstream: FakeOpenAIChat) -> Iterator[OrgateServer]:
    with OrgateServer(
        hardened_config(upstream.base_url), api_key="client-secret-key", env=server_env()
    ) as running:
        yield running


@pytest.fixture
def http(hardened: OrgateServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=hardened.url, headers=hardened.headers(), timeout=30) as client:
        yield client


def assert_error(res: httpx.Response, status: int, code: str | None = None) -> dict[str, Any]:
    """A non-2xx answer in the spec's error shape, with this status (and code)."""
    assert res.status_code == status, res.text[:500]
    assert res.headers["content-type"].startswith("application/json"), res.headers
    body = res.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"}, body
    assert isinstance(error["message"], str) and error["message"]
    assert isinstance(error["type"], str)
    if code is not None:
        assert error["code"] == code, error
    return error


def sse_events(raw: str) -> list[dict[str, Any]]:
    """The JSON events of an SSE body (``[DONE]`` excluded)."""
    events = []
    for block in raw.split("\n\n"):
        for line in block.split("\n"):
            if line.startswith("data: ") and line != "data: [DONE]":
                events.append(orjson.loads(line[6:]))
    return events


def raw_request(
    method: str,
    path: str,
    body: bytes,
    key: str,
    *,
    content_type: str = "application/json",
    extra: str = "",
) -> bytes:
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n"
        f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
    )
    return head.encode() + body


def read_responses(
    sock: socket.socket, count: int, timeout: float = PATIENCE
) -> list[tuple[int, bytes]]:
    """Read ``count`` HTTP/1.1 responses (Content-Length or chunked bodies) from a socket."""
    sock.settimeout(timeout)
    buf = b""
    out: list[tuple[int, bytes]] = []

    def fill() -> None:
        nonlocal buf
        data = sock.recv(65536)
        if not data:
            raise ConnectionError("closed")
        buf += data

    while len(out) < count:
        while b"\r\n\r\n" not in buf:
            fill()
        head, _, buf = buf.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        status = int(lines[0].split()[1])
        headers = {
            k.strip().lower(): v.strip() for k, _, v in (line.partition(b":") for line in lines[1:])
        }
        if b"content-length" in headers:
            size = int(headers[b"content-length"])
            while len(buf) < size:
                fill()
            body, buf = buf[:size], buf[size:]
        else:
            body = b""
            while True:
                while b"\r\n" not in buf:
                    fill()
                size_line, _, buf = buf.partition(b"\r\n")
                size = int(size_line, 16)
                while len(buf) < size + 2:
                    fill()
                body += buf[:size]
                buf = buf[size + 2 :]
                if size == 0:
                    break
        out.append((status, body))
    return out
