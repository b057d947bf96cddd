"""The streaming HTTP exchange shared by the SSE providers (``anthropic``, ``openai-responses``).

``stream_sse`` POSTs the request body, maps an HTTP error reply with the
provider's ``http_error``, decodes an ``application/json`` reply (an upstream
that ignored ``stream: true``) with the provider's ``decode_json``, and
otherwise feeds the SSE bytes to the provider's incremental decoder until it
has finished (or holds an error). A stream that ends before the decoder has
finished is truncated; after the terminal event the rest of the body is read
(``drain``) so the pooled connection is reused. aiohttp / asyncio / OS errors
become ``ApiError`` through ``client_error``.

``drain`` is also used by ``openai-chat``, whose batching loop stays its own.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any, Protocol

import aiohttp
import orjson

from orgate.neutral import Deployment, ModelEvent
from orgate.protocol.errors import ApiError
from orgate.providers.http import client_error, truncated

DRAIN_TIMEOUT = 0.25  # seconds to wait for the end of the body after the terminal event

HttpErrorMapper = Callable[[int, bytes, Mapping[str, str], str], ApiError]


class SseDecoder(Protocol):
    """What ``stream_sse`` needs of a provider's incremental decoder."""

    finished: bool
    skipped: Counter[str]

    @property
    def failed(self) -> bool: ...

    def feed(self, chunk: bytes) -> list[ModelEvent]: ...

    def close(self) -> list[ModelEvent]: ...


async def stream_sse(
    session: aiohttp.ClientSession,
    url: str,
    payload: bytes,
    *,
    headers: Mapping[str, str],
    timeout: aiohttp.ClientTimeout,
    deployment: Deployment,
    decoder: SseDecoder,
    http_error: HttpErrorMapper,
    decode_json: Callable[[Any, str], Iterable[ModelEvent]],
    bad_stream: Callable[[str, str], ApiError],
    terminal: str,
) -> AsyncIterator[ModelEvent]:
    """Yield the upstream's answer as neutral events, ending in one ``Finish``.

    ``terminal`` names the event whose absence makes a stream truncated (for
    the error message).
    """
    try:
        async with session.post(url, data=payload, headers=headers, timeout=timeout) as resp:
            if resp.status >= 400:
                raise http_error(resp.status, await resp.read(), resp.headers, deployment.name)
            content_type = resp.headers.get("Content-Type", "")
            if "json" in content_type and "event-stream" not in content_type:
                try:
                    body = orjson.loads(await resp.read())
                except orjson.JSONDecodeError:
                    raise bad_stream(deployment.name, "the body is not JSON") from None
                for event in decode_json(body, deployment.name):
                    yield event
                return
            try:
                async for chunk in resp.content.iter_any():
                    for event in decoder.feed(chunk):
                        yield event
                    if decoder.finished or decoder.failed:
                        break
            except aiohttp.ClientPayloadError as exc:
                raise truncated(deployment, "the connection was closed mid-stream") from exc
            if not decoder.finished:
                for event in decoder.close():
                    yield event
            if not decoder.finished:
                raise truncated(deployment, f"no {terminal} event")
            if not resp.content.at_eof():
                await drain(resp)
    except ApiError:
        raise
    except (TimeoutError, aiohttp.ClientError, OSError) as exc:
        raise client_error(exc, deployment) from exc


def log_skipped(
    log: logging.Logger, deployment: Deployment, what: str, skipped: Counter[str]
) -> None:
    """Log (info) what the decoder skipped: items with no neutral event yet (docs/providers.md)."""
    if skipped:
        log.info("upstream '%s': skipped %s %s", deployment.name, what, dict(skipped))


async def drain(resp: aiohttp.ClientResponse, timeout: float = DRAIN_TIMEOUT) -> None:
    """Read what follows the terminal event (normally just the chunked terminator) so the connection is reused."""
    try:
        async with asyncio.timeout(timeout):
            while await resp.content.readany():
                pass
    except (TimeoutError, aiohttp.ClientError, OSError):
        pass
