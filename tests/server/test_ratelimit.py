"""The in-process rate limiter (``orgate.server.ratelimit.LocalLimiter``) with a clock of the
test's.

Token buckets per API key, refilled continuously: ``rpm`` requests and ``tpm`` tokens per
minute; a refusal is 429 ``rate_limit_exceeded`` with ``Retry-After`` the longer of the two
waits, so that a client that waits that long gets in; a key's buckets are its own; an idle
bucket fills up to its capacity, never beyond. (Refill and token debt alone:
tests/hardening/test_units.py.)
"""

from __future__ import annotations

from orgate.server.ratelimit import KeyLimits, LocalLimiter, limits_of, refusal


class Clock:
    def __init__(self) -> None:
        self.now = 5000.0

    def __call__(self) -> float:
        return self.now


async def test_each_key_has_its_own_buckets() -> None:
    limiter = LocalLimiter({"a": KeyLimits(rpm=2), "b": KeyLimits(rpm=2)}, clock=Clock())
    assert [await limiter.admit("a") for _ in range(2)] == [None, None]
    assert await limiter.admit("a") is not None
    assert await limiter.admit("b") is None  # a's limit is not b's


async def test_an_idle_bucket_fills_to_its_capacity_only() -> None:
    clock = Clock()
    limiter = LocalLimiter({"a": KeyLimits(rpm=3)}, clock=clock)
    assert await limiter.admit("a") is None
    clock.now += 3600  # an hour idle: three requests, not sixty
    assert [await limiter.admit("a") for _ in range(4)][:3] == [None, None, None]
    assert await limiter.admit("a") is not None


async def test_a_refused_request_costs_nothing() -> None:
    clock = Clock()
    limiter = LocalLimiter({"a": KeyLimits(rpm=60)}, clock=clock)
    for _ in range(60):
        await limiter.admit("a")
    for _ in range(10):
        assert await limiter.admit("a") is not None  # refusals do not dig the bucket deeper
    clock.now += 1.0
    assert await limiter.admit("a") is None


async def test_retry_after_is_the_longer_wait_of_the_two_limits() -> None:
    clock = Clock()
    limiter = LocalLimiter({"a": KeyLimits(rpm=60, tpm=60)}, clock=clock)
    assert await limiter.admit("a") is None
    await limiter.charge("a", 660)  # 600 tokens in debt at 1 token/s: ten minutes
    refused = await limiter.admit("a")
    assert refused is not None and refused.headers["Retry-After"] == "601"
    assert "60 tokens per minute" in refused.message and "tpm" in refused.message
    clock.now += 601
    assert await limiter.admit("a") is None  # waiting as told is enough


async def test_charges_without_a_token_limit_or_tokens_change_nothing() -> None:
    clock = Clock()
    limiter = LocalLimiter({"r": KeyLimits(rpm=1), "t": KeyLimits(tpm=60)}, clock=clock)
    await limiter.charge("r", 10**6)  # no tpm: nothing to charge
    await limiter.charge("t", 0)
    await limiter.charge("t", -50)
    await limiter.charge("nobody", 10)
    assert await limiter.admit("r") is None and await limiter.admit("t") is None


def test_a_refusal_names_the_key_the_limit_and_whole_seconds() -> None:
    error = refusal("acme", "rpm", 30, 0.2)
    assert (error.status, error.code, error.type) == (
        429,
        "rate_limit_exceeded",
        "rate_limit_error",
    )
    assert error.headers == {"Retry-After": "1"}  # at least one second, rounded up
    assert "'acme'" in error.message and "30 requests per minute" in error.message
    assert refusal("acme", "tpm", 1000, 2.01).headers == {"Retry-After": "3"}


def test_only_keys_with_a_limit_are_tracked() -> None:
    class Key:
        def __init__(self, name: str, rpm: int | None = None, tpm: int | None = None) -> None:
            self.name, self.rpm, self.tpm = name, rpm, tpm

    assert limits_of([Key("free"), Key("paid", rpm=10), Key("bulk", tpm=5)]) == {
        "paid": KeyLimits(rpm=10),
        "bulk": KeyLimits(tpm=5),
    }
