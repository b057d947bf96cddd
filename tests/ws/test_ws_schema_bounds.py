"""A hostile schema over a WebSocket gets the same 400 error event as over HTTP,
and the socket serves on."""

from __future__ import annotations

from tests.ws.conftest import create, recv, send, ws_connect
from tests.ws.inproc import InProcessServer


async def test_a_schema_past_its_bounds_is_an_error_event_naming_the_keyword() -> None:
    hostile = {
        "type": "object",
        "properties": {"x": {"type": "array", "minItems": 1_000_000_000}},
        "required": ["x"],
    }
    with InProcessServer() as server:
        async with ws_connect(server) as ws:
            await send(
                ws,
                {
                    "type": "response.create",
                    "model": "orgate/echo",
                    "input": "hi",
                    "text": {"format": {"type": "json_schema", "name": "o", "schema": hostile}},
                },
            )
            error = await recv(ws)
            assert error["type"] == "error" and error["status"] == 400
            assert error["error"]["code"] == "schema_too_complex"
            assert error["error"]["param"] == "text.format.schema.properties.x.minItems"
            assert "limits.max_schema_min_items" in error["error"]["message"]
            assert (await create(ws, model="orgate/echo", input="again"))[-1][
                "type"
            ] == "response.completed"
