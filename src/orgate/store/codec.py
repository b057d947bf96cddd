"""Encoding shared by the backends: a save's rows, a response body's status rewrite."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from orgate.store.base import OUTPUT_POSITIONS, STATUSES, SaveArgs, is_derived, item_id_for


@dataclass(
    slots=True
    # not frozen: a frozen dataclass's __init__ sets each field through object.__setattr__,
    # on every save
)
class SaveRows:
    """What ``save`` writes, encoded once, outside any transaction (never changed after).

    Items are numbered in one sequence per response: its own inputs first
    (``0 … len(inputs) - 1``), then its outputs.
    """

    id: str
    status: str
    model: str | None
    created_at: float
    now: float
    body: bytes
    request: bytes | None
    inputs: Sequence[dict[str, Any]]
    outputs: Sequence[dict[str, Any]]
    #: True when the outputs are not the body's ``output`` (``save(output_items=...)``).
    custom_outputs: bool
    input_ids: list[str]
    output_ids: list[str]
    #: (id, seq) of the items an index of item ids needs: those whose id is not the one
    #: derived from their place (``is_derived``), which the store finds through the row.
    indexed: list[tuple[str, int]]

    @property
    def size(self) -> int:
        """How many items the response owns."""
        return len(self.input_ids) + len(self.output_ids)

    def item_columns(self) -> tuple[list[int], list[str], list[str], list[bytes]]:
        """One row per item (seq, kind, id, JSON) for a table of items."""
        seqs = list(range(self.size))
        kinds = ["input"] * len(self.input_ids) + ["output"] * len(self.output_ids)
        ids = [*self.input_ids, *self.output_ids]
        datas = [orjson.dumps(item) for item in (*self.inputs, *self.outputs)]
        return seqs, kinds, ids, datas


def encode_save(response: dict[str, Any], args: SaveArgs) -> SaveRows:
    """Encode a response and its own items (inputs first, then outputs) for storage.

    The outputs are ``args.output_items`` when given, else ``response["output"]``.
    """
    input_items, request, output_items = args.input_items, args.request, args.output_items
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
    first_output = len(input_items)
    indexed: list[tuple[str, int]] = []
    input_ids = _item_ids(input_items, response_id, 0, 0, indexed)
    output_ids = _item_ids(outputs, response_id, first_output, OUTPUT_POSITIONS, indexed)
    return SaveRows(
        id=response_id,
        status=status,
        model=model if isinstance(model, str) else None,
        created_at=float(created) if isinstance(created, int | float) else now,
        now=now,
        body=orjson.dumps(response),
        request=orjson.dumps(request) if request is not None else None,
        inputs=input_items,
        outputs=outputs,
        custom_outputs=output_items is not None,
        input_ids=input_ids,
        output_ids=output_ids,
        indexed=indexed,
    )


def _item_ids(
    items: Sequence[dict[str, Any]],
    response_id: str,
    first_seq: int,
    first_position: int,
    indexed: list[tuple[str, int]],
) -> list[str]:
    """The ids of ``items`` numbered from ``first_seq`` (``item_id_for``); appends to ``indexed``
    those that are not the id derived from their place (``first_position`` + k, ``is_derived``)."""
    ids: list[str] = []
    # An id made from its seq is derived from its place when seq and place agree (inputs).
    derivable = (
        first_seq == first_position and len(response_id) > 5 and response_id.startswith("resp_")
    )
    for k, item in enumerate(items):
        seq = first_seq + k
        item_id = item_id_for(item, response_id, seq)
        made_here = item_id is not item.get(
            "id"
        )  # not the item's own: item_id_for derived it from seq
        if not (made_here and derivable and seq <= 0xFFFFFF) and not is_derived(
            item_id, response_id, first_position + k
        ):
            indexed.append((item_id, seq))
        ids.append(item_id)
    return ids


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
