"""One real ``orgate serve`` for the directory: two tenants (``key-a`` → ``a``, ``key-b`` →
``b``), the built-in models and one model per fake upstream kind (``chat`` → openai-chat,
``anth`` → anthropic, ``resp`` → openai-responses; tests/support/upstreams.py). ``ups`` are the
fakes with nothing scripted or recorded around a test; ``client``/``other`` the real ``openai``
SDK as each tenant."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from tests.fakes._base import LoopbackFake
from tests.server_process import OrgateServer
from tests.store_e2e.helpers import TWO_TENANTS
from tests.support.upstreams import fresh, provider_models, three_fakes

#: The built-in model under its name without "/", and the openai-chat and anthropic fakes.
MODELS = ["orgate-echo", "chat", "anth"]


@pytest.fixture(scope="package")
def fakes() -> Iterator[dict[str, LoopbackFake]]:
    with three_fakes() as running:
        yield running


@pytest.fixture(scope="package")
def gateway(fakes: dict[str, LoopbackFake]) -> Iterator[OrgateServer]:
    config = TWO_TENANTS + provider_models(fakes, api_key="k", read_timeout=10)
    with OrgateServer(config, api_key="key-a") as running:
        yield running


@pytest.fixture
def ups(fakes: dict[str, LoopbackFake]) -> Iterator[dict[str, LoopbackFake]]:
    with fresh(fakes) as clean:
        yield clean


def sdk(gateway: OrgateServer, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=gateway.base_url, api_key=key, max_retries=0, timeout=30)


@pytest.fixture
def client(gateway: OrgateServer) -> openai.OpenAI:
    return sdk(gateway, "key-a")


@pytest.fixture
def other(gateway: OrgateServer) -> openai.OpenAI:
    return sdk(gateway, "key-b")


def upstream_saw(ups: dict[str, LoopbackFake], model: str) -> list[str]:
    """The JSON text of each model request the fake behind ``model`` received (none for the
    built-in model, which has no upstream)."""
    fake = ups.get(model)
    return [] if fake is None else [json.dumps(body) for body in fake.bodies]


def texts(items: list[Any]) -> list[tuple[str, str]]:
    """(role, text) of the message items of a listing (SDK objects)."""
    out = []
    for item in items:
        if item.type == "message":
            out.append((item.role, "".join(getattr(part, "text", "") for part in item.content)))
    return out
