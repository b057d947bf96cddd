"""Retry feedback: the failed output as an assistant message plus a precise user message.

Feedback is ordinary input (design: "retries are data"). The user message names
each problem on its own line, e.g.::

    Your previous reply failed the schema check:
    - price: expected number, got string "12.5"
    - missing required key sku
    Reply again with the corrected JSON value only: no prose, no code fences.

Items are built by a ``FeedbackItems`` factory: the default builds the protocol
models ``AssistantMessageItemParam`` (``output_text``) and ``UserMessageItemParam``
(``input_text``), the same types the engine puts into ``ModelRequest.input``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from orgate.protocol import (
    AssistantMessageItemParam,
    InputTextContentParam,
    OutputTextContentParam,
    UserMessageItemParam,
)
from orgate.structured.layers import Failure

FeedbackItems = Callable[[str, str], list[Any]]
"""``(failed_output, feedback_text) -> [assistant item, user item]``."""

_STAGE_WORDS = {
    "parse": "is not valid JSON",
    "schema": "failed the schema check",
    "semantic": "failed the domain checks",
    "truncation": "was cut off",
}


def feedback_text(failure: Failure) -> str:
    """The user message telling the model exactly what was wrong."""
    lines = [f"Your previous reply {_STAGE_WORDS.get(failure.stage, 'was rejected')}:"]
    lines += [f"- {e}" for e in failure.errors]
    lines.append("Reply again with the corrected JSON value only: no prose, no code fences.")
    return "\n".join(lines)


def clip_output(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n…[{len(text) - limit} characters omitted]…\n{text[-half:]}"


def protocol_feedback_items(failed_output: str, feedback: str) -> list[Any]:
    """Default factory: an assistant message with the failed output, then the user's feedback."""
    return [
        AssistantMessageItemParam(content=[OutputTextContentParam(text=failed_output)]),
        UserMessageItemParam(content=[InputTextContentParam(text=feedback)]),
    ]
