"""The `real_model` tier: orgate in front of a real language model on loopback.

`scripts/real-model.sh` (called by the README's test command) starts SmolLM2-135M-Instruct
behind llama-cpp-python's OpenAI-compatible server and exports ``ORGATE_TEST_MODEL_URL`` and
``ORGATE_TEST_MODEL_NAME``. Without them the tier is skipped — except in CI, where a missing
model is a failure. The tests check transport and structure (every body and event valid
against the spec, the safety net's guarantees), never the quality of a 135M model's answers.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import httpx
import pytest

from tests.server_process import OrgateServer

MODEL_URL = os.environ.get("ORGATE_TEST_MODEL_URL")
MODEL_NAME = os.environ.get("ORGATE_TEST_MODEL_NAME", "")
MODEL = "smollm2"  # the name clients use at orgate
# A loaded 2-core machine generates a few tokens a second at worst: each request may wait
# for the one model (it serves one request at a time).
REQUEST_TIMEOUT = float(os.environ.get("ORGATE_TEST_MODEL_TIMEOUT", "600"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.real_model)
            item.add_marker(pytest.mark.timeout(3 * REQUEST_TIMEOUT))
            if not MODEL_URL and not os.environ.get("CI"):  # in CI, `gateway` fails instead
                item.add_marker(
                    pytest.mark.skip(
                        reason='ORGATE_TEST_MODEL_URL is unset: run `eval "$(bash '
                        'scripts/real-model.sh)"` first'
                    )
                )


def model_config() -> str:
    return f"""
[[models]]
name = "{MODEL}"
provider = "openai-chat"
base_url = "{MODEL_URL}"
upstream_model = "{MODEL_NAME}"
read_timeout = {REQUEST_TIMEOUT}
routing = {{ retries = 0 }}

[structured]
retries = 1
truncation_retries = 1
seconds = {REQUEST_TIMEOUT}
default_output_cap = 256
"""


@pytest.fixture(scope="module")
def gateway() -> Iterator[OrgateServer]:
    if not MODEL_URL:
        pytest.fail("ORGATE_TEST_MODEL_URL is unset (CI must start scripts/real-model.sh)")
    with OrgateServer(model_config()) as running:
        yield running


@pytest.fixture
def api(gateway: OrgateServer) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=gateway.url, headers=gateway.headers(), timeout=REQUEST_TIMEOUT
    ) as c:
        yield c
