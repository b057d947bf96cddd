"""WebSocket mode and compaction through a real ``orgate serve``."""

from __future__ import annotations

import asyncio

import httpx
import orjson
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosedOK, InvalidStatus

from tests.server_process import OrgateServer
from tests.support.spec import validate, validate_event


async def test_serve_websocket_lifetime_and_compaction() -> None:
    with OrgateServer(
        "[websocket]\nmax_connection_seconds = 2\n",
        env={"ORGATE_COMPACTION_SECRET": "a test secret of enough length"},
    ) as server:
        url = server.url.replace("http", "ws") + "/v1/responses"
        async with connect(url, additional_headers=server.headers(), proxy=None) as ws:
            await ws.send(
                orjson.dumps(
                    {
                        "type": "response.create",
                        "model": "orgate/echo",
                        "input": "hello socket",
                        "store": False,
                    }
                ).decode()
            )
            while True:
                event = orjson.loads(await asyncio.wait_for(ws.recv(), 10))
                validate_event(event)
                if event["type"] == "response.completed":
                    break
            error = orjson.loads(await asyncio.wait_for(ws.recv(), 10))
            validate("WebSocketErrorEvent", error)
            assert error["error"]["code"] == "websocket_connection_limit_reached"
            with pytest.raises(ConnectionClosedOK):
                await asyncio.wait_for(ws.recv(), 5)
        with httpx.Client(base_url=server.url, headers=server.headers(), timeout=20) as http:
            compacted = http.post(
                "/v1/responses/compact",
                json={
                    "model": "orgate/echo",
                    "input": [
                        {"role": "user", "content": "one"},
                        {"role": "assistant", "content": "1"},
                        {"role": "user", "content": "two"},
                        {"role": "assistant", "content": "2"},
                        {"role": "user", "content": "three"},
                    ],
                },
            )
            assert compacted.status_code == 200, compacted.text
            validate("CompactResource", compacted.json())
            follow = http.post(
                "/v1/responses",
                json={
                    "model": "orgate/echo",
                    "input": [*compacted.json()["output"], {"role": "user", "content": "four"}],
                },
            )
            assert follow.status_code == 200, follow.text


async def test_serve_websocket_disabled_is_426() -> None:
    with OrgateServer("[websocket]\nenabled = false\n") as server:
        with pytest.raises(InvalidStatus) as refused:
            async with connect(
                server.url.replace("http", "ws") + "/v1/responses",
                additional_headers=server.headers(),
                proxy=None,
            ):
                pass
        assert refused.value.response.status_code == 426


async def test_serve_websocket_rate_limit_per_key() -> None:
    config = '[auth]\napi_keys = [{ name = "limited", key = "rl-key", rpm = 1 }]\n'
    with OrgateServer(config, api_key="rl-key", env={"ORGATE_API_KEY": ""}) as server:
        url = server.url.replace("http", "ws") + "/v1/responses"
        async with connect(url, additional_headers=server.headers(), proxy=None) as ws:
            create = orjson.dumps(
                {"type": "response.create", "model": "orgate/echo", "input": "one", "store": False}
            ).decode()
            await ws.send(create)
            while (
                orjson.loads(await asyncio.wait_for(ws.recv(), 10))["type"] != "response.completed"
            ):
                pass
            await ws.send(create)
            error = orjson.loads(await asyncio.wait_for(ws.recv(), 10))
            validate("WebSocketErrorEvent", error)
            assert error["status"] == 429
