"""A gateway whose every structured-output request spends its budget: the rig of the tests that
count, for each client of the matrix, the upstream calls one client request makes.

The fake chat upstream answers every request with JSON that fails its schema (``INVALID``); the
gateway gives each request ``CALLS_PER_REQUEST`` upstream calls (one feedback retry), then
queues it for review and answers with its spent-budget error. A client that sends the request
again on its own shows up as more calls than that at the fake, and as more review entries.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import chat_model_config
from tests.fakes.openai_chat_upstream import FakeOpenAIChat, Script, text
from tests.server_process import OrgateServer

MODEL = "chat"
INVALID = '{"name": 5}'  # a number for a string, and the age missing
CALLS_PER_REQUEST = 2  # the first attempt and one feedback retry


def invalid(body: dict[str, Any]) -> Script:
    return text(INVALID)


def config(fake_url: str, review_db: Path) -> str:
    return (
        "[structured]\n"
        "retries = 1\n"
        "truncation_retries = 0\n"
        'on_exhaustion = "review"\n'
        f'review_db = "{review_db}"\n\n' + chat_model_config(fake_url, MODEL)
    )


@dataclass(slots=True)
class SpentBudget:
    server: OrgateServer
    fake: FakeOpenAIChat

    def reviews(self) -> int:
        """Entries in the review queue (one per request whose budget was spent)."""
        with httpx.Client(base_url=self.server.url, headers=self.server.headers()) as api:
            return len(api.get("/v1/orgate/review?status=all").json()["data"])

    def calls(self) -> int:
        return len(self.fake.bodies)


@contextmanager
def spent_budget_gateway(workdir: Path, env: dict[str, str] | None = None) -> Iterator[SpentBudget]:
    with FakeOpenAIChat.start_in_thread() as fake:
        fake.handler = invalid
        with OrgateServer(config(fake.base_url, workdir / "review.db"), env=env) as server:
            yield SpentBudget(server, fake)
