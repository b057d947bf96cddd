"""The pass-through floor: the cheapest Python HTTP proxy on orgate's stack.

A raw ASGI app served by uvicorn (uvloop event loop, httptools parser) that
forwards every request's method, path and body verbatim to one upstream
through a keep-alive pooled ``aiohttp.ClientSession`` and relays the reply.
It parses nothing: a non-streaming reply is read whole and sent with a
Content-Length; a ``text/event-stream`` reply is relayed chunk by chunk as it
arrives (chunked transfer encoding to the client). Whatever orgate does on
top of this — auth, request parsing, translation, the event builder — is
what the benchmark's orgate/floor ratio prices.

Run: ``python bench/passthrough.py --upstream http://127.0.0.1:8080 --port 9000``
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import aiohttp
import uvicorn

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

# Request headers worth forwarding; everything else (Host, Content-Length,
# Connection, ...) is set by the client session itself.
_FORWARD_REQUEST_HEADERS = (b"content-type", b"authorization", b"accept")


class PassThrough:
    """ASGI app forwarding every HTTP request to ``upstream`` unchanged."""

    def __init__(self, upstream: str, pool_size: int = 256) -> None:
        self.upstream = upstream.rstrip("/")
        self.pool_size = pool_size
        self.session: aiohttp.ClientSession | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        assert self.session is not None
        body = bytearray()
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        headers = {
            k.decode("latin-1"): v.decode("latin-1")
            for k, v in scope["headers"]
            if k in _FORWARD_REQUEST_HEADERS
        }
        url = self.upstream + scope["raw_path"].decode("latin-1")
        async with self.session.request(
            scope["method"], url, data=bytes(body), headers=headers
        ) as resp:
            content_type = resp.headers.get("Content-Type", "application/octet-stream")
            if content_type.startswith("text/event-stream"):
                await send(
                    {
                        "type": "http.response.start",
                        "status": resp.status,
                        "headers": [
                            (b"content-type", content_type.encode("latin-1")),
                            (b"cache-control", b"no-cache"),
                        ],
                    }
                )
                async for chunk in resp.content.iter_any():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            else:
                data = await resp.read()
                await send(
                    {
                        "type": "http.response.start",
                        "status": resp.status,
                        "headers": [
                            (b"content-type", content_type.encode("latin-1")),
                            (b"content-length", str(len(data)).encode("ascii")),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": data, "more_body": False})

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                connector = aiohttp.TCPConnector(
                    limit=self.pool_size, keepalive_timeout=300, ttl_dns_cache=None
                )
                self.session = aiohttp.ClientSession(
                    connector=connector,
                    timeout=aiohttp.ClientTimeout(total=None, sock_connect=5),
                    auto_decompress=False,
                )
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self.session is not None:
                    await self.session.close()
                await send({"type": "lifespan.shutdown.complete"})
                return


def main() -> None:
    """Parse arguments and serve the pass-through proxy with one worker."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", required=True, help="base URL, e.g. http://127.0.0.1:8080")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    uvicorn.run(
        PassThrough(args.upstream),
        host=args.host,
        port=args.port,
        loop="uvloop",
        http="httptools",
        lifespan="on",
        access_log=False,
        log_level="warning",
        proxy_headers=False,  # no X-Forwarded-* rewriting: the cheapest server possible
        server_header=False,
        workers=1,
    )


if __name__ == "__main__":
    main()
