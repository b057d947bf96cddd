"""Black-box: the JavaScript clients do not send again a request whose structured-output budget
orgate spent — streaming or not, with their default retry settings (``tests/js/spent_budget.mjs``).

The `openai` SDK retries 408, 409, 429 and 5xx twice unless ``x-should-retry: false``; the Vercel
AI SDK's ``generateText``/``streamText`` retry 408, 409, 429 and 5xx twice and read no such
header. A spent budget is a 400 (``structured_output_invalid``): each client request is exactly
``CALLS_PER_REQUEST`` upstream calls and one review entry (docs/structured-output.md).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.hardening.conftest import server_env
from tests.sdk_js.conftest import _runner
from tests.support.spent_budget import CALLS_PER_REQUEST, MODEL, SpentBudget, spent_budget_gateway

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None,
    reason="node is not installed: the JavaScript SDK tests need Node.js 20+",
)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SpentBudget]:
    with spent_budget_gateway(tmp_path_factory.mktemp("spent-js"), env=server_env()) as running:
        yield running


@pytest.fixture
def run_js(node_modules: Path, gateway: SpentBudget) -> Callable[..., Any]:
    return _runner(gateway.server)


@pytest.mark.parametrize(
    ("scenario", "status"),
    [
        ("openai_create", "status"),
        ("openai_stream", "status"),
        ("ai_generate", "statusCode"),
        ("ai_stream", "statusCode"),
    ],
)
def test_a_spent_budget_is_sent_once(
    run_js: Callable[..., Any], gateway: SpentBudget, scenario: str, status: str
) -> None:
    calls, reviews = gateway.calls(), gateway.reviews()
    failed = run_js("spent_budget.mjs", timeout=120, MODEL=MODEL, SCENARIOS=scenario)[scenario]
    assert gateway.calls() - calls == CALLS_PER_REQUEST, failed  # the client sent it once
    assert gateway.reviews() - reviews == 1
    assert failed[status] == 400 and "structured-output checks" in failed["message"], failed
