"""The I/O piece of the ``openai-responses`` provider: POST ``{base_url}/responses``, feed the decoder.

Always streams from the upstream (``stream: true``); an upstream that answers
``application/json`` anyway is decoded with ``decode_response``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import aiohttp
import orjson

from orgate.neutral import Deployment, ModelEvent, ModelRequest
from orgate.protocol.errors import ApiError
from orgate.providers.http import HttpPool, client_error, timeout_for, truncated
from orgate.providers.openai_responses.decoder import StreamDecoder, bad_stream, decode_response
from orgate.providers.openai_responses.errors import http_error
from orgate.providers.openai_responses.mapping import build_body

DRAIN_TIMEOUT = 0.25  # seconds to wait for the end of the body after the terminal event

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
                    for event in decode_response(body, deployment.name):
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
                    raise truncated(deployment, "no response.completed event")
                if not resp.content.at_eof():
                    await _drain(resp)
        except ApiError:
            raise
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise client_error(exc, deployment) from exc
        if (
            decoder.skipped
        ):  # non-portable output items have no neutral event yet (docs/providers.md)
            _log.info(
                "upstream '%s': skipped output items %s", deployment.name, dict(decoder.skipped)
            )

    async def aclose(self) -> None:
        """Nothing of its own to close: the pool's owner closes the pool."""


async def _drain(resp: aiohttp.ClientResponse) -> None:
    """Read what follows the terminal event (``[DONE]``, the chunked terminator) so the connection is reused."""
    try:
        async with asyncio.timeout(DRAIN_TIMEOUT):
            while await resp.content.readany():
                pass
    except (TimeoutError, aiohttp.ClientError, OSError):
        pass
