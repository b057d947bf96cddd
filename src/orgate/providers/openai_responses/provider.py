"""The I/O piece of the ``openai-responses`` provider: POST ``{base_url}/responses``, feed the decoder.

Always streams from the upstream (``stream: true``); an upstream that answers
``application/json`` anyway is decoded with ``decode_response``. The
deployment's origin (``origin_of``) goes on the extension items it decodes and
decides which opaque history items are sent back.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import aclosing
from functools import partial

import orjson

from orgate.neutral import Deployment, ModelEvent, ModelRequest, origin_of
from orgate.providers.http import HttpPool, timeout_for
from orgate.providers.openai_responses.decoder import StreamDecoder, bad_stream, decode_response
from orgate.providers.openai_responses.errors import http_error
from orgate.providers.openai_responses.mapping import build_body
from orgate.providers.upstream import log_skipped, stream_sse

_log = logging.getLogger(__name__)


def responses_url(base_url: str) -> str:
    """``{base_url}/responses`` (a base URL already ending in it is used as is)."""
    base = base_url.rstrip("/")
    if base.endswith("/responses"):
        return base
    return base + "/responses"


class OpenAIResponsesProvider:
    """One Responses API deployment (OpenAI, vLLM, Ollama, another orgate...)."""

    def __init__(self, deployment: Deployment, pool: HttpPool) -> None:
        self.deployment = deployment
        self._pool = pool
        self._url = responses_url(deployment.base_url)
        self._timeout = timeout_for(deployment)
        self.origin = origin_of(deployment)
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if deployment.api_key:
            headers["Authorization"] = f"Bearer {deployment.api_key}"
        headers.update(deployment.headers)
        self._headers = headers

    def body(self, request: ModelRequest) -> dict[str, object]:
        """The upstream request body (pure; exposed for tests and debugging)."""
        return build_body(
            request,
            stream=True,
            include_encrypted_reasoning=self.deployment.capabilities.reasoning,
            origin=self.origin,
        )

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Yield the upstream's answer as neutral events, ending in one ``Finish``."""
        deployment = self.deployment
        payload = orjson.dumps(self.body(request))
        decoder = StreamDecoder(deployment.name, self.origin)
        events = stream_sse(
            self._pool.session(deployment),
            self._url,
            payload,
            headers=self._headers,
            timeout=self._timeout,
            deployment=deployment,
            decoder=decoder,
            http_error=http_error,
            decode_json=partial(decode_response, origin=self.origin),
            bad_stream=bad_stream,
            terminal="response.completed",
        )
        async with aclosing(events):
            async for event in events:
                yield event
        log_skipped(_log, deployment, "output items", decoder.skipped)

    async def aclose(self) -> None:
        """Nothing of its own to close: the pool's owner closes the pool."""
