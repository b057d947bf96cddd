"""WebSocket mode of /v1/responses, end to end over a real socket (``websockets`` client)."""

from __future__ import annotations

import asyncio

import httpx
import orjson
import pytest
from websockets.exceptions import ConnectionClosedOK, InvalidStatus

from orgate.server.websocket import WebSocketSettings
from tests.fakes.openai_chat_upstream import FakeOpenAIChat
from tests.support.samples import output_text
from tests.support.spec import check_events, check_sse, validate, validate_event
from tests.ws.conftest import create, recv, send, until_terminal, ws_connect
from tests.ws.inproc import InProcessServer


def final_text(events: list[dict]) -> str:
    return output_text(events[-1]["response"])


def check_ws_events(events: list[dict]) -> None:
    for event in events:
        validate_event(event)
    check_events(events)


async def test_same_events_as_sse(app_server: InProcessServer) -> None:
    body = {
        "model": "orgate/echo",
        "input": "orgate:reason tell me about websockets please",
        "metadata": {"k": "v"},
    }
    async with httpx.AsyncClient(
        base_url=app_server.url, headers=app_server.headers(), timeout=20
    ) as http:
        raw = (await http.post("/v1/responses", json={**body, "stream": True})).content
    sse = check_sse(raw)
    async with ws_connect(app_server) as ws:
        events = await create(ws, **body)
    check_ws_events(events)
    assert [e["type"] for e in events] == [e["type"] for e in sse]
    assert [e["sequence_number"] for e in events] == [e["sequence_number"] for e in sse]
    assert final_text(events) == final_text(sse) == "orgate:reason tell me about websockets please"
    assert events[-1]["response"]["metadata"] == {"k": "v"}


async def test_several_responses_one_after_another(app_server: InProcessServer) -> None:
    async with ws_connect(app_server) as ws:
        ids = []
        for n in range(3):
            events = await create(ws, model="orgate/echo", input=f"turn number {n}", store=False)
            check_ws_events(events)
            assert events[-1]["type"] == "response.completed"
            assert final_text(events) == f"turn number {n}"
            ids.append(events[-1]["response"]["id"])
        assert len(set(ids)) == 3


async def test_second_create_while_one_is_running_gets_an_error(
    app_server: InProcessServer,
) -> None:
    async with ws_connect(app_server) as ws:
        await send(
            ws,
            {
                "type": "response.create",
                "model": "orgate/echo",
                "input": "orgate:delay=30 one two three four five six",
            },
        )
        first = await recv(ws)
        assert first["type"] == "response.created"
        await send(ws, {"type": "response.create", "model": "orgate/echo", "input": "second"})
        errors: list[dict] = []
        events = [first, *await until_terminal(ws, errors=errors)]
        assert len(errors) == 1
        validate("WebSocketErrorEvent", errors[0])
        assert errors[0]["status"] == 409 and errors[0]["error"]["code"] == "response_in_progress"
        check_ws_events(events)
        assert events[-1]["type"] == "response.completed"
        assert final_text(events) == "orgate:delay=30 one two three four five six"
        # and the socket takes the next response
        after = await create(ws, model="orgate/echo", input="third")
        assert final_text(after) == "third"


async def test_store_false_continuation_from_the_connection_cache(
    app_server: InProcessServer, fake: FakeOpenAIChat
) -> None:
    async with ws_connect(app_server) as ws:
        first = await create(ws, model="fake-chat", input="my name is Ada", store=False)
        assert first[-1]["response"]["store"] is False
        first_id = first[-1]["response"]["id"]
        second = await create(
            ws,
            model="fake-chat",
            input="what is my name?",
            store=False,
            previous_response_id=first_id,
        )
        check_ws_events(second)
        assert second[-1]["type"] == "response.completed"
        assert second[-1]["response"]["previous_response_id"] == first_id
        third = await create(
            ws,
            model="fake-chat",
            input="and again?",
            store=False,
            previous_response_id=second[-1]["response"]["id"],
        )
        assert third[-1]["type"] == "response.completed"
    messages = fake.requests[-1].body["messages"]
    contents = [(m["role"], m["content"]) for m in messages]
    assert contents[0] == ("user", "my name is Ada")
    assert contents[2] == ("user", "what is my name?")
    assert contents[4] == ("user", "and again?")
    assert [role for role, _ in contents] == ["user", "assistant", "user", "assistant", "user"]


async def test_previous_response_not_found_after_reconnect(app_server: InProcessServer) -> None:
    async with ws_connect(app_server) as ws:
        first = await create(ws, model="orgate/echo", input="remember me", store=False)
    async with ws_connect(app_server) as ws:
        await send(
            ws,
            {
                "type": "response.create",
                "model": "orgate/echo",
                "input": "hi",
                "store": False,
                "previous_response_id": first[-1]["response"]["id"],
            },
        )
        error = await recv(ws)
        validate("WebSocketErrorEvent", error)
        assert error["error"]["code"] == "previous_response_not_found"
        assert error["error"]["param"] == "previous_response_id"


@pytest.mark.parametrize("directive", ["orgate:fail", "orgate:fail-mid"])
async def test_failed_continuation_evicts_the_previous_response(
    app_server: InProcessServer, directive: str
) -> None:
    async with ws_connect(app_server) as ws:
        first = await create(ws, model="orgate/echo", input="base turn", store=False)
        first_id = first[-1]["response"]["id"]
        await send(
            ws,
            {
                "type": "response.create",
                "model": "orgate/echo",
                "input": f"{directive} a b c d",
                "store": False,
                "previous_response_id": first_id,
            },
        )
        if directive == "orgate:fail":
            error = await recv(ws)
            validate("WebSocketErrorEvent", error)
            assert error["status"] == 500
        else:
            events = await until_terminal(ws)
            check_ws_events(events)
            assert events[-1]["type"] == "response.failed"
        await send(
            ws,
            {
                "type": "response.create",
                "model": "orgate/echo",
                "input": "retry",
                "store": False,
                "previous_response_id": first_id,
            },
        )
        error = await recv(ws)
        validate("WebSocketErrorEvent", error)
        assert error["error"]["code"] == "previous_response_not_found"


async def test_request_errors_are_envelopes_and_the_socket_stays_usable(
    app_server: InProcessServer,
) -> None:
    bad = [
        ("not json", 400, "invalid_json"),
        ("[1, 2]", 400, "invalid_type"),
        ('{"model": "orgate/echo"}', 400, "missing_required_parameter"),
        ('{"type": "response.cancel"}', 400, "unknown_event_type"),
        (
            '{"type": "response.create", "model": "orgate/echo", "input": "x", "stream": false}',
            400,
            "unsupported_parameter",
        ),
        (
            '{"type": "response.create", "model": "orgate/echo", "input": "x", '
            '"background": false}',
            400,
            "unsupported_parameter",
        ),
        (
            '{"type": "response.create", "model": "orgate/echo", "input": "x", '
            '"stream_options": {}}',
            400,
            "unsupported_parameter",
        ),
        ('{"type": "response.create", "model": "orgate/echo", "input": 12}', 400, "invalid_type"),
        ('{"type": "response.create", "input": "x"}', 400, "missing_required_parameter"),
        ('{"type": "response.create", "model": "nope", "input": "x"}', 404, "model_not_found"),
        (
            '{"type": "response.create", "model": "orgate/echo", "input": "x", "bogus": 1}',
            400,
            "unknown_parameter",
        ),
    ]
    async with ws_connect(app_server) as ws:
        for raw, status, code in bad:
            await ws.send(raw)
            error = await recv(ws)
            validate("WebSocketErrorEvent", error)
            assert (error["status"], error["error"]["code"]) == (status, code), raw
        await ws.send(b'{"type": "response.create", "model": "orgate/echo", "input": "still here"}')
        events = await until_terminal(ws)
        assert final_text(events) == "still here"


async def test_bad_or_missing_key_refuses_the_handshake(app_server: InProcessServer) -> None:
    with pytest.raises(InvalidStatus) as refused:
        async with ws_connect(app_server, key="wrong"):
            pass
    assert refused.value.response.status_code == 401
    assert orjson.loads(refused.value.response.body)["error"]["code"] == "invalid_api_key"
    from websockets.asyncio.client import connect

    with pytest.raises(InvalidStatus) as missing:
        async with connect(app_server.ws_url, proxy=None):
            pass
    assert missing.value.response.status_code == 401


async def test_two_different_keys_refuse_the_handshake(app_server: InProcessServer) -> None:
    """As on HTTP: a handshake with two different Authorization headers is refused, whichever
    comes first (it took the first one)."""
    from websockets.asyncio.client import connect

    good = app_server.headers()["Authorization"]
    for pair in ((good, "Bearer wrong"), ("Bearer wrong", good)):
        headers = [("Authorization", pair[0]), ("Authorization", pair[1])]
        with pytest.raises(InvalidStatus) as refused:
            async with connect(app_server.ws_url, additional_headers=headers, proxy=None):
                pass
        assert refused.value.response.status_code == 401
        assert orjson.loads(refused.value.response.body)["error"]["code"] == "invalid_api_key"
    same = [("Authorization", good), ("Authorization", good)]
    async with connect(app_server.ws_url, additional_headers=same, proxy=None) as ws:
        await send(
            ws, {"type": "response.create", "model": "orgate/echo", "input": "twice the same key"}
        )
        assert final_text(await until_terminal(ws)) == "twice the same key"


def test_plain_get_is_405_in_error_shape(app_server: InProcessServer) -> None:
    response = httpx.get(f"{app_server.url}/v1/responses", headers=app_server.headers())
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"


async def test_connection_lifetime_limit() -> None:
    with InProcessServer(ws=WebSocketSettings(max_connection_seconds=1, drain_seconds=5)) as server:
        async with ws_connect(server) as ws:
            events = await create(ws, model="orgate/echo", input="quick one")
            assert events[-1]["type"] == "response.completed"
            error = await recv(ws, timeout=5)
            validate("WebSocketErrorEvent", error)
            assert error["error"]["code"] == "websocket_connection_limit_reached"
            with pytest.raises(ConnectionClosedOK):
                await asyncio.wait_for(ws.recv(), 5)


async def test_disabled_websocket_mode_is_426() -> None:
    with InProcessServer(ws=WebSocketSettings(enabled=False)) as server:
        with pytest.raises(InvalidStatus) as refused:
            async with ws_connect(server):
                pass
        assert refused.value.response.status_code == 426
        assert orjson.loads(refused.value.response.body)["error"]["code"] == "websocket_disabled"
        # HTTP still works
        response = httpx.post(
            f"{server.url}/v1/responses",
            headers=server.headers(),
            json={"model": "orgate/echo", "input": "hi"},
        )
        assert response.status_code == 200


async def test_stored_continuation(app_server: InProcessServer) -> None:
    assert app_server.services.responses.store is not None  # the test server runs with its store
    async with ws_connect(app_server) as ws:
        first = await create(ws, model="orgate/echo", input="stored turn", store=True)
    async with ws_connect(app_server) as ws:  # a new connection: only the store knows it
        second = await create(
            ws, model="orgate/echo", input="next", previous_response_id=first[-1]["response"]["id"]
        )
        assert second[-1]["type"] == "response.completed"
        assert (
            second[-1]["response"]["usage"]["input_tokens"]
            > first[-1]["response"]["usage"]["input_tokens"]
        )
