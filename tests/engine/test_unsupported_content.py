"""Content the routed model cannot take is a 400 whose ``param`` names the offending field.

The part's ``type`` when the kind of content is the problem (an image to a model without
images, a part of a type the upstream has no block for), the missing or refused field otherwise
(``image_url``, ``file_url``, ``file_data``) — as the spec's errors name the field at fault.
"""

from __future__ import annotations

from typing import Any

import pytest

from orgate.engine.request_body import check_capabilities, parse_body
from orgate.neutral import Capabilities, Deployment, ModelRequest
from orgate.protocol import InputFileContentParam, UserMessageItemParam
from orgate.protocol.errors import ApiError
from orgate.providers.anthropic import build_body as anthropic_body
from orgate.providers.openai_chat import build_body as chat_body

IMAGE = {"type": "input_image", "image_url": "https://x.test/cat.png"}


def _refused(call: Any) -> ApiError:
    with pytest.raises(ApiError) as info:
        call()
    assert info.value.status == 400 and info.value.type == "invalid_request_error"
    return info.value


def test_an_image_to_a_model_without_images_names_the_part_type() -> None:
    body = parse_body(
        {
            "model": "m",
            "input": [
                {"role": "user", "content": "hi"},
                {"role": "user", "content": [{"type": "input_text", "text": "look"}, IMAGE]},
            ],
        }
    )
    text_only = Deployment(
        name="m",
        provider="openai-chat",
        upstream_model="m",
        capabilities=Capabilities(images=False),
    )
    error = _refused(lambda: check_capabilities(text_only, list(body.input or ()), body))
    assert (error.param, error.code) == ("input[1].content[1].type", "unsupported_content")
    check_capabilities(
        Deployment(name="m", provider="openai-chat", upstream_model="m"),
        list(body.input or ()),
        body,
    )


@pytest.mark.parametrize("build", [chat_body, anthropic_body], ids=["openai-chat", "anthropic"])
def test_a_content_type_an_upstream_cannot_take_names_the_part_type(build: Any) -> None:
    # a plain item, as history replays them (the providers read items by key or attribute)
    video = {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": "watch"},
            {"type": "input_video", "video_url": "https://x.test/v.mp4"},
        ],
    }
    error = _refused(lambda: build(ModelRequest(model="m", input=[video])))
    assert (error.param, error.code) == ("input[0].content[1].type", "unsupported_content")


def test_a_file_the_chat_upstream_cannot_take_names_the_field() -> None:
    nothing = UserMessageItemParam(content=[InputFileContentParam(filename="a.pdf")])
    assert (
        _refused(lambda: chat_body(ModelRequest(model="m", input=[nothing]))).param
        == "input[0].content[0].file_data"
    )
    unknown = UserMessageItemParam(
        content=[InputFileContentParam(filename="a.bin", file_data="AAAA")]
    )
    assert (
        _refused(lambda: anthropic_body(ModelRequest(model="m", input=[unknown]))).param
        == "input[0].content[0].file_data"
    )
