"""The regular-expression reader behind the built-in model's strings for ``pattern``."""

from __future__ import annotations

import pytest

from orgate.providers.regex_tree import PatternSyntaxError, parse
from orgate.providers.schema_example import _strings_for_pattern


def test_the_tree_of_a_pattern() -> None:
    assert parse(r"^a\d{2,}(?:b|c)$") == [
        ("AT", "^"),
        ("LITERAL", ord("a")),
        ("REPEAT", (2, None, [("IN", [("CATEGORY", "DIGIT")])])),
        ("GROUP", (None, [("BRANCH", [[("LITERAL", ord("b"))], [("LITERAL", ord("c"))]])])),
        ("AT", "$"),
    ]
    assert parse(r"[^\sa-c]") == [
        ("IN", [("NEGATE", None), ("CATEGORY", "SPACE"), ("RANGE", (ord("a"), ord("c")))])
    ]
    assert parse(r"(?<year>x)\1\u0041x{") == [
        ("GROUP", (1, [("LITERAL", ord("x"))])),
        ("GROUPREF", 1),
        ("LITERAL", 0x41),
        ("LITERAL", ord("x")),
        ("LITERAL", ord("{")),
    ]


@pytest.mark.parametrize("pattern", ["(a", "a)", "*a", "[z-a]", r"\p{L}", "a{5,2}", "[ab"])
def test_what_it_does_not_read_is_an_error(pattern: str) -> None:
    with pytest.raises(PatternSyntaxError):
        parse(pattern)


def test_generated_strings_match_and_respect_the_lengths() -> None:
    strings = _strings_for_pattern(r"^[a-z]+-\d{3}$", 16, low=8)
    assert strings and all(s.split("-")[1].isdigit() for s in strings)
    assert len(strings[0]) >= 8
