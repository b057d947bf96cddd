"""Semantic checks referenced from config in the tests (``module:function``)."""

from __future__ import annotations

from typing import Any

ALLOWED_SKUS = {"A1", "B2"}


def price_non_negative(value: Any) -> list[str]:
    price = value.get("price") if isinstance(value, dict) else None
    return (
        [f"price: must be >= 0, got {price}"]
        if isinstance(price, int | float) and price < 0
        else []
    )


def sku_allowed(value: Any) -> list[str]:
    sku = value.get("sku") if isinstance(value, dict) else None
    return (
        []
        if sku in ALLOWED_SKUS
        else [f"sku: {sku!r} is not in the catalogue ({', '.join(sorted(ALLOWED_SKUS))})"]
    )


NOT_CALLABLE = 3
