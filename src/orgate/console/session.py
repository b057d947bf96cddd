"""Console sign-in sessions: signed cookies, their expiry, sign-out, and CSRF tokens.

A session is a cookie the server signs (HMAC-SHA256): the key's name, a fingerprint
of the key's secret material (rotating a key ends its sessions), an expiry and a
random session id. Nothing in it is the key. The browser holds it as an HttpOnly,
SameSite=Strict cookie scoped to ``/console``. Being signed rather than looked up,
a session is valid in every process that shares the secret (several workers or
hosts); sign-out records the session id as revoked in the console's shared state (the
response store: ``console/state.py``), which every process consults, and clears the cookie.

The CSRF token of a session is derived from its id with the same secret, sent by
the page in ``X-CSRF-Token`` on every state-changing request.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

import orjson

from orgate.config import ResolvedKey
from orgate.console.state import ConsoleState, state_of

COOKIE = "orgate_console"
CSRF_HEADER = "x-csrf-token"


@dataclass(frozen=True, slots=True)
class ConsoleSession:
    """A signed-in browser: which key, its tenant, whether it sees every tenant, until when."""

    session_id: str
    key_name: str
    tenant: str
    admin: bool
    models: tuple[str, ...] | None
    expires_at: float


def is_admin(key: ResolvedKey) -> bool:
    """Whether the key sees every tenant (``admin = true`` in its ``[auth]`` table)."""
    return key.admin


def _fingerprint(key: ResolvedKey) -> str:
    material = key.sha256 if key.sha256 is not None else hashlib.sha256(key.secret or b"").digest()
    return hashlib.sha256(b"orgate-console-key\0" + material).hexdigest()[:16]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class SessionSigner:
    """Issues, reads and revokes session cookies for the configured keys."""

    def __init__(
        self,
        secret: bytes,
        keys: list[ResolvedKey],
        lifetime_seconds: float,
        state: Callable[[], ConsoleState] | None = None,
    ) -> None:
        self._secret = hashlib.sha256(b"orgate-console-session\0" + secret).digest()
        self._keys = {key.name: key for key in keys}
        self.lifetime = lifetime_seconds
        self.state = state or state_of(lambda: None)  # where sign-outs are recorded

    def _mac(self, purpose: bytes, payload: bytes) -> bytes:
        return hmac.new(self._secret, purpose + b"\0" + payload, hashlib.sha256).digest()

    def issue(self, key: ResolvedKey, now: float | None = None) -> tuple[str, ConsoleSession]:
        """A new session for ``key``: the cookie value and what it stands for."""
        expires = (time.time() if now is None else now) + self.lifetime
        session_id = secrets.token_urlsafe(16)
        payload = orjson.dumps(
            {"k": key.name, "f": _fingerprint(key), "e": expires, "s": session_id}
        )
        cookie = f"{_b64(payload)}.{_b64(self._mac(b'session', payload))}"
        return cookie, self._session(key, session_id, expires)

    def read(self, cookie: str | None, now: float | None = None) -> ConsoleSession | None:
        """The session a cookie stands for; None when absent, forged, expired or its key is
        gone (whether it was signed out is ``revoked``'s to say)."""
        if not cookie or cookie.count(".") != 1:
            return None
        body, mac = cookie.split(".")
        try:
            payload = _unb64(body)
            if not hmac.compare_digest(_unb64(mac), self._mac(b"session", payload)):
                return None
            data = orjson.loads(payload)
        except ValueError:
            return None
        kid = data.get("k") if isinstance(data, dict) else None
        key = self._keys.get(kid) if isinstance(kid, str) else None
        expires = data.get("e") if key is not None else None
        if (
            key is None
            or not isinstance(expires, float | int)
            or data.get("f") != _fingerprint(key)
        ):
            return None
        if expires <= (time.time() if now is None else now):
            return None
        return self._session(key, str(data.get("s")), float(expires))

    async def revoke(self, session: ConsoleSession) -> None:
        """Sign-out: this session id is refused by every process from now on (until it would
        have expired)."""
        await self.state().revoke_console_session(session.session_id, session.expires_at)

    async def revoked(self, session: ConsoleSession) -> bool:
        """Whether the session was signed out, through any process."""
        return await self.state().console_session_revoked(session.session_id)

    def csrf_token(self, session: ConsoleSession) -> str:
        return _b64(self._mac(b"csrf", session.session_id.encode()))

    def csrf_ok(self, session: ConsoleSession, token: str | None) -> bool:
        return bool(token) and hmac.compare_digest(str(token), self.csrf_token(session))

    @staticmethod
    def _session(key: ResolvedKey, session_id: str, expires: float) -> ConsoleSession:
        return ConsoleSession(session_id, key.name, key.tenant, is_admin(key), key.models, expires)
