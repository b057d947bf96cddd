"""Fixtures for the end-to-end tests of stored responses over real ``orgate serve`` processes.

``gw`` is one session-wide server (per xdist worker) with two API keys of two
tenants (``key-a`` → tenant ``a``, ``key-b`` → tenant ``b``), the built-in
``orgate/echo`` and ``fake-chat`` → the session's fake OpenAI upstream, and a
SQLite store in its temp dir. ``a`` and ``b`` are HTTP clients of each key.
Tests that kill or restart a server, or need PostgreSQL, start their own.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import chat_model_config
from tests.fakes.openai_chat_upstream import FakeOpenAIChat
from tests.server_process import OrgateServer
from tests.store_e2e.helpers import TWO_TENANTS


@pytest.fixture(scope="session")
def gw(fake_chat: FakeOpenAIChat) -> Iterator[OrgateServer]:
    with OrgateServer(
        TWO_TENANTS + chat_model_config(fake_chat.base_url), api_key="key-a"
    ) as running:
        yield running


@pytest.fixture
def a(gw: OrgateServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=gw.url, headers={"Authorization": "Bearer key-a"}, timeout=30) as c:
        yield c


@pytest.fixture
def b(gw: OrgateServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=gw.url, headers={"Authorization": "Bearer key-b"}, timeout=30) as c:
        yield c
