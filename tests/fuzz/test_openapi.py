"""``GET /openapi.json`` (orgate's own document) and a bounded schemathesis run against it.

The long run is documented in docs/operations.md (``schemathesis run ... --max-examples 1000``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.server_process import OrgateServer
from tests.support.spec import REPO, spec


def test_document(fuzz_http: httpx.Client) -> None:
    res = fuzz_http.get("/openapi.json")
    assert res.status_code == 200 and res.headers["content-type"].startswith("application/json")
    doc = res.json()
    assert doc["openapi"].startswith("3.")
    assert doc["servers"][0]["url"].endswith("/v1")
    assert doc["components"]["securitySchemes"]["ApiKeyAuth"] == {
        "type": "http",
        "scheme": "bearer",
    }
    assert doc["security"] == [{"ApiKeyAuth": []}]
    paths = doc["paths"]
    assert paths["/responses"]["post"]["operationId"] == "createResponse"
    assert {"get", "delete"} <= set(paths["/responses/{response_id}"])
    assert "get" in paths["/responses/{response_id}/input_items"]
    assert "post" in paths["/responses/{response_id}/cancel"]
    assert "get" in paths["/models"]
    assert paths["/chat/completions"]["post"]["deprecated"] is True
    for name, schema in spec()["components"][
        "schemas"
    ].items():  # the official document (tests/support/spec.py)
        served = doc["components"]["schemas"][name]
        if (
            name == "CreateResponseBody"
        ):  # `model` tightened to what orgate takes: a required string
            assert served["required"] == [*schema.get("required", []), "model"]
            assert served["properties"]["model"] == schema["properties"]["model"]["anyOf"][0]
            served = {
                **served,
                "required": schema.get("required", []),
                "properties": {**served["properties"], "model": schema["properties"]["model"]},
            }
        assert served == schema, name
    # every $ref resolves inside the document
    text = json.dumps(doc)
    for ref in {part.split('"', 1)[0] for part in text.split('"$ref": "#/components/schemas/')[1:]}:
        assert ref in doc["components"]["schemas"], ref
    # every listed path is served (no 404 from the router for a documented path)
    for path, item in paths.items():
        for method in item:
            if method.startswith("x-"):
                continue
            res = fuzz_http.request(
                method.upper(), "/v1" + path.replace("{response_id}", "resp_nope")
            )
            assert res.status_code != 405, (method, path)
            # a route answers (an unknown response id is its own 404);
            # the router's 404 says "Unknown route"
            assert not res.json().get("error", {}).get("message", "").startswith("Unknown route"), (
                method,
                path,
                res.text,
            )


def test_document_needs_no_key(target: OrgateServer) -> None:
    assert httpx.get(f"{target.url}/openapi.json").status_code == 200


def _schemathesis() -> str | None:
    """``$ORGATE_SCHEMATHESIS``, else ``.venv-fuzz/bin/schemathesis`` (its own venv:
    it pins jsonschema-rs < 0.61), else this venv's."""
    candidates = [
        os.environ.get("ORGATE_SCHEMATHESIS"),
        str(REPO / ".venv-fuzz" / "bin" / "schemathesis"),
        str(Path(sys.executable).parent / "schemathesis"),
        shutil.which("schemathesis"),
    ]
    return next((c for c in candidates if c and Path(c).is_file()), None)


@pytest.mark.timeout(420)
def test_schemathesis(target: OrgateServer, tmp_path: Path) -> None:
    """schemathesis on every documented operation: no 5xx, documented status codes,
    responses match their schemas."""
    binary = _schemathesis()
    if binary is None:
        pytest.skip(
            "schemathesis is not installed: set ORGATE_SCHEMATHESIS or create "
            ".venv-fuzz (see docs/operations.md)"
        )
    command = [
        binary,
        "run",
        f"{target.url}/openapi.json",
        "--checks",
        "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance",
        # a fixed number of examples, not --max-time: with a time budget schemathesis repeats
        # its phases until the budget runs out and the operation it is in when time is up can
        # fail Hypothesis' filter health check, whatever the API answered
        "--max-examples",
        "60",
        "--generation-database",
        "none",
        "--seed",
        "7",
        "--no-shrink",
        "--phases",
        "examples,coverage,fuzzing",
        "--header",
        f"Authorization: Bearer {target.api_key}",
        "--exclude-deprecated",
        "--request-timeout",
        "20",
        "--report",
        "junit",
        "--report-dir",
        str(tmp_path),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=360)
    assert result.returncode == 0, result.stdout[-8000:] + result.stderr[-2000:]
