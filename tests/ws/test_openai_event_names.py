"""``[endpoints.responses] event_names = "openai"`` on the socket: reasoning text arrives under
OpenAI's event names (``response.reasoning_text.delta`` / ``.done``),
every other event as the spec names it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import chat_model_config
from tests.fakes import openai_chat_upstream as chat
from tests.fakes.openai_chat_upstream import FakeOpenAIChat
from tests.ws.conftest import create, ws_connect
from tests.ws.inproc import InProcessServer

CONFIG = '[endpoints]\nresponses = { enabled = true, event_names = "openai" }\n'


@pytest.fixture(scope="module")
def openai_names(fake_chat: FakeOpenAIChat) -> Iterator[InProcessServer]:
    with InProcessServer(
        CONFIG + chat_model_config(fake_chat.base_url, capabilities="{ reasoning = true }")
    ) as running:
        yield running


async def test_reasoning_text_under_openai_names(
    openai_names: InProcessServer, fake_chat: FakeOpenAIChat
) -> None:
    fake_chat.reset()
    fake_chat.enqueue(chat.Script(content="Paris.", reasoning="The capital of France is Paris."))
    async with ws_connect(openai_names) as ws:
        events = await create(ws, model="fake-chat", input="capital of France?")
    types = [event["type"] for event in events]
    assert "response.reasoning_text.delta" in types and "response.reasoning_text.done" in types
    assert not any(kind.startswith("response.reasoning.") for kind in types)
    done = next(event for event in events if event["type"] == "response.reasoning_text.done")
    deltas = "".join(
        event["delta"] for event in events if event["type"] == "response.reasoning_text.delta"
    )
    assert done["text"] == deltas == "The capital of France is Paris."
    assert types[-1] == "response.completed" and "response.output_text.done" in types
