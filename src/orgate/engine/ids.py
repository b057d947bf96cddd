"""Id generation with the spec's stable prefixes (``resp_``, ``msg_``, ``fc_``, ``call_``,
``rs_``, ``cmp_``)."""

from __future__ import annotations

import os
import time

from orgate.store.base import OUTPUT_POSITIONS, derived_item_id


class _Entropy:
    """Bytes from the OS's CSPRNG, read 4 KiB at a time (one system call per ~220 ids)."""

    __slots__ = ("buffer", "offset")

    def __init__(self) -> None:
        self.buffer = b""
        self.offset = 0

    def reset(self) -> None:
        """Forget the bytes read so far (a forked child must never reuse its parent's)."""
        self.buffer = b""
        self.offset = 0

    def take(self, size: int) -> bytes:
        if self.offset + size > len(self.buffer):
            self.buffer = os.urandom(4096)
            self.offset = 0
        start = self.offset
        self.offset = start + size
        return self.buffer[start : start + size]


_ENTROPY = _Entropy()
os.register_at_fork(after_in_child=_ENTROPY.reset)


def new_id(prefix: str) -> str:
    """``prefix_`` + 12 hex of Unix milliseconds + 36 random hex (144 random bits).

    Time-ordered ids keep the store's index writes sequential; 144 random bits
    keep them unguessable.
    """
    return f"{prefix}_{time.time_ns() // 1_000_000:012x}{_ENTROPY.take(18).hex()}"


def random_hex(size: int) -> str:
    """``size`` random bytes from the OS's CSPRNG as hex (e.g. request ids)."""
    return _ENTROPY.take(size).hex()


def response_id() -> str:
    return new_id("resp")


def output_item_id(prefix: str, response_id: str, output_index: int) -> str:
    """The id of a response's output item: derived from the response id and its index,
    so the store finds it through the response's row (``orgate.store.base.derived_item_id``)."""
    return derived_item_id(prefix, response_id, OUTPUT_POSITIONS + output_index)


def message_id() -> str:
    return new_id("msg")


def function_call_id() -> str:
    return new_id("fc")


def call_id() -> str:
    return new_id("call")


def reasoning_id() -> str:
    return new_id("rs")
