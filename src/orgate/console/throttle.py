"""The console's sign-in throttle: wrong keys are counted per client address and per key tried,
and past a few of either, sign-ins are refused for a while that doubles with each further
failure.

Two subjects are counted for each wrong key: ``addr:<client address>`` (one client guessing)
and ``key:<fingerprint>`` (one wrong key tried again and again, from any number of
addresses); the fingerprint is an HMAC of the key with the console's secret, so the store
never holds anything a key can be read or tested from. After ``FREE_FAILURES`` failures of a
subject, each further one blocks it for ``2 ** (failures - FREE_FAILURES)`` seconds, up to
``MAX_BLOCK``; a blocked subject's sign-ins get 429 ``too_many_sign_in_attempts`` with
``Retry-After``, and no key is checked (so a blocked client learns nothing more). A subject's
count starts again after ``FORGET_AFTER`` seconds without a failure. A right key from another
address is never held up by a client guessing. The counts live in the store, shared by every
worker and machine (``console/state.py``). Every refusal is a log line on ``orgate.console``
and is counted in ``orgate_console_sign_ins_total{outcome}``.

The client address is the connection's peer: ``orgate serve`` trusts no ``X-Forwarded-For``,
so behind a proxy every client has the proxy's address and the address count is the proxy's
(docs/console.md).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import math
import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter

from orgate.console.state import ConsoleState
from orgate.protocol.errors import ApiError, ErrorCode
from orgate.store.base import StoreError

log = logging.getLogger("orgate.console")

#: Wrong keys a subject may send before it is held up.
FREE_FAILURES = 5
#: The longest wait, in seconds.
MAX_BLOCK = 900.0
#: Seconds without a failure after which a subject's count starts again.
FORGET_AFTER = 3600.0


def block_seconds(failures: int) -> float:
    """How long a subject is refused after its ``failures``-th wrong key (0: not at all)."""
    if failures < FREE_FAILURES:
        return 0.0
    return min(2.0 ** (failures - FREE_FAILURES), MAX_BLOCK)


def store_unavailable() -> ApiError:
    return ApiError.of(
        ErrorCode.STORE_UNAVAILABLE,
        "The response store is unavailable; try again shortly.",
        headers={"Retry-After": "1"},
    )


class SignInThrottle:
    """Counts wrong keys and refuses held-up subjects (see the module docstring)."""

    def __init__(
        self,
        secret: bytes,
        state: Callable[[], ConsoleState],
        registry: CollectorRegistry,
    ) -> None:
        self._secret = hashlib.sha256(b"orgate-console-sign-in\0" + secret).digest()
        self._state = state
        self._outcomes = Counter(
            "orgate_console_sign_ins",
            "Console sign-ins, by outcome (ok, wrong_key, throttled).",
            ["outcome"],
            registry=registry,
        )

    def subjects(self, address: str, key: str) -> list[str]:
        """What a sign-in is counted against: its client address and the key it tried."""
        mac = hmac.new(self._secret, key.encode(), hashlib.sha256).hexdigest()[:32]
        return [f"addr:{address}", f"key:{mac}"]

    async def check(self, subjects: list[str], address: str) -> None:
        """Raise the 429 of a subject held up now (before any key is checked)."""
        try:
            until = await self._state().signin_blocked_until(subjects)
        except StoreError:
            raise store_unavailable() from None
        wait = until - time.time()
        if wait <= 0:
            return
        retry_after = max(1, math.ceil(wait))
        self._outcomes.labels("throttled").inc()
        log.warning("console sign-in throttled: address=%s retry_after=%d", address, retry_after)
        raise ApiError.of(
            ErrorCode.TOO_MANY_SIGN_IN_ATTEMPTS,
            f"Too many wrong keys; sign in again in {retry_after} s.",
            headers={"Retry-After": str(retry_after)},
        )

    async def failed(self, subjects: list[str], address: str) -> None:
        """Count a wrong key against each subject, and hold up those past their free tries."""
        now = time.time()
        state = self._state()
        self._outcomes.labels("wrong_key").inc()
        try:
            counts = await state.signin_failed(subjects, now=now, forget_after=FORGET_AFTER)
            for subject, failures in zip(subjects, counts, strict=True):
                wait = block_seconds(failures)
                if wait:
                    await state.signin_block(subject, now + wait)
        except StoreError:
            raise store_unavailable() from None
        log.warning(
            "console sign-in with a wrong key: address=%s failures=%s",
            address,
            "/".join(str(n) for n in counts),
        )

    def succeeded(self) -> None:
        self._outcomes.labels("ok").inc()
