"""The console's HTTP guard: security headers, the session a request carries,
CSRF and origin checks.

Every console response carries a strict Content-Security-Policy (scripts, styles and
connections from this origin only, no inline script, no framing), ``nosniff``,
``no-referrer`` and ``no-store``. JSON endpoints answer 401 in the spec's error shape
without a valid session (a signed-out one included, whichever process signed it out);
every POST and DELETE — those that change nothing too — also needs the session's CSRF token
and, when the browser sends one, an ``Origin`` equal to the server's own.
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from orgate.console.session import COOKIE, CSRF_HEADER, ConsoleSession, SessionSigner
from orgate.console.throttle import store_unavailable
from orgate.protocol.errors import ApiError, ErrorCode
from orgate.store.base import StoreError

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; form-action 'self'; base-uri 'none'; "
    "frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}


def secured(response: Response) -> Response:
    response.headers.update(SECURITY_HEADERS)
    return response


def json_response(data: Any, status: int = 200) -> Response:
    return secured(Response(orjson.dumps(data), status_code=status, media_type="application/json"))


async def session_of(signer: SessionSigner, request: Request) -> ConsoleSession | None:
    """The request's session: signed, unexpired and not signed out (a store that cannot say
    whether it was is a 503, never a pass)."""
    session = signer.read(request.cookies.get(COOKIE))
    if session is None:
        return None
    try:
        revoked = await signer.revoked(session)
    except StoreError:
        raise store_unavailable() from None
    return None if revoked else session


async def require_session(signer: SessionSigner, request: Request) -> ConsoleSession:
    session = await session_of(signer, request)
    if session is None:
        raise ApiError.of(
            ErrorCode.CONSOLE_SESSION_REQUIRED,
            "Sign in to the console first (the session is missing, expired or signed out).",
        )
    return session


def same_origin(request: Request) -> bool:
    """False when the browser says the request comes from another origin."""
    origin = request.headers.get("origin")
    if origin is None:  # same-origin GETs; the SameSite=Strict cookie covers the rest
        return True
    host = request.headers.get("host", "")
    return origin in (f"http://{host}", f"https://{host}")


async def require_change_allowed(signer: SessionSigner, request: Request) -> ConsoleSession:
    """The session of a POST or DELETE, with a valid CSRF token and no foreign origin: every
    one, those that only compute (gate, diff, eval, validate) too — their answers are the
    session's, and a page of another origin must not have them computed on a user's behalf."""
    session = await require_session(signer, request)
    if not same_origin(request) or not signer.csrf_ok(session, request.headers.get(CSRF_HEADER)):
        raise ApiError.of(ErrorCode.CSRF_FAILED, "Missing or invalid CSRF token.")
    return session


def require_same_origin(request: Request) -> None:
    if not same_origin(request):
        raise ApiError.of(ErrorCode.CSRF_FAILED, "Cross-origin request refused.")


def visible_tenant(session: ConsoleSession, requested: str | None) -> str | None:
    """The tenant a request may read: its own, or (admin only) the one asked for, None = all."""
    if not session.admin:
        return session.tenant
    return requested or None
