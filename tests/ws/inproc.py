"""An orgate app with the WebSocket and compaction route sets, served by uvicorn in a thread.

Until ``[websocket]`` / ``[compaction]`` are wired into ``config.Settings`` and the
route sets into ``create_app``, the tests build the app themselves:
``create_app(settings, route_sets=[websocket_routes, compact_routes])`` with the
WebSocket settings passed directly. ``services`` is exposed so tests can look at
the store (and skip what needs one while it is not wired).

Interim shim (removed by itself once the lead wires expansion into the service,
i.e. once ``ResponsesService.__init__`` takes ``compaction_key``): ``prepare``
expands ``compaction`` input items, exactly where the report proposes the call.
"""

from __future__ import annotations

import inspect
import tempfile
import threading
import time
import tomllib
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from orgate.config import Settings
from orgate.engine.compaction import expand
from orgate.engine.service import ResponsesService
from orgate.server.app import Services, build_services, create_app
from orgate.server.compact import compact_routes, key_for
from orgate.server.websocket import WebSocketSettings, websocket_routes
from tests.server_process import free_port

API_KEY = "test-key"


class _ExpandingService(ResponsesService):
    """The interim shim: ``prepare`` expands ``compaction`` input items first."""

    compaction_key: bytes

    async def prepare(self, body: Any, caller: Any, warnings: list[str] | None = None, **kwargs: Any) -> Any:
        if isinstance(body.input, list):
            body = body.model_copy(update={"input": expand(list(body.input), self.compaction_key, context=caller.tenant)})
        return await super().prepare(body, caller, warnings, **kwargs)


def _interim_expand(services: Services) -> None:
    if "compaction_key" in inspect.signature(ResponsesService.__init__).parameters:
        return  # the service expands compaction items itself
    services.responses.__class__ = _ExpandingService
    services.responses.compaction_key = key_for(services)  # type: ignore[attr-defined]


class InProcessServer:
    def __init__(self, config: str = "", *, ws: WebSocketSettings | None = None) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="orgate-ws-test-"))
        data = tomllib.loads(config)
        data.setdefault("auth", {"api_keys": [API_KEY]})
        data.setdefault("store", {"url": f"sqlite:///{self.dir / 'orgate.db'}"})
        # Once [websocket] is a config section, the app wires the route sets itself from the settings.
        wired = "websocket" in Settings.model_fields
        if wired and ws is not None:
            data["websocket"] = ws.model_dump()
        self.settings = Settings.model_validate(data)
        self.services = build_services(self.settings)
        _interim_expand(self.services)
        route_sets = None if wired else [partial(websocket_routes, settings=ws or WebSocketSettings()), compact_routes]
        self.app = create_app(self.settings, services=self.services, route_sets=route_sets)  # type: ignore[arg-type]
        self.port = free_port()
        self.server = uvicorn.Server(uvicorn.Config(self.app, host="127.0.0.1", port=self.port, ws="auto", lifespan="on", log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.api_key = API_KEY

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/v1/responses"

    def headers(self, key: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {key or self.api_key}"}

    def start(self) -> InProcessServer:
        self.thread.start()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.server.started:
                httpx.get(f"{self.url}/healthz", timeout=2).raise_for_status()
                return self
            time.sleep(0.02)
        raise RuntimeError("uvicorn did not start")

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)

    def __enter__(self) -> InProcessServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
