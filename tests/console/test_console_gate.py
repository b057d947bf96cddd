"""Gate and diff in the browser: an uploaded log's verdict codes and a side-by-side diff,
as the CLI reports them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.console.conftest import WEATHER_TOOL, console_client, shoot, sign_in
from tests.server_process import OrgateServer


def _call(call_id: str, arguments: str) -> dict[str, Any]:
    return {
        "type": "function_call",
        "call_id": call_id,
        "name": "get_weather",
        "arguments": arguments,
        "status": "completed",
    }


LOG = [
    _call("c1", '{"city": "Paris", "unit": "c"}'),
    _call("c2", '{"city": 12, "unit": "c"}'),
    _call("c3", '{"city": "Oslo"'),
    {
        "type": "function_call",
        "call_id": "c4",
        "name": "nope",
        "arguments": "{}",
        "status": "completed",
    },
    {"type": "message", "role": "user", "content": "hi"},
]


def _cli_codes(log: Path, tools: Path) -> list[str]:
    """What ``orgate gate LOG --tools TOOLS --json`` says of each item."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "orgate.gate.cli",
            "gate",
            str(log),
            "--tools",
            str(tools),
            "--json",
            "-q",
        ],
        capture_output=True,
        check=False,
        timeout=120,
    )
    return [json.loads(line)["code"] for line in done.stdout.decode().splitlines() if line.strip()]


def test_upload_a_log_and_read_the_verdict_codes(
    watched: Any, server: OrgateServer, tmp_path: Path
) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps(item) + "\n" for item in LOG))
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([WEATHER_TOOL]))
    page = watched()
    sign_in(page, server, "alpha")
    page.goto(f"{server.url}/console#/gate")
    page.set_input_files("#gate-log-file", str(log))
    page.set_input_files("#gate-tools-file", str(tools))
    page.click("#run-gate")
    page.locator("#gate-result").wait_for()
    codes = page.locator("#gate-result td.verdict-code").all_inner_texts()
    assert codes == [
        "ok",
        "arguments_schema",
        "arguments_parse",
        "unknown_tool",
        "not_function_call",
    ]
    assert codes == _cli_codes(log, tools)
    summary = page.locator("#gate-result tr[data-code]").all()
    assert {row.get_attribute("data-code") for row in summary} == set(codes)
    shoot(page, "gate")


def test_the_console_gate_says_what_the_cli_says(server: OrgateServer, tmp_path: Path) -> None:
    client = console_client(server, "alpha")
    stored = {"id": "resp_1", "object": "response", "output": LOG[:3], "tools": [WEATHER_TOOL]}
    # It changes nothing, yet it is a POST: the CSRF token and this origin, as for every one.
    for refused in (
        client.post(
            "/console/api/gate", json={"log": json.dumps(stored)}, headers={"X-CSRF-Token": ""}
        ),
        client.post(
            "/console/api/gate",
            json={"log": json.dumps(stored)},
            headers={"Origin": "https://evil.example"},
        ),
    ):
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "csrf_failed"
    got = client.post("/console/api/gate", json={"log": json.dumps(stored)}).json()
    assert [row["code"] for row in got["items"]] == ["ok", "arguments_schema", "arguments_parse"]
    assert got["items"][1]["errors"][0]["path"] == "$.city"
    assert (got["calls"], got["failing"]) == (3, 2)
    bad = client.post("/console/api/gate", json={"log": "{not json"})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_input"


def test_diff_two_documents_side_by_side(watched: Any, server: OrgateServer) -> None:
    left = {"output": [LOG[0], LOG[4]]}
    right = {
        "output": [_call("c9", '{"city": "Lyon", "unit": "c"}'), LOG[4]]
    }  # a call_id that does not pair
    page = watched()
    sign_in(page, server, "alpha")
    page.goto(f"{server.url}/console#/gate")
    page.fill("#diff-left", json.dumps(left))
    page.fill("#diff-right", json.dumps(right))
    page.click("#run-diff")
    page.locator("#diff-result").wait_for()
    assert page.locator("#diff-verdict").inner_text() == "block"
    assert page.locator("#diff-result td.blocking").first.inner_text() == "blocking"
    assert page.locator("#diff-result pre.side.blocking").count() == 2  # the call on each side
    shoot(page, "diff")
