"""Semantic checks used by ``examples/eval/cases.yaml`` (``"eval_checks:NAME"``,
with this folder on PYTHONPATH)."""

from __future__ import annotations

import re
from typing import Any


def quantity_positive(value: Any) -> list[str]:
    """Every order line must have a quantity of at least 1."""
    lines = value.get("lines") if isinstance(value, dict) else None
    errors = []
    for index, line in enumerate(lines or []):
        qty = line.get("quantity") if isinstance(line, dict) else None
        if isinstance(qty, int | float) and qty < 1:
            errors.append(f"lines[{index}].quantity: must be >= 1, got {qty}")
    return errors


def email_has_at(value: Any) -> list[str]:
    """``email`` looks like an address (one "@", a dot after it)."""
    email = value.get("email") if isinstance(value, dict) else None
    if not isinstance(email, str) or email.count("@") != 1 or "." not in email.split("@")[1]:
        return [f"email: not an address: {email!r}"]
    return []


def total_is_sum(value: Any) -> list[str]:
    """``total`` equals the sum of the items' ``price`` (to the cent)."""
    if not isinstance(value, dict):
        return []
    prices = [i.get("price") for i in value.get("items") or [] if isinstance(i, dict)]
    if not all(isinstance(p, int | float) for p in prices):
        return []
    total = value.get("total")
    if not isinstance(total, int | float) or abs(total - sum(prices)) > 0.005:
        return [f"total: {total!r} is not the sum of the item prices ({sum(prices):.2f})"]
    return []


def start_before_end(value: Any) -> list[str]:
    """``start`` (an ISO date) is not after ``end``."""
    if (
        isinstance(value, dict)
        and isinstance(value.get("start"), str)
        and isinstance(value.get("end"), str)
        and value["start"] > value["end"]
    ):
        return [f"start {value['start']} is after end {value['end']}"]
    return []


def non_empty_strings(value: Any) -> list[str]:
    """No string value at the top level is empty or only spaces."""
    if not isinstance(value, dict):
        return []
    return [f"{k}: is empty" for k, v in value.items() if isinstance(v, str) and not v.strip()]


_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:[.,]\d+)?")  # "KT-100" has 100, not -100


def _numbers(value: Any, path: str = "") -> list[tuple[str, float]]:
    """Every JSON number in ``value`` (booleans are not numbers), with its path."""
    if isinstance(value, bool):
        return []
    if isinstance(value, int | float):
        return [(path or "$", float(value))]
    if isinstance(value, dict):
        return [n for k, v in value.items() for n in _numbers(v, f"{path}.{k}" if path else k)]
    if isinstance(value, list):
        return [n for i, v in enumerate(value) for n in _numbers(v, f"{path}[{i}]")]
    return []


def numbers_in_input(value: Any, asked: str) -> list[str]:
    """Every number in the answer appears in what was asked: an extraction invents none.

    A check of two parameters gets what the request asked (its instructions and messages).
    """
    given = {float(n.replace(",", ".")) for n in _NUMBER.findall(asked)}
    return [
        f"{path}: {number:g} does not appear in the input (the numbers there: "
        f"{', '.join(f'{g:g}' for g in sorted(given)) or 'none'})"
        for path, number in _numbers(value)
        if number not in given
    ]
