"""``POST /v1/responses/compact``: the request body and the compacted resource."""

from __future__ import annotations

from typing import Literal

from orgate.protocol._base import ParamModel, WireModel
from orgate.protocol.items import InputParam, ItemField
from orgate.protocol.request import ShortKey
from orgate.protocol.response import Usage


class CompactResponseMethodPublicBody(ParamModel):
    model: str
    input: InputParam | None = None
    previous_response_id: str | None = None
    instructions: str | None = None
    prompt_cache_key: ShortKey | None = None


class CompactResource(WireModel):
    id: str
    object: Literal["response.compaction"] = "response.compaction"
    output: list[ItemField]
    created_at: int
    usage: Usage
