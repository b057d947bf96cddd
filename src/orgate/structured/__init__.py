"""The structured-output safety net: JSON output checked, retried with feedback, bounded.

``SafetyNet`` wraps a provider; ``StructuredSettings`` is the ``[structured]``
config section and ``StructuredPolicy`` its resolved runtime form;
``StructuredMetrics`` holds the Prometheus counters; ``ReviewQueue`` the SQLite
queue of exhausted attempts; ``Outcome`` what happened to one request.
See ``docs/structured-output.md``.
"""

from orgate.structured.budget import BODY_FIELD, BUDGET_HEADER, Budget, BudgetOverride
from orgate.structured.layers import Accepted, Failure, ValidatorCache, check_output
from orgate.structured.metrics import Rates, StructuredMetrics
from orgate.structured.modes import Mode, Plan, ensure_json_word, plan
from orgate.structured.net import SafetyNet
from orgate.structured.outcome import (
    ATTEMPTS_HEADER,
    ERROR_CODE,
    MODE_HEADER,
    OUTCOME_HEADER,
    REVIEW_ID_HEADER,
    AttemptRecord,
    Outcome,
)
from orgate.structured.review import NewReview, ReviewError, ReviewItem, ReviewNotFound, ReviewQueue
from orgate.structured.settings import FormatSettings, StructuredPolicy, StructuredSettings
from orgate.structured.strict import StrictResult, Violation, check, denull, strictify

__all__ = [
    "ATTEMPTS_HEADER",
    "BODY_FIELD",
    "BUDGET_HEADER",
    "ERROR_CODE",
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
