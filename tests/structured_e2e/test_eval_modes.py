"""``orgate eval --modes``: the same cases in several modes side by side, offline against the
built-in ``orgate/flaky`` model — one table, one chart, the rates per mode, the regression
rule per mode."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from orgate.cli import main as cli_main
from orgate.providers.builtin_misbehave import FLAKY_MODEL

REPO = Path(__file__).resolve().parents[2]
CASES = REPO / "examples" / "eval" / "cases.yaml"
CALM = "truncate=0,wrong_type=0.05,extra_key=0,missing_key=0"

SEMANTIC_CASES = """
cases:
  - name: priced
    prompt: A1 costs 12.5
    semantic: ["modes_checks:never_right"]
    format:
      type: json_schema
      name: priced
      strict: true
      schema:
        type: object
        properties: {sku: {type: string}, price: {type: number}}
        required: [sku, price]
        additionalProperties: false
"""
CHECKS = '''
def never_right(value, asked):
    """A check of two parameters: it reads what was asked, and never agrees."""
    return [f"price: not in {asked!r}"]
'''


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli_main(["eval", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def modes_of(out: str) -> dict[str, dict[str, Any]]:
    return {report["mode"]: report for report in json.loads(out)["modes"]}


def test_every_mode_is_measured_and_sent_as_it_says(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys, str(CASES), "--model", FLAKY_MODEL, "--runs", "4", "-q", "--json", "--modes", "all"
    )
    assert code == 0, err
    modes = modes_of(out)
    assert list(modes) == ["prompt", "json_object", "constrained", "constrained+semantic"]
    assert set(modes["prompt"]["modes_used"]) == {"instructions"}
    assert set(modes["json_object"]["modes_used"]) == {"json_object", "json_object_instructions"}
    assert "json_schema" in modes["constrained"]["modes_used"]
    for report in modes.values():
        assert report["counts"]["requests"] == 20
        assert report["upstream_calls"]["mean"] >= 1
        first_failures = sum(report["first_attempt_stages"].values())
        assert first_failures == report["counts"]["first_attempt_failures"]
    # the built-in model answers a schema it is given: the constrained modes do far better
    constrained = modes["constrained"]["rates"]["budget_exhaustion_rate"]
    assert constrained < modes["prompt"]["rates"]["budget_exhaustion_rate"]


def test_the_semantic_layer_shows_apart_and_reads_what_was_asked(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    cases = tmp_path / "cases.yaml"
    cases.write_text(SEMANTIC_CASES)
    (tmp_path / "modes_checks.py").write_text(CHECKS)
    code, out, err = run(
        capsys,
        str(cases),
        "--model",
        FLAKY_MODEL,
        "--misbehave",
        "truncate=0",
        "-q",
        "--json",
        "--modes",
        "constrained,constrained+semantic",
    )
    assert code == 0, err
    modes = modes_of(out)
    assert modes["constrained"]["outcomes"] == {"ok": 1}  # no semantic check: valid at once
    semantic = modes["constrained+semantic"]
    assert semantic["first_attempt_stages"] == {"semantic": 1}
    assert semantic["failures_by_stage"] == {"semantic": 2}  # its retry failed it too
    assert semantic["upstream_calls"]["mean"] == 2


def test_the_comparison_is_saved_and_a_baseline_is_compared_mode_by_mode(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    saved = tmp_path / "modes.json"
    argv = [
        str(CASES),
        "--model",
        FLAKY_MODEL,
        "--runs",
        "4",
        "-q",
        "--modes",
        "prompt,constrained",
    ]
    code, out, err = run(capsys, *argv, "--misbehave", CALM, "--save", str(saved))
    assert code == 0, err
    assert "calls/req" in out and "constrained sent as:" in out
    markdown = saved.with_suffix(".md").read_text()
    assert "modes side by side" in markdown and "| mode | requests |" in markdown
    assert "budget exhaustion rate\n  prompt" in markdown  # the chart: a bar per mode and rate
    html = saved.with_suffix(".html").read_text()
    assert "modes side by side" in html and '"modes": [{"mode": "prompt"' in html
    # the same run compares clean; a worse one regresses in the mode that got worse
    code, out, err = run(capsys, *argv, "--misbehave", CALM, "--baseline", str(saved))
    assert code == 0 and "REGRESSION" not in out, out
    code, out, err = run(capsys, *argv, "--baseline", str(saved))  # the default, worse rates
    assert code == 1 and "regression against the baseline" in err
    assert "constrained" in out.split("against the baseline")[1]


def test_an_unknown_mode_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, str(CASES), "--model", FLAKY_MODEL, "--modes", "prompt,grammar")
    assert code == 2 and "unknown mode(s) grammar" in err
