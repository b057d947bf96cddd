"""API-key authentication: ``Authorization: Bearer <key>``, constant-time comparison.

A key that matched is remembered (token → caller, up to ``REMEMBERED_KEYS`` of
them), so a client's next request skips the hashing and the comparisons with
every configured key. Only tokens that matched are kept: a wrong one is always
checked in full, and what a lookup's timing could tell is whether that exact
token was accepted before — nothing about any configured key.
"""

from __future__ import annotations

import hashlib
import hmac

from orgate.config import ResolvedKey
from orgate.engine.service import Caller
from orgate.protocol.errors import ApiError, ErrorCode

#: Accepted tokens remembered (the configured keys are few; the bound only caps memory).
REMEMBERED_KEYS = 1024


class Authenticator:
    """Checks a bearer token against every configured key (plain or SHA-256) without early exit."""

    def __init__(self, keys: list[ResolvedKey]) -> None:
        self.keys = keys
        self._accepted: dict[str, Caller] = {}

    def authenticate(self, authorization: str | None) -> Caller:
        if not authorization:
            raise ApiError.of(
                ErrorCode.MISSING_API_KEY,
                "You didn't provide an API key. Send it as 'Authorization: Bearer <key>'.",
            )
        scheme, _, token = authorization.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise ApiError.of(ErrorCode.INVALID_API_KEY, "The Authorization header must be 'Bearer <key>'.")
        caller = self._accepted.get(token)
        if caller is None:
            caller = self._check(token)
            if len(self._accepted) >= REMEMBERED_KEYS:
                self._accepted.clear()
            self._accepted[token] = caller
        return caller

    def _check(self, token: str) -> Caller:
        presented = token.encode()
        digest = hashlib.sha256(presented).digest()
        match: ResolvedKey | None = None
        for key in self.keys:
            ok = False
            if key.secret is not None:
                ok = hmac.compare_digest(presented, key.secret)
            elif key.sha256 is not None:
                ok = hmac.compare_digest(digest, key.sha256)
            if ok and match is None:
                match = key
        if match is None:
            raise ApiError.of(ErrorCode.INVALID_API_KEY, "Incorrect API key provided.")
        return Caller(key_name=match.name, tenant=match.tenant, models=match.models, admin=match.admin)
