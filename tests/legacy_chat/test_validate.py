"""Malformed and unsupported chat requests → 400 ``ApiError`` with CHAT param paths."""

from __future__ import annotations

from typing import Any

import pytest

from orgate.legacy_chat import translate, validate
from orgate.protocol.errors import ApiError


def base(**fields: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    data.update(fields)
    return data


def reject(data: Any) -> ApiError:
    with pytest.raises(ApiError) as info:
        translate.to_create_response_body(validate.parse_request(data))
    err = info.value
    assert err.status == 400
    assert err.type == "invalid_request_error"
    return err


@pytest.mark.parametrize(
    ("data", "param"),
    [
        ({"messages": [{"role": "user", "content": "hi"}]}, "model"),
        ({"model": "m"}, "messages"),
        (base(messages=[]), "messages"),
        (base(messages=[{"role": "user"}]), "messages[0].content"),
        (base(messages=[{"role": "wizard", "content": "x"}]), "messages[0].role"),
        (base(messages=[{"content": "x"}]), "messages[0].role"),
        (
            base(messages=[{"role": "user", "content": "a"}, {"role": "user", "content": 5}]),
            "messages[1].content",
        ),
        (
            base(
                messages=[
                    {"role": "system", "content": "s"},
                    {"role": "user", "content": "a"},
                    {
                        "role": "user",
                        "content": [{"type": "text", "text": "ok"}, {"type": "video"}],
                    },
                ]
            ),
            "messages[2].content[1].type",
        ),
        (
            base(messages=[{"role": "user", "content": [{"type": "text"}]}]),
            "messages[0].content[0].text",
        ),
        (
            base(
                messages=[
                    {
                        "role": "system",
                        "content": [{"type": "image_url", "image_url": {"url": "u"}}],
                    }
                ]
            ),
            "messages[0].content[0].type",
        ),
        (
            base(
                messages=[
                    {
                        "role": "user",
                        "content": [
                            {"type": "image_url", "image_url": {"url": "u", "detail": "max"}}
                        ],
                    }
                ]
            ),
            "messages[0].content[0].image_url.detail",
        ),
        (
            base(messages=[{"role": "tool", "content": "x"}]),
            "messages[0].tool_call_id",
        ),
        (
            base(
                messages=[
                    {
                        "role": "assistant",
                        "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f"}}],
                    }
                ]
            ),
            "messages[0].tool_calls[0].function.arguments",
        ),
        (base(temperature=3), "temperature"),
        (base(top_p=1.5), "top_p"),
        (base(presence_penalty=-3), "presence_penalty"),
        (base(max_tokens=0), "max_tokens"),
        (base(stop=5), "stop"),
        (base(tools=[{"type": "custom", "custom": {"name": "x"}}]), "tools[0].type"),
        (
            base(tools=[{"type": "function", "function": {"name": "bad name!"}}]),
            "tools[0].function.name",
        ),
        (base(tool_choice="sometimes"), "tool_choice"),
        (base(tool_choice={"type": "function", "function": {}}), "tool_choice.function.name"),
        (base(tool_choice={"type": "mcp"}), "tool_choice.type"),
        (base(response_format={"type": "yaml"}), "response_format.type"),
        (
            base(response_format={"type": "json_schema", "json_schema": {"schema": {}}}),
            "response_format.json_schema.name",
        ),
        (base(metadata={"k": 1}), "metadata.k"),
        (base(stream="yes"), "stream"),
    ],
)
def test_malformed_requests_name_the_chat_param(data: dict[str, Any], param: str) -> None:
    assert reject(data).param == param


def test_unknown_fields_are_rejected_not_dropped() -> None:
    err = reject(base(frobnicate=True))
    assert err.param == "frobnicate"
    assert "frobnicate" in err.message
    err = reject(base(messages=[{"role": "user", "content": "x", "cache_control": {}}]))
    assert err.param == "messages[0].cache_control"


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"n": 2}, "n"),
        ({"top_logprobs": 3}, "top_logprobs"),  # without logprobs: true
        ({"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
        ({"logit_bias": {"50256": -100}}, "logit_bias"),
        ({"seed": 7}, "seed"),
        ({"audio": {"voice": "alloy", "format": "wav"}}, "audio"),
        ({"modalities": ["text", "audio"]}, "modalities"),
        ({"prediction": {"type": "content", "content": "x"}}, "prediction"),
        ({"functions": [{"name": "f"}]}, "functions"),
        ({"function_call": "auto"}, "function_call"),
        ({"web_search_options": {}}, "web_search_options"),
        ({"service_tier": "scale"}, "service_tier"),
        ({"max_tokens": 100, "max_completion_tokens": 100}, "max_tokens"),
        ({"stream_options": {"include_usage": True}}, "stream_options"),
        ({"safety_identifier": "u" * 65}, "safety_identifier"),
        ({"metadata": {f"k{i}": "v" for i in range(17)}}, "metadata"),
        ({"messages": [{"role": "function", "name": "f", "content": "x"}]}, "messages[0].role"),
        ({"messages": [{"role": "user", "name": "bob", "content": "x"}]}, "messages[0].name"),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}
                        ],
                    }
                ]
            },
            "messages[0].content[0]",
        ),
        (
            {
                "messages": [
                    {"role": "user", "content": [{"type": "file", "file": {"file_id": "file-1"}}]}
                ]
            },
            "messages[0].content[0].file.file_id",
        ),
        (
            {
                "messages": [
                    {"role": "user", "content": [{"type": "file", "file": {"filename": "a"}}]}
                ]
            },
            "messages[0].content[0].file.file_data",
        ),
        (
            {
                "messages": [
                    {"role": "user", "content": "x"},
                    {
                        "role": "assistant",
                        "content": None,
                        "function_call": {"name": "f", "arguments": "{}"},
                    },
                ]
            },
            "messages[1].function_call",
        ),
        ({"messages": [{"role": "assistant", "content": None}]}, "messages[0].content"),
    ],
)
def test_unsupported_features_are_refused_clearly(fields: dict[str, Any], param: str) -> None:
    err = reject(base(**fields))
    assert err.param == param
    assert err.message


def test_body_must_be_a_json_object() -> None:
    for data in ([1], "x", None):
        with pytest.raises(ApiError) as info:
            validate.parse_request(data)
        assert info.value.status == 400


def test_error_envelope_shape() -> None:
    err = reject(base(n=3))
    assert translate.error_envelope(err) == {
        "error": {
            "message": err.message,
            "type": "invalid_request_error",
            "param": "n",
            "code": err.code,
        }
    }


def test_logprobs_become_the_responses_include_and_top_logprobs() -> None:
    body = translate.to_create_response_body(
        validate.parse_request(base(logprobs=True, top_logprobs=3))
    )
    assert body.include == ["message.output_text.logprobs"] and body.top_logprobs == 3
    plain = translate.to_create_response_body(
        validate.parse_request(base(logprobs=False, top_logprobs=0))
    )
    assert plain.include is None and plain.top_logprobs is None


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"moderation": {}}, "moderation"),
        ({"service_tier": "premium"}, "service_tier"),
        ({"prompt_cache_retention": "24h"}, "prompt_cache_retention"),
        ({"prompt_cache_options": {}}, "prompt_cache_options"),
        ({"modalities": []}, "modalities"),
        ({"prompt_cache_key": "k" * 65}, "prompt_cache_key"),
        ({"metadata": {"k" * 65: "v"}}, "metadata"),
        ({"metadata": {"k": "v" * 513}}, "metadata.k"),
        (
            {"messages": [{"role": "assistant", "content": "x", "audio": {"id": "a"}}]},
            "messages[0].audio",
        ),
        (
            {
                "messages": [
                    {
                        "role": "assistant",
                        "content": [{"type": "text", "text": "x"}],
                        "annotations": [
                            {
                                "type": "url_citation",
                                "url_citation": {
                                    "url": "https://a.example",
                                    "title": "a",
                                    "start_index": 0,
                                    "end_index": 1,
                                },
                            }
                        ],
                    }
                ]
            },
            "messages[0].annotations",
        ),
    ],
)
def test_more_unsupported_fields_are_refused_before_translation(
    fields: dict[str, Any], param: str
) -> None:
    with pytest.raises(ApiError) as info:
        validate.parse_request(base(**fields))
    assert info.value.status == 400
    assert info.value.param == param


def test_allowed_values_pass_the_checks() -> None:
    req = validate.parse_request(
        base(
            n=1,
            modalities=["text"],
            logit_bias={},
            service_tier="flex",
            prompt_cache_key="k" * 64,
            metadata={"k" * 64: "v" * 512},
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert req.service_tier == "flex"


# Each refused field with the field reported before it, in the order the checks run: a request
# carrying all of them is refused for the first, and so on down the list.
_REFUSAL_ORDER: list[tuple[dict[str, Any], str]] = [
    ({"n": 2}, "n"),
    ({"top_logprobs": 3}, "top_logprobs"),
    ({"logit_bias": {"1": 1}}, "logit_bias"),
    ({"seed": 7}, "seed"),
    ({"audio": {"voice": "alloy"}}, "audio"),
    ({"modalities": ["audio"]}, "modalities"),
    ({"prediction": {}}, "prediction"),
    ({"functions": []}, "functions"),
    ({"function_call": "auto"}, "function_call"),
    ({"web_search_options": {}}, "web_search_options"),
    ({"moderation": {}}, "moderation"),
    ({"prompt_cache_retention": "24h"}, "prompt_cache_retention"),
    ({"prompt_cache_options": {}}, "prompt_cache_options"),
    ({"max_tokens": 5, "max_completion_tokens": 5}, "max_tokens"),
    ({"stream_options": {}}, "stream_options"),
    ({"safety_identifier": "s" * 65}, "safety_identifier"),
    ({"prompt_cache_key": "k" * 65}, "prompt_cache_key"),
    ({"service_tier": "scale"}, "service_tier"),
    ({"metadata": {"k": "v" * 513}}, "metadata.k"),
    ({"messages": [{"role": "user", "name": "bob", "content": "x"}]}, "messages[0].name"),
]


@pytest.mark.parametrize("first", range(len(_REFUSAL_ORDER)))
def test_the_first_refusal_in_check_order_is_reported(first: int) -> None:
    fields: dict[str, Any] = {}
    for more, _ in _REFUSAL_ORDER[first:]:
        fields.update(more)
    with pytest.raises(ApiError) as info:
        validate.parse_request(base(**fields))
    assert info.value.param == _REFUSAL_ORDER[first][1]
