"""The console's pages and assets: ``/console`` and ``/console/static/<file>``.

``/console`` is the application shell for a signed-in browser and the sign-in page
otherwise (an expired or signed-out session lands there). Assets are package data,
read once and served from memory; only the names shipped are served.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from orgate.console.guard import secured, session_of
from orgate.console.session import SessionSigner
from orgate.protocol.errors import ApiError

_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".txt": "text/plain; charset=utf-8",
}


@cache
def asset(name: str) -> tuple[bytes, str] | None:
    """A shipped asset's bytes and media type, or None when there is no such file."""
    if "/" in name or name.startswith("."):
        return None
    media = next((media for suffix, media in _TYPES.items() if name.endswith(suffix)), None)
    path = resources.files("orgate.console").joinpath("static", name)
    if media is None or not path.is_file():
        return None
    return path.read_bytes(), media


def page_routes(signer: SessionSigner) -> list[BaseRoute]:
    async def shell(request: Request) -> Response:
        try:
            signed_in = await session_of(signer, request) is not None
        except ApiError:  # the store cannot say whether the session was signed out
            signed_in = False
        page = "app.html" if signed_in else "signin.html"
        body, media = asset(page) or (b"", "text/html")
        return secured(Response(body, media_type=media))

    async def static(request: Request) -> Response:
        found = asset(request.path_params["name"])
        if found is None:
            return secured(Response(b"not found", status_code=404, media_type="text/plain"))
        return secured(Response(found[0], media_type=found[1]))

    async def slash(request: Request) -> Response:
        return secured(RedirectResponse("/console", status_code=308))

    return [
        Route("/console", shell, methods=["GET"]),
        Route("/console/", slash, methods=["GET"]),
        Route("/console/static/{name}", static, methods=["GET"]),
    ]
