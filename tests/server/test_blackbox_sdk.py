"""Application flows of the official ``openai`` SDK that broke against orgate (regressions).

Each test drives a real ``orgate serve`` (the session ``server`` fixture: built-in
models, the legacy chat endpoint on) the way application code does.
"""

from __future__ import annotations

import openai
import pytest
from pydantic import BaseModel

MODEL = "orgate/echo"


class GetWeather(BaseModel):
    city: str


class Answer(BaseModel):
    answer: str


TOOLS = [openai.pydantic_function_tool(GetWeather)]


def _tool_results(message: object) -> list[dict[str, str]]:
    calls = getattr(message, "tool_calls", None) or []
    assert calls, "the model was expected to call the tool"
    return [{"role": "tool", "tool_call_id": call.id, "content": "sunny"} for call in calls]


def test_chat_parse_message_with_tool_calls_can_be_appended(client: openai.OpenAI) -> None:
    """``chat.completions.parse`` + ``messages.append(message)``:
    the SDK sends ``parsed`` and ``parsed_arguments`` back."""
    messages: list[object] = [{"role": "user", "content": "What is the weather in Paris?"}]
    first = client.chat.completions.parse(model=MODEL, messages=messages, tools=TOOLS)  # type: ignore[arg-type]
    message = first.choices[0].message
    assert message.tool_calls and message.tool_calls[0].function.parsed_arguments == GetWeather(
        city="What is the weather in Paris?"
    )
    messages += [message, *_tool_results(message)]
    second = client.chat.completions.parse(model=MODEL, messages=messages, tools=TOOLS)  # type: ignore[arg-type]
    assert second.choices[0].message.content == "GetWeather returned: sunny"


@pytest.mark.filterwarnings("ignore::UserWarning")  # the SDK's own serializer warns about `parsed`
def test_chat_parse_message_with_parsed_content_can_be_appended(client: openai.OpenAI) -> None:
    messages: list[object] = [{"role": "user", "content": "first"}]
    first = client.chat.completions.parse(model=MODEL, messages=messages, response_format=Answer)  # type: ignore[arg-type]
    assert first.choices[0].message.parsed == Answer(answer="first")
    messages += [first.choices[0].message, {"role": "user", "content": "second"}]
    second = client.chat.completions.parse(model=MODEL, messages=messages, response_format=Answer)  # type: ignore[arg-type]
    assert second.choices[0].message.parsed == Answer(answer="second")


@pytest.mark.parametrize("with_tools", [True, False])
def test_chat_stream_final_message_can_be_appended(client: openai.OpenAI, with_tools: bool) -> None:
    """``chat.completions.stream`` → ``get_final_completion().choices[0].message`` carries ``index``
    and ``parsed``."""
    prompt = "What is the weather in Paris?" if with_tools else "hello there"
    messages: list[object] = [{"role": "user", "content": prompt}]
    kwargs = {"tools": TOOLS} if with_tools else {}
    with client.chat.completions.stream(model=MODEL, messages=messages, **kwargs) as stream:  # type: ignore[arg-type]
        for _ in stream:
            pass
        message = stream.get_final_completion().choices[0].message
    if with_tools:
        messages += [message, *_tool_results(message)]
        expected = "GetWeather returned: sunny"
    else:
        messages += [message, {"role": "user", "content": "again"}]
        expected = "again"
    second = client.chat.completions.create(model=MODEL, messages=messages, **kwargs)  # type: ignore[arg-type]
    assert second.choices[0].message.content == expected


def test_chat_unknown_message_fields_are_still_refused(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(
            model=MODEL,
            messages=[
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "yo", "bogus": 1},
            ],  # type: ignore[list-item]
        )
    assert info.value.code == "unknown_parameter"
    assert info.value.param == "messages[1].bogus"


def test_unknown_route_is_an_invalid_request_error(client: openai.OpenAI) -> None:
    """OpenAI answers an unknown URL with a 404 of type ``invalid_request_error``,
    like orgate's other 404s."""
    with pytest.raises(openai.NotFoundError) as info:
        client.get("/no-such-route", cast_to=object)
    assert info.value.status_code == 404
    assert info.value.type == "invalid_request_error"
    assert info.value.body == {
        "message": "Unknown route: GET /v1/no-such-route",
        "type": "invalid_request_error",
        "param": None,
        "code": "not_found",
    }


def test_models_retrieve(client: openai.OpenAI) -> None:
    """``client.models.retrieve`` (GET /v1/models/{model}), also for names with a slash."""
    model = client.models.retrieve("orgate/echo")
    assert model.id == "orgate/echo" and model.object == "model"
    with pytest.raises(openai.NotFoundError) as info:
        client.models.retrieve("no-such-model")
    assert info.value.code == "model_not_found"
