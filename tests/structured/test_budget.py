"""Budget resolution, overrides (header / body) and max-token growth."""

from __future__ import annotations

import pytest

from orgate.protocol.errors import ApiError
from orgate.structured.budget import Budget, BudgetOverride, Clock, grow_max_tokens
from orgate.structured.settings import StructuredPolicy, StructuredSettings


def test_header_parse() -> None:
    assert BudgetOverride.from_header("retries=1, seconds=5") == BudgetOverride(
        retries=1, seconds=5.0
    )
    assert BudgetOverride.from_header("semantic_retries=0,truncation_retries=3") == BudgetOverride(
        semantic_retries=0, truncation_retries=3
    )
    assert BudgetOverride.from_header("") == BudgetOverride()


@pytest.mark.parametrize(
    "value",
    ["retries", "tries=1", "retries=-1", "retries=1.5", "seconds=0", "seconds=nan", "seconds=x"],
)
def test_bad_header_is_a_400(value: str) -> None:
    with pytest.raises(ApiError) as info:
        BudgetOverride.from_header(value)
    assert info.value.status == 400 and info.value.code == "invalid_structured_budget"
    assert info.value.param == "X-Orgate-Structured-Budget"


def test_body_field() -> None:
    assert BudgetOverride.from_mapping({"retries": 0, "seconds": 2.5}) == BudgetOverride(
        retries=0, seconds=2.5
    )
    with pytest.raises(ApiError, match="unknown key"):
        BudgetOverride.from_mapping({"retry": 1})
    with pytest.raises(ApiError):
        BudgetOverride.from_mapping({"retries": True})
    body, header = BudgetOverride(retries=1, seconds=9), BudgetOverride(seconds=2)
    assert body.merged(header) == BudgetOverride(retries=1, seconds=2)


def test_resolve_config_format_override_and_ceilings() -> None:
    settings = StructuredSettings(
        retries=2, seconds=30, formats={"p": {"retries": 4, "semantic_retries": 0}}
    )
    policy = StructuredPolicy.from_settings(settings)
    assert Budget.resolve(settings, policy.format("other")) == Budget(2, 1, 2, 30)
    assert Budget.resolve(settings, policy.format("p")) == Budget(4, 0, 2, 30)
    assert Budget.resolve(
        settings, policy.format("p"), BudgetOverride(retries=99, seconds=999)
    ) == Budget(5, 0, 2, 120)


def test_clock() -> None:
    assert Clock(None).remaining() is None and not Clock(None).expired()
    assert Clock(0.000001, now=0.0).expired()


def test_grow_max_tokens() -> None:
    assert grow_max_tokens(100, 100, 1000, 2.0) == 200
    assert grow_max_tokens(600, 600, 1000, 2.0) == 1000
    assert grow_max_tokens(1000, 1000, 1000, 2.0) is None
    assert grow_max_tokens(None, 300, 1000, 2.0) == 600
    assert grow_max_tokens(None, None, 1000, 2.0) == 1000
    assert grow_max_tokens(1, 1, 10, 1.1) == 2
