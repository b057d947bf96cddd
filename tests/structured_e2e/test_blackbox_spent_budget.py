"""Black-box: the Python clients do not send again a request whose structured-output budget
orgate spent — streaming or not, with their default retry settings.

The `openai` SDK (and LangChain's ``ChatOpenAI`` and the Agents SDK, which call through it)
retries 408, 409, 429 and 5xx twice unless the answer says ``x-should-retry: false``; the
Agents SDK's own retries follow the same advice. A spent budget is a 400: each client request
is exactly ``CALLS_PER_REQUEST`` upstream calls and one review entry.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import openai
import pytest
from agents import Agent, OpenAIResponsesModel, Runner, set_tracing_disabled
from langchain_openai import ChatOpenAI
from pydantic import BaseModel

from tests.support.spent_budget import CALLS_PER_REQUEST, MODEL, SpentBudget, spent_budget_gateway

set_tracing_disabled(True)  # no network: nothing may try to export traces

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}
FORMAT = {"format": {"type": "json_schema", "name": "person", "schema": PERSON, "strict": True}}


class Person(BaseModel):
    name: str
    age: int


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SpentBudget]:
    with spent_budget_gateway(tmp_path_factory.mktemp("spent-py")) as running:
        yield running


def client(gateway: SpentBudget) -> openai.OpenAI:
    return openai.OpenAI(  # the SDK's default max_retries (2)
        base_url=gateway.server.base_url, api_key=gateway.server.api_key, timeout=60
    )


def openai_create(gateway: SpentBudget) -> None:
    client(gateway).responses.create(model=MODEL, input="Ada Lovelace, 36", text=FORMAT)  # type: ignore[arg-type]


def openai_stream(gateway: SpentBudget) -> None:
    stream = client(gateway).responses.create(
        model=MODEL,
        input="Ada Lovelace, 36",
        text=FORMAT,  # type: ignore[arg-type]
        stream=True,
    )
    for _ in stream:
        pass


def langchain(gateway: SpentBudget) -> ChatOpenAI:
    return ChatOpenAI(
        model=MODEL,
        base_url=gateway.server.base_url,
        api_key=gateway.server.api_key,  # type: ignore[arg-type]
        use_responses_api=True,
        timeout=60,
    )


def langchain_invoke(gateway: SpentBudget) -> None:
    langchain(gateway).with_structured_output(Person, method="json_schema").invoke("Ada, 36")


def langchain_stream(gateway: SpentBudget) -> None:
    for _ in langchain(gateway).with_structured_output(Person, method="json_schema").stream("Ada"):
        pass


def agent(gateway: SpentBudget) -> Agent[Any]:
    sdk = openai.AsyncOpenAI(
        base_url=gateway.server.base_url, api_key=gateway.server.api_key, timeout=60
    )
    return Agent(
        name="extractor",
        instructions="Extract the person.",
        model=OpenAIResponsesModel(MODEL, sdk),
        output_type=Person,
    )


def agents_run(gateway: SpentBudget) -> None:
    Runner.run_sync(agent(gateway), "Ada Lovelace, 36")


def agents_stream(gateway: SpentBudget) -> None:
    async def run() -> None:
        result = Runner.run_streamed(agent(gateway), "Ada Lovelace, 36")
        async for _ in result.stream_events():
            pass

    asyncio.run(run())


@pytest.mark.parametrize(
    "send",
    [
        openai_create,
        openai_stream,
        langchain_invoke,
        langchain_stream,
        agents_run,
        agents_stream,
    ],
    ids=lambda f: f.__name__,
)
def test_a_spent_budget_is_sent_once(
    gateway: SpentBudget, send: Callable[[SpentBudget], None]
) -> None:
    calls, reviews = gateway.calls(), gateway.reviews()
    with pytest.raises(openai.BadRequestError) as caught:
        send(gateway)
    assert gateway.calls() - calls == CALLS_PER_REQUEST  # the client sent it once
    assert gateway.reviews() - reviews == 1
    error = caught.value
    assert error.status_code == 400 and error.code == "structured_output_invalid"
    assert error.response.headers["x-should-retry"] == "false"
    assert error.response.headers["x-orgate-structured-outcome"] == "review"
    assert error.response.headers["x-orgate-review-id"].startswith("rev_")
