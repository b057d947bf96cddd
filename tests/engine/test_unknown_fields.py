"""Fields the request body does not define, in process: top-level and in each setting object,
the neutral and extension fields' types, and which error comes first."""

from __future__ import annotations

import pytest

from orgate.engine.request_body import refuse_unknown_fields
from orgate.protocol import CreateResponseBody
from orgate.protocol.errors import ApiError

FUNCTION = {"type": "function", "name": "f", "parameters": {"type": "object"}}


def _refusal(body: dict) -> tuple[str | None, str | None, str]:
    with pytest.raises(ApiError) as caught:
        refuse_unknown_fields(
            CreateResponseBody.model_validate({"model": "m", "input": "hi", **body})
        )
    return caught.value.code, caught.value.param, caught.value.message


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"client_metadata": {"a": "b"}, "prompt_cache_retention": "24h"},
        {"client_metadata": None, "prompt_cache_retention": None},
        {"user": "u1", "stop": "END"},
        {"stop": ["a", "b"]},
        {"user": None, "stop": None},
        {
            "text": {"format": {"type": "text"}},
            "reasoning": {"effort": "low"},
            "stream_options": {"include_obfuscation": False},
        },
        {
            "tools": [FUNCTION],
            "tool_choice": {
                "type": "allowed_tools",
                "mode": "auto",
                "tools": [{"type": "function", "name": "f"}],
            },
        },
        {"tools": [FUNCTION], "tool_choice": "auto"},
        # A hosted tool's own fields go to the upstream that runs it: not refused here.
        {"tools": [{"type": "web_search", "search_context_size": "low", "anything": 1}]},
    ],
)
def test_known_fields_pass(body):
    refuse_unknown_fields(CreateResponseBody.model_validate({"model": "m", "input": "hi", **body}))


def test_an_unknown_top_level_field_is_refused():
    assert _refusal({"temprature": 1}) == (
        "unknown_parameter",
        "temprature",
        "Unknown parameter: 'temprature'.",
    )


@pytest.mark.parametrize(
    ("name", "value", "kind"),
    [("client_metadata", "tag", "an object"), ("prompt_cache_retention", 24, "a string")],
)
def test_a_neutral_field_of_the_wrong_type_is_refused(name, value, kind):
    assert _refusal({name: value}) == ("invalid_type", name, f"Invalid '{name}': expected {kind}.")


def test_user_must_be_a_string():
    assert _refusal({"user": 5}) == ("invalid_type", "user", "Invalid 'user': expected a string.")


@pytest.mark.parametrize("stop", [5, ["a", 5], {"a": 1}])
def test_stop_must_be_a_string_or_strings(stop):
    assert _refusal({"stop": stop}) == (
        "invalid_type",
        "stop",
        "Invalid 'stop': expected a string or a list of strings.",
    )


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"text": {"verbosity": "low", "colour": "red"}}, "text.colour"),
        ({"text": {"format": {"type": "text", "colour": "red"}}}, "text.format.colour"),
        ({"reasoning": {"effort": "low", "depth": 3}}, "reasoning.depth"),
        ({"stream_options": {"include_obfuscation": True, "x": 1}}, "stream_options.x"),
        ({"tools": [FUNCTION, {**FUNCTION, "name": "g", "x": 1}]}, "tools[1].x"),
        (
            {"tools": [FUNCTION], "tool_choice": {"type": "function", "name": "f", "x": 1}},
            "tool_choice.x",
        ),
        (
            {
                "tools": [FUNCTION],
                "tool_choice": {
                    "type": "allowed_tools",
                    "mode": "auto",
                    "tools": [{"type": "function", "name": "f", "x": 1}],
                },
            },
            "tool_choice.tools[0].x",
        ),
    ],
)
def test_an_unknown_field_in_a_setting_object_is_refused_by_its_path(body, param):
    assert _refusal(body) == ("unknown_parameter", param, f"Unknown parameter: '{param}'.")


def test_the_first_error_wins_top_level_then_settings_then_user_then_stop():
    assert _refusal({"colour": 1, "text": {"colour": 1}, "user": 5})[1] == "colour"
    assert _refusal({"client_metadata": 1, "colour": 1})[1] == "client_metadata"
    assert _refusal({"user": 5, "stop": 5, "text": {"colour": 1}})[1] == "text.colour"
    assert _refusal({"user": 5, "stop": 5})[1] == "user"
