"""Semantic checks the test server imports as ``e2e_checks:NAME``
(this folder is on its PYTHONPATH)."""

from __future__ import annotations

from typing import Any


def price_non_negative(value: Any) -> list[str]:
    price = value.get("price") if isinstance(value, dict) else None
    if isinstance(price, int | float) and price < 0:
        return [f"price: must be >= 0, got {price}"]
    return []
