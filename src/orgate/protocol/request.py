"""The ``POST /v1/responses`` request body, ``CreateResponseBody``.

Strict about types and the schema's limits; unknown top-level fields (extensions
such as ``user``) are kept in ``model_extra`` for the server to honour or reject.
``null`` means "absent", also for optional fields the spec does not make
nullable (``stream``, ``store``...): OpenAI accepts it there, and clients send it.
"""

from __future__ import annotations

from typing import Annotated, TypeAlias

from pydantic import Field

from orgate.protocol._base import ParamModel, omittable
from orgate.protocol.config import MetadataParam, ReasoningParam, StreamOptionsParam, TextParam
from orgate.protocol.enums import IncludeEnum, ServiceTierEnum, TruncationEnum
from orgate.protocol.items import InputParam
from orgate.protocol.tools import ResponsesToolParam, ToolChoiceParam

ShortKey: TypeAlias = Annotated[str, Field(max_length=64)]


class CreateResponseBody(ParamModel):
    model: str | None = None
    input: InputParam | None = None
    previous_response_id: str | None = None
    include: list[IncludeEnum] | None = omittable()
    tools: list[ResponsesToolParam] | None = None
    tool_choice: ToolChoiceParam | None = None
    metadata: MetadataParam | None = None
    text: TextParam | None = None
    # The ranges are the spec's descriptions ("between 0 and 2", "between 0 and 1").
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    top_p: Annotated[float, Field(ge=0, le=1)] | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    parallel_tool_calls: bool | None = None
    stream: bool | None = omittable()
    stream_options: StreamOptionsParam | None = None
    background: bool | None = omittable()
    max_output_tokens: Annotated[int, Field(ge=16)] | None = None
    max_tool_calls: Annotated[int, Field(ge=1)] | None = None
    reasoning: ReasoningParam | None = None
    safety_identifier: ShortKey | None = None
    prompt_cache_key: ShortKey | None = None
    truncation: TruncationEnum | None = omittable()
    instructions: str | None = None
    store: bool | None = omittable()
    service_tier: ServiceTierEnum | None = omittable()
    top_logprobs: Annotated[int, Field(ge=0, le=20)] | None = None
