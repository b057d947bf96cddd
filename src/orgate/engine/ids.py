"""Id generation with the spec's stable prefixes (``resp_``, ``msg_``, ``fc_``, ``call_``, ``rs_``, ``cmp_``)."""

from __future__ import annotations

import os


def new_id(prefix: str) -> str:
    """A random id: ``prefix`` + ``_`` + 48 hex characters (192 random bits)."""
    return f"{prefix}_{os.urandom(24).hex()}"


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
