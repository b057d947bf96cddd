"""Builders of wire-shaped response and item dicts for the store tests."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any

from orgate.store import ResponseStore, SessionTurn

PG_URL = os.environ.get("ORGATE_TEST_PG_URL")
PG_SKIP = 'ORGATE_TEST_PG_URL is unset: run `eval "$(.ci/postgres.sh)"` to test PostgreSQL'

#: ``open_at(url=None, **kwargs)``: open another store on the test's database.
OpenStore = Callable[..., Awaitable[ResponseStore]]


def response(
    response_id: str,
    outputs: list[dict[str, Any]] | None = None,
    *,
    status: str = "completed",
    created_at: int = 1_700_000_000,
) -> dict[str, Any]:
    """A wire-shaped response dict."""
    return {
        "id": response_id,
        "object": "response",
        "created_at": created_at,
        "status": status,
        "model": "test-model",
        "output": outputs if outputs is not None else [],
        "error": None,
    }


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": text}


def assistant(item_id: str, text: str) -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


async def session_pointer(
    store: ResponseStore, tenant: str, session_id: str
) -> tuple[str | None, str | None]:
    """The session's latest response and deployment, as the next turn would see them (the turn
    is claimed and released)."""
    turn: SessionTurn = await store.begin_session_turn(tenant, session_id)
    await store.end_session_turn(turn)
    return turn.latest_response_id, turn.deployment
