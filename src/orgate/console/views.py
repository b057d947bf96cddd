"""What the console's endpoints return for stored responses: a listing row, an inspection.

Pure functions over ``StoredResponse`` records. Gate findings are the gate library's
own verdicts (``orgate.gate.check``) for each ``function_call`` the response produced,
against the tools the response echoes (those its request declared): what ``orgate gate``
says of the same stored response.
"""

from __future__ import annotations

from typing import Any

import orjson

from orgate.gate import ToolsError, check, load_tools
from orgate.store import StoredResponse


def _usage(response: dict[str, Any]) -> dict[str, int] | None:
    usage = response.get("usage")
    if not isinstance(usage, dict):
        return None
    keys = ("input_tokens", "output_tokens", "total_tokens")
    return {key: usage[key] for key in keys if isinstance(usage.get(key), int)}


def _latency(record: StoredResponse) -> float | None:
    if record.status in ("queued", "in_progress"):
        return None
    return round(max(record.updated_at - record.created_at, 0.0), 4)


def gate_verdicts(record: StoredResponse) -> list[dict[str, Any]]:
    """The gate's verdict for each ``function_call`` output item, with the item's index."""
    output = record.response.get("output")
    if not isinstance(output, list):
        return []
    calls = [
        (i, item)
        for i, item in enumerate(output)
        if isinstance(item, dict) and item.get("type") == "function_call"
    ]
    if not calls:
        return []
    declared = record.response.get("tools")
    try:
        tools = load_tools(declared) if isinstance(declared, list) else None
    except ToolsError:
        tools = None
    return [{"index": i, **check(item, tools).to_dict()} for i, item in calls]


def row(record: StoredResponse) -> dict[str, Any]:
    """One line of the traffic list."""
    findings = [v["code"] for v in gate_verdicts(record) if v["code"] != "ok"]
    error = record.response.get("error")
    return {
        "id": record.id,
        "tenant": record.tenant,
        "created_at": record.created_at,
        "status": record.status,
        "model": record.model,
        "deployment": record.deployment,
        "session_id": record.session_id,
        "latency_s": _latency(record),
        "usage": _usage(record.response),
        "gate_findings": findings,
        "structured": _structured(record),
        "error_code": error.get("code") if isinstance(error, dict) else None,
    }


def _structured(record: StoredResponse) -> str | None:
    """The safety net's outcome (``ok``, ``recovered``, ``default``...) when the save recorded it,
    else the structured-output format type asked for, else None."""
    trace = (record.request or {}).get("structured")
    if isinstance(trace, dict) and isinstance(trace.get("status"), str):
        return str(trace["status"])
    return _format_type(record.response)


def _format_type(response: dict[str, Any]) -> str | None:
    """The ``text.format`` type when structured output was asked for (``json_schema``,
    ``json_object``)."""
    text = response.get("text")
    fmt = text.get("format") if isinstance(text, dict) else None
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    return kind if kind in ("json_schema", "json_object") else None


def event_timeline(blob: bytes | None) -> list[dict[str, Any]]:
    """The stored SSE frames of a streamed response, parsed: ``{event, data}`` each."""
    if not blob:
        return []
    events: list[dict[str, Any]] = []
    for frame in blob.split(b"\n\n"):
        name = None
        data: list[bytes] = []
        for line in frame.split(b"\n"):
            if line.startswith(b"event:"):
                name = line[6:].strip().decode("utf-8", "replace")
            elif line.startswith(b"data:"):
                data.append(line[5:].strip())
        if not data:
            continue
        try:
            payload = orjson.loads(b"\n".join(data))
        except orjson.JSONDecodeError:
            payload = b"\n".join(data).decode("utf-8", "replace")
        events.append({"event": name, "data": payload})
    return events


def inspection(
    record: StoredResponse, *, input_items: list[dict[str, Any]], events: bytes | None
) -> dict[str, Any]:
    """Everything the inspector shows of one response."""
    return {
        "row": row(record),
        "previous_response_id": record.previous_response_id,
        "depth": record.depth,
        "request": record.request,
        "input": input_items,
        "response": record.response,
        "gate": gate_verdicts(record),
        "route": (record.request or {}).get("route"),
        "structured": (record.request or {}).get("structured"),
        "translation": (record.request or {}).get("translation") or [],
        "events": event_timeline(events),
    }
