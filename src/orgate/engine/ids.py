"""Id generation with the spec's stable prefixes (``resp_``, ``msg_``, ``fc_``, ``call_``, ``rs_``, ``cmp_``)."""

from __future__ import annotations

import os
import time


def new_id(prefix: str) -> str:
    """``prefix_`` + 12 hex of Unix milliseconds + 36 random hex (144 random bits).

    Time-ordered ids keep the store's index writes sequential; 144 random bits
    keep them unguessable.
    """
    return f"{prefix}_{time.time_ns() // 1_000_000:012x}{os.urandom(18).hex()}"


def response_id() -> str:
    return new_id("resp")


def message_id() -> str:
    return new_id("msg")


def function_call_id() -> str:
    return new_id("fc")


def call_id() -> str:
    return new_id("call")


def reasoning_id() -> str:
    return new_id("rs")
