"""The spec's string enums, as ``Literal`` type aliases named after their schemas."""

from __future__ import annotations

from typing import Final, Literal, TypeAlias

DetailEnum: TypeAlias = Literal["low", "high", "auto"]
ImageDetail: TypeAlias = Literal["low", "high", "auto"]
MessageRole: TypeAlias = Literal["user", "assistant", "system", "developer"]
MessageStatus: TypeAlias = Literal["in_progress", "completed", "incomplete"]
FunctionCallStatus: TypeAlias = Literal["in_progress", "completed", "incomplete"]
FunctionCallItemStatus: TypeAlias = Literal["in_progress", "completed", "incomplete"]
FunctionCallOutputStatusEnum: TypeAlias = Literal["in_progress", "completed", "incomplete"]
IncludeEnum: TypeAlias = Literal["reasoning.encrypted_content", "message.output_text.logprobs"]
LOGPROBS_INCLUDE: Final = (
    "message.output_text.logprobs"  # the ``include`` value asking for logprobs
)
ToolChoiceValueEnum: TypeAlias = Literal["none", "auto", "required"]
VerbosityEnum: TypeAlias = Literal["low", "medium", "high"]
ReasoningEffortEnum: TypeAlias = Literal["none", "low", "medium", "high", "xhigh"]
ReasoningSummaryEnum: TypeAlias = Literal["concise", "detailed", "auto"]
TruncationEnum: TypeAlias = Literal["auto", "disabled"]
ServiceTierEnum: TypeAlias = Literal["auto", "default", "flex", "priority"]

# Not a named schema: the inline enum of ``phase`` on assistant messages (added 2026-04-24).
MessagePhase: TypeAlias = Literal["commentary", "final_answer"]
