"""One ``orgate serve`` for this folder: the fake upstream as ``fake-chat`` plus per-format
policies.

Formats configured (``text.format.name``):

- ``priced``          — semantic check ``e2e_checks:price_non_negative``;
- ``product_default`` — ``on_exhaustion = "default"`` with a default object;
- ``product_review``  — ``on_exhaustion = "review"`` (queue in the server's dir);
- anything else       — ``on_exhaustion = "error"`` (the section default).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import chat_model_config
from tests.fakes.openai_chat_upstream import FakeOpenAIChat
from tests.server_process import OrgateServer

HERE = Path(__file__).resolve().parent
DEFAULT_PRODUCT = {"sku": "UNKNOWN", "price": 0}


def net_config(fake_url: str, review_db: Path) -> str:
    return (
        "[structured]\n"
        f'review_db = "{review_db}"\n'
        "seconds = 30\n\n"
        "[structured.formats.priced]\n"
        'semantic = ["e2e_checks:price_non_negative"]\n\n'
        "[structured.formats.product_default]\n"
        'on_exhaustion = "default"\n'
        'default = { sku = "UNKNOWN", price = 0 }\n\n'
        "[structured.formats.product_review]\n"
        'on_exhaustion = "review"\n\n' + chat_model_config(fake_url)
    )


@pytest.fixture(scope="package")
def net_server(
    fake_chat: FakeOpenAIChat, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OrgateServer]:
    workdir = tmp_path_factory.mktemp("structured-e2e")
    pythonpath = os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH", "")) if p)
    server = OrgateServer(
        net_config(fake_chat.base_url, workdir / "review.db"),
        env={"PYTHONPATH": pythonpath},
        workdir=str(workdir),
    )
    with server:
        yield server


@pytest.fixture
def api(net_server: OrgateServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=net_server.url, headers=net_server.headers(), timeout=30) as c:
        yield c
