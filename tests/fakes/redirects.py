"""A fake upstream that also answers redirects: ``with_redirects(FakeX)`` adds ``POST /old/...``.

``/old/<rest>`` answers ``redirect_status`` (307 unless set) with ``Location:``
``redirect_to`` when set (another origin, say), else ``/<rest>`` on the same
origin, where the fake's real route answers. The redirect requests are
recorded like every other request.
"""

from __future__ import annotations

from typing import Any, TypeVar

from aiohttp import web

from tests.fakes._base import LoopbackFake

Fake = TypeVar("Fake", bound=LoopbackFake)


def with_redirects(fake_cls: type[Fake]) -> type[Fake]:
    """A subclass of ``fake_cls`` whose ``/old/...`` paths redirect (see the module docstring)."""

    class Redirecting(fake_cls):  # type: ignore[valid-type, misc]
        redirect_status = 307
        redirect_to: str | None = None

        def _app(self) -> web.Application:
            app = super()._app()
            app.router.add_post("/old/{rest:.*}", self._redirect)
            return app

        async def _redirect(self, request: web.Request) -> web.Response:
            await self._record(request)
            location = self.redirect_to or "/" + request.match_info["rest"]
            return web.Response(status=self.redirect_status, headers={"Location": location})

        @property
        def old_url(self) -> Any:
            """The base URL under ``/old`` (what a deployment configured with a moved path uses)."""
            return f"http://127.0.0.1:{self.port}/old"

    Redirecting.__name__ = f"Redirecting{fake_cls.__name__}"
    return Redirecting
