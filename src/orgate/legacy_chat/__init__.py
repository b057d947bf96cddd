"""The legacy ``/v1/chat/completions`` adapter over the responses handler.

Off by default (``endpoints.chat_completions.enabled``). The app factory mounts
``routes(services)`` when it is on and logs ``STARTUP_WARNING``. The package is
self-contained: its own wire models (``wire``), request checks (``validate``),
one translation module to and from the Responses protocol (``translate``), the
stream state machine (``stream``) and the HTTP edge (``endpoint``). Removing it
and its config switch leaves the rest of orgate working.
"""

from __future__ import annotations

from typing import Any

from starlette.routing import Route

from orgate.legacy_chat.endpoint import make_handler

PATH = "/v1/chat/completions"

STARTUP_WARNING = (
    "/v1/chat/completions is enabled: it is a legacy compatibility layer translated onto "
    "/v1/responses (one choice, no audio, no legacy functions; each refused with a 400). "
    "New clients should use /v1/responses; see docs/chat-completions.md."
)


def routes(services: Any) -> list[Route]:
    """The adapter's routes, bound to the app's services object."""
    return [Route(PATH, make_handler(services), methods=["POST"], name="chat_completions")]


__all__ = ["PATH", "STARTUP_WARNING", "routes"]
