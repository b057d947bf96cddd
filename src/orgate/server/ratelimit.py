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

``LocalLimiter`` keeps the buckets in the process; ``SharedLimiter``
(``ratelimit_shared``) in a file shared by the workers of one ``orgate serve --workers N``.
``RedisLimiter`` keeps them in Redis (``[ratelimit] redis_url``) so that every orgate process
behind a load balancer shares them; each check is one atomic Lua script using Redis' clock.
If Redis is unreachable the limiter fails open (the request is served, a
warning is logged: the first failure, then one line per 30 s with a count, and
one when Redis answers again): a rate limiter outage must not become a gateway
outage. What the limiters share (limits, interface, refusal) is ``ratelimit_base``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orgate.config import resolve_secret
from orgate.protocol.errors import ApiError
from orgate.server.ratelimit_base import KeyLimits, RateLimiter, refusal
from orgate.server.ratelimit_shared import SharedLimiter

log = logging.getLogger("orgate.ratelimit")

#: Seconds between two warnings about an unreachable Redis (the first failure is logged at once).
WARN_EVERY = 30.0


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
        # Both buckets are checked: Retry-After is the longer wait, so that a client that waits
        # that long gets in (an empty request bucket must not hide a token debt that lasts longer).
        rpm_wait = (
            (1 - requests.level) / requests.rate
            if requests is not None and requests.level < 1
            else 0.0
        )
        tpm_wait = (
            (1 - tokens.level) / tokens.rate if tokens is not None and tokens.level <= 0 else 0.0
        )
        if tokens is not None and tpm_wait > rpm_wait:
            return refusal(key_name, "tpm", int(tokens.capacity), tpm_wait)
        if requests is not None and rpm_wait > 0:
            return refusal(key_name, "rpm", int(requests.capacity), rpm_wait)
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
# Returns {0, 0} when admitted, else {1 = rpm | 2 = tpm, retry-after in ms}: the longer wait of the
# two buckets, so that a client that waits that long gets in.
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
local which, wait = 0, 0
if rpm > 0 then
  r = level(KEYS[1], rpm)
  if r < 1 then which, wait = 1, math.ceil((1 - r) * 60000 / rpm) end
end
if tpm > 0 then
  k = level(KEYS[2], tpm)
  if k <= 0 then
    local w = math.ceil((1 - k) * 60000 / tpm)
    if w > wait then which, wait = 2, w end
  end
end
if which > 0 then return {which, wait} end
if tpm > 0 then
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
    """The same buckets in Redis, shared by every process that uses the same ``redis_url`` and
    ``prefix``."""

    def __init__(self, limits: dict[str, KeyLimits], url: str, prefix: str = "orgate:rl") -> None:
        try:  # optional dependency, imported only when [ratelimit] redis_url is set
            import redis.asyncio as aioredis
            from redis.asyncio.retry import Retry
            from redis.backoff import NoBackoff
            from redis.exceptions import ConnectionError as RedisConnectionError
        except ImportError:
            raise SystemExit(
                "orgate: [ratelimit] redis_url needs redis: pip install 'orgate[redis]'"
            ) from None

        self.limits = limits
        self.prefix = prefix
        # One immediate retry on a connection error: after a Redis restart every pooled connection
        # is stale, and without it each one failed open once (a burst was admitted past the limits).
        # A timeout is not retried (a hung Redis costs a request at most socket_timeout).
        retry = Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,))
        self.client: Any = aioredis.Redis.from_url(
            url, socket_timeout=1.0, socket_connect_timeout=1.0, retry=retry
        )
        self._admit = self.client.register_script(_ADMIT)
        self._charge = self.client.register_script(_CHARGE)
        self._errors: tuple[type[BaseException], ...] = (aioredis.RedisError, OSError, TimeoutError)
        self._failures = 0  # fail-open decisions since the last warning
        self._warned_at: float | None = None

    def _unavailable(self, exc: BaseException, what: str) -> None:
        """Log a Redis outage: the first failure, then at most one line per ``WARN_EVERY`` seconds
        (with the count), not one per request: a busy gateway would flood its log."""
        self._failures += 1
        now = time.monotonic()
        if self._warned_at is None or now - self._warned_at >= WARN_EVERY:
            log.warning(
                "rate limiter: Redis unavailable, %s: %s"
                " (%d request(s) affected since the last warning)",
                what,
                type(exc).__name__,
                self._failures,
            )
            self._warned_at = now
            self._failures = 0

    def _available(self) -> None:
        """Redis answered after an outage that was warned about."""
        log.warning(
            "rate limiter: Redis reachable again (%d more request(s) were admitted without it)",
            self._failures,
        )
        self._warned_at = None
        self._failures = 0

    def _keys(self, key_name: str) -> list[str]:
        return [f"{self.prefix}:{{{key_name}}}:rpm", f"{self.prefix}:{{{key_name}}}:tpm"]

    async def admit(self, key_name: str) -> ApiError | None:
        limits = self.limits.get(key_name)
        if limits is None:
            return None
        try:
            which, retry_ms = await self._admit(
                keys=self._keys(key_name), args=[limits.rpm or 0, limits.tpm or 0]
            )
        except self._errors as exc:
            self._unavailable(exc, "admitting the request")
            return None
        if self._warned_at is not None:
            self._available()
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
            self._unavailable(exc, "tokens not charged")

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


def build_limiter(
    keys: Iterable[Any],
    redis_url: str | None = None,
    prefix: str = "orgate:rl",
    shared_path: Path | None = None,
) -> RateLimiter | None:
    """None when no key has a limit; Redis-backed when ``redis_url`` (may be ``env:NAME``) is
    given, else shared by the server's workers through the file ``shared_path`` when given, else
    in-process."""
    limits = limits_of(keys)
    if not limits:
        return None
    redis_url = resolve_secret(redis_url, where="ratelimit.redis_url")
    if redis_url:
        return RedisLimiter(limits, redis_url, prefix)
    if shared_path is not None:
        return SharedLimiter(limits, shared_path)
    return LocalLimiter(limits)


__all__ = [
    "KeyLimits",
    "LocalLimiter",
    "RateLimiter",
    "RedisLimiter",
    "SharedLimiter",
    "build_limiter",
    "limits_of",
    "refusal",
]
