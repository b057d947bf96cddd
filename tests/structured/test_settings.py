"""Settings validation and resolution of ``module:function`` checks."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from orgate.structured.settings import AskedCheck, StructuredPolicy, StructuredSettings, as_check

MOD = "tests.structured.checks_fixture"


def test_defaults() -> None:
    s = StructuredSettings()
    assert (s.retries, s.semantic_retries, s.seconds, s.strip_fences, s.truncation_growth) == (
        2,
        1,
        30.0,
        False,
        2.0,
    )
    assert s.on_exhaustion == "error" and s.default_output_cap == 32768


def test_checks_are_imported_at_start() -> None:
    s = StructuredSettings.model_validate(
        {
            "formats": {
                "product": {
                    "semantic": [f"{MOD}:price_non_negative", f"{MOD}:sku_allowed"],
                    "default": None,
                    "on_exhaustion": "default",
                }
            }
        }
    )
    policy = StructuredPolicy.from_settings(s)
    fmt = policy.format("product")
    assert [name for name, _ in fmt.checks] == [f"{MOD}:price_non_negative", f"{MOD}:sku_allowed"]
    assert fmt.checks[1][1]({"sku": "Z"}) == ["sku: 'Z' is not in the catalogue (A1, B2)"]
    assert fmt.has_default and fmt.default is None  # null is a legal default value
    assert (
        not policy.format("other").has_default and policy.format("other").on_exhaustion == "error"
    )


@pytest.mark.parametrize(
    ("ref", "words"),
    [
        (f"{MOD}:missing", "no attribute"),
        ("no_such_module_xyz:f", "cannot import"),
        (f"{MOD}:NOT_CALLABLE", "not callable"),
    ],
)
def test_bad_check_reference_fails_start(ref: str, words: str) -> None:
    s = StructuredSettings(formats={"p": {"semantic": [ref]}})
    with pytest.raises(ValueError, match=words):
        StructuredPolicy.from_settings(s)


def test_invalid_settings() -> None:
    with pytest.raises(ValidationError):
        StructuredSettings(formats={"p": {"semantic": ["no-colon"]}})
    with pytest.raises(ValidationError, match="needs a `default`"):
        StructuredSettings(formats={"p": {"on_exhaustion": "default"}})
    with pytest.raises(ValidationError):
        StructuredSettings(truncation_growth=1.0)
    with pytest.raises(ValidationError):
        StructuredSettings(unknown=1)  # type: ignore[call-arg]


def test_a_check_taking_two_arguments_is_given_what_was_asked() -> None:
    def one(value: Any) -> list[str]:
        return []

    def two(value: Any, asked: str) -> list[str]:
        return [asked]

    assert as_check(one) is one and as_check(len) is len  # a builtin: the value only
    wrapped = as_check(two)
    assert isinstance(wrapped, AskedCheck) and wrapped({}, "the input") == ["the input"]
