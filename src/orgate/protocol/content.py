"""Content parts: what goes inside messages, reasoning items and tool outputs.

Request side (``...ContentParam``, strict) and response side (``...Content``),
plus annotations and log-probabilities, and the content unions used by items and
events. ``InputVideoContent`` is one schema used on both sides.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal, TypeAlias

from pydantic import Field

from orgate.protocol._base import ParamModel, WireModel, omittable, type_union
from orgate.protocol.enums import ImageDetail

MAX_TEXT = 10_485_760
MAX_IMAGE_URL = 20_971_520
MAX_FILE_DATA = 33_554_432

LongText: TypeAlias = Annotated[str, Field(max_length=MAX_TEXT)]

# --------------------------------------------------------------------------- request side


class InputTextContentParam(ParamModel):
    type: Literal["input_text"] = "input_text"
    text: LongText


class InputImageContentParamAutoParam(ParamModel):
    type: Literal["input_image"] = "input_image"
    image_url: Annotated[str, Field(max_length=MAX_IMAGE_URL)] | None = None
    detail: ImageDetail | None = None


class InputFileContentParam(ParamModel):
    type: Literal["input_file"] = "input_file"
    filename: str | None = None
    file_data: Annotated[str, Field(max_length=MAX_FILE_DATA)] | None = None
    file_url: str | None = None


class InputVideoContent(ParamModel):
    """A video input (used both in requests and in responses)."""

    type: Literal["input_video"] = "input_video"
    video_url: str


class UrlCitationParam(ParamModel):
    type: Literal["url_citation"] = "url_citation"
    start_index: Annotated[int, Field(ge=0)]
    end_index: Annotated[int, Field(ge=0)]
    url: str
    title: str


class OutputTextContentParam(ParamModel):
    type: Literal["output_text"] = "output_text"
    text: LongText
    annotations: list[UrlCitationParam] | None = omittable()


class RefusalContentParam(ParamModel):
    type: Literal["refusal"] = "refusal"
    refusal: LongText


class ReasoningSummaryContentParam(ParamModel):
    type: Literal["summary_text"] = "summary_text"
    text: LongText


# --------------------------------------------------------------------------- response side


class InputTextContent(WireModel):
    type: Literal["input_text"] = "input_text"
    text: str


class UrlCitationBody(WireModel):
    type: Literal["url_citation"] = "url_citation"
    url: str
    start_index: int
    end_index: int
    title: str


# The ``Annotation`` schema is a one-member union.
Annotation: TypeAlias = UrlCitationBody


class TopLogProb(WireModel):
    token: str
    logprob: float
    bytes: list[int]


class LogProb(WireModel):
    token: str
    logprob: float
    bytes: list[int]
    top_logprobs: list[TopLogProb]


class OutputTextContent(WireModel):
    type: Literal["output_text"] = "output_text"
    text: str
    annotations: list[Annotation] = Field(default_factory=list)
    logprobs: list[LogProb] | None = omittable()


class TextContent(WireModel):
    type: Literal["text"] = "text"
    text: str


class SummaryTextContent(WireModel):
    type: Literal["summary_text"] = "summary_text"
    text: str


class ReasoningTextContent(WireModel):
    type: Literal["reasoning_text"] = "reasoning_text"
    text: str


class RefusalContent(WireModel):
    type: Literal["refusal"] = "refusal"
    refusal: str


class InputImageContent(WireModel):
    type: Literal["input_image"] = "input_image"
    image_url: str | None
    detail: ImageDetail


class InputFileContent(WireModel):
    type: Literal["input_file"] = "input_file"
    filename: str | None = omittable()
    file_url: str | None = omittable()


# --------------------------------------------------------------------------- unions
# Request-side unions route an unknown ``type`` to a failing model so the error is
# located at ``.type``; response-side unions use a plain ``type`` discriminator.

if TYPE_CHECKING:
    UserContentParam: TypeAlias = (
        InputTextContentParam | InputImageContentParamAutoParam | InputFileContentParam
    )
    AssistantContentParam: TypeAlias = OutputTextContentParam | RefusalContentParam
    SystemContentParam: TypeAlias = InputTextContentParam
    FunctionCallOutputContentParam: TypeAlias = (
        InputTextContentParam
        | InputImageContentParamAutoParam
        | InputFileContentParam
        | InputVideoContent
    )
else:
    UserContentParam = type_union(
        InputTextContentParam,
        InputImageContentParamAutoParam,
        InputFileContentParam,
        unknown="UnknownUserContentType",
    )
    AssistantContentParam = type_union(
        OutputTextContentParam, RefusalContentParam, unknown="UnknownAssistantContentType"
    )
    # System and developer messages take text parts only.
    SystemContentParam = type_union(InputTextContentParam, unknown="UnknownSystemContentType")
    FunctionCallOutputContentParam = type_union(
        InputTextContentParam,
        InputImageContentParamAutoParam,
        InputFileContentParam,
        InputVideoContent,
        unknown="UnknownOutputContentType",
    )


ContentPart: TypeAlias = Annotated[
    InputTextContent
    | OutputTextContent
    | TextContent
    | SummaryTextContent
    | ReasoningTextContent
    | RefusalContent
    | InputImageContent
    | InputFileContent,
    Field(discriminator="type"),
]
"""The content union of reasoning items and of content/summary part events."""

MessageContentPart: TypeAlias = Annotated[
    InputTextContent
    | OutputTextContent
    | TextContent
    | SummaryTextContent
    | ReasoningTextContent
    | RefusalContent
    | InputImageContent
    | InputFileContent
    | InputVideoContent,
    Field(discriminator="type"),
]
"""The content union of ``Message`` (``ContentPart`` plus video)."""

FunctionCallOutputContent: TypeAlias = Annotated[
    InputTextContent | InputImageContent | InputFileContent, Field(discriminator="type")
]
