"""An approved MCP call runs once, whatever answers its approval request and wherever: two real
``orgate serve`` processes share one store (a SQLite file; a PostgreSQL schema, as two machines
would), and the same ``mcp_approval_response`` is sent three times, one after the other and all
at once, through either process. A real MCP server counts the calls it runs.

What a replay gets (docs/mcp.md): the recorded outcome (an ``mcp_call`` with the first call's
output), or, while the first is still running, a 409 ``mcp_approval_in_progress`` with
``Retry-After`` — which the ``openai`` SDK retries by itself, and then gets that outcome.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import openai
import pytest
from mcp.server.mcpserver import MCPServer

from tests.mcp.servers import Running
from tests.server_process import OrgateServer
from tests.store.helpers import PG_SKIP, PG_URL

pytestmark = pytest.mark.timeout(600)

PAID: list[str] = []
_PAID_LOCK = threading.Lock()


def paid(memo: str) -> int:
    """How many payments named ``memo`` the bank made (the model writes the memo it was told)."""
    return sum(memo in made for made in PAID)


def bank_server() -> MCPServer:
    server = MCPServer("orgate-test-bank")

    @server.tool(description="Pay a bill: a side effect that must happen once.")
    async def pay(memo: str) -> str:
        with _PAID_LOCK:
            PAID.append(memo)
            receipt = f"receipt {len(PAID)} for {memo}"
        # A payment takes time: answers sent at once may meet it running (the scenario; the
        # checks hold either way)
        await asyncio.sleep(1.5)
        return receipt

    return server


@pytest.fixture(scope="module")
def bank() -> Iterator[Running]:
    running = Running(bank_server()).start()
    yield running
    running.stop()


def _config(bank_url: str) -> str:
    return f"""
[[mcp_servers]]
label = "bank"
url = "{bank_url}"
require_approval = "always"
"""


async def _sql(statement: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(PG_URL)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def pair(request: pytest.FixtureRequest, bank: Running, tmp_path_factory: pytest.TempPathFactory):
    """Two processes on one store."""
    schema = None
    if request.param == "sqlite":
        url = f"sqlite://{tmp_path_factory.mktemp('approvals')}/orgate.db"
    else:
        if not PG_URL:
            pytest.skip(PG_SKIP)
        schema = f"mcp_{uuid.uuid4().hex[:12]}"
        asyncio.run(_sql(f"CREATE SCHEMA {schema}"))
        url = f"{PG_URL}{'&' if '?' in PG_URL else '?'}search_path={schema}"
    servers: list[OrgateServer] = []
    try:
        for _ in range(2):
            servers.append(OrgateServer(_config(bank.url), env={"ORGATE_STORE__URL": url}).start())
        yield servers[0], servers[1]
    finally:
        for server in servers:
            server.stop()
        if schema is not None:
            asyncio.run(_sql(f"DROP SCHEMA {schema} CASCADE"))


TOOLS = [{"type": "mcp", "server_label": "bank"}]


def _ask(server: OrgateServer, memo: str) -> tuple[str, str]:
    """A response that ends with an approval request to pay ``memo``: (its id, the request's)."""
    first = httpx.post(
        f"{server.base_url}/responses",
        headers=server.headers(),
        json={"model": "orgate/echo", "input": f"pay memo {memo}", "tools": TOOLS},
        timeout=120,
    ).json()
    ask = first["output"][-1]
    assert ask["type"] == "mcp_approval_request" and ask["name"] == "pay", first
    return first["id"], ask["id"]


def _answer(server: OrgateServer, previous: str, ask: str) -> httpx.Response:
    body = {
        "model": "orgate/echo",
        "previous_response_id": previous,
        "input": [{"type": "mcp_approval_response", "approval_request_id": ask, "approve": True}],
        "tools": TOOLS,
    }
    return httpx.post(
        f"{server.base_url}/responses", headers=server.headers(), json=body, timeout=120
    )


def _mcp_call(response: dict) -> dict:
    [call] = [item for item in response["output"] if item["type"] == "mcp_call"]
    return call


def test_an_answer_sent_three_times_in_turn_runs_the_call_once(
    pair: tuple[OrgateServer, OrgateServer],
) -> None:
    a, b = pair
    memo = f"rent-{uuid.uuid4().hex[:6]}"
    previous, ask = _ask(a, memo)
    answers = [_answer(server, previous, ask) for server in (a, b, a)]
    assert [r.status_code for r in answers] == [200, 200, 200]
    calls = [_mcp_call(r.json()) for r in answers]
    assert paid(memo) == 1
    [receipt] = {c["output"] for c in calls}
    assert memo in receipt and {(c["approval_request_id"], c["status"]) for c in calls} == {
        (ask, "completed")
    }
    # Each answer is a response of its own; the model of each read the receipt.
    assert len({r.json()["id"] for r in answers}) == 3
    assert all("receipt" in r.json()["output"][-1]["content"][0]["text"] for r in answers)


def test_an_answer_sent_again_in_a_session_runs_the_call_once(
    pair: tuple[OrgateServer, OrgateServer],
) -> None:
    """In a session the conversation is the session's: the second answer's history already holds
    the first one's mcp_call, so it is not an answer to act on."""
    a, b = pair
    memo = f"phone-{uuid.uuid4().hex[:6]}"
    session = {**a.headers(), "X-Session-Id": f"approvals-{uuid.uuid4().hex[:8]}"}

    def post(server: OrgateServer, body: dict) -> dict:
        answer = httpx.post(
            f"{server.base_url}/responses",
            headers=session,
            json={"model": "orgate/echo", "tools": TOOLS, **body},
            timeout=120,
        )
        assert answer.status_code == 200, answer.text
        return dict(answer.json())

    ask = post(a, {"input": f"pay memo {memo}"})["output"][-1]
    assert ask["type"] == "mcp_approval_request"
    approval = {"type": "mcp_approval_response", "approval_request_id": ask["id"], "approve": True}
    first = post(a, {"input": [approval]})
    second = post(b, {"input": [approval]})
    assert memo in _mcp_call(first)["output"] and paid(memo) == 1
    assert not [i for i in second["output"] if i["type"] == "mcp_call"]


def test_an_answer_sent_three_times_at_once_runs_the_call_once(
    pair: tuple[OrgateServer, OrgateServer],
) -> None:
    a, b = pair
    memo = f"water-{uuid.uuid4().hex[:6]}"
    previous, ask = _ask(a, memo)
    with ThreadPoolExecutor(3) as pool:
        answers = list(pool.map(lambda s: _answer(s, previous, ask), (a, b, a)))
    statuses = sorted(r.status_code for r in answers)
    assert paid(memo) == 1
    assert statuses.count(200) >= 1 and set(statuses) <= {200, 409}
    for refused in (r for r in answers if r.status_code == 409):
        error = refused.json()["error"]
        assert error["code"] == "mcp_approval_in_progress"
        assert error["param"] == "input[0].approval_request_id"
        assert int(refused.headers["retry-after"]) >= 1
    # Once the first is done, a retry gets its outcome.
    again = _answer(b, previous, ask)
    assert again.status_code == 200 and "receipt" in _mcp_call(again.json())["output"]
    assert paid(memo) == 1


def test_the_openai_sdk_retries_a_busy_answer_and_gets_the_one_outcome(
    pair: tuple[OrgateServer, OrgateServer],
) -> None:
    a, b = pair
    memo = f"gas-{uuid.uuid4().hex[:6]}"
    previous, ask = _ask(a, memo)
    clients = [
        openai.OpenAI(base_url=server.base_url, api_key=server.api_key, max_retries=5, timeout=120)
        for server in (a, b, b)
    ]

    def answer(client: openai.OpenAI) -> str:
        response = client.responses.create(
            model="orgate/echo",
            previous_response_id=previous,
            input=[{"type": "mcp_approval_response", "approval_request_id": ask, "approve": True}],
            tools=TOOLS,  # type: ignore[list-item]
        )
        [call] = [item for item in response.output if item.type == "mcp_call"]
        return str(call.output)

    started = time.monotonic()
    with ThreadPoolExecutor(3) as pool:
        outputs = list(pool.map(answer, clients))
    assert paid(memo) == 1
    assert len(set(outputs)) == 1 and memo in outputs[0]
    # The SDK waited out Retry-After (1 s) a few times, not its own long backoff; generous, as
    # the three answers take a few seconds on an idle machine.
    assert time.monotonic() - started < 120
