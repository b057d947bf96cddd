"""The I/O piece of the ``anthropic`` provider: POST ``{base_url}/v1/messages``, feed the decoder.

Token counts: ``POST {base_url}/v1/messages/count_tokens`` (Anthropic's endpoint).

Always streams from the upstream (``stream: true``) for streaming and
non-streaming clients alike; an upstream (or proxy) that answers
``application/json`` anyway is decoded with ``decode_message``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

from orgate.neutral import Deployment, ModelEvent, ModelRequest
from orgate.providers.anthropic.decoder import StreamDecoder, bad_stream, decode_message
from orgate.providers.anthropic.errors import http_error
from orgate.providers.anthropic.mapping import build_body
from orgate.providers.custom_tools import custom_call_batches
from orgate.providers.forced_tool import answer_batches
from orgate.providers.http import HttpPool
from orgate.providers.upstream import SseProvider

ANTHROPIC_VERSION = "2023-06-01"

_log = logging.getLogger(__name__)

#: What Anthropic's ``POST /v1/messages/count_tokens`` takes of a Messages body.
COUNTED_FIELDS = frozenset({"model", "messages", "system", "tools", "tool_choice", "thinking"})


def messages_url(base_url: str) -> str:
    """``{base_url}/v1/messages``; a base URL already ending in ``/v1`` or ``/v1/messages`` is
    completed."""
    base = base_url.rstrip("/")
    if base.endswith("/v1/messages"):
        return base
    if base.endswith("/v1"):
        return base + "/messages"
    return base + "/v1/messages"


class AnthropicProvider(SseProvider):
    """One Anthropic Messages API deployment."""

    terminal = "message_stop"
    wire = "Messages API stream"
    skipped = "content blocks"  # server-side tool blocks have no neutral event
    http_error = staticmethod(http_error)
    bad_stream = staticmethod(bad_stream)
    log = _log

    def __init__(self, deployment: Deployment, pool: HttpPool) -> None:
        headers = {"Content-Type": "application/json", "anthropic-version": ANTHROPIC_VERSION}
        if deployment.api_key:
            headers["x-api-key"] = deployment.api_key
        url = messages_url(deployment.base_url)
        super().__init__(deployment, pool, url, headers, count_url=url + "/count_tokens")

    def body(self, request: ModelRequest) -> dict[str, object]:
        """The upstream request body (pure; exposed for tests and debugging)."""
        return build_body(
            request,
            stream=True,
            max_tokens_cap=self.deployment.capabilities.max_output_tokens,
            prompt_cache=bool(self.deployment.options.get("prompt_cache")),
        )

    def count_body(self, request: ModelRequest) -> dict[str, object]:
        """``POST /v1/messages/count_tokens``: the request's body, with the fields it takes."""
        body = self.body(request)
        return {key: value for key, value in body.items() if key in COUNTED_FIELDS}

    def stream_batches(self, request: ModelRequest) -> AsyncIterator[list[ModelEvent]]:
        """The upstream's answer; calls of the functions standing for custom tools come back as
        custom calls."""
        batches = custom_call_batches(request, super().stream_batches(request))
        return answer_batches(request, batches)  # a forced_tool format's call back into text

    def decoder(self, request: ModelRequest) -> StreamDecoder:
        return StreamDecoder(self.deployment.name)

    def decode_json(self, body: Any, name: str) -> list[ModelEvent]:
        return decode_message(body, name)
