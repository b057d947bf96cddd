"""The web console at ``/console``: traffic, the response inspector, the review queue,
the gate and diff, eval charts and an overview of the server's metrics.

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
from orgate.console.overview import overview_routes
from orgate.console.pages import page_routes
from orgate.console.review import review_routes
from orgate.console.session import SessionSigner
from orgate.console.tools import eval_routes, tool_routes

if TYPE_CHECKING:
    from orgate.server.services import Services


def signer_for(services: Services) -> SessionSigner:
    """Sessions signed with ``[console] session_secret``, else with a key derived from the
    compaction key (already shared by every process serving one store)."""
    conf = services.settings.console
    secret = resolve_secret(conf.session_secret, where="console.session_secret")
    material = secret.encode() if secret else services.compaction.key
    return SessionSigner(material, services.keys, conf.session_minutes * 60.0)


def routes(services: Services) -> list[BaseRoute]:
    """Every console route, bound to the app's services."""
    signer = signer_for(services)
    return [
        *page_routes(signer),
        *session_routes(services, signer),
        *response_routes(services, signer),
        *review_routes(services, signer),
        *tool_routes(services, signer),
        *eval_routes(services, signer),
        *overview_routes(services, signer),
    ]


__all__ = ["routes"]
