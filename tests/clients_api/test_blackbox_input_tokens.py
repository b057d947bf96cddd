"""Black-box: ``POST /v1/responses/input_tokens`` (the ``openai`` SDK's
``responses.input_tokens.count``): the upstream's own count where it has one, else an estimate
that says so; never a model call."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from tests.clients_api.conftest import upstream_saw
from tests.fakes._base import LoopbackFake, counted_tokens
from tests.server_process import OrgateServer

TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def count(client: openai.OpenAI, **body: Any) -> tuple[int, str]:
    raw = client.responses.input_tokens.with_raw_response.count(**body)
    parsed = raw.parse()
    assert parsed.object == "response.input_tokens"
    return parsed.input_tokens, raw.headers["x-orgate-input-tokens"]


@pytest.mark.parametrize(
    ("model", "path"),
    [("resp", "/v1/responses/input_tokens"), ("anth", "/v1/messages/count_tokens")],
)
def test_the_upstreams_own_count(
    client: openai.OpenAI, ups: dict[str, LoopbackFake], model: str, path: str
) -> None:
    tokens, source = count(
        client, model=model, input="How warm is Paris?", instructions="Be brief.", tools=[TOOL]
    )
    fake = ups[model]
    assert source == "upstream" and len(fake.counts) == 1
    sent = fake.counts[0]
    assert sent.path == path and tokens == counted_tokens(sent.body)
    assert "How warm is Paris?" in str(sent.body) and "get_weather" in str(sent.body)
    assert "stream" not in sent.body and "max_tokens" not in sent.body
    assert upstream_saw(ups, model) == []  # never a model call


def test_the_built_in_model_counts_its_words(client: openai.OpenAI) -> None:
    assert count(client, model="orgate-echo", input="one two three four") == (4, "upstream")
    first = client.responses.create(model="orgate/echo", input="alpha beta gamma")
    # the history is counted too, as create would send it
    counted = count(client, model="orgate/echo", input="delta", previous_response_id=first.id)
    assert counted == (7, "upstream")
    follow = client.responses.create(
        model="orgate/echo", input="delta", previous_response_id=first.id
    )
    assert follow.usage is not None and follow.usage.input_tokens == counted[0]
    conv = client.conversations.create(
        items=[{"type": "message", "role": "user", "content": "one two"}]
    )
    assert count(client, model="orgate/echo", input="three", conversation=conv.id) == (
        3,
        "upstream",
    )


def test_an_estimate_says_it_is_one(client: openai.OpenAI, ups: dict[str, LoopbackFake]) -> None:
    # characters / 4 of what the model reads ("user: " and the text), 4 tokens per item
    estimate = len("user: " + "x" * 400) // 4 + 4
    tokens, source = count(client, model="chat", input="x" * 400)
    assert (tokens, source) == (estimate, "estimate")
    assert upstream_saw(ups, "chat") == []
    ups["resp"].count_status = 404  # a Responses server without the endpoint
    tokens, source = count(client, model="resp", input="x" * 400)
    assert (tokens, source) == (estimate, "estimate") and len(ups["resp"].counts) == 1
    assert upstream_saw(ups, "resp") == []


def test_an_upstream_error_is_not_hidden(
    client: openai.OpenAI, ups: dict[str, LoopbackFake]
) -> None:
    ups["anth"].count_status = 500
    with pytest.raises(openai.APIStatusError) as caught:
        client.responses.input_tokens.count(model="anth", input="hello")
    assert caught.value.status_code >= 500


def test_requests_it_refuses(client: openai.OpenAI, gateway: OrgateServer) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.input_tokens.count(
            model="orgate/echo", input="x", extra_body={"stream": True}
        )
    assert caught.value.body["param"] == "stream"  # type: ignore[index]
    with pytest.raises(openai.NotFoundError):
        client.responses.input_tokens.count(model="nope", input="x")
    with pytest.raises(openai.NotFoundError):
        client.responses.input_tokens.count(
            model="orgate/echo", input="x", previous_response_id="resp_missing"
        )
    got = httpx.get(
        f"{gateway.base_url}/responses/input_tokens",
        headers={"Authorization": "Bearer key-a"},
        timeout=30,
    )
    assert got.status_code == 405 and got.headers["allow"] == "POST"
