"""Tools and tool choice, request side (``...Param``) and as echoed in a response."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias

from pydantic import Discriminator, Field, Tag

from orgate.protocol._base import FunctionName, ParamModel, WireModel, omittable, type_union
from orgate.protocol.enums import ToolChoiceValueEnum

# --------------------------------------------------------------------------- request side


class EmptyModelParam(ParamModel):
    """The spec's schema for ``parameters``: any JSON object.

    ``FunctionToolParam.parameters`` is typed as a plain ``dict`` (a JSON Schema)
    rather than this model so that the schema reaches the gate untouched.
    """


class FunctionToolParam(ParamModel):
    name: FunctionName
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = omittable()
    type: Literal["function"] = "function"


class SpecificFunctionParam(ParamModel):
    type: Literal["function"] = "function"
    name: str


# OpenAI's ``custom`` tool (not in the spec): the model calls it with one free-form string, which
# ``format`` may constrain (a Lark or regex grammar). A native Responses upstream enforces the
# format; elsewhere it is a function with one string argument and the format is described to the
# model (docs/providers.md, "Tool types").


class CustomTextFormatParam(ParamModel):
    type: Literal["text"] = "text"


class CustomGrammarFormatParam(ParamModel):
    type: Literal["grammar"] = "grammar"
    syntax: Literal["lark", "regex"]
    definition: str


if TYPE_CHECKING:
    CustomToolFormatParam: TypeAlias = CustomTextFormatParam | CustomGrammarFormatParam
else:
    CustomToolFormatParam = type_union(
        CustomTextFormatParam, CustomGrammarFormatParam, unknown="UnknownCustomFormatType"
    )


class CustomToolParam(ParamModel):
    type: Literal["custom"] = "custom"
    name: FunctionName
    description: str | None = None
    format: CustomToolFormatParam | None = None

    def wire(self) -> dict[str, Any]:
        """The tool as OpenAI takes it (what the client sent, without nulls)."""
        return self.model_dump(mode="json", exclude_none=True)


class SpecificCustomParam(ParamModel):
    """``tool_choice`` forcing a ``custom`` tool (OpenAI's extension)."""

    type: Literal["custom"] = "custom"
    name: str


# Tool types OpenAI's Responses API defines beyond the spec's ``function``: tools the upstream runs
# itself (web search, file search, code interpreter…) and ``namespace`` (a named group of tools,
# which Codex sends). orgate passes them to an upstream that runs them and drops or refuses them
# elsewhere (docs/providers.md, "Tool types"); any other type stays a 400.
HOSTED_TOOL_TYPES = frozenset(
    {
        "web_search",
        "web_search_preview",
        "web_search_preview_2025_03_11",
        "web_search_2025_08_26",
        "file_search",
        "code_interpreter",
        "image_generation",
        "computer_use_preview",
        "computer",
        "mcp",
        "local_shell",
        "shell",
        "apply_patch",
        "tool_search",
        "namespace",
    }
)


class HostedToolParam(ParamModel):
    """One of ``HOSTED_TOOL_TYPES`` (not in the spec): kept as sent (its fields in ``model_extra``),
    for an upstream that runs it."""

    type: str

    def wire(self) -> dict[str, Any]:
        return {"type": self.type, **(self.model_extra or {})}


def _hosted_tag(value: Any) -> str | None:
    kind = value.get("type") if isinstance(value, dict) else None
    # Any JSON value can stand where a type belongs: only a string names a hosted tool (a dict or a
    # list is unhashable, and the union's own check then reports it as an invalid type).
    return "HostedToolParam" if isinstance(kind, str) and kind in HOSTED_TOOL_TYPES else None


# ``SpecificToolChoiceParam`` is a one-member union.
SpecificToolChoiceParam: TypeAlias = SpecificFunctionParam


if TYPE_CHECKING:
    AllowedToolParam: TypeAlias = SpecificFunctionParam | SpecificCustomParam
else:
    AllowedToolParam = type_union(
        SpecificFunctionParam, SpecificCustomParam, unknown="UnknownAllowedToolType"
    )


class AllowedToolsParam(ParamModel):
    type: Literal["allowed_tools"] = "allowed_tools"
    tools: Annotated[list[AllowedToolParam], Field(min_length=1, max_length=128)]
    mode: ToolChoiceValueEnum | None = omittable()


def _choice_value(value: Any) -> str | None:
    return "ToolChoiceValueEnum" if isinstance(value, str) else None


if TYPE_CHECKING:
    ResponsesToolParam: TypeAlias = FunctionToolParam | CustomToolParam | HostedToolParam
    ToolChoiceParam: TypeAlias = (
        SpecificToolChoiceParam | SpecificCustomParam | ToolChoiceValueEnum | AllowedToolsParam
    )
else:
    ResponsesToolParam = type_union(
        FunctionToolParam,
        CustomToolParam,
        unknown="UnknownToolType",
        extra=_hosted_tag,
        extra_members=((HostedToolParam, "HostedToolParam"),),
    )
    ToolChoiceParam = type_union(
        SpecificFunctionParam,
        SpecificCustomParam,
        AllowedToolsParam,
        unknown="UnknownToolChoiceType",
        extra=_choice_value,
        extra_members=((ToolChoiceValueEnum, "ToolChoiceValueEnum"),),
        error_message="Input should be 'none', 'auto', 'required' or a tool choice object",
    )

# --------------------------------------------------------------------------- response side


class FunctionTool(WireModel):
    type: Literal["function"] = "function"
    name: str
    description: str | None
    parameters: dict[str, Any] | None
    strict: bool | None


# ``Tool`` is a one-member union.
Tool: TypeAlias = FunctionTool


class FunctionToolChoice(WireModel):
    type: Literal["function"] = "function"
    name: str | None = omittable()


class AllowedToolChoice(WireModel):
    type: Literal["allowed_tools"] = "allowed_tools"
    tools: list[FunctionToolChoice]
    mode: ToolChoiceValueEnum


#: Keyed by object: a tag is looked up by whatever ``type`` the value has.
_RESPONSE_CHOICE_TAGS: dict[object, str] = {
    "function": "FunctionToolChoice",
    "allowed_tools": "AllowedToolChoice",
}


def _response_choice_tag(value: Any) -> str | None:
    if isinstance(value, str):
        return "ToolChoiceValueEnum"
    t = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return _RESPONSE_CHOICE_TAGS.get(t)


if TYPE_CHECKING:
    ResponseToolChoice: TypeAlias = FunctionToolChoice | ToolChoiceValueEnum | AllowedToolChoice
else:
    ResponseToolChoice = Annotated[
        Annotated[FunctionToolChoice, Tag("FunctionToolChoice")]
        | Annotated[ToolChoiceValueEnum, Tag("ToolChoiceValueEnum")]
        | Annotated[AllowedToolChoice, Tag("AllowedToolChoice")],
        Discriminator(_response_choice_tag),
    ]
"""``tool_choice`` as echoed in a ``ResponseResource``."""
