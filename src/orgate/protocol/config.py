"""Generation settings: text format, reasoning, stream options and metadata.

Request side (``TextParam``, ``ReasoningParam``...) and the echo in a response
(``TextField``, ``Reasoning``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias

from pydantic import Field

from orgate.protocol._base import ParamModel, WireModel, omittable, type_union
from orgate.protocol.enums import ReasoningEffortEnum, ReasoningSummaryEnum, VerbosityEnum

MetadataParam: TypeAlias = Annotated[
    dict[str, Annotated[str, Field(max_length=512)]], Field(max_length=16)
]
"""Up to 16 string key-value pairs, values up to 512 characters."""

# --------------------------------------------------------------------------- shared formats


class TextResponseFormat(WireModel):
    type: Literal["text"] = "text"


class JsonObjectResponseFormat(WireModel):
    type: Literal["json_object"] = "json_object"


# --------------------------------------------------------------------------- request side


class JsonSchemaResponseFormatParam(ParamModel):
    """A JSON Schema output format. ``schema`` is kept as given, under ``schema_``."""

    type: Literal["json_schema"] = "json_schema"
    description: str | None = omittable()
    name: str | None = omittable()
    schema_: dict[str, Any] | None = omittable(alias="schema")
    strict: bool | None = None


if TYPE_CHECKING:
    TextFormatParam: TypeAlias = TextResponseFormat | JsonSchemaResponseFormatParam
    TextParamFormat: TypeAlias = TextFormatParam | JsonObjectResponseFormat
else:
    TextFormatParam = type_union(
        TextResponseFormat, JsonSchemaResponseFormatParam, unknown="UnknownTextFormatType"
    )
    # orgate extension: the spec's TextFormatParam omits ``json_object``, which the
    # response side (TextField) and OpenAI clients do use; it is accepted here.
    TextParamFormat = type_union(
        TextResponseFormat,
        JsonObjectResponseFormat,
        JsonSchemaResponseFormatParam,
        unknown="UnknownTextFormatType",
    )


class TextParam(ParamModel):
    format: TextParamFormat | None = None
    verbosity: VerbosityEnum | None = omittable()


class StreamOptionsParam(ParamModel):
    include_obfuscation: bool | None = omittable()


class ReasoningParam(ParamModel):
    effort: ReasoningEffortEnum | None = None
    summary: ReasoningSummaryEnum | None = None


# --------------------------------------------------------------------------- response side


class JsonSchemaResponseFormat(WireModel):
    """The echo of a JSON Schema format. The spec only allows ``schema: null`` here."""

    type: Literal["json_schema"] = "json_schema"
    name: str
    description: str | None
    schema_: None = Field(default=None, alias="schema")
    strict: bool


class TextField(WireModel):
    format: Annotated[
        TextResponseFormat | JsonObjectResponseFormat | JsonSchemaResponseFormat,
        Field(discriminator="type"),
    ]
    verbosity: VerbosityEnum | None = omittable()


class Reasoning(WireModel):
    effort: ReasoningEffortEnum | None
    summary: ReasoningSummaryEnum | None
