"""Assistant ``phase`` (commentary / final_answer): accepted, kept through storage and replay,
dropped cleanly by openai-chat."""

from __future__ import annotations

from typing import Any

import httpx
from pydantic import TypeAdapter

from orgate.neutral import ModelRequest
from orgate.protocol import ItemParam
from orgate.providers.openai_chat.mapping import ChatOptions, map_messages
from tests.fakes.openai_chat_upstream import FakeOpenAIChat
from tests.ws.conftest import create, ws_connect
from tests.ws.inproc import InProcessServer

PHASED: list[dict[str, Any]] = [
    {"role": "user", "content": "plan it"},
    {"role": "assistant", "content": "thinking out loud", "phase": "commentary"},
    {"role": "assistant", "content": "the plan", "phase": "final_answer"},
    {"role": "user", "content": "go on"},
]


def test_openai_chat_mapping_drops_phase() -> None:
    items = TypeAdapter(list[ItemParam]).validate_python(PHASED)
    assert items[1].phase == "commentary"
    messages = map_messages(ModelRequest(model="m", input=items), ChatOptions())
    assert messages[1] == {"role": "assistant", "content": "thinking out loud"}
    assert all("phase" not in m for m in messages)


def test_phased_input_reaches_openai_chat_without_phase(
    app_server: InProcessServer, fake: FakeOpenAIChat
) -> None:
    with httpx.Client(base_url=app_server.url, headers=app_server.headers(), timeout=20) as http:
        response = http.post("/v1/responses", json={"model": "fake-chat", "input": PHASED})
    assert response.status_code == 200, response.text
    sent = fake.requests[-1].body["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "assistant", "user"]
    assert all("phase" not in m for m in sent)


def test_phase_round_trips_through_previous_response_id(app_server: InProcessServer) -> None:
    assert app_server.services.responses.store is not None  # the test server runs with its store
    with httpx.Client(base_url=app_server.url, headers=app_server.headers(), timeout=20) as http:
        first = http.post("/v1/responses", json={"model": "orgate/echo", "input": PHASED}).json()
        stored = http.get(f"/v1/responses/{first['id']}/input_items", params={"order": "asc"})
        assert stored.status_code == 200, stored.text
        phases = [
            item.get("phase") for item in stored.json()["data"] if item.get("role") == "assistant"
        ]
        assert phases == ["commentary", "final_answer"]
        second = http.post(
            "/v1/responses",
            json={"model": "orgate/echo", "input": "more", "previous_response_id": first["id"]},
        )
        assert second.status_code == 200 and second.json()["status"] == "completed"


async def test_phase_in_the_connection_cache(
    app_server: InProcessServer, fake: FakeOpenAIChat
) -> None:
    async with ws_connect(app_server) as ws:
        first = await create(ws, model="fake-chat", input=PHASED, store=False)
        second = await create(
            ws,
            model="fake-chat",
            input="next",
            store=False,
            previous_response_id=first[-1]["response"]["id"],
        )
    assert second[-1]["type"] == "response.completed"
    assert [m["role"] for m in fake.requests[-1].body["messages"]] == [
        "user",
        "assistant",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
