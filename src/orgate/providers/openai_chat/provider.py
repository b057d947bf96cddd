"""The I/O piece of the ``openai-chat`` provider: POST ``/chat/completions``, feed the decoder.

Always streams from the upstream (``stream: true``), for both streaming and
non-streaming clients: one code path, the engine drains the same events either
way, and the first token arrives as early as the upstream sends it. An
upstream that ignores ``stream`` and answers ``application/json`` is decoded
with ``decode_completion``. The exchange itself is ``SseProvider``'s
(``providers/upstream.py``), the same as the other HTTP providers'.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

from orgate.neutral import Deployment, ModelEvent, ModelRequest
from orgate.providers.custom_tools import custom_call_batches
from orgate.providers.http import HttpPool
from orgate.providers.openai_chat.decoder import (
    ChatStreamDecoder,
    decode_completion,
    invalid_response,
)
from orgate.providers.openai_chat.errors import http_error
from orgate.providers.openai_chat.mapping import ChatOptions, build_body
from orgate.providers.upstream import SseProvider

_log = logging.getLogger(__name__)


def completions_url(base_url: str) -> str:
    """``{base_url}/chat/completions`` (a base URL already ending in it is used as is)."""
    base = base_url.rstrip("/")
    if base.endswith("/chat/completions"):
        return base
    return base + "/chat/completions"


class OpenAIChatProvider(SseProvider):
    """One OpenAI-compatible Chat Completions deployment."""

    terminal = "finish_reason"
    wire = "chat.completion.chunk"
    skipped = "chunks"  # never: every chunk has its events
    http_error = staticmethod(http_error)
    bad_stream = staticmethod(invalid_response)
    log = _log

    def __init__(
        self, deployment: Deployment, pool: HttpPool, options: ChatOptions | None = None
    ) -> None:
        self.options = options or ChatOptions.for_deployment(deployment)
        headers = {"Content-Type": "application/json"}
        if deployment.api_key:
            headers["Authorization"] = f"Bearer {deployment.api_key}"
        super().__init__(deployment, pool, completions_url(deployment.base_url), headers)

    def body(self, request: ModelRequest) -> dict[str, object]:
        """The upstream request body (pure; exposed for tests and debugging)."""
        return build_body(request, stream=True, options=self.options)

    def stream_batches(self, request: ModelRequest) -> AsyncIterator[list[ModelEvent]]:
        """The upstream's answer; calls of the functions standing for custom tools come back as
        custom calls."""
        return custom_call_batches(request, super().stream_batches(request))

    def decoder(self, request: ModelRequest) -> ChatStreamDecoder:
        return ChatStreamDecoder(self.deployment.name, logprobs=request.logprobs)

    def decode_json(self, body: Any, name: str) -> list[ModelEvent]:
        return decode_completion(body, name)
