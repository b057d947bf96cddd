"""A throwaway ``redis-server`` of a test's own, for the shared rate limits.

``Redis()`` is a context manager: on a reserved port of the loopback address
(tests/support/ports.py: kept for it until the block ends, so ``stop()`` then ``start()``
brings it back on the same port, empty, as after a crash without persistence), no
persistence. The test is skipped where Debian's ``redis-server`` is not installed.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
from types import TracebackType

import pytest

from tests.support.ports import reserved_port
from tests.support.waiting import wait_until


def listening(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=1).close()
    except OSError:
        return False
    return True


class Redis:
    def __init__(self, host: str = "127.0.0.1") -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.skip("redis-server is not installed (apt-get install -y redis-server)")
        self.binary = binary
        self.host = host
        self._reservation = contextlib.ExitStack()
        self.port = self._reservation.enter_context(reserved_port(host))
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    def start(self) -> Redis:
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", self.host]
            + ["--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        proc = self.proc
        if not wait_until(lambda: proc.poll() is not None or listening(self.host, self.port)):
            raise RuntimeError("redis-server did not start")
        if proc.poll() is not None:
            raise RuntimeError(f"redis-server exited with {proc.returncode}")
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)

    def __enter__(self) -> Redis:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()
        self._reservation.close()
