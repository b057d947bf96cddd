"""Black-box regressions of the replay gate: library, CLI and the gateway's enforcement.

Each test here failed before the fix it guards (see the audit report).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from orgate.gate import diff
from orgate.gate.cli import main as gate_main
from tests.conftest import chat_model_config
from tests.fakes.openai_chat_upstream import FakeOpenAIChat
from tests.server.test_conformance import WEATHER_TOOL
from tests.server_process import OrgateServer

CALL = {
    "type": "function_call",
    "call_id": "call_1",
    "name": "get_weather",
    "arguments": '{"city":"Paris","unit":"c"}',
    "status": "completed",
}
OUTPUT = {"type": "function_call_output", "call_id": "call_1", "output": "sunny"}
USER = {"role": "user", "content": "What is the weather in Paris?"}


# --- diff ------------------------------------------------------------------------------


def test_diff_role_shorthand_message_equals_typed_message() -> None:
    # {"role": ...} without a type is the spec's shorthand message, as check() says: not a
    # namespaced item, so no blocking "type" difference against {"type": "message", ...}.
    left = [{"role": "user", "content": "hi"}, CALL]
    right = [{"type": "message", "role": "user", "content": "hi"}, CALL]
    result = diff(left, right)
    assert result.verdict == "ok", result.to_dict()
    assert result.differences == ()
    # a real type change of a shorthand message is still reported, against "message"
    changed = diff({"role": "user", "content": "hi"}, {"type": "openai:message", "content": "hi"})
    assert changed.verdict == "block"
    assert changed.differences[0].detail == {
        "left": "message",
        "right": "openai:message",
        "became_namespaced": True,
    }


# --- CLI -------------------------------------------------------------------------------


def _write(tmp_path: Path, name: str, value: Any) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(value))
    return str(path)


def test_cli_reads_an_items_page_and_a_request_body(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = CALL | {"status": "in_progress"}
    # GET /v1/responses/{id}/input_items: a stored trajectory as orgate serves it
    page = _write(
        tmp_path,
        "page.json",
        {"object": "list", "data": [USER, bad], "first_id": "x", "last_id": "y", "has_more": False},
    )
    assert gate_main(["gate", page, "--json", "-q"]) == 1
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["code"] for r in rows] == ["not_function_call", "status"]
    # a logged request body: its input, checked against its own tools
    body = {
        "model": "m",
        "tools": [WEATHER_TOOL],
        "input": [USER, CALL | {"arguments": '{"city":"Paris","unit":"kelvin"}'}],
    }
    assert gate_main(["gate", _write(tmp_path, "req.json", body), "--json", "-q"]) == 1
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["code"] for r in rows] == ["not_function_call", "arguments_schema"]
    assert diff(json.loads(Path(page).read_text()), [USER, bad]).verdict == "ok"


def test_cli_text_output_keeps_six_columns_when_a_field_holds_a_tab(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    item = CALL | {"id": "fc\t1", "call_id": "c\t1", "arguments": "{"}
    assert gate_main(["gate", _write(tmp_path, "tab.json", item)]) == 1
    line = capsys.readouterr().out.splitlines()[1]
    assert line.split("\t")[:5] == ["0", "fc 1", "c 1", "get_weather", "arguments_parse"]
    assert line.count("\t") == 5


def test_orgate_gate_does_not_import_the_server(tmp_path: Path) -> None:
    # `orgate gate` on a 100k-line log must not spend a second importing the gateway first.
    path = _write(tmp_path, "one.json", CALL)
    code = (
        "import sys, orgate.cli\n"
        f"status = orgate.cli.main(['gate', {path!r}, '--json', '-q'])\n"
        "heavy = sorted(m for m in ('uvicorn', 'orgate.server.app', 'orgate.config', "
        "'orgate.structured.cli') if m in sys.modules)\n"
        "print(status, heavy, file=sys.stderr)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stderr.strip() == "0 []", res.stderr
    # and the full command line still has every command
    res = subprocess.run(
        [sys.executable, "-m", "orgate.cli", "--help"], capture_output=True, text=True, timeout=60
    )
    assert all(cmd in res.stdout for cmd in ("serve", "gate", "diff", "store", "schema")), (
        res.stdout
    )


# --- gateway ---------------------------------------------------------------------------


def _post(http: httpx.Client, items: list[Any], **body: Any) -> httpx.Response:
    return http.post(
        "/v1/responses",
        json={"model": "orgate/echo", "tools": [WEATHER_TOOL], "input": items, **body},
    )


def _error(res: httpx.Response) -> dict[str, Any]:
    assert res.status_code == 400, res.text
    error = res.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error"
    return error


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    ("call", "code", "param"),
    [
        # the gate's codes, not the parser's generic invalid_type / invalid_value
        (
            CALL | {"arguments": {"city": "Paris", "unit": "c"}},
            "arguments_type",
            "input[1].arguments",
        ),
        (CALL | {"arguments": 1}, "arguments_type", "input[1].arguments"),
        (CALL | {"arguments": None}, "arguments_type", "input[1].arguments"),
        (CALL | {"status": "bogus"}, "status", "input[1]"),
        # in the gate's order: status before arguments_type
        (CALL | {"status": "in_progress", "arguments": {"city": "Paris"}}, "status", "input[1]"),
        # arguments that fail the schema of a tool the request defines
        (CALL | {"arguments": '{"city":"Paris","unit":"kelvin"}'}, "arguments_schema", "input[1]"),
        (CALL | {"arguments": "null"}, "arguments_schema", "input[1]"),
    ],
)
def test_gateway_refuses_input_calls_with_the_gate_code(
    http: httpx.Client, call: dict[str, Any], code: str, param: str, stream: bool
) -> None:
    error = _error(_post(http, [USER, call, OUTPUT], stream=stream))
    assert (error["code"], error["param"]) == (code, param), error


def test_gateway_schema_check_names_every_path_and_spares_unknown_and_null_status(
    http: httpx.Client,
) -> None:
    error = _error(_post(http, [USER, CALL | {"arguments": '{"city":"Paris","unit":"kelvin"}'}]))
    assert "$.unit" in error["message"] and "kelvin" in error["message"]
    # a tool the request no longer defines is not refused (tools may change between turns)
    assert (
        _post(http, [USER, CALL | {"name": "old_tool", "arguments": "{}"}, OUTPUT]).status_code
        == 200
    )
    # `"status": null` is "not given", as a missing status
    assert _post(http, [USER, CALL | {"status": None}, OUTPUT]).status_code == 200


def test_warn_policy_names_the_clients_own_indexes(fake_chat: FakeOpenAIChat) -> None:
    config = '[gate]\npolicy = "warn"\n' + chat_model_config(fake_chat.base_url)
    with OrgateServer(config) as server:

        def post(items: list[Any]) -> httpx.Response:
            res = httpx.post(
                f"{server.base_url}/responses",
                headers=server.headers(),
                json={"model": "orgate/echo", "tools": [WEATHER_TOOL], "input": items},
            )
            assert res.status_code == 200, res.text
            return res

        # input[1] is dropped as non-portable: the orphan output is the client's input[2],
        # not input[1]
        res = post(
            [
                USER,
                {
                    "type": "openai:function_call",
                    "call_id": "call_1",
                    "name": "get_weather",
                    "arguments": "{}",
                },
                OUTPUT,
            ]
        )
        warnings = res.headers["x-orgate-gate-warnings"]
        assert "input[2].call_id: orphan_output" in warnings, warnings
        # a failing call after a dropped item, and a schema failure under warn
        res = post(
            [
                {"type": "openai:web_search_call", "id": "ws_1"},
                USER,
                CALL | {"arguments": '{"city":"Paris","unit":"kelvin"}'},
                OUTPUT,
            ]
        )
        warnings = res.headers["x-orgate-gate-warnings"]
        assert "input[2]: arguments_schema" in warnings, warnings
