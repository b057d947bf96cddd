"""Conversation items: request-side ``ItemParam`` members and response-side ``ItemField``.

``ItemParam`` is discriminated on ``type``; a message may come without ``type``
(``{"role": "user", "content": "hi"}``) and is then told apart by ``role``, and an
object with an ``id`` but no ``role``/``content`` is an ``item_reference``. An unknown
``type`` or ``role`` fails with the error located at ``.type`` / ``.role``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias, Union

from pydantic import BaseModel, Discriminator, Field, Tag, create_model

from orgate.protocol._base import (
    FunctionName,
    ParamModel,
    WireModel,
    omittable,
    str_or_list,
    unknown_type_model,
)
from orgate.protocol.content import (
    AssistantContentParam,
    ContentPart,
    FunctionCallOutputContent,
    FunctionCallOutputContentParam,
    LongText,
    MessageContentPart,
    ReasoningSummaryContentParam,
    SystemContentParam,
    UserContentParam,
)
from orgate.protocol.enums import (
    FunctionCallOutputStatusEnum,
    FunctionCallStatus,
    MessagePhase,
    MessageRole,
    MessageStatus,
)
from orgate.protocol.tools import ResponsesToolParam

CallId: TypeAlias = Annotated[str, Field(min_length=1, max_length=64)]

# --------------------------------------------------------------------------- request side


class ItemReferenceParam(ParamModel):
    """A reference to a stored item by id; ``type`` may be omitted or null."""

    type: Literal["item_reference"] | None = "item_reference"
    id: str


class ReasoningItemParam(ParamModel):
    id: str | None = None
    type: Literal["reasoning"] = "reasoning"
    summary: list[ReasoningSummaryContentParam]
    # The spec allows only null here (reasoning text is not replayed).
    content: None = None
    encrypted_content: str | None = None


class CompactionSummaryItemParam(ParamModel):
    id: str | None = None
    type: Literal["compaction"] = "compaction"
    encrypted_content: LongText


if TYPE_CHECKING:
    UserContent: TypeAlias = str | list[UserContentParam]
    SystemContent: TypeAlias = str | list[SystemContentParam]
    AssistantContent: TypeAlias = str | list[AssistantContentParam]
    FunctionCallOutputParamOutput: TypeAlias = str | list[FunctionCallOutputContentParam]
else:
    UserContent = str_or_list(LongText, list[UserContentParam])
    SystemContent = str_or_list(LongText, list[SystemContentParam])
    AssistantContent = str_or_list(LongText, list[AssistantContentParam])
    FunctionCallOutputParamOutput = str_or_list(LongText, list[FunctionCallOutputContentParam])


class UserMessageItemParam(ParamModel):
    id: str | None = None
    type: Literal["message"] = "message"
    role: Literal["user"] = "user"
    content: UserContent
    status: str | None = None


class SystemMessageItemParam(ParamModel):
    id: str | None = None
    type: Literal["message"] = "message"
    role: Literal["system"] = "system"
    content: SystemContent
    status: str | None = None


class DeveloperMessageItemParam(ParamModel):
    id: str | None = None
    type: Literal["message"] = "message"
    role: Literal["developer"] = "developer"
    content: SystemContent
    status: str | None = None


class AssistantMessageItemParam(ParamModel):
    id: str | None = None
    type: Literal["message"] = "message"
    role: Literal["assistant"] = "assistant"
    content: AssistantContent
    phase: MessagePhase | None = omittable()
    status: str | None = None


class FunctionCallItemParam(ParamModel):
    id: str | None = None
    call_id: CallId
    type: Literal["function_call"] = "function_call"
    name: FunctionName
    arguments: str
    status: FunctionCallStatus | None = None


class FunctionCallOutputItemParam(ParamModel):
    id: str | None = None
    call_id: CallId
    type: Literal["function_call_output"] = "function_call_output"
    output: FunctionCallOutputParamOutput
    status: FunctionCallStatus | None = None


# The items of OpenAI's ``custom`` tools (not in the spec): a call carries one free-form string,
# ``input``, instead of JSON ``arguments``; its result comes back as ``custom_tool_call_output``.


class CustomToolCallItemParam(ParamModel):
    id: str | None = None
    call_id: CallId
    type: Literal["custom_tool_call"] = "custom_tool_call"
    name: FunctionName
    input: LongText
    status: FunctionCallStatus | None = None


class CustomToolCallOutputItemParam(ParamModel):
    id: str | None = None
    call_id: CallId
    type: Literal["custom_tool_call_output"] = "custom_tool_call_output"
    output: FunctionCallOutputParamOutput


class AdditionalToolsItemParam(ParamModel):
    """OpenAI's ``additional_tools`` item (not in the spec): tools offered from a place in the
    input rather than in ``tools`` (Codex sends every tool this way for its newest models).
    orgate offers them as if they were in ``tools`` (docs/providers.md, "Tool types")."""

    type: Literal["additional_tools"] = "additional_tools"
    id: str | None = None
    role: str | None = None
    tools: list[ResponsesToolParam]


# The items of OpenAI's hosted MCP tools (not in the spec): orgate runs MCP tools itself, and a
# client replays these items (a full history) or answers an approval request (docs/mcp.md).


class McpListToolsItemParam(ParamModel):
    type: Literal["mcp_list_tools"] = "mcp_list_tools"
    id: str | None = None
    server_label: str
    tools: list[dict[str, Any]] = Field(default_factory=list)
    error: Any = None


class McpCallItemParam(ParamModel):
    type: Literal["mcp_call"] = "mcp_call"
    id: str | None = None
    server_label: str
    name: str
    arguments: str
    output: str | None = None
    error: Any = None
    approval_request_id: str | None = None
    status: str | None = None


class McpApprovalRequestItemParam(ParamModel):
    type: Literal["mcp_approval_request"] = "mcp_approval_request"
    id: str
    server_label: str
    name: str
    arguments: str


class McpApprovalResponseItemParam(ParamModel):
    type: Literal["mcp_approval_response"] = "mcp_approval_response"
    id: str | None = None
    approval_request_id: str
    approve: bool
    reason: str | None = None


MCP_ITEM_PARAMS = (
    McpListToolsItemParam,
    McpCallItemParam,
    McpApprovalRequestItemParam,
    McpApprovalResponseItemParam,
)

_TYPE_TAGS: dict[str, str] = {
    "item_reference": "ItemReferenceParam",
    "reasoning": "ReasoningItemParam",
    "compaction": "CompactionSummaryItemParam",
    "function_call": "FunctionCallItemParam",
    "function_call_output": "FunctionCallOutputItemParam",
    "custom_tool_call": "CustomToolCallItemParam",
    "custom_tool_call_output": "CustomToolCallOutputItemParam",
    "additional_tools": "AdditionalToolsItemParam",
    "mcp_list_tools": "McpListToolsItemParam",
    "mcp_call": "McpCallItemParam",
    "mcp_approval_request": "McpApprovalRequestItemParam",
    "mcp_approval_response": "McpApprovalResponseItemParam",
}
_ROLE_TAGS: dict[str, str] = {
    "user": "UserMessageItemParam",
    "system": "SystemMessageItemParam",
    "developer": "DeveloperMessageItemParam",
    "assistant": "AssistantMessageItemParam",
}
_UNKNOWN_TYPE = "UnknownItemType"
_UNKNOWN_ROLE = "UnknownMessageRole"

_UnknownItemType = unknown_type_model(_UNKNOWN_TYPE, ("message", *_TYPE_TAGS))
_UnknownMessageRole = create_model(_UNKNOWN_ROLE, __base__=ParamModel, role=(MessageRole, ...))


def _item_tag(value: Any) -> str | None:
    """Tag of one input item: by ``type``, by ``role`` for untyped messages."""
    if isinstance(value, dict):
        has: Callable[[str], bool] = value.__contains__
        t = value.get("type")
        role = value.get("role")
    elif isinstance(value, BaseModel):
        t = getattr(value, "type", None)
        role = getattr(value, "role", None)

        def has(key: str) -> bool:
            return getattr(value, key, None) is not None
    else:
        return None
    if t is None:
        if has("role"):
            t = "message"
        elif has("id") and not has("content"):
            return "ItemReferenceParam"
        elif has("content"):
            return _UNKNOWN_ROLE
        else:
            return _UNKNOWN_TYPE
    if t == "message":
        if isinstance(role, str):
            return _ROLE_TAGS.get(role, _UNKNOWN_ROLE)
        return _UNKNOWN_ROLE
    if isinstance(t, str):
        return _TYPE_TAGS.get(t, _UNKNOWN_TYPE)
    return _UNKNOWN_TYPE


if TYPE_CHECKING:
    ItemParam: TypeAlias = (
        ItemReferenceParam
        | ReasoningItemParam
        | CompactionSummaryItemParam
        | UserMessageItemParam
        | SystemMessageItemParam
        | DeveloperMessageItemParam
        | AssistantMessageItemParam
        | FunctionCallItemParam
        | FunctionCallOutputItemParam
        | CustomToolCallItemParam
        | CustomToolCallOutputItemParam
        | AdditionalToolsItemParam
        | McpListToolsItemParam
        | McpCallItemParam
        | McpApprovalRequestItemParam
        | McpApprovalResponseItemParam
    )
    InputParam: TypeAlias = str | list[ItemParam]
else:
    ItemParam = Annotated[
        Union[  # noqa: UP007
            Annotated[ItemReferenceParam, Tag("ItemReferenceParam")],
            Annotated[ReasoningItemParam, Tag("ReasoningItemParam")],
            Annotated[CompactionSummaryItemParam, Tag("CompactionSummaryItemParam")],
            Annotated[UserMessageItemParam, Tag("UserMessageItemParam")],
            Annotated[SystemMessageItemParam, Tag("SystemMessageItemParam")],
            Annotated[DeveloperMessageItemParam, Tag("DeveloperMessageItemParam")],
            Annotated[AssistantMessageItemParam, Tag("AssistantMessageItemParam")],
            Annotated[FunctionCallItemParam, Tag("FunctionCallItemParam")],
            Annotated[FunctionCallOutputItemParam, Tag("FunctionCallOutputItemParam")],
            Annotated[CustomToolCallItemParam, Tag("CustomToolCallItemParam")],
            Annotated[CustomToolCallOutputItemParam, Tag("CustomToolCallOutputItemParam")],
            Annotated[AdditionalToolsItemParam, Tag("AdditionalToolsItemParam")],
            Annotated[McpListToolsItemParam, Tag("McpListToolsItemParam")],
            Annotated[McpCallItemParam, Tag("McpCallItemParam")],
            Annotated[McpApprovalRequestItemParam, Tag("McpApprovalRequestItemParam")],
            Annotated[McpApprovalResponseItemParam, Tag("McpApprovalResponseItemParam")],
            Annotated[_UnknownItemType, Tag(_UNKNOWN_TYPE)],
            Annotated[_UnknownMessageRole, Tag(_UNKNOWN_ROLE)],
        ],
        Discriminator(
            _item_tag,
            custom_error_type="invalid_item",
            custom_error_message="Input should be an item object",
        ),
    ]
    InputParam = str_or_list(LongText, list[ItemParam])
"""``input`` of a request: a string (one user message) or a list of items."""

MessageItemParam: TypeAlias = (
    UserMessageItemParam
    | SystemMessageItemParam
    | DeveloperMessageItemParam
    | AssistantMessageItemParam
)

# --------------------------------------------------------------------------- response side


class Message(WireModel):
    type: Literal["message"] = "message"
    id: str
    status: MessageStatus
    role: MessageRole
    content: list[MessageContentPart]
    phase: MessagePhase | None = omittable()


class FunctionCall(WireModel):
    type: Literal["function_call"] = "function_call"
    id: str
    call_id: str
    name: str
    arguments: str
    status: FunctionCallStatus


class FunctionCallOutput(WireModel):
    type: Literal["function_call_output"] = "function_call_output"
    id: str
    call_id: str
    output: str | list[FunctionCallOutputContent]
    status: FunctionCallOutputStatusEnum


class ReasoningBody(WireModel):
    type: Literal["reasoning"] = "reasoning"
    id: str
    content: list[ContentPart] | None = omittable()
    summary: list[ContentPart]
    encrypted_content: str | None = omittable()


class CompactionBody(WireModel):
    type: Literal["compaction"] = "compaction"
    id: str
    encrypted_content: str
    created_by: str | None = omittable()


ItemField: TypeAlias = Annotated[
    Message | FunctionCall | FunctionCallOutput | ReasoningBody | CompactionBody,
    Field(discriminator="type"),
]
"""An output item of a response."""
