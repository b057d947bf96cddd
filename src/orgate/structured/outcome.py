"""What the safety net did for one request: the ``Outcome`` the engine reads after the stream.

The engine creates an ``Outcome``, passes it to ``SafetyNet.stream(request,
outcome=...)`` and reads it once the stream has ended (or raised). Its
``headers()`` are what the gateway surfaces to clients:

- ``X-Orgate-Structured-Outcome``: ``ok`` | ``recovered`` | ``default`` | ``review``
  | ``error`` | ``passthrough`` — ``default`` means the configured fallback object
  was returned instead of model output;
- ``X-Orgate-Structured-Mode``: how the request was sent (see ``modes``);
- ``X-Orgate-Structured-Attempts``: upstream calls made;
- ``X-Orgate-Review-Id``: the review-queue entry, when one was created.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

OutcomeStatus = Literal["pending", "ok", "recovered", "default", "review", "error", "passthrough"]
ExhaustedBy = Literal[
    "retries", "semantic_retries", "seconds", "truncation_cap", "truncation_retries"
]

OUTCOME_HEADER = "X-Orgate-Structured-Outcome"
MODE_HEADER = "X-Orgate-Structured-Mode"
ATTEMPTS_HEADER = "X-Orgate-Structured-Attempts"
REVIEW_ID_HEADER = "X-Orgate-Review-Id"
# The response formats the upstream refuses (``json_schema``, ``json_schema,json_object``):
# the mode header says what was sent instead (structured/downgrades.py).
DOWNGRADE_HEADER = "X-Orgate-Structured-Downgrade"


@dataclass(slots=True, frozen=True)
class AttemptRecord:
    """One upstream call: its finish reason and, if it failed, the stage and messages."""

    number: int
    finish_reason: str | None
    stage: str | None = None
    errors: tuple[str, ...] = ()
    max_output_tokens: int | None = None
    text: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "finish_reason": self.finish_reason,
            "stage": self.stage,
            "errors": list(self.errors),
            "max_output_tokens": self.max_output_tokens,
            "text": self.text,
        }


@dataclass(slots=True)
class Outcome:
    """Filled in by the safety net; ``status`` stays ``pending`` if an upstream error escaped."""

    status: OutcomeStatus = "pending"
    mode: str | None = None
    format_name: str | None = None
    attempts: list[AttemptRecord] = field(default_factory=list)
    exhausted_by: ExhaustedBy | None = None
    review_id: str | None = None
    value: Any = None  # the accepted (or default) JSON value
    strict_changes: tuple[str, ...] = ()
    passthrough_reason: str | None = None
    response_id: str | None = None  # set by the engine before streaming; stored with review entries
    refused_formats: tuple[str, ...] = ()  # response formats the upstream refuses (downgraded)

    @property
    def retries(self) -> int:
        return max(0, len(self.attempts) - 1)

    @property
    def valid_model_output(self) -> bool:
        """True only when the released JSON is the model's own, validated output."""
        return self.status in ("ok", "recovered")

    def headers(self) -> dict[str, str]:
        out: dict[str, str] = {OUTCOME_HEADER: self.status}
        if self.mode:
            out[MODE_HEADER] = self.mode
        if self.attempts:
            out[ATTEMPTS_HEADER] = str(len(self.attempts))
        if self.review_id:
            out[REVIEW_ID_HEADER] = self.review_id
        if self.refused_formats:
            out[DOWNGRADE_HEADER] = ",".join(self.refused_formats)
        return out
