"""What the console shares with every process serving it: signed-out sessions and the sign-in
throttle's counts. They live in the response store (``ResponseStore``'s console methods), so a
sign-out or a block made through one worker or machine holds on all of them; a gateway without
a store keeps them in its process (``LocalConsoleState``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol


class ConsoleState(Protocol):
    """The store's console methods (see ``orgate.store.base.ResponseStore``)."""

    async def revoke_console_session(self, session_id: str, expires_at: float) -> None: ...

    async def console_session_revoked(self, session_id: str) -> bool: ...

    async def signin_failed(
        self, subjects: Sequence[str], *, now: float, forget_after: float
    ) -> list[int]: ...

    async def signin_block(self, subject: str, until: float) -> None: ...

    async def signin_blocked_until(self, subjects: Sequence[str]) -> float: ...


@dataclass(slots=True)
class _Subject:
    failures: int
    updated_at: float
    blocked_until: float = 0.0


class LocalConsoleState:
    """The same state in this process only: for a gateway without a store."""

    def __init__(self) -> None:
        self._revoked: dict[str, float] = {}
        self._subjects: dict[str, _Subject] = {}

    async def revoke_console_session(self, session_id: str, expires_at: float) -> None:
        now = time.time()
        self._revoked = {sid: exp for sid, exp in self._revoked.items() if exp > now}
        self._revoked[session_id] = expires_at

    async def console_session_revoked(self, session_id: str) -> bool:
        return session_id in self._revoked

    async def signin_failed(
        self, subjects: Sequence[str], *, now: float, forget_after: float
    ) -> list[int]:
        stale = now - forget_after
        self._subjects = {
            name: s
            for name, s in self._subjects.items()
            if s.updated_at >= stale or s.blocked_until >= now or name in subjects
        }
        counts = []
        for name in subjects:
            known = self._subjects.get(name)
            if known is None or known.updated_at < stale:
                known = self._subjects[name] = _Subject(0, now, known.blocked_until if known else 0)
            known.failures += 1
            known.updated_at = now
            counts.append(known.failures)
        return counts

    async def signin_block(self, subject: str, until: float) -> None:
        known = self._subjects.get(subject)
        if known is not None:
            known.blocked_until = max(known.blocked_until, until)

    async def signin_blocked_until(self, subjects: Sequence[str]) -> float:
        return max(
            (s.blocked_until for name in subjects if (s := self._subjects.get(name))), default=0.0
        )


def state_of(store: Callable[[], ConsoleState | None]) -> Callable[[], ConsoleState]:
    """The console's state: the store once the app has opened it, else this process's own."""
    local = LocalConsoleState()

    def current() -> ConsoleState:
        shared = store()
        return shared if shared is not None else local

    return current
