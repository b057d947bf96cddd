"""The console's sign-in throttle and sign-out state in process: the backoff, and the state a
gateway without a store keeps (``LocalConsoleState``, the store's console methods in memory;
the store's own are in tests/store/test_shared_state.py)."""

from __future__ import annotations

import time

import pytest
from prometheus_client import CollectorRegistry

from orgate.console.state import LocalConsoleState, state_of
from orgate.console.throttle import FREE_FAILURES, MAX_BLOCK, SignInThrottle, block_seconds
from orgate.protocol.errors import ApiError


def test_the_wait_doubles_after_the_free_failures_and_is_capped() -> None:
    waits = [block_seconds(n) for n in range(1, FREE_FAILURES + 5)]
    assert waits[: FREE_FAILURES - 1] == [0.0] * (FREE_FAILURES - 1)
    assert waits[FREE_FAILURES - 1 :] == [1.0, 2.0, 4.0, 8.0, 16.0]
    assert block_seconds(1000) == MAX_BLOCK


async def test_local_state_counts_blocks_forgets_and_revokes() -> None:
    state = LocalConsoleState()
    now = time.time()
    assert await state.signin_failed(["addr:a", "key:k"], now=now, forget_after=60) == [1, 1]
    assert await state.signin_failed(["addr:a", "key:j"], now=now, forget_after=60) == [2, 1]
    await state.signin_block("addr:a", now + 30)
    await state.signin_block("addr:a", now + 10)
    assert await state.signin_blocked_until(["key:x", "addr:a"]) == now + 30
    assert await state.signin_failed(["addr:a"], now=now + 61, forget_after=60) == [1]
    await state.revoke_console_session("s1", now + 60)
    assert await state.console_session_revoked("s1")
    assert not await state.console_session_revoked("s2")


async def test_a_held_up_subject_is_refused_before_any_key_is_checked() -> None:
    state = LocalConsoleState()
    throttle = SignInThrottle(b"secret", state_of(lambda: state), CollectorRegistry())
    subjects = throttle.subjects("10.0.0.1", "sk-wrong")
    assert subjects[0] == "addr:10.0.0.1" and "sk-wrong" not in subjects[1]
    for _ in range(FREE_FAILURES):
        await throttle.check(subjects, "10.0.0.1")
        await throttle.failed(subjects, "10.0.0.1")
    held = await state.signin_blocked_until(subjects)
    assert held > time.time()  # the fifth failure holds both subjects up
    await state.signin_block(subjects[0], time.time() + 100)
    with pytest.raises(ApiError) as refused:
        await throttle.check(subjects, "10.0.0.1")
    assert refused.value.status == 429 and refused.value.code == "too_many_sign_in_attempts"
    assert 90 <= int(refused.value.headers["Retry-After"]) <= 100
    # Another client with another key is not held up.
    await throttle.check(throttle.subjects("10.0.0.2", "sk-right"), "10.0.0.2")
