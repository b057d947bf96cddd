"""No secret in any log line of a real ``orgate serve`` at ``log_level = "debug"``.

One server per log format (text, JSON), logs at debug with the access log on,
two upstreams (openai-chat and
anthropic) whose API keys and custom header values come from ``env:NAME``; it is driven over
HTTP (JSON and SSE), WebSocket, with a wrong key, extra credential headers and an upstream
that echoes what it was sent in an error. Then every line the process wrote is searched for
each secret used.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import orjson
import pytest
import websockets

from tests.fakes.anthropic_upstream import FakeAnthropic
from tests.fakes.openai_chat_upstream import FakeOpenAIChat, http_error
from tests.server_process import OrgateServer

CLIENT_KEY = "sk-client-SECRET-a1b2c3d4"
WRONG_KEY = "sk-wrong-SECRET-e5f6a7b8"
CHAT_KEY = "sk-chat-upstream-SECRET-1111"
ANTHROPIC_KEY = "sk-ant-upstream-SECRET-2222"
HEADER_VALUE = "tenant-token-SECRET-3333"
COOKIE_VALUE = "cookie-SECRET-4444"
X_API_KEY = "xapikey-SECRET-5555"
SECRETS = (CLIENT_KEY, WRONG_KEY, CHAT_KEY, ANTHROPIC_KEY, HEADER_VALUE, COOKIE_VALUE, X_API_KEY)


def config(chat_url: str, anthropic_url: str, log_format: str) -> str:
    return f"""
[server]
log_level = "debug"
log_format = "{log_format}"
access_log = true

[[models]]
name = "up-chat"
provider = "openai-chat"
base_url = "{chat_url}"
api_key = "env:CHAT_KEY"
headers = {{ "X-Tenant-Token" = "env:TENANT_TOKEN" }}

[[models]]
name = "up-anthropic"
provider = "anthropic"
base_url = "{anthropic_url}"
api_key = "env:ANTHROPIC_KEY"
headers = {{ "X-Tenant-Token" = "env:TENANT_TOKEN" }}
"""


@pytest.fixture(scope="module")
def upstreams() -> Iterator[tuple[FakeOpenAIChat, FakeAnthropic]]:
    with FakeOpenAIChat.start_in_thread() as chat, FakeAnthropic.start_in_thread() as anthropic:
        yield chat, anthropic


@pytest.fixture(scope="module", params=["text", "json"])
def server(
    upstreams: tuple[FakeOpenAIChat, FakeAnthropic], request: pytest.FixtureRequest
) -> Iterator[OrgateServer]:
    chat, anthropic = upstreams
    env = {"CHAT_KEY": CHAT_KEY, "ANTHROPIC_KEY": ANTHROPIC_KEY, "TENANT_TOKEN": HEADER_VALUE}
    text = config(chat.base_url, anthropic.base_url, request.param)
    with OrgateServer(text, api_key=CLIENT_KEY, env=env) as server:
        yield server


def headers(key: str = CLIENT_KEY) -> dict[str, str]:
    return {
        "Authorization": f"Bearer {key}",
        "Cookie": f"session={COOKIE_VALUE}; other=1",
        "X-Api-Key": X_API_KEY,
        "Api-Key": X_API_KEY,
    }


def post(server: OrgateServer, body: dict, key: str = CLIENT_KEY) -> httpx.Response:
    return httpx.post(f"{server.url}/v1/responses", json=body, headers=headers(key), timeout=60)


async def websocket_turn(server: OrgateServer) -> list[dict]:
    url = server.url.replace("http://", "ws://") + "/v1/responses"
    events = []
    async with websockets.connect(url, additional_headers=headers()) as ws:
        await ws.send(
            orjson.dumps({"type": "response.create", "model": "up-chat", "input": "hi"}).decode()
        )
        while True:
            event = orjson.loads(await ws.recv())
            events.append(event)
            if event["type"] in ("response.completed", "response.failed", "error"):
                return events


def test_no_secret_in_any_log_line_at_debug(
    server: OrgateServer, upstreams: tuple[FakeOpenAIChat, FakeAnthropic]
) -> None:
    chat, anthropic = upstreams
    chat.reset()
    anthropic.reset()
    answers = [
        post(server, {"model": "up-chat", "input": "hi"}),
        post(server, {"model": "up-anthropic", "input": "hi", "stream": True}),
        post(server, {"model": "up-chat", "input": "hi"}, key=WRONG_KEY),
    ]
    assert [a.status_code for a in answers] == [200, 200, 401]
    events = asyncio.run(websocket_turn(server))
    assert events[-1]["type"] == "response.completed"
    # the upstreams got their credentials, from the environment
    assert chat.requests[0].headers["Authorization"] == f"Bearer {CHAT_KEY}"
    assert chat.requests[0].headers["X-Tenant-Token"] == HEADER_VALUE
    assert anthropic.requests[0].headers["x-api-key"] == ANTHROPIC_KEY
    assert anthropic.requests[0].headers["X-Tenant-Token"] == HEADER_VALUE

    # an upstream that echoes what it was sent: the client gets the message without it
    chat.enqueue(
        http_error(
            400, f"bad token {HEADER_VALUE} for key {CHAT_KEY}", type="invalid_request_error"
        )
    )
    echoed = post(server, {"model": "up-chat", "input": "hi"})
    assert echoed.status_code == 400
    message = echoed.json()["error"]["message"]
    assert HEADER_VALUE not in message and CHAT_KEY not in message
    assert message.count("[redacted]") == 2

    log = server.output()
    assert "authorization: [redacted]" in log  # the handshake's headers were logged, redacted
    leaks = [(secret, line) for line in log.splitlines() for secret in SECRETS if secret in line]
    assert leaks == []
