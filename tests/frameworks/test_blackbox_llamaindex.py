"""Black-box: LlamaIndex's ``OpenAIResponses`` LLM against a real ``orgate serve`` and its
built-in model: complete, chat, streaming, a tool call and its round trip, structured output,
and ``track_previous_responses`` (stored history instead of the whole conversation).

``llama-index-llms-openai`` pins ``openai<3``, which the Agents SDK of the test extra cannot
use: these tests run in their own virtualenv (``scripts/llamaindex-tests.sh``, called by
``scripts/test.sh``) and are skipped where the package is not installed.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

pytest.importorskip(
    "llama_index.llms.openai", reason="runs in .venv-llamaindex (scripts/llamaindex-tests.sh)"
)

from llama_index.core.llms import ChatMessage  # noqa: E402
from llama_index.core.tools import FunctionTool  # noqa: E402
from llama_index.llms.openai import OpenAIResponses  # noqa: E402
from pydantic import BaseModel  # noqa: E402

from tests.server_process import OrgateServer  # noqa: E402

ECHO = "orgate/echo"


@pytest.fixture(scope="module")
def server() -> Iterator[OrgateServer]:
    with OrgateServer() as running:
        yield running


def llm(server: OrgateServer, **kw: object) -> OpenAIResponses:
    # context_window: LlamaIndex knows OpenAI's model names only and asks for it otherwise.
    return OpenAIResponses(
        model=ECHO,
        api_base=server.base_url,
        api_key=server.api_key,
        context_window=8192,
        max_retries=0,
        timeout=30,
        **kw,
    )


def get_weather(city: str) -> str:
    """Get the weather of a city."""
    return f"sunny in {city}"


class City(BaseModel):
    name: str
    population: int


def test_complete_and_chat(server: OrgateServer) -> None:
    assert llm(server).complete("Hello from LlamaIndex").text == "Hello from LlamaIndex"
    reply = llm(server).chat(
        [
            ChatMessage(role="system", content="be brief"),
            ChatMessage(role="user", content="chat turn"),
        ]
    )
    assert reply.message.content == "chat turn"


def test_stream_chat(server: OrgateServer) -> None:
    deltas = [
        r.delta
        for r in llm(server).stream_chat([ChatMessage(role="user", content="one two three four")])
        if r.delta
    ]
    assert len(deltas) == 4 and "".join(deltas) == "one two three four"


def test_a_tool_round_trip(server: OrgateServer) -> None:
    tool = FunctionTool.from_defaults(fn=get_weather)
    model = llm(server)
    question = ChatMessage(role="user", content="what is the weather in Paris")
    reply = model.chat_with_tools([tool], chat_history=[question])
    [call] = model.get_tool_calls_from_response(reply, error_on_no_tool_call=True)
    assert call.tool_name == "get_weather" and isinstance(call.tool_kwargs["city"], str)
    output = model.predict_and_call([tool], chat_history=[question])
    assert output.response.startswith("sunny in")


def test_structured_output(server: OrgateServer) -> None:
    city = llm(server).as_structured_llm(City).complete("a city").raw
    assert isinstance(city, City)


def test_track_previous_responses(server: OrgateServer) -> None:
    model = llm(server, track_previous_responses=True)
    first = model.chat([ChatMessage(role="user", content="first turn")])
    second = model.chat([ChatMessage(role="user", content="second turn")])
    assert second.message.content == "second turn"
    stored = httpx.get(
        f"{server.base_url}/responses/{second.raw.id}", headers=server.headers(), timeout=30
    ).json()
    assert stored["previous_response_id"] == first.raw.id
