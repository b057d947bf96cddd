"""Black-box: ``generate: false`` over HTTP and WebSocket, through the real ``openai`` SDK.

A stored response with no output and no tokens, for which no upstream is called (counted at
the fakes), whose id the next turn continues from."""

from __future__ import annotations

import asyncio
from typing import Any

import openai
import orjson
import pytest
from websockets.asyncio.client import connect

from tests.clients_api.conftest import MODELS, upstream_saw
from tests.fakes._base import LoopbackFake
from tests.server_process import OrgateServer
from tests.support.spec import check_events, check_sse, validate


def assert_prepared(response: Any) -> None:
    assert response.status == "completed" and response.output == []
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (0, 0)


@pytest.mark.parametrize("model", MODELS)
def test_no_model_call_and_the_id_chains(
    client: openai.OpenAI, ups: dict[str, LoopbackFake], model: str
) -> None:
    prepared = client.responses.create(
        model=model,
        input="The code word is heron.",
        instructions="Be brief.",
        extra_body={"generate": False},
    )
    assert_prepared(prepared)
    validate("ResponseResource", prepared.model_dump(mode="json", exclude_unset=True))
    assert upstream_saw(ups, model) == []  # no upstream call
    assert client.responses.retrieve(prepared.id).output == []  # stored
    items = client.responses.input_items.list(prepared.id)
    assert [i.content[0].text for i in items.data] == ["The code word is heron."]
    follow = client.responses.create(
        model=model, input="What is the code word?", previous_response_id=prepared.id
    )
    assert follow.previous_response_id == prepared.id and follow.output_text
    seen = upstream_saw(ups, model)
    if seen:
        assert len(seen) == 1 and "The code word is heron." in seen[0]
    else:  # the built-in model read both messages: 5 + 5 words
        assert follow.usage is not None and follow.usage.input_tokens == 10


def test_streamed_and_in_a_conversation(
    client: openai.OpenAI, ups: dict[str, LoopbackFake], gateway: OrgateServer
) -> None:
    conv = client.conversations.create()
    with client.responses.stream(
        model="chat", input="prepared", conversation=conv.id, extra_body={"generate": False}
    ) as stream:
        events = [event.type for event in stream]
        final = stream.get_final_response()
    assert events == ["response.created", "response.in_progress", "response.completed"]
    assert_prepared(final)
    assert upstream_saw(ups, "chat") == []
    listed = list(client.conversations.items.list(conv.id))
    assert [i.content[0].text for i in listed] == ["prepared"]
    raw = openai.OpenAI(base_url=gateway.base_url, api_key="key-a", max_retries=0)
    frames = raw.responses.with_raw_response.create(
        model="orgate/echo", input="raw", stream=True, extra_body={"generate": False}
    )
    check_sse(frames.http_response.read())


def test_generate_must_be_a_boolean(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="orgate/echo", input="x", extra_body={"generate": "no"})
    assert caught.value.body["param"] == "generate"  # type: ignore[index]


@pytest.mark.parametrize("model", MODELS)
async def test_over_a_websocket_connection(
    gateway: OrgateServer, ups: dict[str, LoopbackFake], model: str
) -> None:
    """A connection warmed with ``generate: false`` (Codex does), then continued on it."""
    url = f"ws://127.0.0.1:{gateway.port}/v1/responses"
    headers = {"Authorization": "Bearer key-a"}
    async with connect(url, additional_headers=headers, proxy=None) as ws:

        async def turn(**body: Any) -> list[dict[str, Any]]:
            await ws.send(orjson.dumps({"type": "response.create", **body}).decode())
            events = []
            while True:
                event = orjson.loads(await asyncio.wait_for(ws.recv(), 30))
                events.append(event)
                if event["type"] in ("response.completed", "response.failed", "error"):
                    return events

        warm = await turn(model=model, input="warm words here", generate=False)
        check_events(warm)
        done = warm[-1]["response"]
        assert done["status"] == "completed" and done["output"] == []
        assert done["usage"]["output_tokens"] == 0
        assert upstream_saw(ups, model) == []
        answer = await turn(model=model, input="now answer", previous_response_id=done["id"])
        assert answer[-1]["type"] == "response.completed"
        assert answer[-1]["response"]["previous_response_id"] == done["id"]
        seen = upstream_saw(ups, model)
        if seen:
            assert len(seen) == 1 and "warm words here" in seen[0]
        # store: false too (the connection's own cache chains it)
        unstored = await turn(model=model, input="kept here", generate=False, store=False)
        last = await turn(
            model=model, input="and on", previous_response_id=unstored[-1]["response"]["id"]
        )
        assert last[-1]["type"] == "response.completed"
        if seen:
            assert "kept here" in upstream_saw(ups, model)[-1]
