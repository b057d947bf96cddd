"""What every rate limiter shares: a key's limits, the limiter's interface and the 429 it
answers with. The limiters themselves are in ``ratelimit`` (in the process, in Redis) and
``ratelimit_shared`` (shared by the workers of one server)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

from orgate.protocol.errors import ApiError, ErrorCode


@dataclass(frozen=True, slots=True)
class KeyLimits:
    """A key's requests and tokens per minute (None: not limited)."""

    rpm: int | None = None
    tpm: int | None = None


class RateLimiter(Protocol):
    """What the middleware asks of a limiter, wherever it keeps its buckets."""

    async def admit(self, key_name: str) -> ApiError | None:
        """None when the call may proceed (one request is taken); else the 429 to send."""
        ...

    async def charge(self, key_name: str, tokens: int) -> None:
        """Charge the tokens of a finished answer to the key."""
        ...

    async def aclose(self) -> None: ...


def refusal(key_name: str, which: str, limit: int, retry_after: float) -> ApiError:
    """The 429 for a key over its ``which`` (rpm or tpm) limit, with ``Retry-After``."""
    seconds = max(1, math.ceil(retry_after))
    unit = "requests" if which == "rpm" else "tokens"
    return ApiError.of(
        ErrorCode.RATE_LIMIT_EXCEEDED,
        f"Rate limit reached for API key '{key_name}': {limit} {unit} per minute"
        f" (auth.api_keys {which}). Retry after {seconds} s.",
        headers={"Retry-After": str(seconds)},
    )
