"""Server-sent events: ``event: <type>`` + ``data: <json>`` frames, no ``id:``, ending in ``data: [DONE]``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson

DONE = b"data: [DONE]\n\n"


def frame(event: dict[str, Any]) -> bytes:
    return b"event: " + event["type"].encode() + b"\ndata: " + orjson.dumps(event) + b"\n\n"


async def encode(events: AsyncIterator[dict[str, Any]]) -> AsyncIterator[bytes]:
    async for event in events:
        yield frame(event)
    yield DONE
