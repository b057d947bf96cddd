"""Hostile upstreams against a real ``orgate serve``: redirects, and 200s that are not an answer.

A 307 from an upstream made orgate resend the prompt to another origin with the Anthropic
``x-api-key`` and the configured headers; ``openai-responses`` and ``anthropic`` turned any
200 JSON object into a ``completed`` response with ``output: []``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.fakes._base import LoopbackFake, Raw
from tests.fakes.anthropic_upstream import FakeAnthropic
from tests.fakes.openai_chat_upstream import FakeOpenAIChat
from tests.fakes.redirects import with_redirects
from tests.fakes.responses_upstream import FakeResponses
from tests.server_process import OrgateServer

UPSTREAM_KEY = "sk-upstream-SECRET-7777777"
HEADER_VALUE = "hdr-SECRET-8888888"
PROVIDERS = {
    "openai-chat": (FakeOpenAIChat, "/v1"),
    "openai-responses": (FakeResponses, "/v1"),
    "anthropic": (FakeAnthropic, ""),
}


@pytest.fixture(scope="module")
def upstreams() -> Iterator[dict[str, Any]]:
    started: dict[str, Any] = {"elsewhere": FakeAnthropic.start_in_thread()}
    for provider, (fake, _) in PROVIDERS.items():
        started[f"redirect-{provider}"] = with_redirects(fake).start_in_thread()
        started[f"plain-{provider}"] = fake.start_in_thread()
    try:
        yield started
    finally:
        for fake in started.values():
            fake.stop_thread()


def model(name: str, provider: str, base_url: str, redirects: str = "none") -> str:
    return f"""
[[models]]
name = "{name}"
provider = "{provider}"
base_url = "{base_url}"
api_key = "{UPSTREAM_KEY}"
headers = {{ "X-Tenant-Token" = "{HEADER_VALUE}" }}
redirects = "{redirects}"
read_timeout = 10
"""


@pytest.fixture(scope="module")
def server(upstreams: dict[str, Any]) -> Iterator[OrgateServer]:
    config = ""
    for provider, (_, suffix) in PROVIDERS.items():
        moved = upstreams[f"redirect-{provider}"]
        config += model(f"moved-{provider}", provider, moved.old_url + suffix)
        config += model(f"same-{provider}", provider, moved.old_url + suffix, "same-origin")
        config += model(f"plain-{provider}", provider, upstreams[f"plain-{provider}"].base_url)
    with OrgateServer(config) as running:
        yield running


def post(server: OrgateServer, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(
        f"{server.base_url}/responses", json=body, headers=server.headers(), timeout=60
    )


@pytest.mark.parametrize("provider", list(PROVIDERS))
@pytest.mark.parametrize("stream", [False, True])
def test_a_redirect_to_another_origin_gets_nothing(
    server: OrgateServer, upstreams: dict[str, Any], provider: str, stream: bool
) -> None:
    elsewhere: LoopbackFake = upstreams["elsewhere"]
    before = len(elsewhere.requests)
    for name in (f"moved-{provider}", f"same-{provider}"):
        moved = upstreams[f"redirect-{provider}"]
        moved.redirect_to = f"http://127.0.0.1:{elsewhere.port}/v1/messages"
        answer = post(server, {"model": name, "input": "a secret prompt", "stream": stream})
        assert answer.status_code == 502, answer.text
        error = answer.json()["error"]
        assert (error["code"], error["type"]) == ("upstream_redirect", "server_error")
        assert f"127.0.0.1:{elsewhere.port}" in error["message"]
    assert len(elsewhere.requests) == before  # no prompt, key or header went there
    assert UPSTREAM_KEY not in server.output() and HEADER_VALUE not in server.output()


@pytest.mark.parametrize("provider", list(PROVIDERS))
def test_same_origin_redirects_are_followed_only_when_configured(
    server: OrgateServer, upstreams: dict[str, Any], provider: str
) -> None:
    moved = upstreams[f"redirect-{provider}"]
    moved.redirect_to = None  # to the same path without /old, on the same origin
    refused = post(server, {"model": f"moved-{provider}", "input": "hi"})
    assert refused.status_code == 502 and refused.json()["error"]["code"] == "upstream_redirect"
    followed = post(server, {"model": f"same-{provider}", "input": "hi"})
    assert followed.status_code == 200, followed.text
    assert followed.json()["status"] == "completed" and followed.json()["output"]


JUNK = {
    "a JSON object": Raw([b'{"ok": true, "result": "fine"}'], content_type="application/json"),
    "an event stream of junk": Raw([b'data: {"ok": true}\n\n', b"data: [DONE]\n\n"]),
}


@pytest.mark.parametrize("provider", list(PROVIDERS))
@pytest.mark.parametrize("junk", list(JUNK))
@pytest.mark.parametrize("stream", [False, True])
def test_a_200_that_is_not_an_answer_is_a_502(
    server: OrgateServer, upstreams: dict[str, Any], provider: str, junk: str, stream: bool
) -> None:
    upstreams[f"plain-{provider}"].enqueue(JUNK[junk])
    answer = post(server, {"model": f"plain-{provider}", "input": "hi", "stream": stream})
    assert answer.status_code == 502, (
        answer.text
    )  # before any output: an HTTP error, streamed or not
    assert answer.json()["error"]["code"] == "upstream_invalid_response"
