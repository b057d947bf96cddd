"""``orgate eval``'s parts in process: a case's validation, the report's arithmetic,
the command's exits."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from orgate.cli import main as cli_main
from orgate.evaluation.run import Case, CaseError, RunResult, _case, build_report
from orgate.providers.builtin_misbehave import FLAKY_MODEL, MisbehaveSettings
from orgate.structured.metrics import StructuredMetrics
from tests.conftest import chat_model_config
from tests.support.ports import closed_port

SCHEMA_FORMAT = {"type": "json_schema", "name": "p", "schema": {"type": "object"}}
MINIMAL = {"name": "c", "prompt": "p", "format": {"type": "json_object"}}


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ([], "a case must be a mapping"),
        ({**MINIMAL, "zeta": 1, "alpha": 2}, "unknown key(s) alpha, zeta"),
        ({"prompt": "p", "format": {"type": "json_object"}}, "missing 'name'"),
        ({"name": "c", "format": {"type": "json_object"}}, "missing 'prompt'"),
        ({"name": "c", "prompt": "p"}, "missing 'format'"),
        ({**MINIMAL, "format": "json_object"}, "format must be a json_schema or json_object"),
        ({**MINIMAL, "format": {"type": "text"}}, "format must be a json_schema or json_object"),
        (
            {**MINIMAL, "format": {"type": "json_schema", "name": "p"}},
            "needs `name` and a `schema`",
        ),
        (
            {**MINIMAL, "format": {"type": "json_schema", "schema": {"type": "object"}}},
            "needs `name` and a `schema`",
        ),
        ({**MINIMAL, "max_output_tokens": 0}, "max_output_tokens must be a positive integer"),
        ({**MINIMAL, "max_output_tokens": "9"}, "max_output_tokens must be a positive integer"),
        ({**MINIMAL, "max_output_tokens": True}, "max_output_tokens must be a positive integer"),
        ({**MINIMAL, "temperature": 2.5}, "temperature must be a number from 0 to 2"),
        ({**MINIMAL, "temperature": -0.1}, "temperature must be a number from 0 to 2"),
        ({**MINIMAL, "temperature": "0"}, "temperature must be a number from 0 to 2"),
        ({**MINIMAL, "temperature": False}, "temperature must be a number from 0 to 2"),
    ],
)
def test_a_malformed_case_is_named_with_its_place(raw: Any, words: str) -> None:
    with pytest.raises(CaseError) as info:
        _case(raw, "cases.yaml case 3")
    assert str(info.value).startswith("cases.yaml case 3: ") and words in str(info.value)


def test_a_case_keeps_what_it_was_given() -> None:
    raw = {
        "name": 7,
        "prompt": 8,
        "format": SCHEMA_FORMAT,
        "semantic": "checks:positive",
        "max_output_tokens": 1,
        "instructions": "be brief",
        "temperature": 0,
    }
    case = _case(raw, "here")
    assert case == Case(
        name="7",
        prompt="8",
        format=SCHEMA_FORMAT,
        semantic=("checks:positive",),
        max_output_tokens=1,
        instructions="be brief",
        temperature=0,
    )
    assert case.format is not SCHEMA_FORMAT
    assert _case({**MINIMAL, "semantic": ["a:b", "c:d"], "temperature": 2}, "x").semantic == (
        "a:b",
        "c:d",
    )
    assert _case({**MINIMAL, "semantic": None}, "x") == Case("c", "p", {"type": "json_object"})


def test_the_report_counts_stages_retries_outcomes_and_latency() -> None:
    metrics = StructuredMetrics(CollectorRegistry())
    for name, value in (
        ("requests", 5),
        ("first_attempt_failures", 3),
        ("recovered_by_retry", 2),
        ("budget_exhausted", 1),
    ):
        getattr(metrics, name).labels(model="m", format="a").inc(value)
    results = [
        RunResult("a", 1, "ok", [None], None, 10.0),
        RunResult("a", 2, "recovered", ["schema", None], None, 30.0),
        RunResult("a", 3, "error", ["parse", "schema", "schema"], "retries", 50.0),
        RunResult("b", 1, "recovered", ["truncation", "semantic", None], None, 20.0),
        RunResult("b", 2, "passthrough", ["schema", None], None, 40.0),
        RunResult("b", 3, "upstream_error", [], None, 5.0, "upstream_error: down"),
        RunResult("b", 4, "default", ["schema"], "retries", 60.0),
    ]
    cases = [
        Case("a", "p", {"type": "json_object"}),
        Case("b", "p", SCHEMA_FORMAT),
        Case("c", "p", SCHEMA_FORMAT),
    ]
    misbehave = MisbehaveSettings.parse("truncate=0.1,seed=4")
    report = build_report(
        results, metrics, model="m", cases=cases, cases_file="f.yaml", runs=4, misbehave=misbehave
    )
    assert (report.model, report.cases_file, report.runs, report.cases) == ("m", "f.yaml", 4, 3)
    assert report.misbehave == misbehave.model_dump()
    assert report.counts == {
        "requests": 5,
        "first_attempt_failures": 3,
        "recovered_by_retry": 2,
        "budget_exhausted": 1,
    }
    assert report.rates == {
        "first_attempt_failure_rate": 0.6,
        "retry_recovery_rate": 2 / 3,
        "budget_exhaustion_rate": 0.2,
    }
    # every failed attempt, and those followed by a retry
    assert report.failures_by_stage == {"parse": 1, "schema": 5, "semantic": 1, "truncation": 1}
    assert report.retries_by_stage == {"parse": 1, "schema": 3, "semantic": 1, "truncation": 1}
    # judged requests only: pass-throughs and upstream errors are not the net's verdicts
    assert report.retries_used == {"0": 2, "1": 1, "2": 2}
    assert report.outcomes == {
        "default": 1,
        "error": 1,
        "ok": 1,
        "passthrough": 1,
        "recovered": 2,
        "upstream_error": 1,
    }
    assert report.latency_ms == {"p50": 30.0, "p95": 60.0, "max": 60.0}
    assert report.per_case == [
        {
            "name": "a",
            "format": "json_object",
            "requests": 3,
            "first_attempt_failure_rate": 2 / 3,
            "budget_exhaustion_rate": 1 / 3,
            "retries": 3,
            "p50_ms": 30.0,
        },
        {
            "name": "b",
            "format": "p",
            "requests": 2,
            "first_attempt_failure_rate": 1.0,
            "budget_exhaustion_rate": 0.5,
            "retries": 3,  # a pass-through's retries too
            "p50_ms": 20.0,
        },
        {
            "name": "c",
            "format": "p",
            "requests": 0,
            "first_attempt_failure_rate": 0.0,
            "budget_exhaustion_rate": 0.0,
            "retries": 0,
            "p50_ms": 0.0,
        },
    ]


def test_an_empty_report_has_zero_latency() -> None:
    report = build_report(
        [],
        StructuredMetrics(CollectorRegistry()),
        model="m",
        cases=[],
        cases_file="f",
        runs=1,
        misbehave=None,
    )
    assert report.latency_ms == {"p50": 0.0, "p95": 0.0, "max": 0.0}
    assert report.misbehave is None and report.per_case == [] and report.outcomes == {}


# --------------------------------------------------------------------------- the command


@pytest.fixture
def cases_file(tmp_path: Path) -> Path:
    path = tmp_path / "cases.yaml"
    path.write_text(
        "- name: anything\n  prompt: say json\n  format: {type: json_object}\n", encoding="utf-8"
    )
    return path


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli_main(["eval", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_runs_below_one_and_an_unreadable_baseline_exit_2(
    capsys: pytest.CaptureFixture[str], cases_file: Path, tmp_path: Path
) -> None:
    code, _, err = run_cli(capsys, str(cases_file), "--model", "orgate/echo", "--runs", "0")
    assert code == 2 and "--runs must be at least 1" in err
    missing = tmp_path / "nowhere.json"
    code, _, err = run_cli(
        capsys, str(cases_file), "--model", "orgate/echo", "--baseline", str(missing)
    )
    assert code == 2 and "nowhere.json" in err
    not_json = tmp_path / "baseline.json"
    not_json.write_text("{", encoding="utf-8")
    code, _, err = run_cli(
        capsys, str(cases_file), "--model", "orgate/echo", "--baseline", str(not_json)
    )
    assert code == 2


def test_the_case_files_folder_is_importable_once(
    capsys: pytest.CaptureFixture[str], cases_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))
    for _ in range(2):
        code, _, err = run_cli(capsys, str(cases_file), "--model", "orgate/echo", "-q", "--json")
        assert code == 0, err
    assert sys.path.count(str(cases_file.parent.resolve())) == 1


def test_a_seed_overrides_the_misbehaviour_of_the_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "cases.yaml"
    path.write_text(
        "misbehave: {truncate: 0.5, seed: 1}\n"
        "cases:\n  - name: anything\n    prompt: say json\n    format: {type: json_object}\n",
        encoding="utf-8",
    )
    code, out, err = run_cli(capsys, str(path), "--model", FLAKY_MODEL, "-q", "--json")
    assert code == 0, err
    assert json.loads(out)["report"]["misbehave"]["seed"] == 1
    assert json.loads(out)["report"]["misbehave"]["truncate"] == 0.5
    code, out, err = run_cli(
        capsys, str(path), "--model", FLAKY_MODEL, "-q", "--json", "--seed", "9"
    )
    assert code == 0, err
    assert json.loads(out)["report"]["misbehave"]["seed"] == 9
    assert json.loads(out)["report"]["misbehave"]["truncate"] == 0.5
    code, out, err = run_cli(
        capsys, str(path), "--model", FLAKY_MODEL, "-q", "--json", "--misbehave", "truncate=0"
    )
    assert code == 0, err
    assert json.loads(out)["report"]["misbehave"]["truncate"] == 0
    plain = tmp_path / "plain.yaml"
    plain.write_text(path.read_text().split("\n", 1)[1], encoding="utf-8")
    code, out, err = run_cli(
        capsys, str(plain), "--model", FLAKY_MODEL, "-q", "--json", "--seed", "5"
    )
    assert code == 0, err
    assert json.loads(out)["report"]["misbehave"] == MisbehaveSettings(seed=5).model_dump()


def test_upstream_failures_are_reported_apart_from_the_rates(
    capsys: pytest.CaptureFixture[str], cases_file: Path, tmp_path: Path
) -> None:
    with closed_port() as port:
        config = tmp_path / "orgate.toml"
        config.write_text(chat_model_config(f"http://127.0.0.1:{port}/v1"), encoding="utf-8")
        code, out, err = run_cli(
            capsys, str(cases_file), "--model", "fake-chat", "--config", str(config), "-q", "--json"
        )
        assert code == 0, err
        report = json.loads(out)["report"]
        assert report["outcomes"] == {"upstream_error": 1} and report["counts"]["requests"] == 0
        assert "1 request(s) failed upstream (not counted in the rates)" in err


def test_logs_are_quiet_unless_verbose(
    capsys: pytest.CaptureFixture[str], cases_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logger = logging.getLogger("orgate.structured")
    monkeypatch.setattr(logger, "propagate", True)
    monkeypatch.setattr(logger, "handlers", [])
    code, _, _ = run_cli(capsys, str(cases_file), "--model", "orgate/echo", "-q", "-v", "--json")
    assert code == 0 and logger.propagate and logger.handlers == []
    code, _, _ = run_cli(capsys, str(cases_file), "--model", "orgate/echo", "-q", "--json")
    assert code == 0 and not logger.propagate
    assert any(isinstance(h, logging.NullHandler) for h in logger.handlers)


def test_the_html_report_charts_the_baseline_as_the_earlier_run(
    capsys: pytest.CaptureFixture[str], cases_file: Path, tmp_path: Path
) -> None:
    def charted_runs(html: Path) -> int:
        text = html.read_text(encoding="utf-8")
        start = text.index('id="eval-model">') + len('id="eval-model">')
        return len(json.loads(text[start : text.index("</script>", start)])["runs"])

    first = tmp_path / "first.json"
    code, _, err = run_cli(
        capsys, str(cases_file), "--model", "orgate/echo", "-q", "--save", str(first)
    )
    assert code == 0, err
    assert charted_runs(first.with_suffix(".html")) == 1
    second = tmp_path / "second.json"
    code, _, err = run_cli(
        capsys,
        str(cases_file),
        "--model",
        "orgate/echo",
        "-q",
        "--save",
        str(second),
        "--baseline",
        str(first),
    )
    assert code == 0, err
    assert charted_runs(second.with_suffix(".html")) == 2
