"""200 concurrent ``previous_response_id`` chains of 5 turns against one process: every history
exact. How fast is the store benchmark's to say (bench/store_bench.py, its chain curve), not a
timed test: this one takes about 15 s on an idle 2-core machine, so it may take minutes on a
loaded one."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from tests.fakes.openai_chat_upstream import FakeOpenAIChat
from tests.server_process import OrgateServer
from tests.store_e2e.helpers import messages_of, uid

CHAINS = 200
TURNS = 5


@pytest.mark.timeout(900)  # 15 s idle: generous for a loaded machine
async def test_concurrent_chains_keep_exact_histories(
    gw: OrgateServer, fake: FakeOpenAIChat
) -> None:
    tag = uid()
    limits = httpx.Limits(max_connections=48, max_keepalive_connections=48)
    # chain -> list of (response id, input text, output text)
    turns: dict[int, list[tuple[str, str, str]]] = {}

    async def chain(c: httpx.AsyncClient, n: int) -> None:
        previous = None
        turns[n] = []
        for t in range(TURNS):
            text = f"{tag} chain {n} turn {t}"
            body = {"model": "fake-chat", "input": text, "previous_response_id": previous}
            r = await c.post("/v1/responses", json=body)
            assert r.status_code == 200, r.text
            data = r.json()
            assert data["previous_response_id"] == previous and data["status"] == "completed"
            out = data["output"][0]["content"][0]["text"]
            assert out == f"You said: {text}"
            turns[n].append((data["id"], text, out))
            previous = data["id"]

    async with httpx.AsyncClient(
        base_url=gw.url, headers={"Authorization": "Bearer key-a"}, timeout=600, limits=limits
    ) as c:
        await asyncio.gather(*(chain(c, n) for n in range(CHAINS)))

        # What the model saw: exactly the chain's own history, in order.
        by_last = {messages_of(body)[-1][1]: messages_of(body) for body in fake.bodies}
        assert len(by_last) == CHAINS * TURNS
        for n in range(CHAINS):
            history: list[tuple[str, str]] = []
            for _, text, out in turns[n]:
                assert by_last[text] == [*history, ("user", text)], (
                    f"chain {n}: wrong context for {text!r}"
                )
                history += [("user", text), ("assistant", out)]

        # What the store kept: each turn's own input, via input_items.
        semaphore = asyncio.Semaphore(48)

        async def check(rid: str, text: str) -> None:
            async with semaphore:
                r = await c.get(f"/v1/responses/{rid}/input_items", params={"order": "asc"})
            assert r.status_code == 200, r.text
            listed = [(i["role"], i["content"]) for i in r.json()["data"]]
            assert listed == [("user", [{"type": "input_text", "text": text}])]

        await asyncio.gather(
            *(check(rid, text) for n in range(CHAINS) for rid, text, _ in turns[n])
        )
