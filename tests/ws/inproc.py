"""An orgate app (WebSocket and compaction routes included) served by uvicorn in a thread.

``services`` is exposed so tests can look at the store; ``ws`` sets the ``[websocket]``
section directly.
"""

from __future__ import annotations

import tempfile
import threading
import time
import tomllib
from pathlib import Path

import httpx
import uvicorn

from orgate.config import Settings
from orgate.gateway import build_services, create_app
from orgate.server.websocket import WebSocketSettings
from tests.server_process import free_port

API_KEY = "test-key"


class InProcessServer:
    def __init__(self, config: str = "", *, ws: WebSocketSettings | None = None) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="orgate-ws-test-"))
        data = tomllib.loads(config)
        data.setdefault("auth", {"api_keys": [API_KEY]})
        data.setdefault("store", {"url": f"sqlite:///{self.dir / 'orgate.db'}"})
        if ws is not None:
            data["websocket"] = ws.model_dump()
        self.settings = Settings.model_validate(data)
        self.services = build_services(self.settings)
        self.app = create_app(self.settings, services=self.services)
        self.port = free_port()
        self.server = uvicorn.Server(
            uvicorn.Config(
                self.app,
                host="127.0.0.1",
                port=self.port,
                ws="auto",
                lifespan="on",
                log_level="warning",
            )
        )
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
