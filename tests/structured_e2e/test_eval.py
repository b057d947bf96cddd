"""``orgate eval`` in-process against the built-in ``orgate/flaky`` model,
and its misbehaviour plan."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from orgate.cli import main as cli_main
from orgate.evaluation.run import (
    CaseError,
    EvalReport,
    compare,
    load_cases,
    to_markdown,
)
from orgate.neutral import Capabilities, Deployment, Finish, ModelRequest, TextDelta, TextFormat
from orgate.protocol import UserMessageItemParam
from orgate.providers.builtin import BuiltinProvider
from orgate.providers.builtin_misbehave import (
    FLAKY_MODEL,
    FlakyProvider,
    MisbehaveSettings,
    attempt_key,
    flaky_wrapper,
)

REPO = Path(__file__).resolve().parents[2]
CASES = REPO / "examples" / "eval" / "cases.yaml"
PRODUCT = {
    "type": "object",
    "properties": {"sku": {"type": "string"}, "price": {"type": "number"}},
    "required": ["sku", "price"],
    "additionalProperties": False,
}


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli_main(["eval", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def eval_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code, out, err = run_cli(capsys, str(CASES), "--model", FLAKY_MODEL, "-q", "--json", *argv)
    assert code == 0, err
    return json.loads(out)["report"]


# --------------------------------------------------------------------------- the example file


def test_example_file_gives_exact_reproducible_rates(capsys: pytest.CaptureFixture[str]) -> None:
    first = eval_json(capsys, "--runs", "20")
    assert first["counts"] == {
        "requests": 100,
        "first_attempt_failures": 51,
        "recovered_by_retry": 44,
        "budget_exhausted": 7,
    }
    assert first["rates"]["first_attempt_failure_rate"] == pytest.approx(0.51)
    assert first["rates"]["retry_recovery_rate"] == pytest.approx(44 / 51)
    assert first["rates"]["budget_exhaustion_rate"] == pytest.approx(0.07)
    assert first["failures_by_stage"] == {"schema": 39, "truncation": 46}
    assert first["retries_by_stage"] == {"schema": 37, "truncation": 41}
    assert first["outcomes"] == {"error": 7, "ok": 49, "recovered": 44}
    assert first["retries_used"] == {"0": 49, "1": 34, "2": 8, "3": 8, "4": 1}
    assert first["misbehave"] == {
        "truncate": 0.1,
        "wrong_type": 0.15,
        "extra_key": 0.05,
        "missing_key": 0.1,
        "seed": 7,
    }
    assert set(first["latency_ms"]) == {"p50", "p95", "max"}
    again = eval_json(capsys, "--runs", "20")
    for key in (
        "counts",
        "rates",
        "failures_by_stage",
        "retries_by_stage",
        "outcomes",
        "retries_used",
        "per_case",
    ):
        if key == "per_case":
            strip = [{k: v for k, v in row.items() if k != "p50_ms"} for row in again[key]]
            assert strip == [{k: v for k, v in row.items() if k != "p50_ms"} for row in first[key]]
        else:
            assert again[key] == first[key]


def test_well_behaved_model_only_fails_the_truncation_case(
    capsys: pytest.CaptureFixture[str],
) -> None:
    report = eval_json(
        capsys, "--runs", "2", "--misbehave", "truncate=0,wrong_type=0,extra_key=0,missing_key=0"
    )
    assert report["counts"]["requests"] == 10
    # catalogue_page: max_output_tokens 40 is too low for its first attempt
    assert report["failures_by_stage"] == {"truncation": 2}
    assert report["outcomes"] == {"ok": 8, "recovered": 2}
    assert report["rates"]["budget_exhaustion_rate"] == 0


def test_another_seed_gives_other_but_reproducible_numbers(
    capsys: pytest.CaptureFixture[str],
) -> None:
    a = eval_json(capsys, "--runs", "4", "--seed", "11")
    b = eval_json(capsys, "--runs", "4", "--seed", "11")
    assert a["misbehave"]["seed"] == 11
    assert a["counts"] == b["counts"] and a["outcomes"] == b["outcomes"]


def test_pretty_output_and_saved_report(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    save = tmp_path / "out" / "run.json"
    code, out, err = run_cli(
        capsys, str(CASES), "--model", FLAKY_MODEL, "--runs", "20", "-q", "--save", str(save)
    )
    assert code == 0, err
    for needle in (
        "first attempt failure rate",
        "51.0%",
        "86.3%",
        "7.0%",
        "failures by stage",
        "p50",
        "p95",
    ):
        assert needle in out
    data = json.loads(save.read_text())
    assert data["counts"]["requests"] == 100 and data["model"] == FLAKY_MODEL
    md = save.with_suffix(".md").read_text()
    assert "# orgate eval — orgate/flaky" in md
    assert "budget exhaustion rate       " + "█" * 3 + "·" * 37 + "   7.0%" in md
    assert "| catalogue_page | catalogue_page | 20 |" in md
    assert f"saved {save}" in err.replace("\n", "")  # rich wraps long paths at the terminal width


# --------------------------------------------------------------------------- baseline


def test_baseline_regression_exits_non_zero(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    calm = tmp_path / "calm.json"
    code, _, err = run_cli(
        capsys,
        str(CASES),
        "--model",
        FLAKY_MODEL,
        "--runs",
        "4",
        "-q",
        "--save",
        str(calm),
        "--misbehave",
        "truncate=0,wrong_type=0.05,extra_key=0,missing_key=0",
    )
    assert code == 0, err
    code, out, err = run_cli(
        capsys, str(CASES), "--model", FLAKY_MODEL, "--runs", "4", "-q", "--baseline", str(calm)
    )
    assert code == 1
    assert "REGRESSION" in out and "regression against the baseline" in err
    code, out, err = run_cli(
        capsys,
        str(CASES),
        "--model",
        FLAKY_MODEL,
        "--runs",
        "4",
        "-q",
        "--baseline",
        str(calm),
        "--misbehave",
        "truncate=0,wrong_type=0.05,extra_key=0,missing_key=0",
    )
    assert code == 0, err
    assert "REGRESSION" not in out


def report(first_attempt: float, exhaustion: float) -> EvalReport:
    return EvalReport(
        model="m",
        cases_file="c",
        runs=1,
        cases=1,
        misbehave=None,
        counts={
            "requests": 100,
            "first_attempt_failures": 0,
            "recovered_by_retry": 0,
            "budget_exhausted": 0,
        },
        rates={
            "first_attempt_failure_rate": first_attempt,
            "retry_recovery_rate": 0.5,
            "budget_exhaustion_rate": exhaustion,
        },
        failures_by_stage={},
        retries_by_stage={},
        retries_used={},
        outcomes={},
        latency_ms={"p50": 0, "p95": 0, "max": 0},
    )


@pytest.mark.parametrize(
    ("now", "regressed"),
    [
        ((0.20, 0.05), set()),
        ((0.249, 0.059), set()),
        ((0.25, 0.05), {"first_attempt_failure_rate"}),
        ((0.20, 0.06), {"budget_exhaustion_rate"}),
        ((0.30, 0.10), {"first_attempt_failure_rate", "budget_exhaustion_rate"}),
        ((0.10, 0.00), set()),
    ],
)
def test_regression_thresholds(now: tuple[float, float], regressed: set[str]) -> None:
    rows = compare(report(*now), report(0.20, 0.05))
    assert {name for name, _, _, bad in rows if bad} == regressed
    assert ("REGRESSION" in to_markdown(report(*now), rows)) == bool(regressed)


# --------------------------------------------------------------------------- case files


def test_jsonl_cases_and_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    good = tmp_path / "cases.jsonl"
    good.write_text(
        json.dumps(
            {
                "name": "p",
                "prompt": "a product",
                "format": {"type": "json_schema", "name": "p", "schema": PRODUCT},
            }
        )
        + "\n"
        + json.dumps(
            {
                "name": "o",
                "prompt": "json please",
                "format": {"type": "json_object"},
                "max_output_tokens": 16,
            }
        )
        + "\n"
    )
    assert [c.name for c in load_cases(good).cases] == ["p", "o"]
    code, out, err = run_cli(
        capsys, str(good), "--model", "orgate/echo", "-q", "--json", "--runs", "3"
    )
    assert code == 0, err
    assert json.loads(out)["report"]["outcomes"] == {"ok": 6}

    bad = tmp_path / "bad.yaml"
    bad.write_text("cases:\n  - name: x\n    prompt: y\n    format: {type: text}\n")
    with pytest.raises(CaseError, match="json_schema or json_object"):
        load_cases(bad)
    code, _, err = run_cli(capsys, str(bad), "--model", "orgate/echo")
    assert code == 2 and "json_schema or json_object" in err
    code, _, err = run_cli(capsys, str(good), "--model", "nope")
    assert code == 2 and "unknown model 'nope'" in err
    code, _, err = run_cli(
        capsys, str(good), "--model", FLAKY_MODEL, "--misbehave", "truncate=0.9,wrong_type=0.9"
    )
    assert code == 2 and "more than 1" in err


# --------------------------------------------------------------------------- the misbehaviour plan


def test_plan_is_seeded_and_follows_the_rates() -> None:
    rates = MisbehaveSettings.parse(
        "truncate=0.1,wrong_type=0.2,extra_key=0.3,missing_key=0.1,seed=3"
    )
    picks = [rates.choose(f"k{i}") for i in range(20000)]
    assert picks == [rates.choose(f"k{i}") for i in range(20000)]
    share = {kind: picks.count(kind) / len(picks) for kind in set(picks)}
    for kind, want in {
        "truncate": 0.1,
        "wrong_type": 0.2,
        "extra_key": 0.3,
        "missing_key": 0.1,
        "valid": 0.3,
    }.items():
        assert share[kind] == pytest.approx(want, abs=0.015)
    other = rates.model_copy(update={"seed": 4})
    assert [other.choose(f"k{i}") for i in range(50)] != picks[:50]
    with pytest.raises(ValueError):
        MisbehaveSettings.parse("often=1")


def request(run: int, **kw: Any) -> ModelRequest:
    return ModelRequest(
        model="orgate/flaky",
        input=[UserMessageItemParam(content="a product")],
        text_format=TextFormat("json_schema", "product", PRODUCT, True),
        metadata={"orgate_eval_run": str(run)},
        **kw,
    )


async def answer(provider: FlakyProvider, req: ModelRequest) -> tuple[str, str]:
    events = [ev async for ev in provider.stream(req)]
    finish = events[-1]
    assert isinstance(finish, Finish)
    return "".join(e.text for e in events if isinstance(e, TextDelta)), finish.reason


@pytest.mark.parametrize(
    ("kind", "problem"),
    [
        ("truncate", None),
        ("wrong_type", "is not of type 'string'"),
        ("extra_key", "Additional properties"),
        ("missing_key", "'sku' is a required property"),
    ],
)
def test_each_misbehaviour_breaks_the_answer(kind: str, problem: str | None) -> None:
    dep = Deployment(FLAKY_MODEL, "builtin", FLAKY_MODEL, capabilities=Capabilities())
    provider = FlakyProvider(BuiltinProvider(dep), MisbehaveSettings.parse(f"{kind}=1,seed=1"))
    text, reason = asyncio.run(answer(provider, request(1)))
    if kind == "truncate":
        assert reason == "length"
        with pytest.raises(json.JSONDecodeError):
            json.loads(text)
        return
    assert reason == "stop"
    errors = [e.message for e in Draft202012Validator(PRODUCT).iter_errors(json.loads(text))]
    assert problem is not None and any(problem in e for e in errors), errors


def test_attempt_key_tells_runs_and_retries_apart() -> None:
    assert attempt_key(request(1)) == attempt_key(request(1))
    assert attempt_key(request(1)) != attempt_key(request(2))
    assert attempt_key(request(1)) != attempt_key(request(1, max_output_tokens=64))


def test_registry_wrapper_only_touches_the_flaky_model() -> None:
    wrap = flaky_wrapper(MisbehaveSettings())
    flaky = Deployment(FLAKY_MODEL, "builtin", FLAKY_MODEL)
    echo = Deployment("orgate/echo", "builtin", "orgate/echo")
    assert isinstance(wrap(BuiltinProvider(flaky), flaky), FlakyProvider)
    assert isinstance(wrap(BuiltinProvider(echo), echo), BuiltinProvider)


def test_an_eval_against_a_configured_upstream_closes_its_http_session(
    fake_chat: Any, tmp_path: Path
) -> None:
    """A real upstream's connection pool is closed at the end: no "Unclosed client session"."""
    import subprocess
    import sys

    from tests.conftest import chat_model_config

    fake_chat.reset()
    config = tmp_path / "orgate.toml"
    config.write_text(chat_model_config(fake_chat.base_url), encoding="utf-8")
    cases = tmp_path / "cases.yaml"
    cases.write_text(
        "- name: anything\n  prompt: say json\n  format: {type: json_object}\n", encoding="utf-8"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-X",
            "dev",
            "-m",
            "orgate.cli",
            "eval",
            str(cases),
            "--model",
            "fake-chat",
            "--config",
            str(config),
            "-q",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["report"]["counts"]["requests"] == 1
    assert "Unclosed" not in done.stderr, done.stderr
