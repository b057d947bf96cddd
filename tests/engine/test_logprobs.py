"""Token log probabilities through the builder: each delta's, then the part's, per part.

The builder puts a ``TextDelta``'s ``logprobs`` on its delta event and gathers them
into the part (``output_text.done``, ``content_part.done``, the output item and the
final response); a new part (after a refusal) starts its own list; text without
them keeps ``[]``. ``logprob_list`` turns what upstreams send into the spec's shape.
"""

from __future__ import annotations

from typing import Any

from orgate.neutral import Finish, RefusalDelta, TextDelta
from orgate.neutral.logprobs import logprob_list
from tests.engine.helpers import run
from tests.support.spec import check_events, validate, validate_event


def _lp(token: str, logprob: float = -0.5) -> dict[str, Any]:
    return {"token": token, "logprob": logprob, "bytes": list(token.encode()), "top_logprobs": []}


def test_each_part_gathers_its_own_deltas_logprobs() -> None:
    builder = run(
        TextDelta("Hel", [_lp("Hel")]),
        TextDelta("lo", [_lp("lo", -1.5)]),
        TextDelta(
            "", [_lp("\u00e9", -3.0)]
        ),  # a token that is part of a character: a delta of its own
        RefusalDelta("no"),
        TextDelta("Again", [_lp("Again")]),
        TextDelta(" plain"),  # an upstream that gave none for this piece
        Finish("stop"),
    )
    events = builder.drain()
    for event in events:
        validate_event(event)
    check_events(events)  # deltas' logprobs concatenate to the done event's and the part's
    deltas = [e["logprobs"] for e in events if e["type"] == "response.output_text.delta"]
    assert deltas == [[_lp("Hel")], [_lp("lo", -1.5)], [_lp("\u00e9", -3.0)], [_lp("Again")], []]
    final = events[-1]["response"]
    validate("ResponseResource", final)
    first, refusal, second = final["output"][0]["content"]
    assert first["text"] == "Hello" and first["logprobs"] == [
        _lp("Hel"),
        _lp("lo", -1.5),
        _lp("\u00e9", -3.0),
    ]
    assert refusal == {"type": "refusal", "refusal": "no"}
    assert second["text"] == "Again plain" and second["logprobs"] == [_lp("Again")]


def test_text_without_logprobs_keeps_empty_lists() -> None:
    events = run(TextDelta("Hi"), Finish("stop")).drain()
    check_events(events)
    part = events[-1]["response"]["output"][0]["content"][0]
    assert part["logprobs"] == [] and all(e.get("logprobs", []) == [] for e in events)


def test_upstream_entries_in_the_spec_shape() -> None:
    raw = [
        {"token": "a", "logprob": -1, "bytes": None, "top_logprobs": None},
        {
            "token": "b",
            "logprob": -0.5,
            "bytes": [98],
            "top_logprobs": [{"token": "c", "logprob": -2}, {"token": 3}],
        },
        {"token": "é", "logprob": -0.1, "bytes": [300]},  # not bytes: the token's UTF-8 instead
        {"token": "d", "logprob": True},  # a boolean is not a log probability
        {"logprob": -1.0},
        None,
    ]
    assert logprob_list(raw) == [
        {"token": "a", "logprob": -1, "bytes": [97], "top_logprobs": []},
        {
            "token": "b",
            "logprob": -0.5,
            "bytes": [98],
            "top_logprobs": [{"token": "c", "logprob": -2, "bytes": [99]}],
        },
        {"token": "é", "logprob": -0.1, "bytes": [195, 169], "top_logprobs": []},
    ]
    for entry in logprob_list(raw):
        validate("LogProb", entry)
    assert logprob_list(None) == logprob_list({"content": []}) == []
