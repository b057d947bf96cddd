"""Two ``orgate serve`` processes on one PostgreSQL database: responses and sessions move between
them."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import chat_model_config
from tests.fakes.openai_chat_upstream import FakeOpenAIChat
from tests.server_process import OrgateServer
from tests.store_e2e.helpers import (
    PG_SKIP,
    PG_URL,
    TWO_TENANTS,
    assert_error,
    create,
    messages_of,
    poll,
    uid,
)

pytestmark = pytest.mark.skipif(not PG_URL, reason=PG_SKIP)


async def _sql(statement: str) -> None:
    import asyncpg  # only needed (and installed) where PostgreSQL tests run

    conn = await asyncpg.connect(PG_URL)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


@pytest.fixture(scope="module")
def pair(fake_chat: FakeOpenAIChat) -> Iterator[tuple[OrgateServer, OrgateServer]]:
    """Processes A and B on a fresh schema of the test database."""
    assert PG_URL is not None
    schema = f"e2e_{uuid.uuid4().hex[:12]}"
    asyncio.run(_sql(f"CREATE SCHEMA {schema}"))
    url = f"{PG_URL}{'&' if '?' in PG_URL else '?'}search_path={schema}"
    config = TWO_TENANTS + chat_model_config(fake_chat.base_url)
    servers: list[OrgateServer] = []
    try:
        for _ in range(2):
            servers.append(
                OrgateServer(config, api_key="key-a", env={"ORGATE_STORE__URL": url}).start()
            )
        yield servers[0], servers[1]
    finally:
        for server in servers:
            server.stop()
        asyncio.run(_sql(f"DROP SCHEMA {schema} CASCADE"))


def _client(server: OrgateServer, key: str = "key-a") -> httpx.Client:
    return httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=30)


def test_created_on_a_fetched_and_continued_on_b(
    pair: tuple[OrgateServer, OrgateServer], fake: FakeOpenAIChat
) -> None:
    with _client(pair[0]) as on_a, _client(pair[1]) as on_b, _client(pair[1], "key-b") as b_on_b:
        first = create(on_a, model="fake-chat", input="from A")
        assert on_b.get(f"/v1/responses/{first['id']}").json() == first
        second = create(on_b, model="fake-chat", input="on B", previous_response_id=first["id"])
        assert second["previous_response_id"] == first["id"]
        assert messages_of(fake.bodies[-1]) == [
            ("user", "from A"),
            ("assistant", "You said: from A"),
            ("user", "on B"),
        ]
        third = create(
            on_a, model="fake-chat", input="back on A", previous_response_id=second["id"]
        )
        assert len(fake.bodies[-1]["messages"]) == 5 and third["status"] == "completed"
        page = on_a.get(f"/v1/responses/{second['id']}/input_items").json()
        assert [i["content"] for i in page["data"]] == [[{"type": "input_text", "text": "on B"}]]
        assert_error(b_on_b.get(f"/v1/responses/{first['id']}"), 404, "not_found")
        assert on_b.delete(f"/v1/responses/{first['id']}").status_code == 200
        assert_error(on_a.get(f"/v1/responses/{first['id']}"), 404, "not_found")


def test_session_started_on_a_continues_on_b(
    pair: tuple[OrgateServer, OrgateServer], fake: FakeOpenAIChat
) -> None:
    headers = {"X-Session-Id": f"pg-{uid()}"}
    with _client(pair[0]) as on_a, _client(pair[1]) as on_b:
        first = create(on_a, model="fake-chat", input="session on A", headers=headers)
        second = create(on_b, model="fake-chat", input="session on B", headers=headers)
        assert second["previous_response_id"] == first["id"]
        assert messages_of(fake.bodies[-1]) == [
            ("user", "session on A"),
            ("assistant", "You said: session on A"),
            ("user", "session on B"),
        ]
        # The turn lease is shared: a running turn on A makes the session busy on B.
        slow = {
            "model": "orgate/echo",
            "input": "orgate:delay=200 one two three four",
            "stream": True,
        }
        with on_a.stream("POST", "/v1/responses", json=slow, headers=headers) as r:
            lines = r.iter_lines()
            next(line for line in lines if line.startswith("data:"))
            busy = on_b.post(
                "/v1/responses", json={"model": "orgate/echo", "input": "me too"}, headers=headers
            )
            assert_error(busy, 409, "session_busy")
            assert "response.completed" in "\n".join(lines)
        assert create(on_b, input="after", headers=headers)["status"] == "completed"


def test_background_on_a_polled_and_cancelled_on_b(pair: tuple[OrgateServer, OrgateServer]) -> None:
    with _client(pair[0]) as on_a, _client(pair[1]) as on_b:
        quick = create(on_a, input="quick background", background=True)
        assert poll(on_b, quick["id"])["status"] == "completed"
        slow = create(
            on_a, input="orgate:delay=300 " + " ".join(f"w{i}" for i in range(40)), background=True
        )
        poll(on_b, slow["id"], until=("in_progress",))
        r = on_b.post(f"/v1/responses/{slow['id']}/cancel")
        assert r.status_code == 200, r.text
        # B only sets the flag; A's runner sees it within its poll interval and stops.
        assert poll(on_a, slow["id"])["status"] == "cancelled"
