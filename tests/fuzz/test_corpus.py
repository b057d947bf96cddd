"""The seed corpus (tests/fuzz/corpus/*.json, raw bytes, many of them hostile):
no 5xx, errors in the spec shape.

Add a file here for every input that ever broke the server.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.fuzz.conftest import check_answer
from tests.hardening.conftest import sse_events

CORPUS = sorted((Path(__file__).parent / "corpus").glob("*.json"))
# Built-in directives that fail on purpose with a 5xx (documented in docs/builtin-model.md).
EXPECTED_5XX = {"directive_fail": 500}
# Known gaps (none left): client mistakes that would still surface as 500 model_error,
# xfailed by name.
KNOWN: dict[str, str] = {}


@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_corpus(fuzz_http: httpx.Client, path: Path) -> None:
    if path.stem in KNOWN:
        pytest.xfail(KNOWN[path.stem])
    for endpoint in ("/v1/responses", "/v1/chat/completions"):
        res = fuzz_http.post(
            endpoint, content=path.read_bytes(), headers={"Content-Type": "application/json"}
        )
        if endpoint == "/v1/responses" and path.stem in EXPECTED_5XX:
            assert res.status_code == EXPECTED_5XX[path.stem]
            assert set(res.json()["error"]) == {"message", "type", "param", "code"}
            continue
        check_answer(res)
        if endpoint == "/v1/responses" and res.headers.get("content-type", "").startswith(
            "text/event-stream"
        ):
            events = sse_events(res.text)
            assert res.text.endswith("data: [DONE]\n\n")
            assert events[-1]["type"] in (
                "response.completed",
                "response.failed",
                "response.incomplete",
            )
    assert fuzz_http.get("/healthz").status_code == 200


def test_corpus_is_there() -> None:
    assert len(CORPUS) >= 40
