"""Eval charts: reports written by a real ``orgate eval --save``,
charted in the console and in the saved HTML report."""

from __future__ import annotations

import json
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest

from tests.console.conftest import console_client, shoot, sign_in
from tests.server_process import OrgateServer

REPO = Path(__file__).resolve().parents[2]
CASES = REPO / "examples" / "eval" / "cases.yaml"


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of two saved runs (two flaky seeds), the second compared with the first."""
    folder = tmp_path_factory.mktemp("eval")
    first = folder / "run-1.json"
    for seed, path, extra in (
        (7, first, []),
        (11, folder / "run-2.json", ["--baseline", str(first)]),
    ):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "orgate.cli",
                "eval",
                str(CASES),
                "--model",
                "orgate/flaky",
                "--runs",
                "4",
                "--seed",
                str(seed),
                "-q",
                "--save",
                str(path),
                *extra,
            ],
            capture_output=True,
            timeout=300,
            check=False,
            cwd=folder,
        )
        assert done.returncode in (0, 1), done.stderr.decode()
        assert path.exists() and path.with_suffix(".html").exists()
    return folder


def _canvas_painted(page: Any, selector: str) -> bool:
    """True when the chart's canvas has more than a background: read from a PNG screenshot of
    it (its decompressed scanlines), since the console's CSP refuses evaluated scripts."""
    png = page.locator(f"{selector} canvas").first.screenshot()
    data, pos = b"", 8
    while pos < len(png):
        length = int.from_bytes(png[pos : pos + 4], "big")
        if png[pos + 4 : pos + 8] == b"IDAT":
            data += png[pos + 8 : pos + 8 + length]
        pos += 12 + length
    return len(set(zlib.decompress(data))) > 8  # lines, labels and fills: many shades


def test_open_a_folder_of_reports_and_see_the_charts(
    watched: Any, server: OrgateServer, reports: Path
) -> None:
    page = watched()
    sign_in(page, server, "alpha")
    page.goto(f"{server.url}/console#/eval")
    page.set_input_files("#eval-files", sorted(str(p) for p in reports.glob("*.json")))
    page.locator("#eval-rates canvas").first.wait_for()
    assert _canvas_painted(page, "#eval-rates")
    legend = page.locator("#eval-rates .u-legend").inner_text()
    assert "first attempt failure rate" in legend and "budget exhaustion rate threshold" in legend
    assert page.locator("#eval-cases tbody tr").count() == 5  # the example file's cases
    assert page.locator("#eval-comparison tbody tr").count() == 3
    shoot(page, "eval")


def test_the_saved_html_report_draws_the_same_charts_offline(browser: Any, reports: Path) -> None:
    context = browser.new_context(offline=True)
    page = context.new_page()
    problems: list[str] = []
    page.on("console", lambda msg: msg.type == "error" and problems.append(msg.text))
    page.on("pageerror", lambda exc: problems.append(str(exc)))
    page.on(
        "request",
        lambda req: req.url.startswith("file://") or problems.append(f"request: {req.url}"),
    )
    page.goto((reports / "run-2.html").as_uri())
    page.locator("#eval-rates canvas").first.wait_for()
    assert _canvas_painted(page, "#eval-rates")
    assert page.locator("#eval-comparison tbody tr").count() == 3
    context.close()
    assert not problems, problems


def test_the_eval_endpoint_refuses_what_is_not_a_report(
    server: OrgateServer, reports: Path
) -> None:
    client = console_client(server, "alpha")
    saved = [{"name": p.name, "text": p.read_text()} for p in sorted(reports.glob("*.json"))]
    foreign = client.post(
        "/console/api/eval", json={"reports": saved}, headers={"X-CSRF-Token": "forged"}
    )
    assert foreign.status_code == 403 and foreign.json()["error"]["code"] == "csrf_failed"
    model = client.post("/console/api/eval", json={"reports": saved}).json()
    assert [run["rates"] for run in model["runs"]] == [
        json.loads(r["text"])["rates"] for r in saved
    ]
    bad = client.post(
        "/console/api/eval", json={"reports": [{"name": "x.json", "text": '{"hello": 1}'}]}
    )
    assert bad.status_code == 400 and "x.json" in bad.json()["error"]["message"]
