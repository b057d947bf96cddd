"""The structured-output safety net: JSON output checked, retried with feedback, bounded.

``SafetyNet`` wraps a provider; ``StructuredSettings`` is the ``[structured]``
config section and ``StructuredPolicy`` its resolved runtime form;
``StructuredMetrics`` holds the Prometheus counters; ``Reviews`` the queue of exhausted
attempts (in the response store, ``review_store.py``, or a SQLite file: ``ReviewQueue``);
``Outcome`` what happened to one request.
See ``docs/structured-output.md``.

The names are imported on first use: ``orgate schema``, ``review`` and ``eval`` load
only the modules they need, and the server loads the safety net when it starts.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orgate.structured.budget import BODY_FIELD, BUDGET_HEADER, Budget, BudgetOverride
    from orgate.structured.layers import Accepted, Failure, ValidatorCache, check_output
    from orgate.structured.metrics import Rates, StructuredMetrics
    from orgate.structured.modes import Mode, Plan, ensure_json_word, plan
    from orgate.structured.net import SafetyNet
    from orgate.structured.outcome import (
        ATTEMPTS_HEADER,
        MODE_HEADER,
        OUTCOME_HEADER,
        REVIEW_ID_HEADER,
        AttemptRecord,
        Outcome,
    )
    from orgate.structured.review import (
        NewReview,
        ReviewError,
        ReviewItem,
        ReviewNotFound,
        ReviewQueue,
        Reviews,
    )
    from orgate.structured.settings import FormatSettings, StructuredPolicy, StructuredSettings
    from orgate.structured.strict import StrictResult, Violation, check, denull, strictify

#: Each public name → the module that defines it.
_SOURCES = {
    "BODY_FIELD": "orgate.structured.budget",
    "BUDGET_HEADER": "orgate.structured.budget",
    "Budget": "orgate.structured.budget",
    "BudgetOverride": "orgate.structured.budget",
    "Accepted": "orgate.structured.layers",
    "Failure": "orgate.structured.layers",
    "ValidatorCache": "orgate.structured.layers",
    "check_output": "orgate.structured.layers",
    "Rates": "orgate.structured.metrics",
    "StructuredMetrics": "orgate.structured.metrics",
    "Mode": "orgate.structured.modes",
    "Plan": "orgate.structured.modes",
    "ensure_json_word": "orgate.structured.modes",
    "plan": "orgate.structured.modes",
    "SafetyNet": "orgate.structured.net",
    "ATTEMPTS_HEADER": "orgate.structured.outcome",
    "MODE_HEADER": "orgate.structured.outcome",
    "OUTCOME_HEADER": "orgate.structured.outcome",
    "REVIEW_ID_HEADER": "orgate.structured.outcome",
    "AttemptRecord": "orgate.structured.outcome",
    "Outcome": "orgate.structured.outcome",
    "NewReview": "orgate.structured.review",
    "ReviewError": "orgate.structured.review",
    "ReviewItem": "orgate.structured.review",
    "ReviewNotFound": "orgate.structured.review",
    "ReviewQueue": "orgate.structured.review",
    "Reviews": "orgate.structured.review",
    "FormatSettings": "orgate.structured.settings",
    "StructuredPolicy": "orgate.structured.settings",
    "StructuredSettings": "orgate.structured.settings",
    "StrictResult": "orgate.structured.strict",
    "Violation": "orgate.structured.strict",
    "check": "orgate.structured.strict",
    "denull": "orgate.structured.strict",
    "strictify": "orgate.structured.strict",
}


def __getattr__(name: str) -> Any:
    module = _SOURCES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


__all__ = [
    "ATTEMPTS_HEADER",
    "BODY_FIELD",
    "BUDGET_HEADER",
    "MODE_HEADER",
    "OUTCOME_HEADER",
    "REVIEW_ID_HEADER",
    "Accepted",
    "AttemptRecord",
    "Budget",
    "BudgetOverride",
    "Failure",
    "FormatSettings",
    "Mode",
    "NewReview",
    "Outcome",
    "Plan",
    "Rates",
    "ReviewError",
    "ReviewNotFound",
    "ReviewItem",
    "ReviewQueue",
    "Reviews",
    "SafetyNet",
    "StrictResult",
    "StructuredMetrics",
    "StructuredPolicy",
    "StructuredSettings",
    "ValidatorCache",
    "Violation",
    "check",
    "check_output",
    "denull",
    "ensure_json_word",
    "plan",
    "strictify",
]
