"""WebSocket connection caps of a real ``orgate serve``: per key, per process,
and a descriptor reserve.

One key once held 1,003 idle sockets, exhausted the process's file descriptors, and
``/healthz`` was refused while they stayed open. Here the caps refuse the handshake with an
HTTP status, other keys and plain HTTP are served at the cap, and a process whose open-files
limit is lowered (``prlimit``) keeps descriptors for ``/healthz`` however many sockets a
client opens.
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
from collections.abc import AsyncIterator, Iterator

import httpx
import orjson
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import InvalidStatus

from tests.server_process import OrgateServer

KEY_A = "sk-conn-a-0123456789"
KEY_B = "sk-conn-b-0123456789"
CONFIG = f"""
[auth]
api_keys = [
  {{ name = "a", key = "{KEY_A}" }},
  {{ name = "b", key = "{KEY_B}" }},
]

[websocket]
max_connections = 5
max_connections_per_key = 3
"""


def ws_url(server: OrgateServer) -> str:
    return server.url.replace("http://", "ws://") + "/v1/responses"


def open_socket(server: OrgateServer, key: str) -> connect:
    return connect(
        ws_url(server),
        additional_headers={"Authorization": f"Bearer {key}"},
        proxy=None,
        open_timeout=30,
    )


async def refusal(server: OrgateServer, key: str) -> tuple[int, dict]:
    with pytest.raises(InvalidStatus) as refused:
        async with open_socket(server, key):
            pass
    return refused.value.response.status_code, orjson.loads(refused.value.response.body)["error"]


def served(server: OrgateServer, key: str) -> tuple[int, int]:
    health = httpx.get(f"{server.url}/healthz", timeout=30).status_code
    created = httpx.post(
        f"{server.base_url}/responses",
        json={"model": "orgate/echo", "input": "hi"},
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
    ).status_code
    return health, created


@contextlib.asynccontextmanager
async def sockets(
    server: OrgateServer, key: str, count: int
) -> AsyncIterator[list[ClientConnection]]:
    async with contextlib.AsyncExitStack() as stack:
        yield [await stack.enter_async_context(open_socket(server, key)) for _ in range(count)]


@pytest.fixture(scope="module")
def server() -> Iterator[OrgateServer]:
    with OrgateServer(CONFIG, api_key="") as running:
        yield running


def test_caps_per_key_and_per_process(server: OrgateServer) -> None:
    async def scenario() -> None:
        async with sockets(server, KEY_A, 3):
            status, error = await refusal(server, KEY_A)
            assert (status, error["code"], error["type"]) == (
                429,
                "too_many_websocket_connections",
                "rate_limit_error",
            )
            async with sockets(server, KEY_B, 2) as of_b:
                status, error = await refusal(server, KEY_B)  # 5 open: the process's cap
                assert (status, error["code"]) == (503, "websocket_capacity_reached")
                assert served(server, KEY_B) == (200, 200)  # HTTP is not counted
                await of_b[0].close()
                for _ in range(600):  # the server sees the close soon after: a place is free again
                    with contextlib.suppress(InvalidStatus):
                        async with open_socket(server, KEY_B):
                            return
                    await asyncio.sleep(0.05)
                raise AssertionError("a closed socket's place was not freed")

    asyncio.run(scenario())


def test_a_low_open_files_limit_keeps_descriptors_for_http() -> None:
    """With 256 descriptors, sockets are refused well before the process runs out:
    /healthz is served."""
    with OrgateServer(
        CONFIG.replace("max_connections = 5", "max_connections = 100000").replace(
            "max_connections_per_key = 3", "max_connections_per_key = 100000"
        ),
        api_key="",
    ) as running:
        assert running.proc is not None
        resource.prlimit(running.proc.pid, resource.RLIMIT_NOFILE, (256, 256))
        expected = 256 - 128  # a quarter of the limit, but at least 128, is kept

        async def scenario() -> None:
            async with sockets(running, KEY_A, expected):
                status, error = await refusal(running, KEY_A)
                assert (status, error["code"]) == (503, "websocket_capacity_reached")
                assert f"maximum of {expected}" in error["message"]
                assert served(running, KEY_B) == (200, 200)

        asyncio.run(scenario())
