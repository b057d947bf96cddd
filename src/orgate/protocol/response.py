"""The response object (``ResponseResource``) and its parts: usage, error, details.

Every field the spec requires is required here, nullable ones included, so
``model_dump(mode="json")`` gives exactly the spec shape.
"""

from __future__ import annotations

from typing import Any, Literal

from orgate.protocol._base import WireModel
from orgate.protocol.config import Reasoning, TextField
from orgate.protocol.enums import TruncationEnum
from orgate.protocol.items import ItemField
from orgate.protocol.tools import ResponseToolChoice, Tool


class IncompleteDetails(WireModel):
    reason: str


class Error(WireModel):
    """The error of a failed response (``ResponseResource.error``)."""

    code: str
    message: str


class InputTokensDetails(WireModel):
    cached_tokens: int = 0


class OutputTokensDetails(WireModel):
    reasoning_tokens: int = 0


class Usage(WireModel):
    input_tokens: int
    output_tokens: int
    total_tokens: int
    input_tokens_details: InputTokensDetails
    output_tokens_details: OutputTokensDetails


class ResponseResource(WireModel):
    id: str
    object: Literal["response"] = "response"
    created_at: int
    completed_at: int | None
    status: str
    incomplete_details: IncompleteDetails | None
    model: str
    previous_response_id: str | None
    instructions: str | None
    output: list[ItemField]
    error: Error | None
    tools: list[Tool]
    tool_choice: ResponseToolChoice
    truncation: TruncationEnum
    parallel_tool_calls: bool
    text: TextField
    top_p: float
    presence_penalty: float
    frequency_penalty: float
    top_logprobs: int
    temperature: float
    reasoning: Reasoning | None
    usage: Usage | None
    max_output_tokens: int | None
    max_tool_calls: int | None
    store: bool
    background: bool
    service_tier: str
    metadata: Any
    safety_identifier: str | None
    prompt_cache_key: str | None
