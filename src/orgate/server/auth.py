"""API-key authentication: ``Authorization: Bearer <key>``, constant-time comparison; the one path.

``AuthMiddleware`` (``server/middleware.py``) checks the credential of every HTTP
request and WebSocket handshake once, with ``Authenticator.authenticate``, and
keeps the outcome on the request's state; an endpoint that needs a key asks
``caller_of(scope)`` (the caller, or the 401 the credential earned). The console's
sign-in checks the key typed into its form with the same ``check_token``.

A key that matched is remembered (token → caller, up to ``REMEMBERED_KEYS`` of
them), so a client's next request skips the hashing and the comparisons with
every configured key. Only tokens that matched are kept: a wrong one is always
checked in full, and what a lookup's timing could tell is whether that exact
token was accepted before — nothing about any configured key.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import MutableMapping
from typing import Any

from orgate.config import ResolvedKey
from orgate.engine.service import Caller
from orgate.protocol.errors import ApiError, ErrorCode
from orgate.server.request_state import STATE_KEY, RequestState

#: Accepted tokens remembered (the configured keys are few; the bound only caps memory).
REMEMBERED_KEYS = 1024


def missing_key() -> ApiError:
    return ApiError.of(
        ErrorCode.MISSING_API_KEY,
        "You didn't provide an API key. Send it as 'Authorization: Bearer <key>'.",
    )


def ambiguous_key() -> ApiError:
    """A request with two different ``Authorization`` headers: refused rather than run under one
    of them (the layers used to read headers differently, the first one or the last one)."""
    return ApiError.of(
        ErrorCode.INVALID_API_KEY,
        "The request has more than one Authorization header; send exactly one.",
    )


class Authenticator:
    """Checks a bearer token against every configured key (plain or SHA-256) without early exit."""

    def __init__(self, keys: list[ResolvedKey]) -> None:
        self.keys = keys
        self._accepted: dict[str, Caller] = {}

    def authenticate(self, authorization: str | None) -> Caller:
        """The caller an ``Authorization`` header value names, or a 401."""
        if not authorization:
            raise missing_key()
        scheme, _, token = authorization.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise ApiError.of(
                ErrorCode.INVALID_API_KEY, "The Authorization header must be 'Bearer <key>'."
            )
        caller = self._accepted.get(token)  # every request asks: the remembered case without a call
        return caller if caller is not None else self._remember(token)

    def check_token(self, token: str) -> Caller:
        """The caller a bare key names, or a 401."""
        caller = self._accepted.get(token)
        return caller if caller is not None else self._remember(token)

    def _remember(self, token: str) -> Caller:
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
        return Caller(
            key_name=match.name, tenant=match.tenant, models=match.models, admin=match.admin
        )


def caller_of(scope: MutableMapping[str, Any]) -> Caller:
    """The authenticated caller of a request, or the 401 its credential earned: what every
    endpoint that needs a key asks (the key was checked once, by ``AuthMiddleware``)."""
    state: RequestState = scope[STATE_KEY]
    if state.caller is not None:
        return state.caller
    raise state.auth_error or missing_key()


__all__ = ["Authenticator", "ambiguous_key", "caller_of", "missing_key"]
