"""Encoding shared by the backends: a save's rows, a response body's status rewrite."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from orgate.store.base import STATUSES, item_id_for


@dataclass(frozen=True, slots=True)
class SaveRows:
    """What ``save`` writes, encoded once, outside any transaction."""

    id: str
    status: str
    model: str | None
    created_at: float
    now: float
    body: bytes
    request: bytes | None
    seqs: list[int]
    kinds: list[str]
    item_ids: list[str]
    datas: list[bytes]


def encode_save(
    response: dict[str, Any],
    input_items: Sequence[dict[str, Any]],
    request: dict[str, Any] | None,
    output_items: Sequence[dict[str, Any]] | None = None,
) -> SaveRows:
    """Encode a response and its own items (inputs first, then outputs) for storage.

    The outputs are ``output_items`` when given, else ``response["output"]``.
    """
    response_id = response.get("id")
    if not isinstance(response_id, str) or not response_id:
        raise ValueError("response has no id")
    status = response.get("status")
    if status not in STATUSES:
        raise ValueError(f"response {response_id} has unknown status {status!r}")
    model = response.get("model")
    created = response.get("created_at")
    now = time.time()
    outputs = output_items if output_items is not None else response.get("output") or []
    seqs: list[int] = []
    kinds: list[str] = []
    item_ids: list[str] = []
    datas: list[bytes] = []
    for kind, items in (("input", input_items), ("output", outputs)):
        for item in items:
            seq = len(seqs)
            seqs.append(seq)
            kinds.append(kind)
            item_ids.append(item_id_for(item, response_id, seq))
            datas.append(orjson.dumps(item))
    return SaveRows(
        id=response_id,
        status=status,
        model=model if isinstance(model, str) else None,
        created_at=float(created) if isinstance(created, int | float) else now,
        now=now,
        body=orjson.dumps(response),
        request=orjson.dumps(request) if request is not None else None,
        seqs=seqs,
        kinds=kinds,
        item_ids=item_ids,
        datas=datas,
    )


def rewrite_status(body: bytes, status: str, error: dict[str, Any] | None) -> bytes:
    """The response body with a new ``status`` (and ``error`` when given)."""
    if status not in STATUSES:
        raise ValueError(f"unknown status {status!r}")
    response = orjson.loads(body)
    response["status"] = status
    if error is not None:
        response["error"] = error
    return orjson.dumps(response)


loads = orjson.loads
dumps = orjson.dumps
