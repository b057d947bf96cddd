"""The error catalogue: sound members, the gate's codes in it, its doc table equal to it, and no
bare code string at an error's construction site in ``src/``."""

from __future__ import annotations

import ast
import pathlib
import re
import runpy

import pytest

from orgate.gate.pairing import PAIRING_KINDS
from orgate.gate.verdict import Code as GateCode
from orgate.protocol import errors
from orgate.protocol.error_codes import ErrorCode, markdown_table
from orgate.protocol.errors import ApiError
from orgate.store.base import INTERRUPTED_ERROR

ROOT = pathlib.Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "orgate"
TYPES = {
    "invalid_request_error",
    "authentication_error",
    "permission_error",
    "rate_limit_error",
    "server_error",
    "model_error",
}


@pytest.mark.parametrize("code", list(ErrorCode), ids=str)
def test_each_code_has_a_status_a_type_a_cause_and_an_action(code: ErrorCode) -> None:
    assert re.fullmatch(r"[a-z][a-z_]*[a-z]", code.value)
    assert 400 <= code.status <= 599
    assert code.type in TYPES
    for text in (code.when, code.action):
        assert text.strip() and text.endswith(".") and "|" not in text


def test_the_wire_string_is_the_value() -> None:
    error = ApiError.of(ErrorCode.UNKNOWN_PARAMETER, "m", param="p")
    assert error.body() == {
        "error": {
            "message": "m",
            "type": "invalid_request_error",
            "param": "p",
            "code": "unknown_parameter",
        }
    }
    assert type(error.code) is str
    assert (error.status, error.type) == (400, "invalid_request_error")
    assert ApiError.of(ErrorCode.UPSTREAM_ERROR, "m", status=501).status == 501


def test_named_constructors_keep_their_messages() -> None:
    assert errors.internal().body()["error"] == {
        "message": "The server had an error while processing your request.",
        "type": "server_error",
        "param": None,
        "code": "server_error",
    }
    assert errors.internal().status == 500
    assert (
        errors.unknown_parameter("text.foo").body()["error"]["message"]
        == "Unknown parameter: 'text.foo'."
    )
    assert errors.model_not_found("m").status == 404
    assert errors.method_not_allowed("PUT", "/v1/x", "GET, POST").headers == {"Allow": "GET, POST"}
    assert (
        errors.upstream_without_events("d").message
        == "upstream 'd' ended its answer without any event"
    )


def test_the_gate_codes_are_in_the_catalogue() -> None:
    """The input gate sends the gate's verdict codes and pairing kinds as 400 codes."""
    for code in [*(c for c in GateCode if c is not GateCode.OK), *PAIRING_KINDS]:
        assert ErrorCode(code).status == 400


def test_the_store_marks_interrupted_responses_with_a_catalogue_code() -> None:
    """The store does not import protocol (it stays light for its CLI):
    its one code is checked here."""
    assert ErrorCode(INTERRUPTED_ERROR["code"]) is ErrorCode.SERVER_ERROR


def test_docs_errors_md_lists_the_catalogue() -> None:
    doc = (ROOT / "docs" / "errors.md").read_text(encoding="utf-8")
    render = runpy.run_path(str(ROOT / "scripts" / "errors_doc.py"))["render"]
    assert markdown_table() in doc
    assert render(doc) == doc, "docs/errors.md is out of date: run python scripts/errors_doc.py"


# --------------------------------------------------------------------------- no bare code strings

CODES = {code.value for code in ErrorCode}
# Names that hold a code (`ERROR_CODE`, `code`): a string written under one is a second catalogue.
CODE_NAME = re.compile(r"(^|_)CODE(S)?$")


def _bare_codes(tree: ast.AST) -> list[tuple[int, str]]:
    """Code strings written at a construction site: ``code="…"``, ``{"code": "…"}``, a positional
    catalogue string passed to an error helper, or a constant named ``…CODE``."""
    found: list[tuple[int, str]] = []

    def literal(node: ast.AST | None) -> str | None:
        return (
            node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None
        )

    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg == "code" and (value := literal(kw.value)) is not None:
                    found.append((node.lineno, value))
            name = ast.unparse(node.func).rsplit(".", 1)[-1]
            if "error" in name.lower() or name.startswith("_upstream"):
                found += [(node.lineno, v) for arg in node.args if (v := literal(arg)) in CODES]
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if literal(key) == "code" and (v := literal(value)) is not None:
                    found.append((node.lineno, v))
        elif isinstance(node, ast.Compare) and ".code" in ast.unparse(node.left):
            for right in node.comparators:
                items = right.elts if isinstance(right, ast.Set | ast.Tuple | ast.List) else [right]
                found += [(node.lineno, v) for item in items if (v := literal(item)) in CODES]
        elif isinstance(node, ast.Set | ast.Tuple | ast.List) and len(node.elts) > 1:
            values = [literal(item) for item in node.elts]
            if all(v in CODES for v in values):  # a set of codes: the catalogue's members, by name
                found += [(node.lineno, v) for v in values if v is not None]
        elif isinstance(node, ast.arguments):  # def f(..., code="…")
            positional = [*node.posonlyargs, *node.args]  # the defaults are the last ones
            named = positional[len(positional) - len(node.defaults) :]
            pairs = [
                *zip(named, node.defaults, strict=True),
                *zip(node.kwonlyargs, node.kw_defaults, strict=True),
            ]
            found += [
                (arg.lineno, v)
                for arg, default in pairs
                if arg.arg == "code" and (v := literal(default)) is not None
            ]
        elif isinstance(node, ast.Assign):
            targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
            if any(
                CODE_NAME.search(t.upper()) for t in targets
            ):  # CODE = "…", code = "a" if … else "b"
                found += [
                    (node.lineno, v)
                    for sub in ast.walk(node.value)
                    if isinstance(v := literal(sub), str) and (v in CODES or sub is node.value)
                ]
    return found


def _scanned() -> list[pathlib.Path]:
    # The catalogue itself; the store's one code and the gate's own vocabulary (it imports nothing
    # of orgate) are checked against the catalogue above.
    skip = {
        SRC / "protocol" / "error_codes.py",
        SRC / "store" / "base.py",
        SRC / "gate" / "pairing.py",
    }
    return [path for path in sorted(SRC.rglob("*.py")) if path not in skip]


def test_no_bare_code_string_at_a_construction_site() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {value!r}"
        for path in _scanned()
        for line, value in _bare_codes(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert not offenders, (
        "name error codes through orgate.protocol.error_codes.ErrorCode:\n" + "\n".join(offenders)
    )


def test_the_scan_finds_bare_codes() -> None:
    sample = ast.parse(
        'raise ApiError(400, "m", code="invalid_value")\n'
        'x = {"type": "error", "code": "server_error"}\n'
        'error_bytes(408, message, "request_timeout")\n'
        'SHUTDOWN_CODE = "server_shutdown"\n'
        'if error.code == "upstream_error": pass\n'
        'def helper(message, code="unsupported_content"): pass\n'
        'code = "invalid_type" if wrong else "missing_call_id"\n'
        'FUTILE = frozenset({"upstream_redirect", "upstream_auth_failed"})\n'
        'ok = ApiError.of(ErrorCode.INVALID_VALUE, "m")\n'
    )
    found = sorted(_bare_codes(sample))
    assert [value for _, value in found] == [
        "invalid_value",
        "server_error",
        "request_timeout",
        "server_shutdown",
        "upstream_error",
        "unsupported_content",
        "invalid_type",
        "missing_call_id",
        "upstream_auth_failed",
        "upstream_redirect",
    ]


def test_the_openapi_document_lists_the_catalogue() -> None:
    from orgate.server.openapi import build_document

    doc = build_document()
    listed = doc["components"]["x-orgate-error-codes"]
    assert [row["code"] for row in listed] == [code.value for code in ErrorCode]
    assert listed[0] == {
        "code": "invalid_json",
        "status": 400,
        "type": "invalid_request_error",
        "when": ErrorCode.INVALID_JSON.when,
        "action": ErrorCode.INVALID_JSON.action,
    }
    answers = doc["paths"]["/responses"]["post"]["responses"]
    assert "`unknown_parameter`" in answers["400"]["description"]
    assert "`upstream_timeout`" in answers["504"]["description"]


def test_every_catalogued_code_is_sent_somewhere() -> None:
    """No dead rows: each code is named at a site in src/, or is one of the gate's codes (the input
    gate sends those as ``ErrorCode(verdict.code)``)."""
    text = "\n".join(
        p.read_text(encoding="utf-8") for p in SRC.rglob("*.py") if p.name != "error_codes.py"
    )
    gate = {*(c.value for c in GateCode), *PAIRING_KINDS}
    unused = [
        c.value
        for c in ErrorCode
        if c.value not in gate and not re.search(rf"ErrorCode\.{c.name}\b", text)
    ]
    assert not unused
