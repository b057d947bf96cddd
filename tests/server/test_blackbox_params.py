"""Black-box semantics of the ``POST /v1/responses`` request fields, per provider kind.

Each field must reach the upstream as that upstream names it, be echoed in the
``ResponseResource`` as what was *used*, or be refused with a 400 naming the
param — never dropped silently where it would change the answer. The real
gateway runs in front of loopback fakes of ``openai-chat``, ``openai-responses``
and ``anthropic`` (and the built-in ``orgate/echo``); the tests read the bodies
the fakes received.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.fakes._base import LoopbackFake
from tests.fakes.openai_chat_upstream import Script as ChatScript
from tests.hardening.conftest import server_env
from tests.server_process import OrgateServer
from tests.support.spec import check_sse, validate
from tests.support.upstreams import fresh, provider_models

MODELS = ("orgate/echo", "chat", "anth", "resp")
TOOL_F = {
    "type": "function",
    "name": "f",
    "parameters": {"type": "object", "properties": {"x": {"type": "string"}}},
}
TOOL_G = {"type": "function", "name": "g", "parameters": {"type": "object", "properties": {}}}


@pytest.fixture(scope="module")
def server(fakes: dict[str, Any]) -> Iterator[OrgateServer]:
    with OrgateServer(
        provider_models(fakes, api_key="k", read_timeout=10), env=server_env()
    ) as running:
        yield running


@pytest.fixture
def http(server: OrgateServer, fakes: dict[str, LoopbackFake]) -> Iterator[httpx.Client]:
    with (
        fresh(fakes),
        httpx.Client(base_url=server.url, headers=server.headers(), timeout=30) as client,
    ):
        yield client


def create(http: httpx.Client, model: str, **fields: Any) -> dict[str, Any]:
    res = http.post("/v1/responses", json={"model": model, "input": "hi", **fields})
    assert res.status_code == 200, res.text[:800]
    body = res.json()
    validate("ResponseResource", body)
    return body


def refused(http: httpx.Client, model: str, param: str, **fields: Any) -> dict[str, Any]:
    res = http.post("/v1/responses", json={"model": model, "input": "hi", **fields})
    assert res.status_code == 400, res.text[:800]
    body = res.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}, (
        body
    )
    validate("ErrorPayload", body["error"])
    assert body["error"]["param"] == param, body
    return body["error"]


def upstream(fakes: dict[str, LoopbackFake], model: str) -> dict[str, Any]:
    """The one body the model's fake received."""
    bodies = fakes[model].bodies
    assert len(bodies) == 1, bodies
    return bodies[0]


def calls(response: dict[str, Any]) -> list[str]:
    return [o["name"] for o in response["output"] if o["type"] == "function_call"]


# --------------------------------------------------------------------------- parallel_tool_calls /
# max_tool_calls


def test_parallel_tool_calls_false_returns_at_most_one_call_even_when_the_upstream_ignores_it(
    http: httpx.Client, fakes: dict[str, Any]
) -> None:
    """vLLM, Ollama... ignore ``parallel_tool_calls``: the gateway keeps its promise itself."""
    two = ChatScript(content=None, tool_calls=[("f", '{"x": "a"}'), ("g", "{}")])
    fakes["chat"].enqueue(two)
    out = create(http, "chat", tools=[TOOL_F, TOOL_G], parallel_tool_calls=False)
    assert upstream(fakes, "chat")["parallel_tool_calls"] is False
    assert calls(out) == ["f"] and out["parallel_tool_calls"] is False

    fakes["chat"].enqueue(ChatScript(content=None, tool_calls=[("f", '{"x": "a"}'), ("g", "{}")]))
    res = http.post(
        "/v1/responses",
        json={
            "model": "chat",
            "input": "hi",
            "tools": [TOOL_F, TOOL_G],
            "parallel_tool_calls": False,
            "stream": True,
        },
    )
    events = check_sse(res.text)
    added = [
        e["item"]["name"]
        for e in events
        if e["type"] == "response.output_item.added" and e["item"]["type"] == "function_call"
    ]
    assert added == ["f"] and calls(events[-1]["response"]) == ["f"]

    fakes["chat"].enqueue(ChatScript(content=None, tool_calls=[("f", '{"x": "a"}'), ("g", "{}")]))
    assert calls(create(http, "chat", tools=[TOOL_F, TOOL_G])) == [
        "f",
        "g",
    ]  # default: parallel allowed


def test_max_tool_calls_limits_the_answer_and_reaches_a_responses_upstream(
    http: httpx.Client, fakes: dict[str, Any]
) -> None:
    fakes["chat"].enqueue(
        ChatScript(content=None, tool_calls=[("f", '{"x": "a"}'), ("g", "{}"), ("f", '{"x": "b"}')])
    )
    out = create(http, "chat", tools=[TOOL_F, TOOL_G], max_tool_calls=2)
    assert calls(out) == ["f", "g"] and out["max_tool_calls"] == 2
    create(http, "resp", tools=[TOOL_F], max_tool_calls=3)
    assert (
        upstream(fakes, "resp")["max_tool_calls"] == 3
    )  # it also bounds the upstream's own built-in tools


# --------------------------------------------------------------------------- text.verbosity


def test_text_verbosity_reaches_openai_upstreams(http: httpx.Client, fakes: dict[str, Any]) -> None:
    out = create(http, "resp", text={"verbosity": "low"})
    assert upstream(fakes, "resp")["text"] == {"verbosity": "low"}
    assert out["text"] == {"format": {"type": "text"}, "verbosity": "low"}
    create(http, "chat", text={"verbosity": "high"})
    assert upstream(fakes, "chat")["verbosity"] == "high"


def test_text_verbosity_the_anthropic_upstream_cannot_honour_is_a_400(
    http: httpx.Client, fakes: dict[str, Any]
) -> None:
    error = refused(http, "anth", "text.verbosity", text={"verbosity": "low"})
    assert error["code"] == "unsupported_parameter"
    assert not fakes["anth"].bodies
    assert (
        create(http, "anth", text={"verbosity": "medium"})["text"]["verbosity"] == "medium"
    )  # the default


# --------------------------------------------------------------------------- service_tier


@pytest.mark.parametrize("model", ["chat", "resp"])
def test_service_tier_reaches_openai_upstreams(
    http: httpx.Client, fakes: dict[str, Any], model: str
) -> None:
    out = create(http, model, service_tier="flex")
    assert upstream(fakes, model)["service_tier"] == "flex"
    assert out["service_tier"] == "flex"


def test_service_tier_is_echoed_as_the_tier_used_where_the_upstream_has_none(
    http: httpx.Client, fakes: dict[str, Any]
) -> None:
    """``service_tier`` in a response is "the service tier that was used": not a priority tier
    Anthropic was never asked for. The built-in test model serves every tier alike."""
    assert create(http, "anth", service_tier="priority")["service_tier"] == "default"
    assert "service_tier" not in upstream(fakes, "anth")
    assert create(http, "orgate/echo", service_tier="flex")["service_tier"] == "flex"


# --------------------------------------------------------------------------- safety_identifier /
# user / prompt_cache_key


def test_safety_identifier_goes_to_a_responses_upstream_under_its_own_name(
    http: httpx.Client, fakes: dict[str, Any]
) -> None:
    out = create(http, "resp", safety_identifier="sid-1", prompt_cache_key="pck")
    body = upstream(fakes, "resp")
    assert body["safety_identifier"] == "sid-1" and "user" not in body
    assert body["prompt_cache_key"] == "pck"
    assert (out["safety_identifier"], out["prompt_cache_key"]) == ("sid-1", "pck")
    fakes["resp"].reset()
    create(http, "resp", safety_identifier="sid-1", user="u-1")
    body = upstream(fakes, "resp")
    assert (body["safety_identifier"], body["user"]) == ("sid-1", "u-1")


def test_safety_identifier_stands_in_for_user_on_chat_and_anthropic(
    http: httpx.Client, fakes: dict[str, Any]
) -> None:
    create(http, "chat", safety_identifier="sid-1", prompt_cache_key="pck")
    assert upstream(fakes, "chat")["user"] == "sid-1"
    assert upstream(fakes, "chat")["prompt_cache_key"] == "pck"
    out = create(http, "anth", safety_identifier="sid-1")
    assert upstream(fakes, "anth")["metadata"] == {"user_id": "sid-1"}
    assert out["safety_identifier"] == "sid-1"
    fakes["anth"].reset()
    create(http, "anth", safety_identifier="sid-1", user="u-1")
    assert upstream(fakes, "anth")["metadata"] == {"user_id": "u-1"}


# --------------------------------------------------------------------------- sampling,
# tool_choice, reasoning


@pytest.mark.parametrize("model", ["chat", "resp"])
def test_sampling_parameters_reach_openai_upstreams_and_are_echoed(
    http: httpx.Client, fakes: dict[str, Any], model: str
) -> None:
    sampling = {
        "temperature": 0.2,
        "top_p": 0.5,
        "presence_penalty": 0.5,
        "frequency_penalty": 0.25,
    }
    out = create(http, model, max_output_tokens=64, **sampling)
    body = upstream(fakes, model)
    assert {k: body[k] for k in sampling} == sampling
    assert body["max_tokens" if model == "chat" else "max_output_tokens"] == 64
    assert {k: out[k] for k in sampling} == sampling and out["max_output_tokens"] == 64


def test_penalties_the_anthropic_upstream_cannot_honour_are_a_400(
    http: httpx.Client, fakes: dict[str, Any]
) -> None:
    refused(http, "anth", "presence_penalty", presence_penalty=0.5)
    refused(http, "anth", "frequency_penalty", frequency_penalty=0.5)
    assert not fakes["anth"].bodies
    create(http, "anth", temperature=0.3, top_p=0.9, max_output_tokens=32)
    body = upstream(fakes, "anth")
    assert (body["temperature"], body["top_p"], body["max_tokens"]) == (0.3, 0.9, 32)


@pytest.mark.parametrize(
    ("choice", "chat", "anth"),
    [
        ("none", "none", {"type": "none"}),
        (
            {"type": "function", "name": "f"},
            {"type": "function", "function": {"name": "f"}},
            {"type": "tool", "name": "f"},
        ),
        (
            {"type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": "g"}]},
            "auto",
            {"type": "auto"},
        ),
    ],
)
def test_tool_choice_forms_reach_every_upstream(
    http: httpx.Client, fakes: dict[str, Any], choice: Any, chat: Any, anth: Any
) -> None:
    for model in ("chat", "anth", "resp"):
        res = http.post(
            "/v1/responses",
            json={"model": model, "input": "hi", "tools": [TOOL_F, TOOL_G], "tool_choice": choice},
        )
        assert res.status_code in (200, 400), (
            res.text
        )  # a forced call the fake does not make fails the gate
        body = fakes[model].bodies[0]
        expected = {"chat": chat, "anth": anth, "resp": choice}[model]
        assert body["tool_choice"] == expected, (model, body["tool_choice"])
        if isinstance(choice, dict) and choice["type"] == "allowed_tools" and model != "resp":
            names = [t.get("name") or t["function"]["name"] for t in body["tools"]]
            assert names == [
                "g"
            ]  # allowed_tools is a hard constraint: only those tools are offered
        fakes[model].reset()


def test_reasoning_options_reach_the_upstreams_or_are_refused(
    http: httpx.Client, fakes: dict[str, Any]
) -> None:
    out = create(http, "resp", reasoning={"effort": "high", "summary": "detailed"})
    assert upstream(fakes, "resp")["reasoning"] == {"effort": "high", "summary": "detailed"}
    assert out["reasoning"] == {"effort": "high", "summary": "detailed"}
    # An effort needs a model with reasoning (openai-chat has none by default);
    # a summary alone does not.
    error = refused(http, "chat", "reasoning.effort", reasoning={"effort": "high"})
    assert error["code"] == "unsupported_parameter"
    assert create(http, "chat", reasoning={"summary": "auto"})["status"] == "completed"


# --------------------------------------------------------------------------- refused / echoed
# everywhere


def _text_part(response: dict[str, Any]) -> dict[str, Any]:
    (message,) = [o for o in response["output"] if o["type"] == "message"]
    (part,) = message["content"]
    assert part["type"] == "output_text"
    return part


@pytest.mark.parametrize("model", ("orgate/echo", "chat", "resp"))
def test_logprobs_reach_the_upstream_and_come_back_with_the_text(
    http: httpx.Client, fakes: dict[str, Any], model: str
) -> None:
    """``include`` + ``top_logprobs``: the upstream is asked in its own terms, and each token's
    ``LogProb`` comes back in the part, its tokens spelling the text (stream and not)."""
    asked = {"top_logprobs": 2, "include": ["message.output_text.logprobs"]}
    out = create(http, model, **asked)
    assert out["top_logprobs"] == 2
    part = _text_part(out)
    logprobs = part["logprobs"]
    assert logprobs and "".join(p["token"] for p in logprobs) == part["text"]
    for p in logprobs:
        assert p["bytes"] == list(p["token"].encode()) and p["logprob"] <= 0
        alternatives = 1 if model == "orgate/echo" else 2  # the built-in model's words are certain
        assert (
            len(p["top_logprobs"]) == alternatives and p["top_logprobs"][0]["token"] == p["token"]
        )
    if model == "chat":
        sent = upstream(fakes, "chat")
        assert (sent["logprobs"], sent["top_logprobs"]) == (True, 2)
    elif model == "resp":
        sent = upstream(fakes, "resp")
        assert "message.output_text.logprobs" in sent["include"] and sent["top_logprobs"] == 2

    res = http.post("/v1/responses", json={"model": model, "input": "hi", "stream": True, **asked})
    events = check_sse(
        res.text
    )  # the deltas' logprobs concatenate to the done event's and the part's
    deltas = [e for e in events if e["type"] == "response.output_text.delta"]
    assert all(
        len(e["logprobs"]) == 1 for e in deltas
    )  # one token per delta, as the upstreams sent them
    assert _text_part(events[-1]["response"])["logprobs"] == logprobs


@pytest.mark.parametrize("model", ("orgate/echo", "chat", "resp"))
def test_logprobs_come_with_either_field_and_not_without(
    http: httpx.Client, fakes: dict[str, Any], model: str
) -> None:
    only_include = _text_part(create(http, model, include=["message.output_text.logprobs"]))[
        "logprobs"
    ]
    assert only_include and all(p["top_logprobs"] == [] for p in only_include)
    only_top = _text_part(create(http, model, top_logprobs=1))["logprobs"]
    assert only_top and all(len(p["top_logprobs"]) == 1 for p in only_top)
    plain = create(http, model, top_logprobs=0, include=["reasoning.encrypted_content"])
    assert plain["top_logprobs"] == 0 and _text_part(plain)["logprobs"] == []
    if model == "chat":
        bodies = fakes["chat"].bodies
        assert [b.get("logprobs") for b in bodies] == [True, True, None]
        assert [b.get("top_logprobs") for b in bodies] == [None, 1, None]


def test_logprobs_the_anthropic_upstream_cannot_give_are_a_400(http: httpx.Client) -> None:
    error = refused(http, "anth", "top_logprobs", top_logprobs=3)
    assert error["code"] == "unsupported_parameter" and "log probabilities" in error["message"]
    refused(http, "anth", "include", include=["message.output_text.logprobs"])
    assert (
        create(http, "anth", top_logprobs=0, include=["reasoning.encrypted_content"])[
            "top_logprobs"
        ]
        == 0
    )


def test_fields_outside_the_spec_and_limits_are_400s(http: httpx.Client) -> None:
    refused(http, "orgate/echo", "prompt", prompt={"id": "pmpt_1"})
    refused(http, "orgate/echo", "metadata", metadata={str(i): "v" for i in range(17)})
    refused(http, "orgate/echo", "metadata.k", metadata={"k": "v" * 513})
    refused(http, "orgate/echo", "background", background=True, store=False)
    refused(http, "orgate/echo", "text.shape", text={"shape": 1})


def test_echoed_fields_and_instructions_are_per_request(
    http: httpx.Client, fakes: dict[str, Any]
) -> None:
    """``instructions`` of a previous response are not carried over (the OpenAI semantics)."""
    first = create(
        http, "chat", instructions="SYSTEM ONE", metadata={"a": "b"}, truncation="auto", store=True
    )
    assert (first["instructions"], first["metadata"], first["truncation"], first["store"]) == (
        "SYSTEM ONE",
        {"a": "b"},
        "auto",
        True,
    )
    assert upstream(fakes, "chat")["messages"][0] == {"role": "system", "content": "SYSTEM ONE"}
    fakes["chat"].reset()
    second = create(http, "chat", input="again", previous_response_id=first["id"])
    roles = [m["role"] for m in upstream(fakes, "chat")["messages"]]
    assert roles == ["user", "assistant", "user"]
    assert (
        second["instructions"] is None
        and second["metadata"] == {}
        and second["truncation"] == "disabled"
    )


def test_store_false_is_not_retrievable_nor_continuable(http: httpx.Client) -> None:
    out = create(http, "orgate/echo", store=False)
    assert out["store"] is False
    assert http.get(f"/v1/responses/{out['id']}").status_code == 404
    res = http.post(
        "/v1/responses",
        json={"model": "orgate/echo", "input": "x", "previous_response_id": out["id"]},
    )
    assert res.status_code == 404 and res.json()["error"]["param"] == "previous_response_id"


# --------------------------------------------------------------------------- the official SDK


def test_the_openai_sdk_sees_what_it_asked_for(server: OrgateServer, fakes: dict[str, Any]) -> None:
    for fake in fakes.values():
        fake.reset()
    client = openai.OpenAI(base_url=server.base_url, api_key=server.api_key, max_retries=0)
    out = client.responses.create(
        model="resp",
        input="hi",
        service_tier="priority",
        safety_identifier="sid-9",
        text={"verbosity": "high"},
        max_tool_calls=4,
        metadata={"k": "v"},
    )
    body = upstream(fakes, "resp")
    assert (
        body["service_tier"],
        body["safety_identifier"],
        body["text"],
        body["max_tool_calls"],
    ) == ("priority", "sid-9", {"verbosity": "high"}, 4)
    assert out.service_tier == "priority" and out.safety_identifier == "sid-9"
    assert out.text is not None and out.text.verbosity == "high"
    assert out.max_tool_calls == 4 and out.metadata == {"k": "v"}
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="anth", input="hi", text={"verbosity": "low"})
    assert caught.value.param == "text.verbosity"


def test_input_file_reaches_a_chat_upstream_as_a_file_part(
    http: httpx.Client, fakes: dict[str, Any]
) -> None:
    pdf = "data:application/pdf;base64,JVBERi0xLjQK"
    content = [
        {"type": "input_text", "text": "summarise"},
        {"type": "input_file", "filename": "r.pdf", "file_data": pdf},
    ]
    res = http.post(
        "/v1/responses", json={"model": "chat", "input": [{"role": "user", "content": content}]}
    )
    assert res.status_code == 200, res.text[:800]
    (message,) = upstream(fakes, "chat")["messages"]
    assert message["content"][1] == {
        "type": "file",
        "file": {"file_data": pdf, "filename": "r.pdf"},
    }
    url = [
        {"role": "user", "content": [{"type": "input_file", "file_url": "https://x.test/r.pdf"}]}
    ]
    refused_url = http.post("/v1/responses", json={"model": "chat", "input": url})
    assert (
        refused_url.status_code == 400
        and refused_url.json()["error"]["param"] == "input[0].content[0].file_url"
    )
