"""Shared fixtures: a fake OpenAI-compatible upstream and a real orgate server in front of it.

``server`` is one ``orgate serve`` subprocess for the session with the
built-in models, ``fake-chat`` (``openai-chat`` → the fake upstream,
``fake_chat``) and the legacy chat endpoint switched on. Tests that need
another configuration start their own ``OrgateServer``. ``fakes`` are the three
fake upstreams of tests/support/upstreams.py (one set per module), ``fx`` the
same with nothing scripted or recorded around the test.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fakes._base import LoopbackFake  # noqa: E402
from tests.fakes.openai_chat_upstream import FakeOpenAIChat  # noqa: E402
from tests.server_process import OrgateServer  # noqa: E402
from tests.support.upstreams import fresh, three_fakes  # noqa: E402


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """tests/cluster/ on one worker, the rest test by test (tests/support/scheduling.py).

    Imported here: the hook runs only under pytest-xdist, and the suites run in their own
    virtualenvs (scripts/llamaindex-tests.sh) do not install it."""
    from tests.support.scheduling import make_scheduler

    return make_scheduler(config, log)


def chat_model_config(base_url: str, name: str = "fake-chat", **extra: str) -> str:
    lines = [
        "[[models]]",
        f'name = "{name}"',
        'provider = "openai-chat"',
        f'base_url = "{base_url}"',
        'api_key = "upstream-secret"',
        'upstream_model = "fake-model"',
        "read_timeout = 3",
    ]
    lines += [f"{k} = {v}" for k, v in extra.items()]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="session")
def fake_chat() -> Iterator[FakeOpenAIChat]:
    with FakeOpenAIChat.start_in_thread() as fake:
        yield fake


@pytest.fixture(scope="session")
def server(fake_chat: FakeOpenAIChat) -> Iterator[OrgateServer]:
    config = "[endpoints]\nchat_completions = { enabled = true }\n\n" + chat_model_config(
        fake_chat.base_url
    )
    with OrgateServer(config) as running:
        yield running


@pytest.fixture
def fake(fake_chat: FakeOpenAIChat) -> Iterator[FakeOpenAIChat]:
    """The session's fake upstream, with its script and records reset for one test."""
    fake_chat.reset()
    yield fake_chat
    fake_chat.reset()


@pytest.fixture
def client(server: OrgateServer) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=server.base_url, api_key=server.api_key, max_retries=0, timeout=20
    )


@pytest.fixture
def http(server: OrgateServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, headers=server.headers(), timeout=20) as c:
        yield c


@pytest.fixture(scope="module")
def fakes() -> Iterator[dict[str, LoopbackFake]]:
    with three_fakes() as running:
        yield running


@pytest.fixture
def fx(fakes: dict[str, LoopbackFake]) -> Iterator[dict[str, LoopbackFake]]:
    with fresh(fakes):
        yield fakes
