"""Shared by the engine tests: a response skeleton and a builder fed with model events."""

from __future__ import annotations

from typing import Any

from orgate.engine.builder import ResponseBuilder
from tests.support.samples import response as sample_response

#: What the builder owns; the rest of a response is the skeleton echoed from the request.
_BUILDER_FIELDS = (
    "id",
    "object",
    "created_at",
    "completed_at",
    "status",
    "incomplete_details",
    "output",
    "error",
    "usage",
)


def base() -> dict[str, Any]:
    """A response skeleton: every field echoed from the request, none the builder owns."""
    return {k: v for k, v in sample_response().items() if k not in _BUILDER_FIELDS}


def run(*events: Any) -> ResponseBuilder:
    """A started builder fed ``events``."""
    builder = ResponseBuilder(base())
    builder.start()
    for event in events:
        builder.feed(event)
    return builder
