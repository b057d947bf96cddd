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
    dict[Annotated[str, Field(max_length=64)], Annotated[str, Field(max_length=512)]],
    Field(max_length=16),
]
"""Up to 16 string key-value pairs:
keys up to 64 characters (the spec's description), values up to 512."""

FormatName: TypeAlias = Annotated[
    str, Field(min_length=1, max_length=64, pattern=r"^[a-zA-Z0-9_-]+$")
]
"""A json_schema format's ``name``: "a-z, A-Z, 0-9, or contain underscores and dashes, with a
maximum length of 64" (the spec's description of ``JsonSchemaResponseFormatParam.name``)."""

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
    name: FormatName | None = omittable()
    schema_: dict[str, Any] | None = omittable(alias="schema")
    strict: bool | None = None


class TextResponseFormatParam(TextResponseFormat):
    """``{"type": "text"}`` in a request: a ``TextResponseFormat`` that keeps unknown keys
    (``model_extra``) so that the server refuses them rather than dropping them."""

    model_config = ParamModel.model_config


class JsonObjectResponseFormatParam(JsonObjectResponseFormat):
    """``{"type": "json_object"}`` in a request (see ``TextResponseFormatParam``)."""

    model_config = ParamModel.model_config


if TYPE_CHECKING:
    TextFormatParam: TypeAlias = TextResponseFormat | JsonSchemaResponseFormatParam
    TextParamFormat: TypeAlias = TextFormatParam | JsonObjectResponseFormat
else:
    TextFormatParam = type_union(
        TextResponseFormatParam, JsonSchemaResponseFormatParam, unknown="UnknownTextFormatType"
    )
    # orgate extension: the spec's TextFormatParam omits ``json_object``, which the
    # response side (TextField) and OpenAI clients do use; it is accepted here.
    TextParamFormat = type_union(
        TextResponseFormatParam,
        JsonObjectResponseFormatParam,
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
    # OpenAI's extension (Codex sends ``"all_turns"``): which turns' reasoning the model keeps.
    # orgate sends each upstream the whole history it may read, so it is accepted and not sent.
    context: str | None = omittable()


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
