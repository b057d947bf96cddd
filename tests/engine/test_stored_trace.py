"""What a save records beyond the request for inspection: retries and fallbacks, the safety net's
attempts, the translation ledger."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from orgate.engine.router import Attempt, RouteTrace
from orgate.engine.service import _with_trace
from orgate.neutral import Ledger, Translation
from orgate.structured.outcome import AttemptRecord, Outcome

REQUEST = {"model": "m", "stream": False}


def _turn(route: RouteTrace | None = None, outcome: Outcome | None = None) -> Any:
    return SimpleNamespace(route=route, outcome=outcome)


def test_a_plain_turn_records_nothing_more() -> None:
    answered = RouteTrace(served_by="a", attempts=[Attempt("a")])
    assert _with_trace(REQUEST, _turn(answered, Outcome(status="passthrough")), Ledger()) is REQUEST
    assert _with_trace(REQUEST, _turn(None, Outcome()), Ledger()) is REQUEST


def test_retries_and_fallbacks_are_recorded() -> None:
    route = RouteTrace(served_by="b", attempts=[Attempt("a", "503 upstream_error"), Attempt("b")])
    got = _with_trace(REQUEST, _turn(route), Ledger())
    assert got["route"] == {
        "served_by": "b",
        "attempts": [
            {"deployment": "a", "error": "503 upstream_error"},
            {"deployment": "b", "error": None},
        ],
    }
    assert REQUEST == {"model": "m", "stream": False}  # the turn's own record is not changed


def test_the_safety_nets_attempts_are_recorded() -> None:
    outcome = Outcome(status="recovered", mode="strict", format_name="pet")
    outcome.attempts = [
        AttemptRecord(1, "stop", "schema", ("$.age: wrong type",), 100, '{"age": "x"}'),
        AttemptRecord(2, "stop"),
    ]
    route = RouteTrace(served_by="a", attempts=[Attempt("a")])
    got = _with_trace(REQUEST, _turn(route, outcome), Ledger())
    assert "route" not in got
    assert got["structured"]["status"] == "recovered"
    assert [a["stage"] for a in got["structured"]["attempts"]] == ["schema", None]
    assert got["structured"]["attempts"][0]["text"] == '{"age": "x"}'


def test_the_ledger_is_recorded_entry_by_entry() -> None:
    ledger = Ledger()
    ledger.note(Translation.HOSTED_TOOL_DROPPED, "tools[1]", "web_search")
    ledger.note(Translation.HOSTED_TOOL_DROPPED, "tools[1]", "web_search")  # noted once
    got = _with_trace(REQUEST, _turn(None, Outcome()), ledger)
    assert got["translation"] == [
        {
            "code": "hosted_tool_dropped",
            "kind": "dropped",
            "side": "request",
            "path": "tools[1]",
            "detail": "web_search",
        }
    ]
