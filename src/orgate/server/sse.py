"""Server-sent events: ``event: <type>`` + ``data: <json>`` frames, no ``id:``, ending in ``data:
[DONE]``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson

DONE = b"data: [DONE]\n\n"


EVENT_TYPES = (
    "response.created",
    "response.queued",
    "response.in_progress",
    "response.completed",
    "response.failed",
    "response.incomplete",
    "response.output_item.added",
    "response.output_item.done",
    "response.reasoning_summary_part.added",
    "response.reasoning_summary_part.done",
    "response.content_part.added",
    "response.content_part.done",
    "response.output_text.delta",
    "response.output_text.done",
    "response.refusal.delta",
    "response.refusal.done",
    "response.reasoning.delta",
    "response.reasoning.done",
    "response.reasoning_summary_text.delta",
    "response.reasoning_summary_text.done",
    "response.output_text.annotation.added",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.done",
    "error",
    "response.reasoning_text.delta",  # OpenAI's names (OPENAI_EVENT_NAMES)
    "response.reasoning_text.done",
)
_PREFIXES = {kind: b"event: " + kind.encode() + b"\ndata: " for kind in EVENT_TYPES}


#: ``[endpoints.responses] event_names = "openai"``: the spec's events that OpenAI names otherwise.
OPENAI_EVENT_NAMES = {
    "response.reasoning.delta": "response.reasoning_text.delta",
    "response.reasoning.done": "response.reasoning_text.done",
}


def openai_event(event: dict[str, Any]) -> dict[str, Any]:
    """The event under OpenAI's name for it (a copy), when that differs from the spec's."""
    renamed = OPENAI_EVENT_NAMES.get(event["type"])
    return event if renamed is None else {**event, "type": renamed}


def openai_frame(event: dict[str, Any]) -> bytes:
    """``frame`` with OpenAI's event names (``OPENAI_EVENT_NAMES``)."""
    return frame(openai_event(event))


def frame(event: dict[str, Any]) -> bytes:
    """One SSE frame: ``event: <type>``, ``data: <json>``, blank line (no ``id:``)."""
    kind = event["type"]
    prefix = _PREFIXES.get(kind) or b"event: " + kind.encode() + b"\ndata: "
    return b"".join((prefix, orjson.dumps(event), b"\n\n"))


async def then_done(frames: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """``frames`` (e.g. a running background response's, which end with its terminal event),
    then ``[DONE]``."""
    async for chunk in frames:
        yield chunk
    yield DONE
