"""Following a running background response through the store, from a node that does not run it.

``GET /v1/responses/{id}?stream=true`` of a background response that runs elsewhere reads
the events its runner keeps in the store (written twice a second, ``engine/background.py``)
every ``FOLLOW_EVERY`` seconds, and sends the ones past the last sequence number sent, until
the response ends (then its stored events, or, for one failed without them, an ``error`` and
a ``response.failed`` made from the stored response). Before it first sends output (anything
past ``response.created`` / ``queued`` / ``in_progress``), it records in the store that the
output reached a client, for the attempt it read: a process taking the response over after
its runner died then fails it rather than run it again, and a follower that read the events
of an attempt already taken over sends nothing of them (the new attempt starts again).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any, NamedTuple

import orjson

from orgate.store.base import ResponseStore, StoreError

log = logging.getLogger("orgate.server")

#: Seconds between two reads of the store while following.
FOLLOW_EVERY = 0.25
#: Events that carry no output: sending them delivers nothing of the model's answer.
LIFECYCLE = frozenset({"response.created", "response.queued", "response.in_progress"})


class Event(NamedTuple):
    number: int
    type: str
    raw: bytes  # the whole SSE frame


def sequenced(blob: bytes) -> list[Event]:
    """The SSE frames of ``blob`` with their event's sequence number and type."""
    found = []
    for raw in blob.split(b"\n\n"):
        data = next((line[6:] for line in raw.split(b"\n") if line.startswith(b"data: ")), None)
        if data is None or data == b"[DONE]":
            continue
        try:
            event = orjson.loads(data)
        except orjson.JSONDecodeError:
            continue
        number = event.get("sequence_number") if isinstance(event, dict) else None
        if isinstance(number, int):
            found.append(Event(number, str(event.get("type")), raw + b"\n\n"))
    return found


Encoder = Callable[[dict[str, Any]], bytes]


async def follow_stored(
    store: ResponseStore, response_id: str, tenant: str, encode: Encoder, after: int = -1
) -> AsyncIterator[bytes]:
    """The response's events past sequence number ``after``, live, until it ends (``encode``:
    how this server writes an event it makes)."""
    last = after
    while True:
        try:
            progress = await store.background_progress(response_id, tenant)
        except StoreError as exc:  # a passing outage: the follower waits for the store
            log.debug("following %s: %s", response_id, exc)
            await asyncio.sleep(1.0)
            continue
        if progress is None:
            return  # deleted (or expired) meanwhile
        new = [event for event in sequenced(progress.events or b"") if event.number > last]
        running = progress.attempts is not None
        if running and new and not progress.delivered and any(e.type not in LIFECYCLE for e in new):
            marked = await store.mark_background(
                response_id, "delivered", attempts=progress.attempts
            )
            if not marked:
                continue  # taken over (or ended) since the read: read again
        if new:
            yield b"".join(event.raw for event in new)
            last = new[-1].number
        if not running:
            if progress.events is None and progress.status == "failed":
                ending = await _failed_ending(store, response_id, tenant, encode, last)
                if ending:
                    yield ending
            return
        await asyncio.sleep(FOLLOW_EVERY)


async def _failed_ending(
    store: ResponseStore, response_id: str, tenant: str, encode: Encoder, last: int
) -> bytes:
    """``error`` + ``response.failed`` for a response that failed without stored events (a
    takeover that did not run it again), numbered after what the follower sent."""
    record = await store.get(response_id, tenant)
    if record is None:
        return b""
    error = record.response.get("error") or {}
    return encode(
        {
            "type": "error",
            "sequence_number": last + 1,
            "error": {
                "type": "server_error",
                "code": error.get("code"),
                "message": error.get("message"),
                "param": None,
            },
        }
    ) + encode(
        {"type": "response.failed", "sequence_number": last + 2, "response": record.response}
    )
