"""Retry budgets: how many retries, how many seconds, and per-request overrides.

A request may lower or raise its budget (up to the configured ceilings
``override_max_retries`` / ``override_max_seconds``) with either

- the header ``X-Orgate-Structured-Budget: retries=1,seconds=5`` (also
  ``semantic_retries=``, ``truncation_retries=``), or
- the body extension field ``"structured_budget": {"retries": 1, "seconds": 5}``.

The header wins over the body field, key by key. Malformed values are a 400.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from orgate.protocol.errors import ApiError, ErrorCode
from orgate.structured.settings import FormatPolicy, StructuredSettings

BUDGET_HEADER = "X-Orgate-Structured-Budget"
BODY_FIELD = "structured_budget"
_KEYS = ("retries", "semantic_retries", "truncation_retries", "seconds")


@dataclass(slots=True, frozen=True)
class BudgetOverride:
    """Per-request budget values; None keeps the configured value."""

    retries: int | None = None
    semantic_retries: int | None = None
    truncation_retries: int | None = None
    seconds: float | None = None

    @classmethod
    def from_header(cls, value: str) -> BudgetOverride:
        """Parse ``retries=1,seconds=5``; raises a 400 ``ApiError`` naming the bad part."""
        fields: dict[str, Any] = {}
        for raw in value.split(","):
            part = raw.strip()
            if not part:
                continue
            key, sep, val = part.partition("=")
            key = key.strip()
            if not sep or key not in _KEYS:
                raise ApiError.of(
                    ErrorCode.INVALID_STRUCTURED_BUDGET,
                    f"{BUDGET_HEADER}: {part!r} is not one of {', '.join(k + '=' for k in _KEYS)}",
                    param=BUDGET_HEADER,
                )
            fields[key] = val.strip()
        return cls.from_mapping(fields, where=BUDGET_HEADER)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, where: str = BODY_FIELD) -> BudgetOverride:
        """Build from the body extension object (or parsed header fields)."""
        unknown = set(data) - set(_KEYS)
        if unknown:
            raise ApiError.of(
                ErrorCode.INVALID_STRUCTURED_BUDGET,
                f"{where}: unknown key(s) {', '.join(sorted(unknown))}",
                param=where,
            )
        out: dict[str, Any] = {}
        for key, val in data.items():
            try:
                if key == "seconds":
                    num = float(val)
                    if not math.isfinite(num) or num <= 0:
                        raise ValueError
                    out[key] = num
                else:
                    if isinstance(val, float | bool):
                        raise ValueError
                    num_i = int(val)
                    if num_i < 0:
                        raise ValueError
                    out[key] = num_i
            except (TypeError, ValueError):
                kind = "a positive number" if key == "seconds" else "a non-negative integer"
                raise ApiError.of(
                    ErrorCode.INVALID_STRUCTURED_BUDGET,
                    f"{where}: {key} must be {kind}, got {val!r}",
                    param=where,
                ) from None
        return cls(**out)

    def merged(self, other: BudgetOverride | None) -> BudgetOverride:
        """``other``'s values win where set."""
        if other is None:
            return self
        return BudgetOverride(
            *(
                getattr(other, k) if getattr(other, k) is not None else getattr(self, k)
                for k in _KEYS
            )
        )


@dataclass(slots=True, frozen=True)
class Budget:
    """The effective budget of one request."""

    retries: int
    semantic_retries: int
    truncation_retries: int
    seconds: float | None

    @classmethod
    def resolve(
        cls, settings: StructuredSettings, fmt: FormatPolicy, override: BudgetOverride | None = None
    ) -> Budget:
        """Config, then the format's own values, then the request override
        (clamped to the ceilings)."""
        retries = fmt.retries if fmt.retries is not None else settings.retries
        semantic = (
            fmt.semantic_retries if fmt.semantic_retries is not None else settings.semantic_retries
        )
        seconds = fmt.seconds if fmt.seconds is not None else settings.seconds
        truncation = settings.truncation_retries
        if override is not None:
            if override.retries is not None:
                retries = min(override.retries, settings.override_max_retries)
            if override.semantic_retries is not None:
                semantic = min(override.semantic_retries, settings.override_max_retries)
            if override.truncation_retries is not None:
                truncation = min(override.truncation_retries, settings.override_max_retries)
            if override.seconds is not None:
                seconds = min(override.seconds, settings.override_max_seconds)
        return cls(
            retries=retries,
            semantic_retries=semantic,
            truncation_retries=truncation,
            seconds=seconds,
        )


class Clock:
    """Wall-clock budget: started when the request starts, checked before every retry."""

    def __init__(self, seconds: float | None, *, now: float | None = None) -> None:
        self.seconds = seconds
        self.started = time.monotonic() if now is None else now

    def remaining(self) -> float | None:
        if self.seconds is None:
            return None
        return self.seconds - (time.monotonic() - self.started)

    def expired(self) -> bool:
        left = self.remaining()
        return left is not None and left <= 0


def grow_max_tokens(current: int | None, used: int | None, cap: int, growth: float) -> int | None:
    """The next ``max_output_tokens`` after a length cut, or None when the cap is already reached.

    ``current`` is the limit the attempt was sent with (None = provider default,
    then the tokens actually produced are the best estimate of it).
    """
    base = current if current is not None else (used if used else None)
    if base is None:
        return cap
    if base >= cap:
        return None
    return min(cap, max(base + 1, math.ceil(base * growth)))
