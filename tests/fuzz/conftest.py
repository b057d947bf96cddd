"""A server for the fuzzers: built-in models, the fake upstream as ``fake-chat``,
the chat adapter on."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import chat_model_config
from tests.fakes.openai_chat_upstream import FakeOpenAIChat
from tests.hardening.conftest import LIMITS, server_env
from tests.server_process import OrgateServer

ERROR_FIELDS = {"message", "type", "param", "code"}


@pytest.fixture(scope="module")
def fuzz_upstream() -> Iterator[FakeOpenAIChat]:
    with FakeOpenAIChat.start_in_thread() as fake:
        yield fake


@pytest.fixture(scope="module")
def target(fuzz_upstream: FakeOpenAIChat) -> Iterator[OrgateServer]:
    config = (
        "[endpoints]\nchat_completions = { enabled = true }\n"
        + LIMITS
        + "\n"
        + chat_model_config(fuzz_upstream.base_url)
    )
    with OrgateServer(config, env=server_env()) as server:
        yield server


@pytest.fixture(scope="module")
def fuzz_http(target: OrgateServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=target.url, headers=target.headers(), timeout=30) as c:
        yield c


def check_answer(res: httpx.Response) -> None:
    """No 5xx for client input (502/504 are upstream failures, not expected here),
    and every error in the spec shape."""
    assert res.status_code < 500, f"{res.status_code}: {res.text[:1000]}"
    if res.status_code >= 400:
        assert res.headers.get("content-type", "").startswith("application/json"), res.headers
        body: Any = res.json()
        assert isinstance(body, dict) and set(body) == {"error"}, body
        assert set(body["error"]) == ERROR_FIELDS, body
        assert isinstance(body["error"]["message"], str) and body["error"]["message"]
        assert body["error"]["param"] is None or isinstance(body["error"]["param"], str)
        assert body["error"]["code"] is None or isinstance(body["error"]["code"], str)
