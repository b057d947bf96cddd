"""The workers' shared rate limits: the buckets of ``LocalLimiter`` in one SQLite file, so two
limiters on the same file (two workers) draw from one bucket per key."""

from __future__ import annotations

from pathlib import Path

from orgate.server.ratelimit import KeyLimits, build_limiter
from orgate.server.ratelimit_shared import SharedLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def pair(
    tmp_path: Path, limits: dict[str, KeyLimits], clock: Clock
) -> tuple[SharedLimiter, SharedLimiter]:
    path = tmp_path / "ratelimit.db"
    return SharedLimiter(limits, path, clock=clock), SharedLimiter(limits, path, clock=clock)


async def test_two_workers_share_one_request_bucket(tmp_path: Path) -> None:
    clock = Clock()
    one, two = pair(tmp_path, {"a": KeyLimits(rpm=60)}, clock)
    for turn in range(60):
        assert await (one if turn % 2 else two).admit("a") is None
    for limiter in (one, two):
        refusal = await limiter.admit("a")
        assert (
            refusal is not None and refusal.status == 429 and refusal.headers["Retry-After"] == "1"
        )
    clock.now += 1.0  # one request per second comes back, to whichever worker asks first
    assert await two.admit("a") is None
    assert await one.admit("a") is not None
    assert await one.admit("unlimited-key") is None
    await one.aclose()
    await two.aclose()


async def test_a_token_debt_charged_on_one_worker_blocks_the_other(tmp_path: Path) -> None:
    clock = Clock()
    one, two = pair(tmp_path, {"t": KeyLimits(tpm=600)}, clock)
    assert await one.admit("t") is None
    await one.charge("t", 1200)  # 600 in debt: 10 tokens/s → 60 s to repay
    refusal = await two.admit("t")
    assert refusal is not None and 60 <= int(refusal.headers["Retry-After"]) <= 61
    clock.now += 59
    assert await two.admit("t") is not None
    clock.now += 2
    assert await two.admit("t") is None
    await one.aclose()
    await two.aclose()


def test_a_worker_gets_the_shared_limiter_unless_redis_is_configured(tmp_path: Path) -> None:
    class Key:
        name, rpm, tpm = "a", 5, None

    assert isinstance(build_limiter([Key()], shared_path=tmp_path / "r.db"), SharedLimiter)
