"""The I/O piece of the ``anthropic`` provider: POST ``{base_url}/v1/messages``, feed the decoder.

Always streams from the upstream (``stream: true``) for streaming and
non-streaming clients alike; an upstream (or proxy) that answers
``application/json`` anyway is decoded with ``decode_message``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import aclosing

import orjson

from orgate.neutral import Deployment, ModelEvent, ModelRequest
from orgate.providers.anthropic.decoder import StreamDecoder, bad_stream, decode_message
from orgate.providers.anthropic.errors import http_error
from orgate.providers.anthropic.mapping import build_body
from orgate.providers.http import HttpPool, timeout_for
from orgate.providers.upstream import log_skipped, stream_sse

ANTHROPIC_VERSION = "2023-06-01"

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
        events = stream_sse(
            self._pool.session(deployment),
            self._url,
            payload,
            headers=self._headers,
            timeout=self._timeout,
            deployment=deployment,
            decoder=decoder,
            http_error=http_error,
            decode_json=decode_message,
            bad_stream=bad_stream,
            terminal="message_stop",
        )
        async with aclosing(events):
            async for event in events:
                yield event
        log_skipped(_log, deployment, "content blocks", decoder.skipped)

    async def aclose(self) -> None:
        """Nothing of its own to close: the pool's owner closes the pool."""
