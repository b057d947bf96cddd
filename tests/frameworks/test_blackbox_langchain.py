"""Black-box: LangChain's ``ChatOpenAI`` on the Responses API (``use_responses_api=True``)
against a real ``orgate serve`` and its built-in model.

Invoke, stream, tool calls and their round trip, structured output (``json_schema``),
``reasoning`` options (refused by ``orgate/echo`` before it took them), and
``use_previous_response_id`` (stored history instead of the whole conversation).
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic import BaseModel

from tests.server_process import OrgateServer

ECHO = "orgate/echo"


@pytest.fixture(scope="module")
def server() -> Iterator[OrgateServer]:
    with OrgateServer() as running:
        yield running


def chat(server: OrgateServer, **kw: object) -> ChatOpenAI:
    return ChatOpenAI(
        model=ECHO,
        base_url=server.base_url,
        api_key=server.api_key,
        use_responses_api=True,
        max_retries=0,
        timeout=30,
        **kw,
    )


@tool
def get_weather(city: str) -> str:
    """Get the weather of a city."""
    return f"sunny in {city}"


class City(BaseModel):
    name: str
    population: int


def text_of(message: AIMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))


def test_invoke(server: OrgateServer) -> None:
    reply = chat(server).invoke("Hello from LangChain")
    assert text_of(reply) == "Hello from LangChain"
    assert reply.usage_metadata is not None and reply.usage_metadata["output_tokens"] == 3


def test_stream(server: OrgateServer) -> None:
    chunks = list(chat(server).stream("one two three four"))
    assert len([c for c in chunks if text_of(c)]) == 4
    assert "".join(text_of(c) for c in chunks) == "one two three four"


def test_a_tool_round_trip(server: OrgateServer) -> None:
    model = chat(server).bind_tools([get_weather])
    question = HumanMessage("what is the weather in Paris")
    first = model.invoke([question])
    [call] = first.tool_calls
    assert call["name"] == "get_weather" and isinstance(call["args"]["city"], str)
    output = ToolMessage(get_weather.invoke(call["args"]), tool_call_id=call["id"])
    second = model.invoke([question, first, output])
    assert text_of(second).startswith("get_weather returned: sunny in")


def test_structured_output(server: OrgateServer) -> None:
    city = chat(server).with_structured_output(City, method="json_schema").invoke("a city")
    assert isinstance(city, City)


def test_reasoning_options(server: OrgateServer) -> None:
    reply = chat(server, reasoning={"effort": "low", "summary": "auto"}).invoke(
        "orgate:reason think, then answer"
    )
    assert text_of(reply) == "orgate:reason think, then answer"
    assert reply.usage_metadata is not None
    assert reply.usage_metadata.get("output_token_details", {}).get("reasoning", 0) > 0


def test_previous_response_id(server: OrgateServer) -> None:
    model = chat(server, use_previous_response_id=True)
    first = model.invoke([HumanMessage("first turn")])
    second = model.invoke([HumanMessage("first turn"), first, HumanMessage("second turn")])
    assert text_of(second) == "second turn"
    # The second request continued the first stored response instead of resending it.
    stored = httpx.get(
        f"{server.base_url}/responses/{second.response_metadata['id']}",
        headers=server.headers(),
        timeout=30,
    ).json()
    assert stored["previous_response_id"] == first.response_metadata["id"]
