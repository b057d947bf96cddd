"""The web console at ``/console``: traffic, the response inspector, the review queue,
the gate and diff, eval charts, an overview of the server's metrics and the configured
models (a probe of one, on request).

``routes(services)`` is mounted by the app factory when ``[console] enabled``. The
pages are static files shipped in ``static/`` (no CDN, no build step); everything they
show comes from the JSON endpoints in ``api`` (and its siblings), which read orgate's
own store, review queue, gate library and metrics. Nothing here runs while no console
is open: the request path is untouched.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.routing import BaseRoute

from orgate.config import resolve_secret
from orgate.console.api import response_routes, session_routes
from orgate.console.models import model_routes
from orgate.console.overview import overview_routes
from orgate.console.pages import page_routes
from orgate.console.review import review_routes
from orgate.console.session import SessionSigner
from orgate.console.state import state_of
from orgate.console.throttle import SignInThrottle
from orgate.console.tools import eval_routes, tool_routes

if TYPE_CHECKING:
    from orgate.server.services import Services


def secret_of(services: Services) -> bytes:
    """``[console] session_secret``, else the compaction key (already shared by every process
    serving one store): what signs sessions and keys the sign-in throttle's fingerprints."""
    secret = resolve_secret(
        services.settings.console.session_secret, where="console.session_secret"
    )
    return secret.encode() if secret else services.compaction.key


def signer_for(services: Services) -> SessionSigner:
    """Sessions signed with ``secret_of(services)``, their sign-outs kept in the store."""
    return SessionSigner(
        secret_of(services),
        services.keys,
        services.settings.console.session_minutes * 60.0,
        state_of(lambda: services.store),
    )


def routes(services: Services) -> list[BaseRoute]:
    """Every console route, bound to the app's services."""
    signer = signer_for(services)
    throttle = SignInThrottle(secret_of(services), signer.state, services.metrics)
    return [
        *page_routes(signer),
        *session_routes(services, signer, throttle),
        *response_routes(services, signer),
        *review_routes(services, signer),
        *tool_routes(services, signer),
        *eval_routes(services, signer),
        *overview_routes(services, signer),
        *model_routes(services, signer),
    ]


__all__ = ["routes"]
