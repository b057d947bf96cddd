"""Waiting for something to happen, for tests that must pass on a loaded machine.

A test that needs a state to be reached polls for it (``wait_until``; ``eventually`` in a
coroutine) instead of sleeping for a time it hopes is long enough. The deadline only bounds a
failure: a condition that comes returns at once, however long the deadline, so it is generous
(``PATIENCE``, 60 s; ``ORGATE_TEST_PATIENCE`` changes it), enough for a 2-core CI machine
running the suite in two workers beside other jobs to be many times slower than an idle one.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

#: How long a poll waits for its condition before it gives up (seconds).
PATIENCE = float(os.environ.get("ORGATE_TEST_PATIENCE", "60"))
#: How often a poll looks (seconds): short, since looking is cheap.
EVERY = 0.02


def wait_until(condition: Callable[[], T], timeout: float = PATIENCE, every: float = EVERY) -> T:
    """Poll ``condition`` until it returns something true; that value, or its last (false)
    value once ``timeout`` seconds have passed: ``assert wait_until(...)`` fails then."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(every)


async def eventually(
    condition: Callable[[], T], timeout: float = PATIENCE, every: float = EVERY
) -> T:
    """``wait_until`` for a coroutine: the event loop runs between two looks."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value or time.monotonic() >= deadline:
            return value
        await asyncio.sleep(every)
