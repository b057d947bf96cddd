"""Per-key rate limits: requests and tokens per minute, as token buckets.

A key configured with ``rpm`` and/or ``tpm``::

    [auth]
    api_keys = [{ name = "a", key = "env:KEY_A", rpm = 60, tpm = 100000 }]

gets two buckets that refill continuously (``rpm/60`` requests and ``tpm/60``
tokens per second, up to one minute's worth). A model call is admitted when the
request bucket holds a whole request and the token bucket is not in debt; the
tokens of the answer (input + output, from the upstream's usage) are charged
when it finishes, so the token bucket can go below zero and then blocks the key
until it refills. A refusal is a 429 ``rate_limit_exceeded`` in the spec's
error shape with ``Retry-After`` (whole seconds).

``LocalLimiter`` keeps the buckets in the process. ``RedisLimiter`` keeps them
in Redis (``[ratelimit] redis_url``) so that every orgate process behind a load
balancer shares them; each check is one atomic Lua script using Redis' clock.
If Redis is unreachable the limiter fails open (the request is served, a
warning is logged): a rate limiter outage must not become a gateway outage.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from orgate.config import resolve_secret
from orgate.protocol.errors import RATE_LIMIT, ApiError

log = logging.getLogger("orgate.ratelimit")


@dataclass(frozen=True, slots=True)
class KeyLimits:
    rpm: int | None = None
    tpm: int | None = None


class RateLimiter(Protocol):
    async def admit(self, key_name: str) -> ApiError | None:
        """None when the call may proceed (one request is taken); else the 429 to send."""
        ...

    async def charge(self, key_name: str, tokens: int) -> None:
        """Charge the tokens of a finished answer to the key."""
        ...

    async def aclose(self) -> None: ...


def refusal(key_name: str, which: str, limit: int, retry_after: float) -> ApiError:
    seconds = max(1, math.ceil(retry_after))
    unit = "requests" if which == "rpm" else "tokens"
    return ApiError(
        429,
        f"Rate limit reached for API key '{key_name}': {limit} {unit} per minute (auth.api_keys {which}). Retry after {seconds} s.",
        type=RATE_LIMIT,
        code="rate_limit_exceeded",
        headers={"Retry-After": str(seconds)},
    )


@dataclass(slots=True)
class _Bucket:
    capacity: float
    rate: float  # per second
    level: float
    stamp: float

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
        self.stamp = now


class LocalLimiter:
    """Token buckets in this process (one gateway process, or limits per process)."""

    def __init__(self, limits: dict[str, KeyLimits], clock: Any = time.monotonic) -> None:
        self.limits = limits
        self.clock = clock
        self._buckets: dict[tuple[str, str], _Bucket] = {}

    def _bucket(self, key_name: str, which: str, per_minute: int, now: float) -> _Bucket:
        bucket = self._buckets.get((key_name, which))
        if bucket is None:
            bucket = _Bucket(per_minute, per_minute / 60.0, float(per_minute), now)
            self._buckets[(key_name, which)] = bucket
        bucket.refill(now)
        return bucket

    async def admit(self, key_name: str) -> ApiError | None:
        limits = self.limits.get(key_name)
        if limits is None:
            return None
        now = self.clock()
        requests = self._bucket(key_name, "rpm", limits.rpm, now) if limits.rpm else None
        tokens = self._bucket(key_name, "tpm", limits.tpm, now) if limits.tpm else None
        if requests is not None and requests.level < 1:
            return refusal(key_name, "rpm", int(requests.capacity), (1 - requests.level) / requests.rate)
        if tokens is not None and tokens.level <= 0:
            return refusal(key_name, "tpm", int(tokens.capacity), (1 - tokens.level) / tokens.rate)
        if requests is not None:
            requests.level -= 1
        return None

    async def charge(self, key_name: str, tokens: int) -> None:
        limits = self.limits.get(key_name)
        if limits is None or not limits.tpm or tokens <= 0:
            return
        bucket = self._bucket(key_name, "tpm", limits.tpm, self.clock())
        bucket.level -= tokens

    async def aclose(self) -> None:
        return None


# KEYS[1] = request bucket, KEYS[2] = token bucket; ARGV = rpm, tpm (0 = none).
# Returns {0, 0} when admitted, else {1 = rpm | 2 = tpm, retry-after in ms}.
_ADMIT = """
local now = redis.call('TIME')
local t = tonumber(now[1]) + tonumber(now[2]) / 1e6
local function level(key, per_minute)
  local v = redis.call('HMGET', key, 'level', 'stamp')
  local lvl = tonumber(v[1]) or per_minute
  local stamp = tonumber(v[2]) or t
  return math.min(per_minute, lvl + (t - stamp) * per_minute / 60.0)
end
local rpm = tonumber(ARGV[1])
local tpm = tonumber(ARGV[2])
local r, k
if rpm > 0 then
  r = level(KEYS[1], rpm)
  if r < 1 then return {1, math.ceil((1 - r) * 60000 / rpm)} end
end
if tpm > 0 then
  k = level(KEYS[2], tpm)
  if k <= 0 then return {2, math.ceil((1 - k) * 60000 / tpm)} end
  redis.call('HSET', KEYS[2], 'level', tostring(k), 'stamp', tostring(t))
  redis.call('PEXPIRE', KEYS[2], 120000 + math.ceil(math.max(0, -k) * 60000 / tpm))
end
if rpm > 0 then
  redis.call('HSET', KEYS[1], 'level', tostring(r - 1), 'stamp', tostring(t))
  redis.call('PEXPIRE', KEYS[1], 120000)
end
return {0, 0}
"""

# KEYS[1] = token bucket; ARGV = tpm, tokens.
_CHARGE = """
local now = redis.call('TIME')
local t = tonumber(now[1]) + tonumber(now[2]) / 1e6
local tpm = tonumber(ARGV[1])
local v = redis.call('HMGET', KEYS[1], 'level', 'stamp')
local lvl = tonumber(v[1]) or tpm
local stamp = tonumber(v[2]) or t
lvl = math.min(tpm, lvl + (t - stamp) * tpm / 60.0) - tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'level', tostring(lvl), 'stamp', tostring(t))
redis.call('PEXPIRE', KEYS[1], 120000 + math.ceil(math.max(0, -lvl) * 60000 / tpm))
return 0
"""


class RedisLimiter:
    """The same buckets in Redis, shared by every process that uses the same ``redis_url`` and ``prefix``."""

    def __init__(self, limits: dict[str, KeyLimits], url: str, prefix: str = "orgate:rl") -> None:
        import redis.asyncio as aioredis  # optional dependency, imported only when [ratelimit] redis_url is set

        self.limits = limits
        self.prefix = prefix
        self.client: Any = aioredis.Redis.from_url(url, socket_timeout=1.0, socket_connect_timeout=1.0)
        self._admit = self.client.register_script(_ADMIT)
        self._charge = self.client.register_script(_CHARGE)
        self._errors: tuple[type[BaseException], ...] = (aioredis.RedisError, OSError, TimeoutError)

    def _keys(self, key_name: str) -> list[str]:
        return [f"{self.prefix}:{{{key_name}}}:rpm", f"{self.prefix}:{{{key_name}}}:tpm"]

    async def admit(self, key_name: str) -> ApiError | None:
        limits = self.limits.get(key_name)
        if limits is None:
            return None
        try:
            which, retry_ms = await self._admit(keys=self._keys(key_name), args=[limits.rpm or 0, limits.tpm or 0])
        except self._errors as exc:
            log.warning("rate limiter: Redis unavailable, admitting the request: %s", type(exc).__name__)
            return None
        if int(which) == 0:
            return None
        kind = "rpm" if int(which) == 1 else "tpm"
        limit = limits.rpm if kind == "rpm" else limits.tpm
        assert limit is not None
        return refusal(key_name, kind, limit, int(retry_ms) / 1000)

    async def charge(self, key_name: str, tokens: int) -> None:
        limits = self.limits.get(key_name)
        if limits is None or not limits.tpm or tokens <= 0:
            return
        try:
            await self._charge(keys=self._keys(key_name)[1:], args=[limits.tpm, tokens])
        except self._errors as exc:
            log.warning("rate limiter: Redis unavailable, tokens not charged: %s", type(exc).__name__)

    async def aclose(self) -> None:
        await self.client.aclose()


def limits_of(keys: Iterable[Any]) -> dict[str, KeyLimits]:
    """Key name → limits, for the resolved keys that have any (``rpm`` / ``tpm`` attributes)."""
    table: dict[str, KeyLimits] = {}
    for key in keys:
        rpm, tpm = getattr(key, "rpm", None), getattr(key, "tpm", None)
        if rpm or tpm:
            table[key.name] = KeyLimits(rpm, tpm)
    return table


def build_limiter(keys: Iterable[Any], redis_url: str | None = None, prefix: str = "orgate:rl") -> RateLimiter | None:
    """None when no key has a limit; Redis-backed when ``redis_url`` (may be ``env:NAME``) is given, else in-process."""
    limits = limits_of(keys)
    if not limits:
        return None
    redis_url = resolve_secret(redis_url, where="ratelimit.redis_url")
    if redis_url:
        return RedisLimiter(limits, redis_url, prefix)
    return LocalLimiter(limits)


__all__ = ["KeyLimits", "LocalLimiter", "RateLimiter", "RedisLimiter", "build_limiter", "limits_of", "refusal"]
