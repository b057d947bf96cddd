"""Responses event sequences for the adapter's tests, made by the real ``ResponseBuilder``.

``run(model_events)`` feeds neutral model events through the engine's builder
and returns every spec event it emitted, in order (what the responses service
streams). ``run_failing`` ends the response with an ``ApiError`` instead.
"""

from __future__ import annotations

from typing import Any

from orgate.engine.builder import ResponseBuilder
from orgate.neutral import ModelEvent
from orgate.protocol.errors import ApiError


def base(model: str = "gpt-test") -> dict[str, Any]:
    return {
        "model": model,
        "previous_response_id": None,
        "instructions": None,
        "tools": [],
        "tool_choice": "auto",
        "truncation": "disabled",
        "parallel_tool_calls": True,
        "text": {"format": {"type": "text"}},
        "top_p": 1.0,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "top_logprobs": 0,
        "temperature": 1.0,
        "reasoning": None,
        "max_output_tokens": None,
        "max_tool_calls": None,
        "store": False,
        "background": False,
        "service_tier": "default",
        "metadata": {},
        "safety_identifier": None,
        "prompt_cache_key": None,
    }


def run(model_events: list[ModelEvent], *, model: str = "gpt-test") -> list[dict[str, Any]]:
    builder = ResponseBuilder(base(model), created_at=1_700_000_000)
    builder.start()
    for event in model_events:
        builder.feed(event)
    return builder.drain()


def run_failing(
    model_events: list[ModelEvent], error: ApiError, *, model: str = "gpt-test"
) -> list[dict[str, Any]]:
    builder = ResponseBuilder(base(model), created_at=1_700_000_000)
    builder.start()
    for event in model_events:
        builder.feed(event)
    builder.fail(error)
    return builder.drain()
