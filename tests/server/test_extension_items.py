"""An upstream's own output items end to end: a real ``orgate serve`` in front of fake upstreams.

``native`` is an ``openai-responses`` deployment on the fake Responses upstream
(``…/v1``); ``native-other`` is the same fake reached at another base URL (so
another origin); ``claude`` and ``chat`` are the Anthropic and Chat fakes;
``mixed`` routes to ``native`` first and falls back to ``claude``. The fake
Responses upstream answers with a ``web_search_call`` and an
``openai:``-namespaced item before its message: the client never sees them,
the next turn sends them back only to the same upstream, and every other
upstream gets the conversation without them plus a gate warning.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.fakes.anthropic_upstream import FakeAnthropic
from tests.fakes.anthropic_upstream import text as claude_text
from tests.fakes.openai_chat_upstream import FakeOpenAIChat
from tests.fakes.openai_chat_upstream import text as chat_text
from tests.fakes.responses_upstream import FakeResponses, Script, http_error, text, web_search_call
from tests.server_process import OrgateServer
from tests.support.configs import model_block, native_and_claude
from tests.support.spec import check_sse, validate

GATE_HEADER = "x-orgate-gate-warnings"
PREVIEW = {
    "id": "wsp_0001",
    "type": "openai:web_search_preview_call",
    "status": "completed",
    "action": {"query": "paris"},
    "results": None,
}


def config(native: FakeResponses, claude: FakeAnthropic, chat: FakeOpenAIChat) -> str:
    return (
        native_and_claude(
            native,
            claude,
            native_other=True,
            native_key="upstream-secret",
            claude_key="anthropic-secret",
            native_extra="capabilities = { reasoning = true }",
        )
        + model_block("chat", "openai-chat", chat.base_url, "fake-model")
        + f"""
[[models]]
name = "mixed"
read_timeout = 5
routing = {{ retries = 0, circuit_failures = 1000 }}
[[models.deployments]]
name = "mixed-native"
provider = "openai-responses"
base_url = "{native.base_url}"
upstream_model = "gpt-fake-1"
[[models.deployments]]
name = "mixed-claude"
provider = "anthropic"
base_url = "{claude.base_url}"
upstream_model = "claude-fake-1"
api_key = "anthropic-secret"
"""
    )


Fakes = tuple[FakeResponses, FakeAnthropic, FakeOpenAIChat]


@pytest.fixture(scope="module")
def upstreams() -> Iterator[Fakes]:
    with (
        FakeResponses.start_in_thread() as native,
        FakeAnthropic.start_in_thread() as claude,
        FakeOpenAIChat.start_in_thread() as chat,
    ):
        yield native, claude, chat


@pytest.fixture(scope="module")
def gateway(upstreams: Fakes) -> Iterator[OrgateServer]:
    running = OrgateServer(config(*upstreams)).start(timeout=60)
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def fakes(upstreams: Fakes) -> Iterator[Fakes]:
    for fake in upstreams:
        fake.reset()
    yield upstreams
    for fake in upstreams:
        fake.reset()


@pytest.fixture
def sdk(gateway: OrgateServer) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=gateway.base_url, api_key=gateway.api_key, max_retries=0, timeout=20
    )


@pytest.fixture
def http(gateway: OrgateServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=gateway.url, headers=gateway.headers(), timeout=20) as client:
        yield client


def searching(answer: str = "It is sunny in Paris.") -> Script:
    """Reasoning, a hosted web search, a namespaced item, then the message."""
    return text(
        answer,
        reasoning_summary="Look it up.",
        encrypted_content="gAAAAB-native-state",
        extra_items=[web_search_call("paris weather"), PREVIEW],
    )


def first_turn(
    http: httpx.Client, native: FakeResponses, *, stream: bool, model: str = "native"
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One turn answered with extension items; (the spec response,
    the raw items the upstream made)."""
    script = searching()
    native.enqueue(script)
    made = FakeResponses().output_items(script)
    body = {"model": model, "input": "Weather in Paris?", "stream": stream}
    if stream:
        with http.stream("POST", "/v1/responses", json=body) as res:
            assert res.status_code == 200
            raw = res.read().decode()
        events = check_sse(raw)  # every event validates against the spec; the grammar holds
        assert "web_search" not in raw and "openai:" not in raw and "orgate:" not in raw
        response = events[-1]["response"]
    else:
        res = http.post("/v1/responses", json=body)
        assert res.status_code == 200, res.text
        response = res.json()
        assert (
            "web_search" not in res.text and "openai:" not in res.text and "orgate:" not in res.text
        )
    validate("ResponseResource", response)
    assert [item["type"] for item in response["output"]] == ["reasoning", "message"]
    assert response["output"][1]["content"][0]["text"] == "It is sunny in Paris."
    assert GATE_HEADER not in res.headers
    return response, made


def extension_items(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        i
        for i in items
        if i.get("type")
        not in ("message", "reasoning", "function_call", "function_call_output", None)
    ]


# --- the client's view ----------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_the_client_never_sees_extension_items(
    http: httpx.Client, fakes: Fakes, stream: bool
) -> None:
    native, _, _ = fakes
    response, _ = first_turn(http, native, stream=stream)
    stored = http.get(f"/v1/responses/{response['id']}")
    assert stored.status_code == 200
    validate("ResponseResource", stored.json())
    assert [item["type"] for item in stored.json()["output"]] == ["reasoning", "message"]


def test_the_sdk_sees_a_plain_answer(sdk: openai.OpenAI, fakes: Fakes) -> None:
    native, _, _ = fakes
    native.enqueue(searching())
    response = sdk.responses.create(model="native", input="Weather in Paris?")
    assert response.output_text == "It is sunny in Paris."
    assert [item.type for item in response.output] == ["reasoning", "message"]


# --- back to the same upstream -------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_a_follow_up_to_the_same_upstream_sends_them_back_in_order(
    http: httpx.Client, sdk: openai.OpenAI, fakes: Fakes, stream: bool
) -> None:
    native, _, _ = fakes
    first, made = first_turn(http, native, stream=stream)
    native.enqueue(text("You're welcome."))
    raw = sdk.responses.with_raw_response.create(
        model="native", previous_response_id=first["id"], input="Thanks!"
    )
    second = raw.parse()
    assert second.output_text == "You're welcome."
    assert GATE_HEADER not in raw.headers
    sent = native.bodies[-1]["input"]
    # the upstream's order: its two items, its reasoning, its message
    assert [i.get("type") for i in made] == [
        "web_search_call",
        "openai:web_search_preview_call",
        "reasoning",
        "message",
    ]
    assert [i.get("type") for i in sent] == [
        "message",
        "web_search_call",
        "openai:web_search_preview_call",
        "reasoning",
        "message",
        "message",
    ]
    # the upstream's own items go back exactly as it made them (ids and nulls included)
    assert sent[1] == made[0] and sent[2] == PREVIEW
    # reasoning goes back to the upstream that made it, summary and encrypted state intact
    assert sent[3] == {
        "type": "reasoning",
        "summary": made[2]["summary"],
        "encrypted_content": "gAAAAB-native-state",
    }
    assert (
        sent[4]["role"] == "assistant" and sent[4]["content"][0]["text"] == "It is sunny in Paris."
    )
    assert (sent[0]["content"], sent[5]["content"]) == ("Weather in Paris?", "Thanks!")


def test_a_session_carries_them_to_the_next_turn(http: httpx.Client, fakes: Fakes) -> None:
    native, _, _ = fakes
    headers = {"X-Session-Id": "ext-items-session"}
    native.enqueue(searching(), text("Again."))
    assert (
        http.post(
            "/v1/responses", json={"model": "native", "input": "Weather?"}, headers=headers
        ).status_code
        == 200
    )
    res = http.post(
        "/v1/responses", json={"model": "native", "input": "And tomorrow?"}, headers=headers
    )
    assert res.status_code == 200, res.text
    assert [i["type"] for i in extension_items(native.bodies[-1]["input"])] == [
        "web_search_call",
        "openai:web_search_preview_call",
    ]


# --- gated elsewhere ------------------------------------------------------------------------------


def _other_upstream_received(fakes: Fakes, model: str) -> str:
    native, claude, chat = fakes
    if model == "claude":
        return json.dumps(claude.bodies[-1])
    if model == "chat":
        return json.dumps(chat.bodies[-1])
    return json.dumps(native.bodies[-1])


@pytest.mark.parametrize("model", ["claude", "chat", "native-other"])
def test_a_follow_up_elsewhere_leaves_them_out_and_says_so(
    http: httpx.Client, sdk: openai.OpenAI, fakes: Fakes, model: str
) -> None:
    native, claude, chat = fakes
    first, made = first_turn(http, native, stream=False)
    claude.enqueue(claude_text("Still sunny."))
    chat.enqueue(chat_text("Still sunny."))
    native.enqueue(text("Still sunny."))
    raw = sdk.responses.with_raw_response.create(
        model=model, previous_response_id=first["id"], input="Thanks!"
    )
    second = raw.parse()
    assert second.output_text == "Still sunny."
    validate("ResponseResource", raw.http_response.json())
    received = _other_upstream_received(fakes, model)
    assert (
        "web_search" not in received
        and "wsp_0001" not in received
        and made[0]["id"] not in received
    )
    assert (
        "gAAAAB-native-state" not in received
    )  # the reasoning state goes back only to the upstream that made it
    assert (
        "It is sunny in Paris." in received and "Thanks!" in received
    )  # the rest of the conversation went
    warning = raw.headers[GATE_HEADER]
    assert warning.startswith("history: namespaced, 2 item(s) made by another upstream not sent to")
    assert "(web_search_call)" in warning and "(openai:web_search_preview_call)" in warning


def test_a_fallback_to_another_upstream_is_gated_too(
    sdk: openai.OpenAI, http: httpx.Client, fakes: Fakes
) -> None:
    native, claude, _ = fakes
    first, _ = first_turn(http, native, stream=False, model="mixed")
    native.enqueue(http_error(500, "down"))
    claude.enqueue(claude_text("From the fallback."))
    raw = sdk.responses.with_raw_response.create(
        model="mixed", previous_response_id=first["id"], input="Thanks!"
    )
    assert raw.parse().output_text == "From the fallback."
    assert "web_search" in json.dumps(
        native.bodies[-1]["input"]
    )  # the native upstream was offered them
    assert "web_search" not in json.dumps(claude.bodies[-1])
    assert "not sent to 'mixed-claude'" in raw.headers[GATE_HEADER]


def test_client_reasoning_items_carry_no_origin_and_go_as_before(
    http: httpx.Client, fakes: Fakes
) -> None:
    """Only history knows where reasoning came from: a client's own reasoning item goes to any
    Responses upstream."""
    native, _, _ = fakes
    first, _ = first_turn(http, native, stream=False)
    native.enqueue(text("Replayed."))
    replay = [
        {"role": "user", "content": "Weather in Paris?"},
        *first["output"],
        {"role": "user", "content": "Thanks!"},
    ]
    res = http.post("/v1/responses", json={"model": "native-other", "input": replay})
    assert res.status_code == 200, res.text
    sent = native.bodies[-1]["input"]
    assert sent[1] == {
        "type": "reasoning",
        "summary": first["output"][0]["summary"],
        "encrypted_content": "gAAAAB-native-state",
    }


def test_the_stored_response_shows_no_origin(http: httpx.Client, fakes: Fakes) -> None:
    native, _, _ = fakes
    first, _ = first_turn(http, native, stream=True)
    stored = http.get(f"/v1/responses/{first['id']}")
    assert stored.json()["output"] == first["output"] and "orgate:" not in stored.text


# --- never from a client --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "item",
    [
        {"type": "openai:web_search_call", "id": "ws_1", "status": "completed"},
        {
            "type": "orgate:extension_item",
            "id": "ext_1",
            "origin": "openai-responses http://x/v1",
            "item": {"type": "web_search_call"},
        },
    ],
)
def test_a_client_sending_such_an_item_gets_a_400(
    http: httpx.Client, fakes: Fakes, item: dict[str, Any]
) -> None:
    native, _, _ = fakes
    res = http.post(
        "/v1/responses",
        json={"model": "native", "input": [{"role": "user", "content": "hi"}, item]},
    )
    assert res.status_code == 400, res.text
    assert (res.json()["error"]["code"], res.json()["error"]["param"]) == (
        "non_portable_item",
        "input[1].type",
    )
    assert native.bodies == []


def test_a_client_sending_an_unnamespaced_upstream_item_gets_a_400(
    http: httpx.Client, fakes: Fakes
) -> None:
    native, _, _ = fakes
    item = web_search_call()
    res = http.post(
        "/v1/responses",
        json={"model": "native", "input": [{"role": "user", "content": "hi"}, item]},
    )
    assert res.status_code == 400, res.text
    assert res.json()["error"]["param"].startswith("input[1]")
    assert native.bodies == []
