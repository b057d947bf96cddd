"""The streaming HTTP exchange shared by the SSE providers (``anthropic``, ``openai-responses``).

``SseProvider`` is the I/O class both are: it holds the deployment's URL,
headers and timeouts, and ``stream_batches`` POSTs the body (``body``), maps an HTTP
error reply with the provider's ``http_error``, decodes an
``application/json`` reply (an upstream that ignored ``stream: true``) with
``decode_json``, and otherwise feeds the SSE bytes to a fresh incremental
``decoder()`` until it has finished (or holds an error), handing on the events
of each network read as one batch. A stream that ends
before the decoder has finished is truncated, or invalid when not one event of
the wire format came (a 200 that is not an answer); after the terminal event the
rest of the body is read (``drain``) so the pooled connection is reused.
aiohttp / asyncio / OS errors become ``ApiError`` through ``client_error``.
What the decoder skipped (items with no neutral event) is logged.

``drain`` is also used by ``openai-chat``, whose batching loop stays its own.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any, ClassVar, Protocol

import aiohttp
import orjson

from orgate.neutral import Deployment, ModelEvent, ModelRequest, Provider
from orgate.protocol.errors import ApiError
from orgate.providers.http import (
    STREAM,
    HttpPool,
    client_error,
    invalid,
    open_reply,
    post,
    timeout_for,
    truncated,
)
from orgate.providers.upstream_errors import redact_secrets

DRAIN_TIMEOUT = 0.25  # seconds to wait for the end of the body after the terminal event


class SseDecoder(Protocol):
    """What ``SseProvider`` needs of a provider's incremental decoder."""

    finished: bool
    recognized: bool
    skipped: Counter[str]

    @property
    def failed(self) -> bool: ...

    def feed(self, chunk: bytes) -> list[ModelEvent]: ...

    def close(self) -> list[ModelEvent]: ...


class SseProvider(Provider):
    """One deployment of an SSE upstream; a subclass names its wire protocol's pieces.

    Class attributes: ``terminal`` (the event a complete stream ends with, for
    the truncation message), ``wire`` (the wire format's name, for the message
    on a body that holds none of its events), ``skipped`` (what its decoder skips, for the log
    line), ``http_error`` and ``bad_stream`` (the provider's error mappings),
    ``log``. Hooks: ``body(request)``, ``decoder()``, ``decode_json(body, name)``.
    """

    terminal: ClassVar[str]
    wire: ClassVar[str]
    skipped: ClassVar[str]
    http_error: ClassVar[Callable[[int, bytes, Mapping[str, str], str], ApiError]]
    bad_stream: ClassVar[Callable[[str, str], ApiError]]
    log: ClassVar[logging.Logger]

    def __init__(
        self, deployment: Deployment, pool: HttpPool, url: str, headers: dict[str, str]
    ) -> None:
        self.deployment = deployment
        self._pool = pool
        self._url = url
        self._timeout = timeout_for(deployment)
        headers.update(deployment.headers)  # the configured headers come last
        self._headers = headers

    def body(self, request: ModelRequest) -> dict[str, object]:
        """The upstream request body (pure; exposed for tests and debugging)."""
        raise NotImplementedError

    def decoder(self) -> SseDecoder:
        """A fresh incremental decoder for one stream."""
        raise NotImplementedError

    def decode_json(self, body: Any, name: str) -> Iterable[ModelEvent]:
        """The events of a non-streaming (``application/json``) reply."""
        raise NotImplementedError

    async def stream_batches(self, request: ModelRequest) -> AsyncIterator[list[ModelEvent]]:
        """The upstream's answer as neutral events, ending in one ``Finish``: one batch per read."""
        deployment = self.deployment
        payload = orjson.dumps(self.body(request))
        decoder = self.decoder()
        session = self._pool.session(deployment)
        try:
            async with await post(
                session, deployment, self._url,
                data=payload, headers=self._headers, timeout=self._timeout,
            ) as resp:
                body = await open_reply(resp, deployment, self.http_error, self.bad_stream)
                if body is not STREAM:
                    yield list(self.decode_json(body, deployment.name))
                    return
                feed = decoder.feed
                try:
                    async for chunk in resp.content.iter_any():
                        events = feed(chunk)
                        if events:
                            yield events
                        if decoder.finished or decoder.failed:
                            break
                except aiohttp.ClientPayloadError as exc:
                    raise truncated(deployment, "the connection was closed mid-stream") from exc
                if not decoder.finished:
                    events = decoder.close()
                    if events:
                        yield events
                if not decoder.finished and not decoder.recognized:
                    raise invalid(deployment, f"a 200 without any {self.wire} event")
                if not decoder.finished:
                    raise truncated(deployment, f"no {self.terminal} event")
                if not resp.content.at_eof():
                    await drain(resp)
        except ApiError as error:
            redact_secrets(error, deployment)  # an upstream may echo the key or headers
            raise
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise client_error(exc, deployment) from exc
        if decoder.skipped:
            self.log.info(
                "upstream '%s': skipped %s %s", deployment.name, self.skipped, dict(decoder.skipped)
            )



async def drain(resp: aiohttp.ClientResponse, timeout: float = DRAIN_TIMEOUT) -> None:
    """Read what follows the terminal event (normally just the chunked terminator) so the connection is reused."""
    try:
        async with asyncio.timeout(timeout):
            while await resp.content.readany():
                pass
    except (TimeoutError, aiohttp.ClientError, OSError):
        pass
