"""Semantic checks used by ``examples/eval/cases.yaml`` (``"eval_checks:NAME"``, with this folder on PYTHONPATH)."""

from __future__ import annotations

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
