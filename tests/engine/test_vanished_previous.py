"""A turn whose previous response is deleted while it runs is still stored, unchained."""

from __future__ import annotations

from pathlib import Path

from orgate.engine.request_body import parse_body
from orgate.engine.service import Caller, ResponsesService
from orgate.neutral import Deployment, Finish, TextDelta
from orgate.store import open_store
from tests.support.scripted import ScriptedProvider

MODEL = Deployment(
    name="m", provider="openai-chat", upstream_model="m", base_url="http://upstream.invalid/v1"
)
CALLER = Caller("k", "t")


async def test_a_turn_whose_previous_response_vanished_is_stored_without_the_link(
    tmp_path: Path,
) -> None:
    store = await open_store(f"sqlite://{tmp_path}/orgate.db", heartbeat_interval=0)
    try:
        service = ResponsesService(
            {"m": MODEL},
            lambda deployment: ScriptedProvider(otherwise=[TextDelta("ok"), Finish("stop")]),
            store=store,
        )
        first = await (
            await service.create(parse_body({"model": "m", "input": "one"}), CALLER, [])
        ).final()
        stream = await service.create(
            parse_body({"model": "m", "input": "two", "previous_response_id": first["id"]}),
            CALLER,
            [],
        )
        assert await store.delete(first["id"], "t")  # deleted while the second turn runs
        answer = await stream.final()
        assert answer["status"] == "completed"
        stored = await store.get(answer["id"], "t")
        assert stored is not None
        assert stored.previous_response_id is None
        assert stored.response["previous_response_id"] is None  # the stored body says so too
        assert stored.response["output"] == answer["output"]
        assert [
            item["content"]
            for item in await store.context(answer["id"], "t")
            if item.get("role") == "user"
        ] == ["two"]
    finally:
        await store.close()
