"""A semantic check that never returns: an operator's check stuck on the CPU, for the tests of a
bounded shutdown (``[structured.formats.<name>] semantic = ["tests.hostile.spin_check:forever"]``)."""

from __future__ import annotations

from typing import Any


def forever(value: Any) -> list[str]:
    while True:
        pass
