"""An orgate app (WebSocket and compaction routes included) served by uvicorn in a thread,
on a socket the test bound (port 0: no port to take meanwhile).

``services`` is exposed so tests can look at the store; ``ws`` sets the ``[websocket]``
section directly.
"""

from __future__ import annotations

import tempfile
import threading
import tomllib
from pathlib import Path

import httpx
import uvicorn

from orgate.config import Settings
from orgate.gateway import build_services, create_app
from orgate.server.websocket import WebSocketSettings
from tests.support.ports import listening_socket, port_of
from tests.support.waiting import wait_until

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
        self.sock = listening_socket()
        self.port = port_of(self.sock)
        self.server = uvicorn.Server(
            uvicorn.Config(self.app, ws="auto", lifespan="on", log_level="warning")
        )
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )
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
        if not wait_until(lambda: self.server.started or not self.thread.is_alive()):
            raise RuntimeError("uvicorn did not start")
        if not self.server.started:
            raise RuntimeError("uvicorn exited before it started")
        httpx.get(f"{self.url}/healthz", timeout=10).raise_for_status()
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)
        self.sock.close()

    def __enter__(self) -> InProcessServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
