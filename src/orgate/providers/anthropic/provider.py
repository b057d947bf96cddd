"""The I/O piece of the ``anthropic`` provider: POST ``{base_url}/v1/messages``, feed the decoder.

Always streams from the upstream (``stream: true``) for streaming and
non-streaming clients alike; an upstream (or proxy) that answers
``application/json`` anyway is decoded with ``decode_message``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import aiohttp
import orjson

from orgate.neutral import Deployment, ModelEvent, ModelRequest
from orgate.protocol.errors import ApiError
from orgate.providers.anthropic.decoder import StreamDecoder, bad_stream, decode_message
from orgate.providers.anthropic.errors import http_error
from orgate.providers.anthropic.mapping import build_body
from orgate.providers.http import HttpPool, client_error, timeout_for, truncated

ANTHROPIC_VERSION = "2023-06-01"
DRAIN_TIMEOUT = 0.25  # seconds to wait for the end of the body after message_stop

_log = logging.getLogger(__name__)


def messages_url(base_url: str) -> str:
    """``{base_url}/v1/messages``; a base URL already ending in ``/v1`` or ``/v1/messages`` is completed."""
    base = base_url.rstrip("/")
    if base.endswith("/v1/messages"):
        return base
    if base.endswith("/v1"):
        return base + "/messages"
    return base + "/v1/messages"


class AnthropicProvider:
    """One Anthropic Messages API deployment."""

    def __init__(self, deployment: Deployment, pool: HttpPool) -> None:
        self.deployment = deployment
        self._pool = pool
        self._url = messages_url(deployment.base_url)
        self._timeout = timeout_for(deployment)
        headers = {"Content-Type": "application/json", "anthropic-version": ANTHROPIC_VERSION}
        if deployment.api_key:
            headers["x-api-key"] = deployment.api_key
        headers.update(deployment.headers)
        self._headers = headers

    def body(self, request: ModelRequest) -> dict[str, object]:
        """The upstream request body (pure; exposed for tests and debugging)."""
        return build_body(
            request, stream=True, max_tokens_cap=self.deployment.capabilities.max_output_tokens
        )

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Yield the upstream's answer as neutral events, ending in one ``Finish``."""
        deployment = self.deployment
        payload = orjson.dumps(self.body(request))
        decoder = StreamDecoder(deployment.name)
        session = self._pool.session(deployment)
        try:
            async with session.post(
                self._url, data=payload, headers=self._headers, timeout=self._timeout
            ) as resp:
                if resp.status >= 400:
                    raise http_error(resp.status, await resp.read(), resp.headers, deployment.name)
                content_type = resp.headers.get("Content-Type", "")
                if "json" in content_type and "event-stream" not in content_type:
                    try:
                        body = orjson.loads(await resp.read())
                    except orjson.JSONDecodeError:
                        raise bad_stream(deployment.name, "the body is not JSON") from None
                    for event in decode_message(body, deployment.name):
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
                    raise truncated(deployment, "no message_stop event")
                if not resp.content.at_eof():
                    await _drain(resp)
        except ApiError:
            raise
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise client_error(exc, deployment) from exc
        if decoder.skipped:  # server-side tool blocks have no neutral event yet (docs/providers.md)
            _log.info(
                "upstream '%s': skipped content blocks %s", deployment.name, dict(decoder.skipped)
            )

    async def aclose(self) -> None:
        """Nothing of its own to close: the pool's owner closes the pool."""


async def _drain(resp: aiohttp.ClientResponse) -> None:
    """Read what follows ``message_stop`` (normally just the chunked terminator) so the connection is reused."""
    try:
        async with asyncio.timeout(DRAIN_TIMEOUT):
            while await resp.content.readany():
                pass
    except (TimeoutError, aiohttp.ClientError, OSError):
        pass
