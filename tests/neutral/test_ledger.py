"""The translation ledger (``orgate.neutral.ledger``): entries noted once, the refuse policy by
code and by kind (request side only), the compact header, and docs/translation.md in step
with the catalogue."""

from __future__ import annotations

import dataclasses
import runpy
from pathlib import Path

import pytest

from orgate.config import Settings
from orgate.neutral import Ledger, ModelRequest, Translation
from orgate.neutral.ledger import KINDS

ROOT = Path(__file__).resolve().parents[2]


def test_an_entry_is_noted_once() -> None:
    ledger = Ledger()
    ledger.note(Translation.HOSTED_TOOL_DROPPED, "tools[1]", "web_search")
    ledger.note(Translation.HOSTED_TOOL_DROPPED, "tools[1]", "web_search")
    ledger.note(Translation.HOSTED_TOOL_DROPPED, "tools[2]", "file_search")
    assert [(e.code, e.path) for e in ledger] == [
        ("hosted_tool_dropped", "tools[1]"),
        ("hosted_tool_dropped", "tools[2]"),
    ]


def test_a_request_shares_its_ledger_with_its_rewrites() -> None:
    request = ModelRequest(model="m", input=[])
    rewritten = dataclasses.replace(request, model="other")
    rewritten.ledger.note(Translation.DEVELOPER_AS_SYSTEM, "input[0]")
    assert request.ledger == rewritten.ledger and len(request.ledger) == 1
    assert ModelRequest(model="m", input=[]).ledger == []  # each request its own


@pytest.mark.parametrize("refuse", [{"dropped"}, {"hosted_tool_dropped"}])
def test_the_policy_names_codes_or_kinds(refuse: set[str]) -> None:
    ledger = Ledger()
    ledger.note(Translation.DEVELOPER_AS_SYSTEM, "input[0]")
    ledger.note(Translation.HOSTED_TOOL_DROPPED, "tools[1]", "web_search")
    assert ledger.refused() is None  # no policy
    ledger.refuse = frozenset(refuse)
    refused = ledger.refused()
    assert refused is not None and refused.path == "tools[1]"


def test_the_answer_side_is_never_refused() -> None:
    ledger = Ledger()
    ledger.note(Translation.UPSTREAM_ITEM_WITHHELD, "output", "web_search_call")
    ledger.refuse = frozenset({"dropped", "upstream_item_withheld"})
    assert ledger.refused() is None


def test_the_header_is_compact_and_bounded() -> None:
    ledger = Ledger()
    for i in range(14):
        ledger.note(Translation.REASONING_ITEM_DROPPED, f"input[{i}]")
    header = ledger.header()
    assert header.startswith("reasoning_item_dropped=input[0], reasoning_item_dropped=input[1]")
    assert header.endswith(", +2") and header.count("=") == 12


def test_every_code_has_a_kind_a_side_and_a_meaning() -> None:
    for code in Translation:
        assert code.kind in KINDS and code.side in ("request", "response") and code.what


def test_the_configuration_takes_codes_and_kinds_only() -> None:
    ok = Settings.model_validate({"translation": {"refuse": ["dropped", "field_dropped"]}})
    assert ok.translation.refuse == ["dropped", "field_dropped"]
    with pytest.raises(ValueError, match="unknown translation code or kind 'drop'"):
        Settings.model_validate({"translation": {"refuse": ["drop"]}})


def test_docs_translation_md_lists_the_catalogue() -> None:
    doc = (ROOT / "docs" / "translation.md").read_text(encoding="utf-8")
    render = runpy.run_path(str(ROOT / "scripts" / "translation_doc.py"))["render"]
    assert render(doc) == doc, "docs/translation.md is out of date: run scripts/translation_doc.py"
