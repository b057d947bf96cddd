"""The OpenAPI document the package ships is the official one, byte for byte.

Tests validate against ``../shared/spec`` when the checkout sits beside it and against
the packaged copy otherwise (``tests/support/spec.py``); both must then be the same
document, as must what ``GET /openapi.json`` is built from.
"""

from __future__ import annotations

import json

import pytest

from tests.support.spec import PACKAGED_SPEC, SHARED_SPEC, spec, spec_path


def test_the_packaged_copy_is_the_official_document() -> None:
    if not SHARED_SPEC.is_file():
        pytest.skip(
            f"no official copy at {SHARED_SPEC} (a checkout elsewhere): the packaged copy is used"
        )
    assert PACKAGED_SPEC.read_bytes() == SHARED_SPEC.read_bytes()


def test_the_document_in_use_is_the_2026_04_24_spec() -> None:
    assert spec_path().is_file()
    document = spec()
    assert document == json.loads(PACKAGED_SPEC.read_text(encoding="utf-8"))
    assert "CreateResponseBody" in document["components"]["schemas"]
    assert "ResponseResource" in document["components"]["schemas"]
