"""Black-box: the Python agent frameworks real users point at a Responses server,
against ``orgate serve``.

The OpenAI Agents SDK (``openai-agents``: ``OpenAIResponsesModel`` over HTTP and
``OpenAIResponsesWSModel`` over orgate's WebSocket mode) and ``pydantic-ai``
(``OpenAIResponsesModel``) run in-process against a real ``orgate serve`` that serves the
built-in ``orgate/echo`` and one model per fake upstream kind (``chat`` → openai-chat,
``anth`` → anthropic, ``resp`` → openai-responses; tests/support/upstreams.py). The fakes
answer with text, tool calls and reasoning (summaries, encrypted content, Anthropic
thinking with signatures), and the tests read what each upstream received on the next turn.

Regressions (each failed before its fix):

- a reasoning item's ``content`` (``reasoning_text`` parts, what orgate's own output carries
  for Anthropic thinking and chat ``reasoning_content``) replayed as input by the SDKs was a
  400 (``engine/input_gate.without_reasoning_text``);
- the Agents SDK's websocket transport always sends ``"stream": true`` in ``response.create``
  (OpenAI accepts it), which orgate refused (``server/websocket``);
- the body's ``user`` (pydantic-ai ``openai_user``: the end user's id to OpenAI) was a session
  key by default, so a stateless client's history was chained twice (400 ``duplicate_call``
  in a tool loop) and concurrent requests of one end user got 409 (``config.SessionSettings``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from agents import (
    Agent,
    ModelSettings,
    OpenAIResponsesModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from agents.model_settings import Reasoning
from agents.models.openai_responses import OpenAIResponsesWSModel
from openai import AsyncOpenAI
from pydantic import BaseModel
from pydantic_ai import Agent as PAgent
from pydantic_ai import NativeOutput
from pydantic_ai.models.openai import OpenAIResponsesModel as PModel
from pydantic_ai.models.openai import OpenAIResponsesModelSettings
from pydantic_ai.providers.openai import OpenAIProvider

from tests.fakes import anthropic_upstream as anth_fake
from tests.fakes import openai_chat_upstream as chat_fake
from tests.fakes import responses_upstream as resp_fake
from tests.fakes._base import LoopbackFake
from tests.server_process import OrgateServer
from tests.support.upstreams import fresh, provider_models

set_tracing_disabled(True)  # no network: nothing may try to export traces

ECHO = "orgate/echo"
SIGNATURE = anth_fake.Script().signature


@pytest.fixture(scope="module")
def server(fakes: dict[str, LoopbackFake]) -> Iterator[OrgateServer]:
    # `user` as a session key off: pydantic-ai's `openai_user` is an end-user id sent with the whole
    # history (docs/configuration.md recommends this setting for such clients).
    with OrgateServer(
        provider_models(fakes, api_key="k", read_timeout=10),
        env={"ORGATE_SESSIONS__USE_USER_FIELD": "false"},
    ) as running:
        yield running


@pytest.fixture
def ups(fakes: dict[str, LoopbackFake]) -> Iterator[dict[str, LoopbackFake]]:
    with fresh(fakes) as clean:
        yield clean


@pytest.fixture
def client(server: OrgateServer) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=server.base_url, api_key=server.api_key, max_retries=0, timeout=20)


@function_tool
def get_weather(city: str) -> str:
    """Get the weather for a city."""
    return f"sunny in {city}"


@function_tool
def get_time(city: str) -> str:
    """Get the local time in a city."""
    return f"noon in {city}"


class Forecast(BaseModel):
    city: str
    degrees: int


def script_tool_turn(ups: dict[str, LoopbackFake], kind: str, *, reasoning: bool = True) -> None:
    """Queue on the ``kind`` fake: a turn calling ``get_weather`` (after reasoning),
    then an answer."""
    fake = ups[kind]
    call = ("get_weather", '{"city":"Paris"}')
    if kind == "resp":
        first = resp_fake.Script(text=None, function_calls=[call])
        if reasoning:
            first.reasoning_summary, first.encrypted_content = "thinking hard", "gAAAA-enc-1"
        fake.enqueue(
            first,
            resp_fake.reasoning("done", "It is sunny.", encrypted="gAAAA-enc-2")
            if reasoning
            else resp_fake.text("It is sunny."),
        )
    elif kind == "chat":
        fake.enqueue(
            chat_fake.tool_calls(
                call, content=None, reasoning="thinking hard" if reasoning else None
            ),
            chat_fake.text("It is sunny.", reasoning="done" if reasoning else None),
        )
    else:
        fake.enqueue(
            anth_fake.Script(
                text=None, thinking="thinking hard" if reasoning else None, tool_uses=[call]
            ),
            anth_fake.thinking("done", "It is sunny.")
            if reasoning
            else anth_fake.text("It is sunny."),
        )


def assert_replayed(ups: dict[str, LoopbackFake], kind: str, *, reasoning: bool = True) -> None:
    """The second upstream request carries the tool loop, and the first turn's reasoning
    (``reasoning``) back in that upstream's form."""
    bodies = ups[kind].bodies
    assert len(bodies) == 2, bodies
    second = bodies[1]
    if not reasoning:
        wire = json.dumps(second)
        assert "sunny in Paris" in wire and "get_weather" in wire
    elif kind == "resp":
        items = second["input"]
        reasoning = [i for i in items if i.get("type") == "reasoning"]
        assert [r.get("encrypted_content") for r in reasoning] == ["gAAAA-enc-1"]
        assert [i["type"] for i in items if i.get("type") != "reasoning"] == [
            "message",
            "function_call",
            "function_call_output",
        ]
    elif kind == "anth":
        assistant = second["messages"][1]
        assert assistant["role"] == "assistant"
        assert assistant["content"][0] == {
            "type": "thinking",
            "thinking": "thinking hard",
            "signature": SIGNATURE,
        }
        assert assistant["content"][1]["type"] == "tool_use"
        assert second["messages"][2]["content"][0]["type"] == "tool_result"
    else:
        assert [m["role"] for m in second["messages"] if m["role"] != "system"] == [
            "user",
            "assistant",
            "tool",
        ]


async def drain(result: Any) -> list[Any]:
    return [event async for event in result.stream_events()]


# --- OpenAI Agents SDK over HTTP ------------------------------------------------------------------


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_streamed"])
@pytest.mark.parametrize("kind", ["resp", "chat", "anth"])
async def test_agents_tool_loop_replays_reasoning(
    client: AsyncOpenAI, ups: dict[str, LoopbackFake], kind: str, streamed: bool
) -> None:
    """The SDK sends the first turn's output back as input: reasoning items with ``content``
    (Anthropic thinking, chat ``reasoning_content``) and ``encrypted_content`` included."""
    script_tool_turn(ups, kind)
    settings = (
        ModelSettings(reasoning=Reasoning(effort="low", summary="auto"))
        if kind != "chat"
        else ModelSettings()
    )
    agent = Agent(
        name="a",
        instructions="Be brief.",
        model=OpenAIResponsesModel(kind, client),
        tools=[get_weather],
        model_settings=settings,
    )
    if streamed:
        result: Any = Runner.run_streamed(agent, "What's the weather in Paris?")
        events = await drain(result)
        names = [getattr(e, "name", None) for e in events if e.type == "run_item_stream_event"]
        assert names[:3] == ["reasoning_item_created", "tool_called", "tool_output"]
    else:
        result = await Runner.run(agent, "What's the weather in Paris?")
    assert result.final_output == "It is sunny."
    kinds = [type(item).__name__ for item in result.new_items]
    assert kinds == [
        "ReasoningItem",
        "ToolCallItem",
        "ToolCallOutputItem",
        "ReasoningItem",
        "MessageOutputItem",
    ]
    assert_replayed(ups, kind)
    usage = result.context_wrapper.usage
    assert (
        usage.requests == 2 and usage.total_tokens == usage.input_tokens + usage.output_tokens > 0
    )


@pytest.mark.parametrize("kind", ["resp", "anth"])
async def test_agents_stateless_store_false_with_encrypted_reasoning(
    client: AsyncOpenAI, ups: dict[str, LoopbackFake], kind: str
) -> None:
    """``store: false`` + ``include: ["reasoning.encrypted_content"]``:
    the state travels in the items."""
    script_tool_turn(ups, kind)
    settings = ModelSettings(
        store=False,
        reasoning=Reasoning(effort="low"),
        response_include=["reasoning.encrypted_content"],
    )
    agent = Agent(
        name="a",
        model=OpenAIResponsesModel(kind, client),
        tools=[get_weather],
        model_settings=settings,
    )
    result = await Runner.run(agent, "What's the weather in Paris?")
    assert result.final_output == "It is sunny."
    assert_replayed(ups, kind)
    # The whole run, replayed by the application on its next turn, is accepted too.
    ups[kind].enqueue(resp_fake.text("Bye.") if kind == "resp" else anth_fake.text("Bye."))
    again = await Runner.run(
        agent, [*result.to_input_list(), {"role": "user", "content": "thanks"}]
    )
    assert again.final_output == "Bye."


async def test_reasoning_content_other_than_reasoning_text_is_still_refused(
    server: OrgateServer,
) -> None:
    item = {"type": "reasoning", "summary": [], "content": [{"type": "input_text", "text": "x"}]}
    async with httpx.AsyncClient(base_url=server.url, headers=server.headers()) as http:
        r = await http.post(
            "/v1/responses",
            json={"model": ECHO, "input": [{"role": "user", "content": "hi"}, item]},
        )
    assert r.status_code == 400 and r.json()["error"]["param"] == "input[1].content"


@pytest.mark.parametrize("auto_previous", [False, True])
async def test_agents_echo_tools_handoffs_and_previous_response_id(
    client: AsyncOpenAI, auto_previous: bool
) -> None:
    echo = OpenAIResponsesModel(ECHO, client)
    agent = Agent(name="a", model=echo, tools=[get_weather, get_time])
    first = await Runner.run(
        agent, "What's the weather in Paris?", auto_previous_response_id=auto_previous
    )
    assert first.final_output == "get_weather returned: sunny in What's the weather in Paris?"
    follow = await Runner.run(agent, "and the time?", previous_response_id=first.last_response_id)
    assert follow.final_output == "get_time returned: noon in and the time?"
    spanish = Agent(name="spanish", instructions="Answer in Spanish.", model=echo)
    triage = Agent(name="triage", model=echo, handoffs=[spanish])
    routed = await Runner.run(
        triage, "Transfer to spanish please", auto_previous_response_id=auto_previous
    )
    assert routed.last_agent.name == "spanish"
    assert [type(i).__name__ for i in routed.new_items] == [
        "HandoffCallItem",
        "HandoffOutputItem",
        "MessageOutputItem",
    ]


@pytest.mark.parametrize("streamed", [False, True])
async def test_agents_structured_output_and_model_settings(
    client: AsyncOpenAI, streamed: bool
) -> None:
    settings = ModelSettings(
        temperature=0.2,
        top_p=0.9,
        max_tokens=200,
        truncation="auto",
        metadata={"app": "t"},
        store=False,
        parallel_tool_calls=False,
    )
    agent = Agent(
        name="a",
        model=OpenAIResponsesModel(ECHO, client),
        output_type=Forecast,
        model_settings=settings,
    )
    if streamed:
        result: Any = Runner.run_streamed(agent, "Paris")
        raw = [e.data.type for e in await drain(result) if e.type == "raw_response_event"]
        assert (
            raw[0] == "response.created"
            and raw[-1] == "response.completed"
            and "response.output_text.delta" in raw
        )
    else:
        result = await Runner.run(agent, "Paris")
    assert isinstance(result.final_output, Forecast) and result.final_output.city == "Paris"


async def test_agents_parallel_calls_and_tool_choice(
    client: AsyncOpenAI, ups: dict[str, LoopbackFake]
) -> None:
    ups["chat"].enqueue(
        chat_fake.tool_calls(
            ("get_weather", '{"city":"Paris"}'),
            ("get_time", '{"city":"Rome"}'),
            content=None,
            interleave=True,
        ),
        chat_fake.text("Both done."),
    )
    agent = Agent(
        name="a",
        model=OpenAIResponsesModel("chat", client),
        tools=[get_weather, get_time],
        model_settings=ModelSettings(parallel_tool_calls=True),
    )
    result = Runner.run_streamed(agent, "weather and time")
    await drain(result)
    assert result.final_output == "Both done."
    tool_messages = [m for m in ups["chat"].bodies[1]["messages"] if m["role"] == "tool"]
    assert sorted(m["content"] for m in tool_messages) == ["noon in Rome", "sunny in Paris"]
    named = Agent(
        name="b",
        model=OpenAIResponsesModel(ECHO, client),
        tools=[get_weather, get_time],
        model_settings=ModelSettings(tool_choice="get_time"),
    )
    assert (
        await Runner.run(named, "weather in Paris")
    ).final_output == "get_time returned: noon in weather in Paris"


# --- OpenAI Agents SDK over WebSocket -------------------------------------------------------------


@pytest.mark.parametrize("kind", [ECHO, "anth"])
async def test_agents_websocket_transport(
    client: AsyncOpenAI, ups: dict[str, LoopbackFake], kind: str
) -> None:
    """``OpenAIResponsesWSModel`` sends ``"stream": true`` in every ``response.create``
    (OpenAI accepts it)."""
    model = OpenAIResponsesWSModel(kind, client)
    agent = Agent(name="a", model=model, tools=[get_weather])
    try:
        if kind != ECHO:
            script_tool_turn(ups, kind)
        result = await Runner.run(agent, "What's the weather in Paris?")
        if kind == ECHO:
            assert (
                result.final_output == "get_weather returned: sunny in What's the weather in Paris?"
            )
        else:
            assert result.final_output == "It is sunny."
            assert_replayed(ups, kind)
        streamed = Runner.run_streamed(
            agent, "What's the weather in Rome?", auto_previous_response_id=True
        )
        if kind != ECHO:
            script_tool_turn(ups, kind)
        await drain(streamed)
        assert streamed.final_output
    finally:
        await model.close()


# --------------------------------------------------------------------------- pydantic-ai


def p_model(client: AsyncOpenAI, name: str) -> PModel:
    return PModel(name, provider=OpenAIProvider(openai_client=client))


@pytest.mark.parametrize("kind", ["resp", "chat", "anth"])
async def test_pydantic_ai_tool_loop_and_history(
    client: AsyncOpenAI, ups: dict[str, LoopbackFake], kind: str
) -> None:
    agent = PAgent(p_model(client, kind), instructions="Be brief.")

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """Weather of a city."""
        return f"sunny in {city}"

    script_tool_turn(ups, kind)
    result = await agent.run("What's the weather in Paris?")
    assert result.output == "It is sunny."
    assert result.usage.requests == 2 and result.usage.tool_calls == 1
    # pydantic-ai decides from its profile of the model name whether thinking goes back as items
    assert_replayed(ups, kind, reasoning=False)
    # the whole history (thinking parts included) goes back on the next run
    nxt = await agent.run("thanks", message_history=result.all_messages())
    assert nxt.output == "You said: thanks"
    script_tool_turn(ups, kind, reasoning=False)
    async with agent.run_stream("What's the weather in Paris?") as stream:
        assert "".join([chunk async for chunk in stream.stream_text(delta=True)]) == "It is sunny."


async def test_pydantic_ai_structured_output_and_streaming(client: AsyncOpenAI) -> None:
    model = p_model(client, ECHO)
    tool_output = await PAgent(model, output_type=Forecast).run("Paris")
    assert tool_output.output == Forecast(city="Paris", degrees=tool_output.output.degrees)
    native = await PAgent(model, output_type=NativeOutput(Forecast)).run("Lyon")
    assert native.output.city == "Lyon"
    async with PAgent(model).run_stream("hello there friend") as stream:
        assert "".join([c async for c in stream.stream_text(delta=True)]) == "hello there friend"


async def test_pydantic_ai_user_is_not_a_session_key(client: AsyncOpenAI) -> None:
    """``openai_user`` is OpenAI's end-user id: with ``use_user_field = false`` a stateless client
    sending its whole history with it is not chained onto the previous response, and one end user
    may run requests concurrently."""
    settings = OpenAIResponsesModelSettings(openai_user="end-user-42")
    agent = PAgent(p_model(client, ECHO), model_settings=settings)

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """Weather of a city."""
        return "sunny"

    first = await agent.run("weather in Paris")
    assert first.output == "get_weather returned: sunny"
    second = await agent.run("once more", message_history=first.all_messages())
    assert second.output == "get_weather returned: sunny"
    plain = PAgent(p_model(client, ECHO), model_settings=settings)
    outputs = await asyncio.gather(*(plain.run(f"hello {i}") for i in range(3)))
    assert [o.output for o in outputs] == ["hello 0", "hello 1", "hello 2"]
    assert [o.usage.input_tokens for o in outputs] == [2, 2, 2]  # nothing chained in front


async def test_pydantic_ai_previous_response_id_auto(client: AsyncOpenAI) -> None:
    settings = OpenAIResponsesModelSettings(
        openai_previous_response_id="auto", temperature=0.3, max_tokens=64, openai_truncation="auto"
    )
    agent = PAgent(p_model(client, ECHO), model_settings=settings)
    first = await agent.run("first words")
    second = await agent.run("second words", message_history=first.all_messages())
    assert second.output == "second words"
    raw = json.loads(second.all_messages_json())
    assert raw[-1]["provider_response_id"].startswith("resp_")
