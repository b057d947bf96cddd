"""The streaming HTTP exchange of every HTTP provider (``openai-chat``, ``openai-responses``,
``anthropic``).

``SseProvider`` is the I/O class all three are: it holds the deployment's URL,
headers and timeouts, and ``stream_batches`` POSTs the body (``body``), maps an HTTP
error reply with the provider's ``http_error``, decodes an ``application/json``
reply (an upstream that ignored ``stream: true``) with ``decode_json``, and
otherwise feeds the event stream to a fresh incremental ``decoder(request)``,
handing on the events of each network read as one batch.

The end of a stream has one shape for every provider. Once the decoder says the
answer is ``complete``, what may still come is a trailer (``openai-chat``'s usage
chunk and ``data: [DONE]``; for the others nothing but the end of the body): it is
read until the decoder has ``ended``, for at most ``TRAILER_TIMEOUT`` (a server that
keeps the connection open without it must not turn a complete answer into a read
timeout), and a connection closed within it loses nothing. Then the rest of the body
is read (``drain``) so the pooled connection is reused, and only then is the final
batch — the events from the read that completed the answer on, ending in the
``Finish`` — handed on: a consumer that stops at the final event (they all do) has
no request to unwind.

A stream that ends before the answer is complete is truncated, or invalid when not
one event of the wire format came (a 200 that is not an answer). aiohttp / asyncio /
OS errors become ``ApiError`` through ``client_error``; the deployment's secrets are
cut out of every error. What the decoder skipped (items with no neutral event) is
logged.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any, ClassVar, Protocol

import aiohttp
import orjson

from orgate.neutral import Deployment, ModelEvent, ModelRequest, Provider, Translation
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
from orgate.providers.plain import check_refusals
from orgate.providers.upstream_errors import redact_secrets

#: Seconds to wait, once the answer is complete, for its trailer (usage, ``[DONE]``).
TRAILER_TIMEOUT = 2.0
#: Seconds to wait for the end of the body once nothing more is decoded.
DRAIN_TIMEOUT = 0.25


class UpstreamDecoder(Protocol):
    """What ``SseProvider`` needs of a provider's incremental stream decoder."""

    @property
    def complete(self) -> bool:
        """The answer is complete: only a trailer (usage, ``[DONE]``, the body's end) may follow."""

    @property
    def ended(self) -> bool:
        """Nothing more is to be decoded: the rest of the body is not read for events."""

    @property
    def failed(self) -> bool:
        """An upstream error is pending after some output: ``close`` raises it."""

    @property
    def recognized(self) -> bool:
        """An event of the wire format came (else a 200 that ends was not an answer)."""

    @property
    def skipped(self) -> Mapping[str, int]:
        """What was skipped (no neutral event), by kind, for the log."""

    def feed(self, chunk: bytes) -> list[ModelEvent]: ...

    def close(self) -> list[ModelEvent]:
        """End of the stream: the last events (ending in the ``Finish`` if the answer is
        complete); raises a pending error."""


class SseProvider(Provider):
    """One deployment of a streaming HTTP upstream; a subclass names its wire protocol's pieces.

    Class attributes: ``terminal`` (what a complete stream ends with, for the truncation
    message), ``wire`` (the wire format's name, for the message on a body that holds none
    of its events), ``skipped`` (what its decoder skips, for the log line), ``http_error``
    and ``bad_stream`` (the provider's error mappings), ``log``. Hooks: ``body(request)``,
    ``decoder(request)``, ``decode_json(body, name)``.
    """

    terminal: ClassVar[str]
    wire: ClassVar[str]
    skipped: ClassVar[str]
    log: ClassVar[logging.Logger]

    @staticmethod
    def http_error(status: int, raw: bytes, headers: Mapping[str, str], name: str) -> ApiError:
        """The provider's error for an upstream error reply (each provider sets its own)."""
        raise NotImplementedError

    @staticmethod
    def bad_stream(name: str, detail: str) -> ApiError:
        """The provider's error for a reply it cannot read (each provider sets its own)."""
        raise NotImplementedError

    def __init__(
        self,
        deployment: Deployment,
        pool: HttpPool,
        url: str,
        headers: dict[str, str],
        count_url: str | None = None,
    ) -> None:
        self.deployment = deployment
        self._pool = pool
        self._url = url
        self._count_url = count_url  # the upstream's token-count endpoint, if it has one
        self._timeout = timeout_for(deployment)
        headers.update(deployment.headers)  # the configured headers come last
        self._headers = headers

    def count_body(self, request: ModelRequest) -> dict[str, object]:
        """The body of the upstream's token-count request (pure); with a ``count_url`` only."""
        raise NotImplementedError

    async def count_input_tokens(self, request: ModelRequest) -> int | None:
        """The upstream's count (its ``count_url``); None without one, or when the upstream
        answers 404 or 405 there (an OpenAI-compatible server without the endpoint). Its other
        errors are raised as the provider maps them."""
        if self._count_url is None:
            return None
        deployment = self.deployment
        payload = orjson.dumps(self.count_body(request))
        headers = {**self._headers, "Accept": "application/json"}
        try:
            async with await post(
                self._pool.session(deployment),
                deployment,
                self._count_url,
                data=payload,
                headers=headers,
                timeout=self._timeout,
            ) as resp:
                if resp.status in (404, 405):
                    self.log.info(
                        "upstream '%s' has no token count endpoint (%d)",
                        deployment.name,
                        resp.status,
                    )
                    return None
                body = await open_reply(resp, deployment, self.http_error, self.bad_stream)
        except ApiError as error:
            redact_secrets(error, deployment)
            raise
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise client_error(exc, deployment) from exc
        count = body.get("input_tokens") if isinstance(body, dict) else None
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise invalid(deployment, "a token count without an 'input_tokens' number")
        return count

    def body(self, request: ModelRequest) -> dict[str, object]:
        """The upstream request body (pure; exposed for tests and debugging)."""
        raise NotImplementedError

    def decoder(self, request: ModelRequest) -> UpstreamDecoder:
        """A fresh incremental decoder for the stream answering ``request``."""
        raise NotImplementedError

    def decode_json(self, body: Any, name: str) -> list[ModelEvent]:
        """The events of a non-streaming (``application/json``) reply."""
        raise NotImplementedError

    async def stream_batches(self, request: ModelRequest) -> AsyncIterator[list[ModelEvent]]:
        """The upstream's answer as neutral events, ending in one ``Finish``: one batch per read,
        the last one once the connection is released."""
        deployment = self.deployment
        payload = orjson.dumps(self.body(request))
        check_refusals(request)
        session = self._pool.session(deployment)
        final: list[ModelEvent]  # the batch with the Finish: handed on once the request is over
        try:
            async with await post(
                session,
                deployment,
                self._url,
                data=payload,
                headers=self._headers,
                timeout=self._timeout,
            ) as resp:
                body = await open_reply(resp, deployment, self.http_error, self.bad_stream)
                if body is not STREAM:
                    final = self.decode_json(body, deployment.name)
                else:
                    decoder = self.decoder(request)
                    final = []
                    feed = decoder.feed
                    try:
                        async for chunk in resp.content.iter_any():
                            events = feed(chunk)
                            if decoder.complete or decoder.failed:
                                final = events
                                break
                            if events:
                                yield events
                    except aiohttp.ClientPayloadError as exc:
                        raise truncated(deployment, "the connection was closed mid-stream") from exc
                    try:
                        if decoder.complete and not decoder.ended:
                            final += await read_trailer(resp, decoder)
                        rest = decoder.close()
                    except ApiError:
                        if final:  # the output before the error, then the error
                            yield final
                        raise
                    if not decoder.complete:
                        if rest:
                            yield rest
                        raise self._cut_short(decoder)
                    final += rest
                    if decoder.skipped:
                        self.log.info(
                            "upstream '%s': skipped %s %s",
                            deployment.name,
                            self.skipped,
                            dict(decoder.skipped),
                        )
                        for kind, count in decoder.skipped.items():
                            request.ledger.note(
                                Translation.UPSTREAM_ITEM_DROPPED, "output", f"{kind} x{count}"
                            )
                    if not resp.content.at_eof():
                        await drain(resp)
        except ApiError as error:
            redact_secrets(error, deployment)  # an upstream may echo the key or headers
            raise
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise client_error(exc, deployment) from exc
        # Out of the ``async with``: the connection is back in the pool before the last batch.
        yield final

    def _cut_short(self, decoder: UpstreamDecoder) -> ApiError:
        """The error for a body that ended before the answer was complete: invalid when not one
        event of the wire format came (a 200 that is not an answer), else truncated."""
        if not decoder.recognized:
            return invalid(self.deployment, f"a 200 without any {self.wire} event")
        return truncated(self.deployment, f"no {self.terminal} event")


async def read_trailer(resp: aiohttp.ClientResponse, decoder: UpstreamDecoder) -> list[ModelEvent]:
    """What follows a complete answer until the decoder has ended (usage, ``[DONE]``), read for
    at most ``TRAILER_TIMEOUT``: a server that sends none of it and keeps the connection open
    leaves the answer complete (its connection is then not reused), and so does one that closes
    the connection meanwhile. Returns the events decoded (usually none: the usage goes into the
    ``Finish`` that ``close`` makes)."""
    events: list[ModelEvent] = []
    try:
        async with asyncio.timeout(TRAILER_TIMEOUT):
            while not decoder.ended:
                chunk = await resp.content.readany()
                if not chunk:
                    break
                events += decoder.feed(chunk)
    except (TimeoutError, aiohttp.ClientPayloadError):
        pass
    return events


async def drain(resp: aiohttp.ClientResponse, timeout: float = DRAIN_TIMEOUT) -> None:
    """Read what follows the decoded stream (normally just the chunked terminator) so the
    connection is reused."""
    try:
        async with asyncio.timeout(timeout):
            while await resp.content.readany():
                pass
    except (TimeoutError, aiohttp.ClientError, OSError):
        pass
