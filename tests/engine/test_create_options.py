"""``engine/create_options.py``: OpenAI's extra create fields, read and checked (no server)."""

from __future__ import annotations

from typing import Any

import pytest

from orgate.engine.create_options import PLAIN, CreateOptions, create_options
from orgate.engine.request_body import parse_body, refuse_unknown_fields
from orgate.protocol.errors import ApiError


def options(**fields: Any) -> CreateOptions:
    return create_options(parse_body({"model": "m", "input": "x", **fields}))


def refusal(**fields: Any) -> tuple[int, str | None, str | None]:
    with pytest.raises(ApiError) as caught:
        options(**fields)
    return caught.value.status, caught.value.code, caught.value.param


def test_a_plain_body_has_none() -> None:
    assert options() is PLAIN
    assert options(user="u") is PLAIN  # other extra fields are not these


def test_what_each_field_asks_for() -> None:
    assert options(conversation="conv_1").conversation == "conv_1"
    assert options(conversation={"id": "conv_2"}).conversation == "conv_2"
    assert options(conversation=None) == PLAIN
    assert options(generate=False).generate is False
    assert options(generate=True) == PLAIN
    managed = options(context_management=[{"type": "compaction", "compact_threshold": 900}])
    assert (managed.compaction, managed.compact_threshold) == (True, 900)
    unset = options(context_management=[{"type": "compaction"}])
    assert (unset.compaction, unset.compact_threshold) == (True, None)
    assert options(context_management=[]) == PLAIN


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (
            {"conversation": "c", "previous_response_id": "resp_1"},
            (400, "mutually_exclusive_parameters", None),
        ),
        ({"conversation": ["c"]}, (400, "invalid_type", "conversation")),
        ({"conversation": {}}, (400, "missing_required_parameter", "conversation.id")),
        ({"conversation": {"id": 3}}, (400, "invalid_type", "conversation.id")),
        ({"conversation": "c" * 257}, (400, "invalid_value", "conversation")),
        ({"conversation": "conv\r\nX-Evil: 1"}, (400, "invalid_value", "conversation")),
        ({"generate": 0}, (400, "invalid_type", "generate")),
        ({"context_management": ["compaction"]}, (400, "invalid_type", "context_management[0]")),
        (
            {
                "context_management": [
                    {"type": "compaction", "compact_threshold": 9},
                    {"type": "compaction", "compact_threshold": 9},
                ]
            },
            (400, "invalid_value", "context_management[1]"),
        ),
        (
            {"context_management": [{"type": "compaction", "compact_threshold": True}]},
            (400, "invalid_type", "context_management[0].compact_threshold"),
        ),
    ],
)
def test_refusals(fields: dict[str, Any], expected: tuple[int, str, str | None]) -> None:
    assert refusal(**fields) == expected


def test_they_are_not_unknown_parameters() -> None:
    body = parse_body(
        {
            "model": "m",
            "input": "x",
            "conversation": "c",
            "generate": False,
            "context_management": [{"type": "compaction", "compact_threshold": 5}],
        }
    )
    refuse_unknown_fields(body)  # no 400 unknown_parameter
