"""The I/O piece of the ``openai-responses`` provider: POST ``{base_url}/responses``,
feed the decoder.

Token counts: ``POST {base_url}/responses/input_tokens`` (OpenAI's endpoint).

Always streams from the upstream (``stream: true``); an upstream that answers
``application/json`` anyway is decoded with ``decode_response``. The
deployment's origin (``origin_of``) goes on the extension items it decodes and
decides which opaque history items are sent back.
"""

from __future__ import annotations

import logging
from typing import Any

from orgate.neutral import Deployment, ModelEvent, ModelRequest, origin_of
from orgate.providers.http import HttpPool
from orgate.providers.openai_responses.decoder import StreamDecoder, bad_stream, decode_response
from orgate.providers.openai_responses.errors import http_error
from orgate.providers.openai_responses.mapping import build_body
from orgate.providers.upstream import SseProvider

_log = logging.getLogger(__name__)

#: What OpenAI's ``POST /responses/input_tokens`` takes of a create body.
COUNTED_FIELDS = frozenset(
    {
        "model",
        "input",
        "instructions",
        "tools",
        "tool_choice",
        "text",
        "reasoning",
        "parallel_tool_calls",
        "truncation",
    }
)


def responses_url(base_url: str) -> str:
    """``{base_url}/responses`` (a base URL already ending in it is used as is)."""
    base = base_url.rstrip("/")
    if base.endswith("/responses"):
        return base
    return base + "/responses"


class OpenAIResponsesProvider(SseProvider):
    """One Responses API deployment (OpenAI, vLLM, Ollama, another orgate...)."""

    terminal = "response.completed"
    wire = "Responses API stream"
    skipped = "output items"  # spec items with no neutral event (function_call_output, compaction)
    http_error = staticmethod(http_error)
    bad_stream = staticmethod(bad_stream)
    log = _log

    def __init__(self, deployment: Deployment, pool: HttpPool) -> None:
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if deployment.api_key:
            headers["Authorization"] = f"Bearer {deployment.api_key}"
        url = responses_url(deployment.base_url)
        super().__init__(deployment, pool, url, headers, count_url=url + "/input_tokens")
        self.origin = origin_of(deployment)

    def body(self, request: ModelRequest) -> dict[str, object]:
        """The upstream request body (pure; exposed for tests and debugging)."""
        return build_body(
            request,
            stream=True,
            include_encrypted_reasoning=self.deployment.capabilities.reasoning,
            origin=self.origin,
        )

    def count_body(self, request: ModelRequest) -> dict[str, object]:
        """``POST /responses/input_tokens``: the request's body, with the fields that endpoint
        takes."""
        body = self.body(request)
        return {key: value for key, value in body.items() if key in COUNTED_FIELDS}

    def decoder(self, request: ModelRequest) -> StreamDecoder:
        return StreamDecoder(self.deployment.name, self.origin, request.ledger)

    def decode_json(self, body: Any, name: str) -> list[ModelEvent]:
        return decode_response(body, name, self.origin)
