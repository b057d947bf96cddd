"""Fixtures for the replay gate tests: the spec's sales-report tool and item builders."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from orgate.gate import BACKENDS, SchemaCache

SALES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"region": {"type": "string", "enum": ["apac", "emea", "amer"]}},
    "required": ["region"],
    "additionalProperties": False,
}
SALES_TOOLS: list[dict[str, Any]] = [
    {"type": "function", "name": "get_latest_sales_report", "parameters": SALES_SCHEMA}
]


def call(
    arguments: Any = None,
    *,
    name: str = "get_latest_sales_report",
    status: str | None = "completed",
    call_id: str = "call_1",
    id: str = "fc_1",
) -> dict[str, Any]:
    """A function_call item; dict/list ``arguments`` are serialised to a JSON string."""
    if arguments is None:
        arguments = {"region": "apac"}
    if isinstance(arguments, dict | list):
        arguments = orjson.dumps(arguments).decode()
    item: dict[str, Any] = {
        "type": "function_call",
        "id": id,
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
    }
    if status is not None:
        item["status"] = status
    return item


def output(call_id: str = "call_1", text: str = '{"rows": 3}') -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": text}


@pytest.fixture(params=BACKENDS)
def cache(request: pytest.FixtureRequest) -> SchemaCache:
    """A fresh schema cache for each available validator backend."""
    return SchemaCache(backend=request.param)
