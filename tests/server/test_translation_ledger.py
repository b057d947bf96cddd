"""The translation ledger end to end: a real ``orgate serve`` in front of ``orgate/echo`` and the
openai-chat and anthropic fakes.

A request whose tools include one the upstream cannot run (a hosted ``web_search``) shows an
entry for it in ``X-Orgate-Translation``, in the stored response's record (through the
console's API, which the inspector renders: tests/console) and in
``orgate_translations_total``; the upstream never saw the tool. The mappings' own entries
(a developer message, a custom tool) come through the same way, and ``[translation] refuse``
turns a translation into a 400 naming it, before any upstream call.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.fakes._base import LoopbackFake
from tests.server_process import OrgateServer
from tests.support.upstreams import fresh, provider_models, three_fakes

CONSOLE = '[console]\nsession_secret = "ledger-test-secret-0123456789abcdef"\n'
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}
MODELS = ("orgate/echo", "chat", "anth")


@pytest.fixture(scope="module")
def fakes() -> Iterator[dict[str, LoopbackFake]]:
    with three_fakes() as running:
        yield running


def _config(fakes: dict[str, LoopbackFake], extra: str = "") -> str:
    models = provider_models(fakes, api_key="upstream-key", read_timeout=10)
    return CONSOLE + extra + models


@pytest.fixture(scope="module")
def gateway(fakes: dict[str, LoopbackFake]) -> Iterator[OrgateServer]:
    with OrgateServer(_config(fakes)) as running:
        yield running


@pytest.fixture(scope="module")
def strict(fakes: dict[str, LoopbackFake]) -> Iterator[OrgateServer]:
    policy = '[translation]\nrefuse = ["dropped", "developer_as_system"]\n'
    with OrgateServer(_config(fakes, policy)) as running:
        yield running


@pytest.fixture
def clean(fakes: dict[str, LoopbackFake]) -> Iterator[dict[str, LoopbackFake]]:
    with fresh(fakes) as reset:
        yield reset


def _post(server: OrgateServer, **body: Any) -> httpx.Response:
    return httpx.post(
        f"{server.base_url}/responses", headers=server.headers(), json=body, timeout=60
    )


def _stored(server: OrgateServer, response_id: str) -> list[dict[str, str]]:
    """The ledger of the stored response, as the console's inspector gets it."""
    with httpx.Client(base_url=server.url, timeout=60) as console:
        session = console.post("/console/api/session", json={"key": server.api_key})
        assert session.status_code == 200, session.text
        got = console.get(f"/console/api/responses/{response_id}")
        assert got.status_code == 200, got.text
        return list(got.json()["translation"])


def _sent_tools(fake: LoopbackFake) -> list[Any]:
    (body,) = fake.bodies
    return list(body.get("tools") or [])


@pytest.mark.parametrize("model", MODELS)
def test_a_tool_the_upstream_cannot_take_is_in_the_header_the_record_and_the_metric(
    gateway: OrgateServer, clean: dict[str, LoopbackFake], model: str
) -> None:
    res = _post(
        gateway, model=model, input="weather in Paris", tools=[WEATHER, {"type": "web_search"}]
    )
    assert res.status_code == 200, res.text
    assert res.headers["x-orgate-translation"] == "hosted_tool_dropped=tools[1]"
    assert _stored(gateway, res.json()["id"]) == [
        {
            "code": "hosted_tool_dropped",
            "kind": "dropped",
            "side": "request",
            "path": "tools[1]",
            "detail": "web_search",
        }
    ]
    if model in clean:
        assert [t.get("name") or t["function"]["name"] for t in _sent_tools(clean[model])] == [
            "get_weather"
        ]
    metrics = httpx.get(f"{gateway.url}/metrics", timeout=30).text
    assert 'orgate_translations_total{code="hosted_tool_dropped",kind="dropped"}' in metrics


def test_a_plain_request_has_no_ledger(gateway: OrgateServer, clean: dict[str, Any]) -> None:
    for model in MODELS:
        res = _post(gateway, model=model, input="hello")
        assert res.status_code == 200, res.text
        assert "x-orgate-translation" not in res.headers
        assert _stored(gateway, res.json()["id"]) == []


@pytest.mark.parametrize(
    ("model", "code"),
    [("chat", "developer_as_system"), ("anth", "system_message_to_system_prompt")],
)
def test_the_mappings_note_what_they_approximate(
    gateway: OrgateServer, clean: dict[str, Any], model: str, code: str
) -> None:
    res = _post(
        gateway,
        model=model,
        input=[
            {"role": "developer", "content": "be brief"},
            {"role": "user", "content": "hi"},
        ],
    )
    assert res.status_code == 200, res.text
    assert res.headers["x-orgate-translation"] == f"{code}=input[0]"
    assert [e["kind"] for e in _stored(gateway, res.json()["id"])] == ["approximated"]


def test_a_custom_tool_is_noted_both_ways(gateway: OrgateServer, clean: dict[str, Any]) -> None:
    patch = {"type": "custom", "name": "apply_patch", "description": "edit files"}
    res = _post(gateway, model="orgate/echo", input="patch it", tools=[patch])
    assert res.status_code == 200, res.text
    assert res.json()["output"][0]["type"] == "custom_tool_call"
    codes = {(e["code"], e["side"]) for e in _stored(gateway, res.json()["id"])}
    assert codes == {
        ("custom_tool_as_function", "request"),
        ("custom_call_from_function_call", "response"),
    }


@pytest.mark.parametrize("model", MODELS)
def test_a_refuse_policy_turns_a_drop_into_a_400_naming_it(
    strict: OrgateServer, clean: dict[str, LoopbackFake], model: str
) -> None:
    res = _post(strict, model=model, input="hi", tools=[WEATHER, {"type": "web_search"}])
    assert res.status_code == 400, res.text
    error = res.json()["error"]
    assert error["code"] == "translation_refused" and error["param"] == "tools[1]"
    assert "hosted_tool_dropped" in error["message"] and "web_search" in error["message"]
    assert all(not fake.bodies for fake in clean.values())  # no upstream was called


def test_a_refused_mapping_stops_before_the_upstream_is_called(
    strict: OrgateServer, clean: dict[str, LoopbackFake]
) -> None:
    """The chat mapping notes a developer message it sends as system: refused by code, after
    the mapping and before the request leaves."""
    res = _post(
        strict,
        model="chat",
        input=[{"role": "developer", "content": "be brief"}, {"role": "user", "content": "hi"}],
    )
    assert res.status_code == 400, res.text
    assert res.json()["error"]["param"] == "input[0]"
    assert not clean["chat"].bodies
    # what the policy does not name still goes through
    assert _post(strict, model="chat", input="hi").status_code == 200
