"""Pydantic models of the Chat Completions wire format (request, response, stream chunk).

These are the adapter's OWN models: they import nothing of ``orgate.protocol``
(an import-linter contract enforces it). The request side forbids unknown
fields, so nothing a client sends is dropped silently; fields that are known
but not supported are modelled loosely here and refused by
``orgate.legacy_chat.validate`` with a clear 400.

Unions are discriminated by callables whose tags start with ``~``; a
validation location such as ``("messages", 2, "~user", "content", "~list", 0)``
becomes the chat ``param`` ``messages[2].content[0]`` by dropping those tags
(see ``param_from_loc``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias, Union

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag

TAG = "~"


def _is_none(value: Any) -> bool:
    return value is None


def _omit() -> Any:
    """An optional field left out of dumps while it is ``None``."""
    return Field(default=None, exclude_if=_is_none)


class RequestModel(BaseModel):
    """Request side: unknown fields are an error (never dropped silently)."""

    model_config = ConfigDict(extra="forbid", strict=True)


class ResponseModel(BaseModel):
    """Response side: built by the adapter, dumped as the chat wire JSON."""

    model_config = ConfigDict(extra="forbid")


def param_from_loc(loc: Sequence[int | str]) -> str:
    """``("messages", 2, "~user", "content")`` → ``"messages[2].content"``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part.startswith(TAG):
            continue
        else:
            out += f".{part}" if out else part
    return out


def _type_union(field: str, *members: tuple[str, Any], what: str) -> Any:
    """A union of objects discriminated on ``field`` (``type`` or ``role``)."""
    tags = {value for value, _ in members}

    def tag(value: Any) -> str | None:
        if not isinstance(value, dict):
            return None
        key = value.get(field)
        return TAG + key if isinstance(key, str) and key in tags else TAG + "?"

    annotated = [Annotated[model, Tag(TAG + value)] for value, model in members]
    return Annotated[
        Union[tuple(annotated)],  # noqa: UP007
        Discriminator(
            tag,
            custom_error_type=f"chat_union_{field}",
            custom_error_message=f"{what} must be an object with a '{field}' of "
            + ", ".join(repr(v) for v, _ in members),
        ),
    ]


def _str_or_list_tag(value: Any) -> str | None:
    if isinstance(value, str):
        return TAG + "str"
    if isinstance(value, list):
        return TAG + "list"
    return None


if TYPE_CHECKING:
    StrOrList: TypeAlias = str | list[str]
else:
    StrOrList = Annotated[
        Union[Annotated[str, Tag(TAG + "str")], Annotated[list[str], Tag(TAG + "list")]],  # noqa: UP007
        Discriminator(
            _str_or_list_tag,
            custom_error_type="chat_str_or_list",
            custom_error_message="Input should be a string or an array of strings",
        ),
    ]


def _str_or_list(item: Any) -> Any:
    return Annotated[
        Union[Annotated[str, Tag(TAG + "str")], Annotated[list[item], Tag(TAG + "list")]],  # noqa: UP007
        Discriminator(
            _str_or_list_tag,
            custom_error_type="chat_str_or_list",
            custom_error_message="Input should be a string or an array of content parts",
        ),
    ]


# --------------------------------------------------------------------------- content parts


class TextPart(RequestModel):
    type: Literal["text"]
    text: str


class RefusalPart(RequestModel):
    type: Literal["refusal"]
    refusal: str


class ImageUrl(RequestModel):
    url: str
    detail: Literal["auto", "low", "high"] | None = None


class ImagePart(RequestModel):
    type: Literal["image_url"]
    image_url: ImageUrl


class InputAudioPart(RequestModel):
    """Modelled only to be refused with a clear message."""

    type: Literal["input_audio"]
    input_audio: dict[str, Any]


class FileRef(RequestModel):
    file_data: str | None = None
    file_id: str | None = None
    filename: str | None = None


class FilePart(RequestModel):
    type: Literal["file"]
    file: FileRef


if TYPE_CHECKING:
    UserPart: TypeAlias = TextPart | ImagePart | InputAudioPart | FilePart
    AssistantPart: TypeAlias = TextPart | RefusalPart
    UserContent: TypeAlias = str | list[UserPart]
    TextContent: TypeAlias = str | list[TextPart]
    AssistantContent: TypeAlias = str | list[AssistantPart]
else:
    UserPart = _type_union(
        "type",
        ("text", TextPart),
        ("image_url", ImagePart),
        ("input_audio", InputAudioPart),
        ("file", FilePart),
        what="A user content part",
    )
    AssistantPart = _type_union(
        "type", ("text", TextPart), ("refusal", RefusalPart), what="An assistant content part"
    )
    UserContent = _str_or_list(UserPart)
    TextContent = _str_or_list(_type_union("type", ("text", TextPart), what="A content part"))
    AssistantContent = _str_or_list(AssistantPart)


# --------------------------------------------------------------------------- messages


FunctionName: TypeAlias = Annotated[
    str, Field(min_length=1, max_length=64, pattern=r"^[a-zA-Z0-9_-]+$")
]
CallId: TypeAlias = Annotated[str, Field(min_length=1, max_length=64)]


# The official SDKs' helpers (``chat.completions.parse``, ``chat.completions.stream``'s
# final completion) return an assistant message with extra, response-only fields:
# ``parsed`` on the message, ``parsed_arguments`` on each call's function and
# ``index`` on each streamed call. Appending that message to ``messages`` (the
# documented tool-calling loop) sends them back, and the OpenAI API ignores them;
# so they are accepted here and never translated. Any other unknown field is still refused.


class FunctionCallRef(RequestModel):
    name: FunctionName
    arguments: str
    parsed_arguments: Any = None  # SDK echo, ignored


class ToolCall(RequestModel):
    id: CallId
    type: Literal["function"]
    function: FunctionCallRef
    index: int | None = None  # SDK echo (a streamed call's position), ignored


class SystemMessage(RequestModel):
    role: Literal["system"]
    content: TextContent
    name: str | None = None


class DeveloperMessage(RequestModel):
    role: Literal["developer"]
    content: TextContent
    name: str | None = None


class UserMessage(RequestModel):
    role: Literal["user"]
    content: UserContent
    name: str | None = None


class UrlCitationIn(RequestModel):
    start_index: int
    end_index: int
    title: str
    url: str


class AnnotationIn(RequestModel):
    """An annotation echoed back on an assistant message (as SDKs do with a previous reply)."""

    type: Literal["url_citation"]
    url_citation: UrlCitationIn


class AssistantMessage(RequestModel):
    role: Literal["assistant"]
    content: AssistantContent | None = None
    refusal: str | None = None
    tool_calls: list[ToolCall] | None = None
    annotations: list[AnnotationIn] | None = None
    name: str | None = None
    audio: Any = None  # refused
    function_call: Any = None  # legacy, refused
    parsed: Any = None  # SDK echo of a parse helper's result, ignored


class ToolMessage(RequestModel):
    role: Literal["tool"]
    content: TextContent
    tool_call_id: CallId


class FunctionMessage(RequestModel):
    """The legacy ``function`` role: modelled only to be refused with a clear message."""

    role: Literal["function"]
    content: str | None = None
    name: str | None = None


if TYPE_CHECKING:
    ChatMessage: TypeAlias = (
        SystemMessage
        | DeveloperMessage
        | UserMessage
        | AssistantMessage
        | ToolMessage
        | FunctionMessage
    )
else:
    ChatMessage = _type_union(
        "role",
        ("system", SystemMessage),
        ("developer", DeveloperMessage),
        ("user", UserMessage),
        ("assistant", AssistantMessage),
        ("tool", ToolMessage),
        ("function", FunctionMessage),
        what="A message",
    )


# --------------------------------------------------------------------------- tools and formats


class FunctionDefinition(RequestModel):
    name: FunctionName
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class FunctionTool(RequestModel):
    type: Literal["function"]
    function: FunctionDefinition


class NamedFunction(RequestModel):
    name: FunctionName


class NamedToolChoice(RequestModel):
    type: Literal["function"]
    function: NamedFunction


class AllowedTools(RequestModel):
    mode: Literal["auto", "required"]
    tools: list[NamedToolChoice] = Field(min_length=1)


class AllowedToolsChoice(RequestModel):
    type: Literal["allowed_tools"]
    allowed_tools: AllowedTools


def _tool_choice_tag(value: Any) -> str | None:
    if isinstance(value, str):
        return TAG + "mode"
    if isinstance(value, dict):
        t = value.get("type")
        return TAG + t if t in ("function", "allowed_tools") else TAG + "?"
    return None


if TYPE_CHECKING:
    ToolChoice: TypeAlias = (
        Literal["none", "auto", "required"] | NamedToolChoice | AllowedToolsChoice
    )
else:
    ToolChoice = Annotated[
        Union[  # noqa: UP007
            Annotated[Literal["none", "auto", "required"], Tag(TAG + "mode")],
            Annotated[NamedToolChoice, Tag(TAG + "function")],
            Annotated[AllowedToolsChoice, Tag(TAG + "allowed_tools")],
        ],
        Discriminator(
            _tool_choice_tag,
            custom_error_type="chat_union_type",
            custom_error_message="tool_choice must be 'none', 'auto', 'required', "
            "an object with a 'type' of 'function' or 'allowed_tools'",
        ),
    ]


class TextFormat(RequestModel):
    type: Literal["text"]


class JsonObjectFormat(RequestModel):
    type: Literal["json_object"]


class JsonSchemaSpec(RequestModel):
    name: str = Field(min_length=1, max_length=64, pattern=r"^[a-zA-Z0-9_-]+$")
    description: str | None = None
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: bool | None = None


class JsonSchemaFormat(RequestModel):
    type: Literal["json_schema"]
    json_schema: JsonSchemaSpec


if TYPE_CHECKING:
    ResponseFormat: TypeAlias = TextFormat | JsonObjectFormat | JsonSchemaFormat
else:
    ResponseFormat = _type_union(
        "type",
        ("text", TextFormat),
        ("json_object", JsonObjectFormat),
        ("json_schema", JsonSchemaFormat),
        what="response_format",
    )


class StreamOptions(RequestModel):
    include_usage: bool | None = None
    include_obfuscation: bool | None = None


# --------------------------------------------------------------------------- the request


class ChatCompletionRequest(RequestModel):
    """``POST /v1/chat/completions`` body. Unknown fields fail validation."""

    model: str = Field(min_length=1)
    messages: list[ChatMessage] = Field(min_length=1)

    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    stop: StrOrList | None = None
    n: int | None = Field(default=None, ge=1)

    stream: bool | None = None
    stream_options: StreamOptions | None = None

    tools: list[FunctionTool] | None = None
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    response_format: ResponseFormat | None = None

    user: str | None = None
    safety_identifier: str | None = None
    prompt_cache_key: str | None = None
    metadata: dict[str, str] | None = None
    store: bool | None = None
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = None
    verbosity: Literal["low", "medium", "high"] | None = None
    service_tier: str | None = None

    logprobs: bool | None = None
    top_logprobs: int | None = None

    # Known but not supported: modelled so the refusal can say why (see validate.py).
    seed: int | None = None
    logit_bias: dict[str, Any] | None = None
    audio: Any = None
    modalities: list[str] | None = None
    prediction: Any = None
    functions: Any = None
    function_call: Any = None
    web_search_options: Any = None
    moderation: Any = None
    prompt_cache_retention: Any = None
    prompt_cache_options: Any = None


# --------------------------------------------------------------------------- the response


class FunctionCallOut(ResponseModel):
    name: str
    arguments: str


class ToolCallOut(ResponseModel):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCallOut


class UrlCitation(ResponseModel):
    start_index: int
    end_index: int
    title: str
    url: str


class AnnotationOut(ResponseModel):
    type: Literal["url_citation"] = "url_citation"
    url_citation: UrlCitation


class AssistantMessageOut(ResponseModel):
    role: Literal["assistant"] = "assistant"
    content: str | None = None
    refusal: str | None = None
    tool_calls: list[ToolCallOut] | None = _omit()
    annotations: list[AnnotationOut] = Field(default_factory=list)


FinishReason: TypeAlias = Literal["stop", "length", "tool_calls", "content_filter"]


class TopLogprobOut(ResponseModel):
    token: str
    logprob: float
    bytes: list[int] | None = None


class TokenLogprobOut(ResponseModel):
    token: str
    logprob: float
    bytes: list[int] | None = None
    top_logprobs: list[TopLogprobOut] = Field(default_factory=list)


class ChoiceLogprobs(ResponseModel):
    """``logprobs`` of a choice (``logprobs: true``): the tokens of its content."""

    content: list[TokenLogprobOut] | None = None
    refusal: list[TokenLogprobOut] | None = None


class Choice(ResponseModel):
    index: int = 0
    message: AssistantMessageOut
    finish_reason: FinishReason
    logprobs: ChoiceLogprobs | None = None


class PromptTokensDetails(ResponseModel):
    cached_tokens: int = 0


class CompletionTokensDetails(ResponseModel):
    reasoning_tokens: int = 0


class CompletionUsage(ResponseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails = Field(default_factory=PromptTokensDetails)
    completion_tokens_details: CompletionTokensDetails = Field(
        default_factory=CompletionTokensDetails
    )


class ChatCompletion(ResponseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: CompletionUsage | None = None
    system_fingerprint: None = None
    service_tier: str | None = _omit()


# --------------------------------------------------------------------------- stream chunks


class DeltaFunction(ResponseModel):
    name: str | None = _omit()
    arguments: str | None = _omit()


class DeltaToolCall(ResponseModel):
    index: int
    id: str | None = _omit()
    type: Literal["function"] | None = _omit()
    function: DeltaFunction


class Delta(ResponseModel):
    role: Literal["assistant"] | None = _omit()
    content: str | None = _omit()
    refusal: str | None = _omit()
    tool_calls: list[DeltaToolCall] | None = _omit()


class ChunkChoice(ResponseModel):
    index: int = 0
    delta: Delta
    finish_reason: FinishReason | None = None
    logprobs: ChoiceLogprobs | None = None


class ChatCompletionChunk(ResponseModel):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoice]
    system_fingerprint: None = None
    service_tier: str | None = _omit()  # on every chunk, as on the chat.completion
    # Present (null until the last chunk) only when stream_options.include_usage is set.
    usage: CompletionUsage | None = None


class ErrorBody(ResponseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorEnvelope(ResponseModel):
    """``{"error": {...}}`` — HTTP error bodies and the mid-stream error line."""

    error: ErrorBody
