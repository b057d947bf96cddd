"""The I/O piece of the ``openai-chat`` provider: POST ``/chat/completions``, feed the decoder.

Always streams from the upstream (``stream: true``), for both streaming and
non-streaming clients: one code path, the engine drains the same events either
way, and the first token arrives as early as the upstream sends it. An
upstream that ignores ``stream`` and answers ``application/json`` is decoded
with ``decode_completion``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator

import aiohttp
import orjson

from orgate.neutral import Deployment, ModelEvent, ModelRequest, Provider
from orgate.protocol.errors import ApiError
from orgate.providers.custom_tools import custom_call_batches
from orgate.providers.http import (
    STREAM,
    HttpPool,
    client_error,
    open_reply,
    post,
    timeout_for,
    truncated,
)
from orgate.providers.openai_chat.decoder import (
    ChatStreamDecoder,
    decode_completion,
    invalid_response,
)
from orgate.providers.openai_chat.errors import http_error
from orgate.providers.openai_chat.mapping import ChatOptions, build_body
from orgate.providers.upstream import drain
from orgate.providers.upstream_errors import redact_secrets


def completions_url(base_url: str) -> str:
    """``{base_url}/chat/completions`` (a base URL already ending in it is used as is)."""
    base = base_url.rstrip("/")
    if base.endswith("/chat/completions"):
        return base
    return base + "/chat/completions"


class OpenAIChatProvider(Provider):
    """One OpenAI-compatible Chat Completions deployment."""

    def __init__(
        self, deployment: Deployment, pool: HttpPool, options: ChatOptions | None = None
    ) -> None:
        self.deployment = deployment
        self.options = options or ChatOptions.for_deployment(deployment)
        self._pool = pool
        self._url = completions_url(deployment.base_url)
        self._timeout = timeout_for(deployment)
        headers = {"Content-Type": "application/json"}
        if deployment.api_key:
            headers["Authorization"] = f"Bearer {deployment.api_key}"
        headers.update(deployment.headers)
        self._headers = headers

    def stream_batches(self, request: ModelRequest) -> AsyncIterator[list[ModelEvent]]:
        """The upstream's answer as neutral events, ending in one ``Finish``: one batch per read;
        calls of the functions standing for custom tools come back as custom calls."""
        return custom_call_batches(request, self._batches(request))

    async def _batches(self, request: ModelRequest) -> AsyncGenerator[list[ModelEvent], None]:
        deployment = self.deployment
        payload = orjson.dumps(build_body(request, stream=True, options=self.options))
        session = self._pool.session(deployment)
        last: list[ModelEvent] | None = None  # the batch with the Finish: yielded once the request is over
        try:
            async with await post(
                session, deployment, self._url,
                data=payload, headers=self._headers, timeout=self._timeout,
            ) as resp:
                body = await open_reply(resp, deployment, http_error, invalid_response)
                if body is not STREAM:
                    last = decode_completion(body, deployment.name)
                else:
                    decoder = ChatStreamDecoder(deployment.name, logprobs=request.logprobs)
                    feed = decoder.feed
                    pending: list[ModelEvent] = []
                    try:
                        async for chunk in resp.content.iter_any():
                            events = feed(chunk)
                            if decoder.done:
                                if decoder.error is not None:  # the output before it, then the error
                                    if events:
                                        yield events
                                    raise decoder.error
                                pending = events  # sent together with the final events below
                                break
                            if events:
                                yield events
                            if decoder.finish_reason is not None:
                                break  # what may follow (usage, [DONE]) is read below, briefly
                        if not decoder.done and decoder.finish_reason is not None:
                            pending = await _after_finish(resp, decoder)
                    except aiohttp.ClientPayloadError as exc:
                        if decoder.finish_reason is None:
                            raise truncated(deployment, "the connection was closed mid-stream") from exc
                        # the answer was complete (finish_reason seen); only [DONE] / usage got lost
                    final = decoder.close()
                    if not resp.content.at_eof():
                        # Read the end of the body first, so the pooled connection is reused
                        # even though the consumer stops at the final event.
                        await drain(resp)
                    last = pending + final if pending else final
        except ApiError as error:
            redact_secrets(error, deployment)  # an upstream may echo the key or headers
            raise
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise client_error(exc, deployment) from exc
        if last is not None:
            # The final batch leaves once the connection is back in the pool: a consumer that
            # stops at the final event (they all do) has no request to unwind.
            yield last



#: Seconds to wait, once the finish_reason came, for the usage chunk and ``[DONE]``.
AFTER_FINISH_TIMEOUT = 2.0


async def _after_finish(resp: aiohttp.ClientResponse, decoder: ChatStreamDecoder) -> list[ModelEvent]:
    """Read the end of a stream whose answer is complete (usage, ``[DONE]``), for at most
    ``AFTER_FINISH_TIMEOUT``: a server that sends neither and keeps the connection open must
    not turn a complete answer into a read timeout. Returns the events decoded (usually none)."""
    events: list[ModelEvent] = []
    try:
        async with asyncio.timeout(AFTER_FINISH_TIMEOUT):
            while not decoder.done:
                chunk = await resp.content.readany()
                if not chunk:
                    break
                events += decoder.feed(chunk)
    except TimeoutError:
        pass  # complete without usage: the connection is not reused (the body was not read to its end)
    if decoder.error is not None:
        raise decoder.error
    return events
