"""What every process of one store shares besides responses: background leases, the review
queue and the node list, on both backends (stores opened side by side are other processes)."""

from __future__ import annotations

import asyncio
import time

import orjson
import pytest

from orgate.store import ResponseStore
from orgate.store.base import JobWrite, LeaseLost, StoredReview
from tests.store.helpers import OpenStore, response, user

LEASE = 30.0


async def _queue(
    store: ResponseStore,
    response_id: str,
    token: str = "tok-1",
    *,
    session: tuple[str, str] | None = None,
) -> None:
    """A background response stored queued with its lease, as the service does."""
    await store.save(
        response(response_id, status="queued"),
        tenant="t",
        input_items=[user("again")],
        session_id=session[0] if session else None,
        job=JobWrite(
            token,
            "lease",
            LEASE,
            request={"body": {"input": "again"}},
            session_token=session[1] if session else None,
        ),
    )


async def _expire(store: ResponseStore) -> None:
    """Every lease this store holds, expired (its node silent past the lease)."""
    await store.renew_background(lease_seconds=-1.0)


async def test_a_lease_is_claimed_once_and_fences_the_old_holders_saves(
    open_at: OpenStore,
) -> None:
    first, second, third = await open_at(), await open_at(), await open_at()
    await _queue(first, "resp_bg1")
    assert await second.claim_background(lease_seconds=LEASE) is None  # held, not expired
    assert await first.renew_background(lease_seconds=LEASE) == {"resp_bg1"}
    await _expire(first)
    claims = await asyncio.gather(
        second.claim_background(lease_seconds=LEASE), third.claim_background(lease_seconds=LEASE)
    )
    taken = [claim for claim in claims if claim is not None]
    assert len(taken) == 1, claims
    job = taken[0]
    assert job.response_id == "resp_bg1" and job.attempts == 2 and job.tenant == "t"
    assert job.request == {"body": {"input": "again"}}
    assert not job.delivered and not job.effects and job.session is None
    # the first holder lost it: its saves, marks and events write nothing
    with pytest.raises(LeaseLost):
        await first.save(
            response("resp_bg1", status="completed"),
            tenant="t",
            input_items=[user("again")],
            job=JobWrite("tok-1", "finish"),
        )
    assert not await first.mark_background("resp_bg1", "effects", token="tok-1")
    assert not await first.write_background_events("resp_bg1", "tok-1", b"data: x\n\n")
    assert await first.renew_background(lease_seconds=LEASE) == set()
    stored = await first.get("resp_bg1", "t")
    assert stored is not None and stored.status == "queued"
    # the new holder finishes it: the job ends, nobody claims it again
    holder = second if claims[0] is not None else third
    await holder.save(
        response("resp_bg1", status="completed"),
        tenant="t",
        input_items=[user("again")],
        job=JobWrite(job.token, "finish"),
    )
    await _expire(holder)
    assert await first.claim_background(lease_seconds=LEASE) is None
    done = await first.get("resp_bg1", "t")
    assert done is not None and done.status == "completed"


async def test_recovery_leaves_leased_responses_and_their_session_to_a_takeover(
    open_at: OpenStore,
) -> None:
    dying, survivor = await open_at(), await open_at()
    turn = await dying.begin_session_turn("t", "sess-1")
    await _queue(dying, "resp_bg2", session=("sess-1", turn.token))
    await dying.save(response("resp_fg", status="in_progress"), tenant="t", input_items=[])
    await dying.close()  # stopped: its owner row says so
    recovered = await survivor.recover_interrupted()
    assert recovered == ["resp_fg"]
    job = await survivor.claim_background(lease_seconds=LEASE)  # a stopped owner: at once
    assert job is not None and job.response_id == "resp_bg2"
    assert job.session is not None and job.session.token == turn.token
    # the queued save made it the session's latest already
    assert job.session.latest_response_id == "resp_bg2" and not job.session_lost
    # the session stays busy until the job ends
    with pytest.raises(Exception, match="in progress"):
        await survivor.begin_session_turn("t", "sess-1")
    assert await survivor.end_background(job, "failed", {"code": "server_error", "message": "x"})
    failed = await survivor.get("resp_bg2", "t")
    assert failed is not None and failed.status == "failed"
    assert failed.response["error"]["code"] == "server_error"
    free = await survivor.begin_session_turn("t", "sess-1")
    await survivor.end_session_turn(free)


async def test_marks_and_events_a_follower_reads(open_at: OpenStore) -> None:
    runner, follower = await open_at(), await open_at()
    await _queue(runner, "resp_bg3")
    progress = await follower.background_progress("resp_bg3", "t")
    assert progress is not None and progress.attempts == 1 and progress.events is None
    assert await follower.background_progress("resp_bg3", "other") is None
    assert await runner.write_background_events("resp_bg3", "tok-1", b"data: one\n\n")
    progress = await follower.background_progress("resp_bg3", "t")
    assert progress is not None and progress.events == b"data: one\n\n"
    assert not progress.delivered
    assert not await follower.mark_background("resp_bg3", "delivered", attempts=2)
    assert await follower.mark_background("resp_bg3", "delivered", attempts=1)
    assert await runner.mark_background("resp_bg3", "effects", token="tok-1")
    await _expire(runner)
    job = await follower.claim_background(lease_seconds=LEASE)
    assert job is not None and job.delivered and job.effects
    progress = await follower.background_progress("resp_bg3", "t")
    assert progress is not None and progress.attempts == 2 and progress.events is None
    # ended: no job row, the final events are what a follower reads
    await follower.save(
        response("resp_bg3", status="completed"),
        tenant="t",
        input_items=[],
        events=b"data: all\n\n",
        job=JobWrite(job.token, "finish"),
    )
    progress = await runner.background_progress("resp_bg3", "t")
    assert progress is not None and progress.attempts is None
    assert progress.status == "completed" and progress.events == b"data: all\n\n"


async def test_a_deleted_background_response_leaves_no_job(open_at: OpenStore) -> None:
    store, other = await open_at(), await open_at()
    await _queue(store, "resp_bg4")
    assert await store.delete("resp_bg4", "t")
    await _expire(store)
    assert await other.claim_background(lease_seconds=LEASE) is None


def _entry(review_id: str, tenant: str, created_at: float, **extra: object) -> StoredReview:
    return StoredReview(
        id=review_id,
        tenant=tenant,
        created_at=created_at,
        status="pending",
        model="m",
        format_name="person",
        mode="json_schema",
        stage="schema",
        errors='["bad"]',
        schema='{"type": "object"}',
        request="{}",
        attempts="[]",
        **extra,  # type: ignore[arg-type]
    )


async def test_review_entries_are_one_queue_for_every_process(open_at: OpenStore) -> None:
    one, two = await open_at(), await open_at()
    added = await one.add_reviews(
        [_entry("rev_a", "alpha", 1.0, response_id="resp_a"), _entry("rev_b", "beta", 2.0)]
    )
    assert added == 2
    assert await two.add_reviews([_entry("rev_a", "alpha", 9.0)]) == 0  # imported once
    assert [e.id for e in await two.list_reviews("pending", None, limit=10, offset=0)] == [
        "rev_a",
        "rev_b",
    ]
    assert [e.id for e in await two.list_reviews(None, "beta", limit=10, offset=0)] == ["rev_b"]
    assert await two.count_reviews("pending", "alpha") == 1
    assert await two.get_review("rev_a", "beta") is None
    found = await two.get_review(None, "alpha", response_id="resp_a")
    assert found is not None and found.id == "rev_a" and found.created_at == 1.0
    assert not await two.finish_review("rev_a", "discarded", None, None, "beta")
    assert await two.finish_review("rev_a", "resolved", '{"x": 1}', "ok", "alpha")
    assert not await one.finish_review("rev_a", "discarded", None, None, None)
    done = await one.get_review("rev_a", None)
    assert done is not None and done.status == "resolved" and done.resolution == '{"x": 1}'
    assert done.note == "ok" and done.resolved_at is not None


async def test_the_node_list(open_at: OpenStore) -> None:
    one, two = await open_at(), await open_at()
    await one.describe_node(version="1.2.3", address="http://10.0.0.1:8080")
    await one.write_metrics(orjson.dumps([["orgate_x", "doc", "counter", []]]))
    await _queue(two, "resp_bg5")
    nodes = {node.owner_id: node for node in await two.nodes()}
    first, second = nodes[one.owner_id], nodes[two.owner_id]
    assert first.version == "1.2.3" and first.address == "http://10.0.0.1:8080"
    assert first.metrics is not None and orjson.loads(first.metrics)[0][0] == "orgate_x"
    assert first.metrics_at is not None and first.metrics_at <= time.time()
    assert second.version is None and second.background == 1 and first.background == 0
    assert first.stopped_at is None
