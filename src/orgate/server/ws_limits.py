"""How many WebSocket connections one process holds, and one key (admission before the
handshake); and, on a multiplexed connection, how many responses and named streams it runs.

An idle WebSocket costs a file descriptor for as long as it stays open (up to
``[websocket] max_connection_seconds``). Without a bound one key holding a
thousand idle sockets exhausted the process's descriptors, and then
``/healthz`` and every HTTP request were refused at ``accept``. ``SocketLimits``
admits a connection only under three bounds:

- ``max_connections_per_key`` open sockets per API key (else HTTP 429
  ``too_many_websocket_connections``, a ``rate_limit_error``),
- ``max_connections`` open sockets in the process (else 503
  ``websocket_capacity_reached``),
- what the open-files limit leaves after a reserve of a quarter of it (at least
  ``FD_RESERVE``), so HTTP requests, ``/healthz``, the upstream connections of
  running responses, the store and the logs keep descriptors of their own (503 too).

The counts are this process's (with ``--workers N`` each worker has its own).

With ``[websocket] multiplexing`` on, ``LaneLimits`` admits each ``response.create`` of one
connection: its ``stream_id`` well formed (OpenAI's pattern: 1 to 256 of ``A-Za-z0-9_.-``),
at most ``max_streams`` named streams over the connection's life (a new name past it is
400 ``websocket_stream_limit_reached``, OpenAI's code) and at most ``max_active_responses``
responses running or queued on it (429 ``websocket_active_response_limit_reached``).
"""

from __future__ import annotations

import re
import sys
from collections import Counter

from orgate.protocol.errors import ApiError, ErrorCode, invalid_type, invalid_value

if sys.platform != "win32":  # Windows has no descriptor budget
    import resource

#: The fewest descriptors kept for everything but WebSockets (a quarter of the limit, when more).
FD_RESERVE = 128


def descriptor_budget() -> int | None:
    """How many WebSockets the open-files limit allows (None: no limit known)."""
    if sys.platform == "win32":
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return None
    return max(0, soft - max(FD_RESERVE, soft // 4))


class SocketLimits:
    """Open WebSockets counted per key and in all; ``admit`` before accepting, ``release`` after."""

    def __init__(self, max_connections: int, max_per_key: int) -> None:
        self.max_connections = max_connections
        self.max_per_key = max_per_key
        self.open = 0
        self.by_key: Counter[str] = Counter()

    def capacity(self) -> int:
        """The process's cap now: the configured one, or less when the open-files limit says so."""
        budget = descriptor_budget()  # read each time: the limit may be raised after start-up
        return self.max_connections if budget is None else min(self.max_connections, budget)

    def admit(self, key: str) -> ApiError | None:
        """Count one more socket of ``key``, or the refusal (nothing counted)."""
        if self.by_key[key] >= self.max_per_key:
            return ApiError.of(
                ErrorCode.TOO_MANY_WEBSOCKET_CONNECTIONS,
                f"This API key has {self.by_key[key]} WebSocket connections open, the limit "
                f"(websocket.max_connections_per_key); close one, or use HTTP.",
            )
        capacity = self.capacity()
        if self.open >= capacity:
            return ApiError.of(
                ErrorCode.WEBSOCKET_CAPACITY_REACHED,
                f"This server holds its maximum of {capacity} WebSocket connections; "
                "retry later, or use HTTP.",
                headers={"Retry-After": "5"},
            )
        self.open += 1
        self.by_key[key] += 1
        return None

    def release(self, key: str) -> None:
        """One socket of ``key`` closed."""
        self.open -= 1
        self.by_key[key] -= 1
        if self.by_key[key] <= 0:
            del self.by_key[key]


_STREAM_ID = re.compile(r"[A-Za-z0-9_.-]{1,256}")


def check_stream_id(value: object) -> str:
    """A ``stream_id`` as OpenAI's schema has it, else 400 naming it."""
    if not isinstance(value, str):
        raise invalid_type("Invalid 'stream_id': expected a string.", param="stream_id")
    if _STREAM_ID.fullmatch(value) is None:
        raise invalid_value(
            "Invalid 'stream_id': 1 to 256 characters of letters, digits, '_', '.' and '-'.",
            param="stream_id",
        )
    return value


class LaneLimits:
    """One multiplexed connection's responses (running or queued) and named streams."""

    def __init__(self, max_active: int, max_streams: int) -> None:
        self.max_active = max_active
        self.max_streams = max_streams
        self.active = 0
        self.names: set[str] = set()

    def admit(self, stream_id: str | None) -> ApiError | None:
        """Count one more response on ``stream_id`` (None: the default stream), or the refusal."""
        new_name = stream_id is not None and stream_id not in self.names
        if new_name and len(self.names) >= self.max_streams:
            return ApiError.of(
                ErrorCode.WEBSOCKET_STREAM_LIMIT_REACHED,
                f"This WebSocket connection has reached its stream limit of "
                f"{self.max_streams} named streams (websocket.max_streams); reuse one, "
                "or open a new connection.",
                param="stream_id",
            )
        if self.active >= self.max_active:
            return ApiError.of(
                ErrorCode.WEBSOCKET_ACTIVE_RESPONSE_LIMIT_REACHED,
                f"This WebSocket connection has {self.active} responses running or queued, "
                "its limit (websocket.max_active_responses); send this one after a terminal "
                "event.",
            )
        if stream_id is not None:
            self.names.add(stream_id)
        self.active += 1
        return None

    def release(self) -> None:
        """One response ended (its terminal event, or its error)."""
        self.active -= 1


__all__ = ["FD_RESERVE", "LaneLimits", "SocketLimits", "check_stream_id", "descriptor_budget"]
