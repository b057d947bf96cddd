"""A semantic check that never returns: an operator's check stuck on the CPU, for the tests of a
bounded shutdown (``[structured.formats.<name>] semantic = ["tests.hostile.spin_check:forever"]``).

Where ``ORGATE_TEST_SPIN_MARKS`` names a directory, each call first leaves a file there, so the
test knows the checks are spinning rather than guessing how long they take to start."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any


def forever(value: Any) -> list[str]:
    marks = os.environ.get("ORGATE_TEST_SPIN_MARKS")
    if marks:
        Path(marks, f"{os.getpid()}-{threading.get_ident()}").touch()
    while True:
        pass
