"""Counting the CPU instructions of one run of a benchmark's driver, under valgrind.

``bench/instructions.py`` and ``bench/wrappers.py`` run their drivers twice this way
and divide the difference of the totals by the difference of the work done: start-up
and warm-up cancel out, and with a fixed ``PYTHONHASHSEED`` the count does not move
with the machine's load.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys


def instructions_of(driver_argv: list[str], what: str) -> int:
    """Instructions of ``python driver_argv…`` (all threads); ``what`` names it in an error."""
    argv = [
        "valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
        sys.executable, *driver_argv,
    ]  # fmt: skip
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=1800)
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"{what}: the driver failed:\n{done.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))
