"""Pure error mapping (upstream HTTP replies, aiohttp exceptions) and the session pool."""

from __future__ import annotations

import aiohttp
import orjson
import pytest

from orgate.neutral import Deployment
from orgate.protocol.errors import ApiError
from orgate.providers.http import HttpPool, client_error, host_of, origin
from orgate.providers.openai_chat import completions_url, http_error

DEP = Deployment(
    name="dep",
    provider="openai-chat",
    upstream_model="m",
    base_url="http://user:pw@up.test:8000/v1",
    api_key="sk-x",
)


def body(message: str) -> bytes:
    return orjson.dumps({"error": {"message": message, "type": "x", "param": None, "code": None}})


@pytest.mark.parametrize(
    ("status", "want_status", "want_type", "want_code"),
    [
        (400, 400, "invalid_request_error", "upstream_bad_request"),
        (422, 400, "invalid_request_error", "upstream_bad_request"),
        (401, 502, "server_error", "upstream_auth_failed"),
        (403, 502, "server_error", "upstream_auth_failed"),
        (404, 502, "server_error", "upstream_model_not_found"),
        (429, 429, "rate_limit_error", "rate_limit_exceeded"),
        (500, 502, "server_error", "upstream_error"),
        (503, 502, "server_error", "upstream_error"),
        (504, 504, "server_error", "upstream_timeout"),
    ],
)
def test_http_status_mapping(status: int, want_status: int, want_type: str, want_code: str) -> None:
    err = http_error(status, body("sk-x is wrong"), {}, "dep")
    assert (err.status, err.type, err.code) == (want_status, want_type, want_code)
    assert "'dep'" in err.message
    if status in (401, 403):
        assert "sk-x" not in err.message


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b'{"error": "model \\"llama9\\" not found"}', 'model "llama9" not found'),  # Ollama
        (b'{"detail": "Not Found"}', "Not Found"),  # FastAPI
        (b'{"object": "error", "message": "bad temp", "code": 400}', "bad temp"),  # vLLM
        (b"upstream connect error", "upstream connect error"),
        (b"", "(empty body)"),
    ],
)
def test_upstream_message_shapes(raw: bytes, message: str) -> None:
    assert (
        http_error(400, raw, {}, "dep").message == f"upstream 'dep' rejected the request: {message}"
    )


def test_retry_after_headers() -> None:
    assert http_error(429, b"", {"Retry-After": "12"}, "d").headers == {"Retry-After": "12"}
    assert http_error(429, b"", {"retry-after-ms": "1500"}, "d").headers == {"Retry-After": "2"}
    assert http_error(503, b"", {"Retry-After": "5"}, "d").headers == {"Retry-After": "5"}
    assert http_error(500, b"", {"Retry-After": "5"}, "d").headers == {}


def test_client_errors() -> None:
    refused = aiohttp.ClientConnectorError(
        aiohttp.client_reqrep.ConnectionKey("up.test", 8000, False, True, None, None, None),
        ConnectionRefusedError(111, "Connection refused"),
    )
    cases: list[tuple[BaseException, int, str]] = [
        (refused, 502, "upstream_unavailable"),
        (aiohttp.ServerDisconnectedError(), 502, "upstream_unavailable"),
        (aiohttp.ClientOSError(104, "Connection reset by peer"), 502, "upstream_unavailable"),
        (aiohttp.SocketTimeoutError(), 504, "upstream_timeout"),
        (aiohttp.ConnectionTimeoutError(), 504, "upstream_timeout"),
        (TimeoutError(), 504, "upstream_timeout"),
        (aiohttp.ClientPayloadError("cut"), 502, "upstream_stream_truncated"),
    ]
    for exc, status, code in cases:
        err = client_error(exc, DEP)
        assert isinstance(err, ApiError)
        assert (err.status, err.type, err.code) == (status, "server_error", code), exc
        assert "'dep'" in err.message and "up.test:8000" in err.message
        assert "sk-x" not in err.message and "pw" not in err.message


def test_urls() -> None:
    assert origin("https://api.openai.com/v1") == "https://api.openai.com:443"
    assert origin("http://localhost:11434/v1/") == "http://localhost:11434"
    assert host_of("http://user:pw@up.test:8000/v1") == "up.test:8000"
    assert completions_url("http://h/v1/") == "http://h/v1/chat/completions"
    assert completions_url("http://h/v1/chat/completions") == "http://h/v1/chat/completions"


async def test_pool_shares_sessions_per_origin_and_limit() -> None:
    pool = HttpPool()
    a = Deployment(name="a", provider="openai-chat", upstream_model="m", base_url="http://h:1/v1")
    b = Deployment(name="b", provider="openai-chat", upstream_model="n", base_url="http://h:1/v1/")
    c = Deployment(
        name="c",
        provider="openai-chat",
        upstream_model="n",
        base_url="http://h:1/v1",
        max_connections=4,
    )
    sa, sb, sc = pool.session(a), pool.session(b), pool.session(c)
    assert sa is sb and sa is not sc
    assert isinstance(sa.cookie_jar, aiohttp.DummyCookieJar)
    assert sc.connector is not None and sc.connector.limit == 4
    await pool.aclose()
    assert sa.closed and sc.closed
    assert pool.session(a) is not sa  # a new one after close
    await pool.aclose()
