"""The state every process serving one store shares, on SQLite and PostgreSQL: MCP approvals
consumed once, signed-out console sessions, and the console's sign-in throttle. Several
"processes" are several stores opened on one database."""

from __future__ import annotations

import asyncio
import time

from orgate.store import ResponseStore
from tests.store.helpers import OpenStore

DENIED = {"output": None, "error": {"type": "mcp_protocol_error", "message": "denied"}}


async def test_an_approval_is_claimed_once_and_its_outcome_is_found(store: ResponseStore) -> None:
    assert await store.claim_approval("t", "mcpr_1", "resp_a") is None
    assert await store.claim_approval("t", "mcpr_1", "resp_a") is None  # a retried claim: its own
    taken = await store.claim_approval("t", "mcpr_1", "resp_b")
    assert taken is not None and taken.response_id == "resp_a" and taken.outcome is None
    await store.settle_approval("t", "mcpr_1", "resp_a", {"output": "7", "error": None})
    again = await store.claim_approval("t", "mcpr_1", "resp_c")
    assert again is not None and again.outcome == {"output": "7", "error": None}
    # Tenants are apart: the same id in another tenant is another request.
    assert await store.claim_approval("other", "mcpr_1", "resp_x") is None


async def test_only_the_claimant_settles_or_releases(store: ResponseStore) -> None:
    assert await store.claim_approval("t", "mcpr_2", "resp_a") is None
    await store.settle_approval("t", "mcpr_2", "resp_b", DENIED)  # not its claim: nothing
    await store.release_approval("t", "mcpr_2", "resp_b")
    claim = await store.claim_approval("t", "mcpr_2", "resp_c")
    assert claim is not None and claim.response_id == "resp_a" and claim.outcome is None
    # Released by its claimant before anything ran: the next answer may act.
    await store.release_approval("t", "mcpr_2", "resp_a")
    assert await store.claim_approval("t", "mcpr_2", "resp_c") is None
    # A settled claim is never released.
    await store.settle_approval("t", "mcpr_2", "resp_c", DENIED)
    await store.release_approval("t", "mcpr_2", "resp_c")
    claim = await store.claim_approval("t", "mcpr_2", "resp_d")
    assert claim is not None and claim.outcome == DENIED


async def test_of_claims_at_once_from_several_processes_exactly_one_wins(
    open_at: OpenStore,
) -> None:
    stores = [await open_at() for _ in range(4)]
    for round_ in range(5):
        approval = f"mcpr_race_{round_}"
        claims = await asyncio.gather(
            *(
                store.claim_approval("t", approval, f"resp_{n}")
                for n, store in enumerate(stores * 3)
            )
        )
        winners = [f"resp_{n}" for n, claim in enumerate(claims) if claim is None]
        assert len(winners) == 1
        [winner] = winners
        assert all(claim.response_id == winner for claim in claims if claim is not None)


async def test_a_sign_out_is_seen_by_every_process_and_pruned_after_expiry(
    open_at: OpenStore,
) -> None:
    one, two = await open_at(), await open_at()
    assert not await two.console_session_revoked("s1")
    await one.revoke_console_session("s1", time.time() + 3600)
    assert await two.console_session_revoked("s1")
    await one.revoke_console_session("old", time.time() - 1)  # expired: dropped by the next one
    await two.revoke_console_session("s2", time.time() + 3600)
    assert not await one.console_session_revoked("old")
    assert await one.console_session_revoked("s2") and await one.console_session_revoked("s1")


async def test_sign_in_failures_count_per_subject_and_blocks_are_shared(
    open_at: OpenStore,
) -> None:
    one, two = await open_at(), await open_at()
    now = time.time()
    assert await one.signin_failed(["addr:a", "key:k"], now=now, forget_after=60) == [1, 1]
    assert await two.signin_failed(["addr:a", "key:j"], now=now, forget_after=60) == [2, 1]
    assert await one.signin_blocked_until(["addr:a", "key:k"]) == 0.0
    await two.signin_block("addr:a", now + 30)
    await one.signin_block("addr:a", now + 10)  # never shortens a block
    assert await one.signin_blocked_until(["addr:a", "key:x"]) == now + 30
    assert await two.signin_blocked_until(["addr:b", "key:k"]) == 0.0
    # After a quiet while the count starts again.
    later = now + 61
    assert await one.signin_failed(["addr:a"], now=later, forget_after=60) == [1]
    # Idle subjects whose block is over are dropped: key:j is gone, so it counts from 1.
    assert await two.signin_failed(["key:j"], now=later + 100, forget_after=60) == [1]


async def test_the_new_tables_follow_a_tenant_rename_and_prune(store: ResponseStore) -> None:
    assert await store.claim_approval("old", "mcpr_3", "resp_a") is None
    await store.rename_tenant("old", "new")
    claim = await store.claim_approval("new", "mcpr_3", "resp_b")
    assert claim is not None and claim.response_id == "resp_a"
    await store.prune(older_than=-1)  # everything is older than the cutoff
    assert await store.claim_approval("new", "mcpr_3", "resp_b") is None
