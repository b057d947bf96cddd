"""The gate/diff CLI, run as a subprocess: ``python -m orgate.gate.cli``."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from orgate.gate.cli import register

from .conftest import SALES_TOOLS, call, output

MESSAGE = {"type": "message", "id": "msg_1", "role": "assistant", "content": []}
GOOD = call({"region": "apac"}, call_id="c1", id="fc_1")
BAD = call({"region": "global"}, call_id="c2", id="fc_2")
WEB = {"type": "openai:web_search_call", "id": "ws_1", "status": "completed"}


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orgate.gate.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def write(
    tmp_path: Path, name: str, value: Any, *, jsonl: bool = False, indent: int | None = None
) -> str:
    path = tmp_path / name
    if jsonl:
        path.write_text("".join(json.dumps(v) + "\n" for v in value))
    else:
        path.write_text(json.dumps(value, indent=indent))
    return str(path)


def records(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines()]


@pytest.fixture
def tools_file(tmp_path: Path) -> str:
    return write(tmp_path, "tools.json", SALES_TOOLS)


def test_single_item_ok(tmp_path: Path, tools_file: str) -> None:
    result = run("gate", write(tmp_path, "item.json", GOOD), "--tools", tools_file, "--json")
    assert result.returncode == 0, result.stderr
    (rec,) = records(result.stdout)
    assert rec["index"] == 0 and rec["code"] == "ok" and rec["call_id"] == "c1"
    assert rec["id"] == "fc_1" and rec["name"] == "get_latest_sales_report" and rec["errors"] == []


def test_array_one_json_line_per_item_in_order(tmp_path: Path, tools_file: str) -> None:
    items = [MESSAGE, GOOD, BAD, WEB, output("c1")]
    result = run(
        "gate", write(tmp_path, "items.json", items, indent=2), "--tools", tools_file, "--json"
    )
    assert result.returncode == 1
    recs = records(result.stdout)
    assert [r["index"] for r in recs] == [0, 1, 2, 3, 4]
    assert [r["code"] for r in recs] == [
        "not_function_call",
        "ok",
        "arguments_schema",
        "namespaced",
        "not_function_call",
    ]
    assert recs[2]["errors"][0]["path"] == "$.region"
    assert "summary" in result.stderr  # the summary never goes to stdout with --json


def test_quiet_json_prints_nothing_else(tmp_path: Path, tools_file: str) -> None:
    result = run(
        "gate", write(tmp_path, "items.json", [GOOD]), "--tools", tools_file, "--json", "-q"
    )
    assert result.returncode == 0 and result.stderr == ""
    assert len(result.stdout.splitlines()) == 1


def test_stored_response_uses_its_own_tools(tmp_path: Path) -> None:
    response = {
        "object": "response",
        "id": "resp_1",
        "tools": SALES_TOOLS,
        "output": [MESSAGE, GOOD, BAD],
    }
    path = write(tmp_path, "resp.json", response, indent=2)
    result = run("gate", path, "--json")
    assert result.returncode == 1
    assert [r["code"] for r in records(result.stdout)] == [
        "not_function_call",
        "ok",
        "arguments_schema",
    ]
    # --tools overrides the response's tools
    other = write(tmp_path, "other.json", {"get_latest_sales_report": {"type": "object"}})
    result = run("gate", path, "--tools", other, "--json")
    assert result.returncode == 0
    assert [r["code"] for r in records(result.stdout)] == ["not_function_call", "ok", "ok"]


def test_jsonl_log_of_items_and_responses(tmp_path: Path, tools_file: str) -> None:
    lines = [MESSAGE, GOOD, {"object": "response", "output": [BAD, WEB]}, [GOOD, MESSAGE]]
    path = tmp_path / "log.jsonl"
    path.write_text("\n".join(json.dumps(v) for v in lines) + "\n\n")
    result = run("gate", str(path), "--tools", tools_file, "--json")
    recs = records(result.stdout)
    assert [r["index"] for r in recs] == list(range(6))
    assert [r["code"] for r in recs] == [
        "not_function_call",
        "ok",
        "arguments_schema",
        "namespaced",
        "ok",
        "not_function_call",
    ]
    assert result.returncode == 1


def test_stdin(tools_file: str) -> None:
    stdin = json.dumps(GOOD) + "\n" + json.dumps(MESSAGE) + "\n"
    result = run("gate", "-", "--tools", tools_file, "--json", stdin=stdin)
    assert result.returncode == 0
    assert [r["code"] for r in records(result.stdout)] == ["ok", "not_function_call"]


def test_namespaced_and_messages_do_not_fail_the_run(tmp_path: Path) -> None:
    result = run("gate", write(tmp_path, "x.json", [MESSAGE, WEB, output("c1")]), "--json")
    assert result.returncode == 0


@pytest.mark.parametrize(
    "item",
    [
        call(status="in_progress"),
        call(status="incomplete"),
        {**call(), "arguments": {"region": "apac"}},
        call('{"region": "ap'),
        call(name="nope"),
    ],
)
def test_each_failing_call_exits_1(tmp_path: Path, tools_file: str, item: dict[str, Any]) -> None:
    assert run("gate", write(tmp_path, "i.json", item), "--tools", tools_file).returncode == 1


def test_text_output_and_summary(tmp_path: Path, tools_file: str) -> None:
    result = run("gate", write(tmp_path, "items.json", [MESSAGE, GOOD, BAD]), "--tools", tools_file)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0].split("\t") == ["index", "id", "call_id", "name", "code", "detail"]
    assert lines[3].split("\t")[:5] == [
        "2",
        "fc_2",
        "c2",
        "get_latest_sales_report",
        "arguments_schema",
    ]
    assert "$.region" in lines[3]
    assert "summary: 3 items, 2 function calls, 1 not ok" in result.stdout


def test_text_output_keeps_one_line_per_item(tmp_path: Path) -> None:
    item = {**call(), "name": "a\nb", "id": "x\r\ny"}
    result = run("gate", write(tmp_path, "i.json", [item, MESSAGE]))
    assert len(result.stdout.split("\n")) - 1 == 1 + 2 + 3  # header, 2 items, summary + 2 codes


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "invalid JSON"),
        ('{"type": "message"}\n{"type": \n', ":2: invalid JSON"),
        ("[1, 2", "invalid JSON"),
    ],
)
def test_unreadable_input_exits_2(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    result = run("gate", str(path), "--json")
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr


def test_missing_file_and_bad_tools_exit_2(tmp_path: Path) -> None:
    result = run("gate", str(tmp_path / "nope.json"))
    assert result.returncode == 2 and "nope.json" in result.stderr and result.stdout == ""
    item = write(tmp_path, "i.json", GOOD)
    bad_tools = write(
        tmp_path, "t.json", [{"type": "function", "name": "a", "parameters": {"type": "foo"}}]
    )
    result = run("gate", item, "--tools", bad_tools)
    assert result.returncode == 2 and "tools[0].parameters" in result.stderr
    result = run("gate", item, "--tools", str(tmp_path / "missing-tools.json"))
    assert result.returncode == 2


def test_empty_input_is_zero_items(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("\n")
    result = run("gate", str(path), "--json")
    assert result.returncode == 0 and result.stdout == ""


def test_diff_ok_block_and_unreadable(tmp_path: Path) -> None:
    left = [MESSAGE, GOOD, output("c1")]
    same = write(tmp_path, "l.json", left)
    reformatted = write(
        tmp_path, "r.json", [MESSAGE, {**GOOD, "arguments": '{ "region" : "apac" }'}, output("c1")]
    )
    result = run("diff", same, reformatted)
    assert result.returncode == 0, result.stderr
    assert "verdict: ok" in result.stdout

    namespaced = write(
        tmp_path, "n.json", [MESSAGE, {**GOOD, "type": "openai:function_call"}, output("c1")]
    )
    result = run("diff", same, namespaced, "--json")
    assert result.returncode == 1
    body = json.loads(result.stdout)
    assert body["verdict"] == "block"
    assert (
        body["differences"][0]["kind"] == "type"
        and body["differences"][0]["detail"]["became_namespaced"]
    )
    assert len(result.stdout.splitlines()) == 1

    result = run(
        "diff", same, "-", stdin=json.dumps([MESSAGE, {**GOOD, "call_id": "zz"}, output("zz")])
    )
    assert result.returncode == 1 and "call_id" in result.stdout

    assert run("diff", same, str(tmp_path / "missing.json")).returncode == 2
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    result = run("diff", str(bad), same)
    assert result.returncode == 2 and "invalid JSON" in result.stderr


def test_register_adds_both_subcommands() -> None:
    parser = argparse.ArgumentParser(prog="orgate")
    sub = parser.add_subparsers(dest="command", required=True)
    register(sub)
    args = parser.parse_args(["gate", "log.jsonl", "--tools", "t.json", "--json"])
    assert args.handler.__name__ == "run_gate" and args.func is args.handler
    assert args.tools == "t.json" and args.json
    args = parser.parse_args(["diff", "a.json", "b.json"])
    assert args.func.__name__ == "run_diff" and (args.left, args.right) == ("a.json", "b.json")


def test_invalid_tools_in_a_logged_response_exit_2(tmp_path: Path) -> None:
    bad = {
        "object": "response",
        "tools": [{"type": "function", "name": "f", "parameters": {"type": 7}}],
        "output": [GOOD],
    }
    path = tmp_path / "log.jsonl"
    path.write_text(json.dumps({"type": "message"}) + "\n" + json.dumps(bad) + "\n")
    result = run("gate", str(path), "--json")
    assert result.returncode == 2
    assert "line 2" in result.stderr and "tools[0].parameters" in result.stderr


def test_custom_tool_items_are_classified(tmp_path: Path) -> None:
    """OpenAI's custom tool items: a call with a string input is ``ok`` (nothing to validate), an
    unfinished one fails the run, and an output is ``not_function_call``."""
    custom = {
        "type": "custom_tool_call",
        "call_id": "c9",
        "name": "apply_patch",
        "input": "*** Begin Patch",
        "status": "completed",
        "id": "ctc_1",
    }
    items = [
        custom,
        {"type": "custom_tool_call_output", "call_id": "c9", "output": "done"},
        {**custom, "status": "incomplete"},
        {**custom, "input": {"patch": 1}},
    ]
    result = run("gate", write(tmp_path, "custom.json", items), "--json")
    assert result.returncode == 1
    assert [(r["code"], r["name"]) for r in records(result.stdout)] == [
        ("ok", "apply_patch"),
        ("not_function_call", None),
        ("status", "apply_patch"),
        ("arguments_type", "apply_patch"),
    ]
