"""The composition root: the HTTP server with the adapters the configuration mounts.

``create_app(settings)`` is the app a server runs: the server's ``server.app.build_app`` (the
core routes) plus the optional route sets ``[endpoints.chat_completions]`` and ``[console]``
switch on. It lives above the
server, the chat adapter and the console, so that they import the server and the
server imports none of them (an import-linter contract keeps it so). Deleting an
optional package only means deleting its lines here.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from starlette.applications import Starlette

from orgate.config import Settings
from orgate.server.app import RouteSet, build_app
from orgate.server.services import Services, build_services

log = logging.getLogger("orgate.server")


def default_route_sets(settings: Settings) -> list[RouteSet]:
    """Optional route sets switched on by configuration (each package imported only when on)."""
    sets: list[RouteSet] = []
    if settings.endpoints.chat_completions.enabled:
        from orgate.legacy_chat import STARTUP_WARNING
        from orgate.legacy_chat import routes as chat_routes

        log.warning(STARTUP_WARNING)
        sets.append(chat_routes)
    if settings.console.enabled:
        from orgate.console import routes as console_routes

        sets.append(console_routes)
    return sets


def create_app(
    settings: Settings,
    *,
    route_sets: Sequence[RouteSet] | None = None,
    services: Services | None = None,
) -> Starlette:
    """The ASGI app. ``route_sets`` defaults to what the settings switch on."""
    extra = default_route_sets(settings) if route_sets is None else route_sets
    return build_app(settings, route_sets=extra, services=services)


__all__ = ["build_services", "create_app", "default_route_sets"]
