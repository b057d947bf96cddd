"""The console's tool endpoints: ``orgate gate`` and ``orgate diff`` on pasted or uploaded
text, and the eval charts' model from uploaded ``orgate eval --save`` reports.

The same library as the CLI: the gate reader (a JSON document or JSON Lines), its
rule for which items a value holds and which tools check them (``items_and_tools``),
``check`` and ``diff``. Nothing is stored; the caller's session is all they need.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from orgate.console.guard import json_response, require_change_allowed
from orgate.console.session import SessionSigner
from orgate.evaluation.charts import ReportError, eval_model, parse_reports
from orgate.gate import CODES, ToolCatalog, ToolsError, check, diff, load_tools
from orgate.gate.cli import ResponseTools, items_and_tools
from orgate.gate.diff import as_items
from orgate.gate.reader import InputError, read_bytes
from orgate.protocol.errors import ApiError, ErrorCode, invalid_value
from orgate.server.body import read_json

if TYPE_CHECKING:
    from orgate.server.services import Services

#: Verdict rows returned at most (the summary counts every item).
MAX_ROWS = 5000


def _text(data: Any, field: str, *, required: bool = True) -> str | None:
    value = data.get(field) if isinstance(data, dict) else None
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value.strip()):
        raise invalid_value(f"'{field}' must be the file's text.", param=field)
    return value


def _values(text: str, name: str) -> list[Any]:
    try:
        return read_bytes(text.encode(), name)
    except InputError as exc:
        raise ApiError.of(ErrorCode.INVALID_INPUT, str(exc), param=name) from None


def gate_report(log: str, tools_text: str | None) -> dict[str, Any]:
    """Verdicts of every item of ``log`` (any input ``orgate gate`` takes),
    with a summary by code."""
    cli_tools: ToolCatalog | None = None
    if tools_text is not None and tools_text.strip():
        try:
            cli_tools = load_tools(_values(tools_text, "tools")[0])
        except (ToolsError, IndexError) as exc:
            raise ApiError.of(ErrorCode.INVALID_TOOLS, f"tools: {exc}", param="tools") from None
    response_tools = ResponseTools()
    rows: list[dict[str, Any]] = []
    counts: dict[str, int] = {}
    calls = failing = index = 0
    for number, value in enumerate(_values(log, "log"), 1):
        try:
            items, tools = items_and_tools(value, cli_tools, response_tools)
        except ToolsError as exc:
            raise ApiError.of(
                ErrorCode.INVALID_TOOLS, f"log: value {number}: invalid tools: {exc}", param="log"
            ) from None
        for item in items:
            verdict = check(item, tools)
            code = verdict.code.value
            counts[code] = counts.get(code, 0) + 1
            kind = item.get("type") if isinstance(item, dict) else None
            if kind == "function_call":
                calls += 1
                failing += code != "ok"
            if len(rows) < MAX_ROWS:
                rows.append(
                    {
                        "index": index,
                        "type": kind if isinstance(kind, str) else None,
                        **verdict.to_dict(),
                    }
                )
            index += 1
    summary = [
        {"code": code.value, "items": counts[code.value]}
        for code in CODES
        if counts.get(code.value)
    ]
    return {
        "items": rows,
        "truncated": index > len(rows),
        "total": index,
        "calls": calls,
        "failing": failing,
        "summary": summary,
    }


def diff_report(left: str, right: str) -> dict[str, Any]:
    """``orgate diff`` of two documents: the verdict, every difference (blocking ones marked)
    and each side's items, which the differences' indexes point into."""
    sides = []
    for name, text in (("left", left), ("right", right)):
        items: list[Any] = []
        for value in _values(text, name):
            items.extend(as_items(value))
        sides.append(items)
    return {**diff(sides[0], sides[1]).to_dict(), "left": sides[0], "right": sides[1]}


def tool_routes(services: Services, signer: SessionSigner) -> list[BaseRoute]:
    limits = services.settings.limits

    async def gate(request: Request) -> Response:
        await require_change_allowed(signer, request)
        data = await read_json(request, limits)
        log, tools = _text(data, "log"), _text(data, "tools", required=False)
        return json_response(await asyncio.to_thread(gate_report, log or "", tools))

    async def diff_documents(request: Request) -> Response:
        await require_change_allowed(signer, request)
        data = await read_json(request, limits)
        left, right = _text(data, "left"), _text(data, "right")
        return json_response(await asyncio.to_thread(diff_report, left or "", right or ""))

    return [
        Route("/console/api/gate", gate, methods=["POST"]),
        Route("/console/api/diff", diff_documents, methods=["POST"]),
    ]


def eval_routes(services: Services, signer: SessionSigner) -> list[BaseRoute]:
    async def charts(request: Request) -> Response:
        await require_change_allowed(signer, request)
        data = await read_json(request, services.settings.limits)
        files = data.get("reports") if isinstance(data, dict) else None
        if not isinstance(files, list) or not all(
            isinstance(f, dict) and isinstance(f.get("text"), str) for f in files
        ):
            raise invalid_value(
                'Send {"reports": [{"name": "...", "text": "<report JSON>"}, ...]}.',
                param="reports",
            )
        reports = []
        for number, file in enumerate(files):
            name = str(file.get("name") or f"report {number + 1}")
            try:
                reports += parse_reports(orjson.loads(file["text"]), name)
            except orjson.JSONDecodeError as exc:
                raise ApiError.of(
                    ErrorCode.INVALID_REPORT, f"{name}: invalid JSON: {exc}", param="reports"
                ) from None
            except ReportError as exc:
                raise ApiError.of(ErrorCode.INVALID_REPORT, str(exc), param="reports") from None
        return json_response(eval_model(reports))

    return [Route("/console/api/eval", charts, methods=["POST"])]
