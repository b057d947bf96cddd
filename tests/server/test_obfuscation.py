"""``stream_options.include_obfuscation`` (the spec's default: true): padded delta events.

The four delta events the spec gives an ``obfuscation`` field carry random characters
that round the delta's UTF-8 length up to a multiple of ``PAD_TO``; other events are
untouched; ``include_obfuscation: false`` turns it off per request, and
``[endpoints.responses] obfuscation = false`` changes the default (a request can still ask).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from orgate.engine.padding import PAD_TO, PADDING
from orgate.neutral import (
    Finish,
    ReasoningDelta,
    RefusalDelta,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
)
from tests.engine.helpers import run
from tests.server_process import OrgateServer
from tests.support.spec import check_events, check_sse, spec, validate_event


def _padded_stream(*events: Any) -> list[dict[str, Any]]:
    builder = run()
    builder.padded = True
    for event in events:
        builder.feed(event)
    drained = builder.drain()
    for event in drained:
        validate_event(event)
    check_events(drained)
    return drained


def test_padding_rounds_each_delta_up_to_a_multiple_of_pad_to() -> None:
    texts = ["", "a", "hello", "x" * 31, "y" * 32, "日本語", "e\u0301"]
    assert all(1 <= len(PADDING[r]) == (PAD_TO - r or PAD_TO) for r in range(PAD_TO))
    assert all(p.isascii() and p.isalnum() for p in PADDING) and len(set(PADDING)) == PAD_TO
    events = _padded_stream(*(TextDelta(t) for t in texts), Finish("stop"))
    deltas = [e for e in events if e["type"] == "response.output_text.delta"]
    assert [e["delta"] for e in deltas] == [t for t in texts if t]
    for e in deltas:
        assert (len(e["delta"].encode()) + len(e["obfuscation"])) % PAD_TO == 0


def test_only_the_four_delta_events_of_the_spec_are_padded() -> None:
    events = _padded_stream(
        ReasoningDelta("think", "summary"),
        ReasoningDelta("hard", "content"),
        TextDelta("hi"),
        RefusalDelta("no"),
        ToolCallStart(0, "call_1", "f"),
        ToolCallDelta(0, '{"a": 1}'),
        Finish("tool_calls"),
    )
    padded = {e["type"] for e in events if "obfuscation" in e}
    schemas = spec()["components"]["schemas"].values()
    in_spec = {
        s["properties"]["type"]["enum"][0]
        for s in schemas
        if "obfuscation" in s.get("properties", {})
    }
    assert padded == in_spec  # the events the spec gives the field, each of them, no more
    unpadded = run(TextDelta("hi"), Finish("stop")).drain()  # a builder not told to: none
    assert not any("obfuscation" in e for e in unpadded)


TOOLS = [
    {
        "type": "function",
        "name": "lookup",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
    }
]


def _stream(http: httpx.Client, **fields: Any) -> list[dict[str, Any]]:
    res = http.post(
        "/v1/responses",
        json={"model": "orgate/echo", "input": "orgate:reason find cats", "stream": True, **fields},
    )
    assert res.status_code == 200, res.text
    return check_sse(res.text)  # spec-valid events, the grammar holds with the extra field


def _padded(events: list[dict[str, Any]]) -> set[str]:
    """The types of the events that carry ``obfuscation``."""
    return {e["type"] for e in events if "obfuscation" in e}


@pytest.fixture(scope="module", params=[True, False], ids=["default", "configured-off"])
def http(request: pytest.FixtureRequest) -> Iterator[tuple[httpx.Client, bool]]:
    config = "" if request.param else "[endpoints.responses]\nobfuscation = false\n"
    with (
        OrgateServer(config) as server,
        httpx.Client(base_url=server.url, headers=server.headers(), timeout=30) as client,
    ):
        yield client, request.param


def test_streams_follow_the_request_then_the_configuration(http: tuple[httpx.Client, bool]) -> None:
    client, default = http
    text_and_summary = {"response.output_text.delta", "response.reasoning_summary_text.delta"}
    assert _padded(_stream(client)) == (text_and_summary if default else set())
    assert _padded(_stream(client, stream_options={"include_obfuscation": False})) == set()
    assert (
        _padded(_stream(client, stream_options={"include_obfuscation": True})) == text_and_summary
    )
    assert _padded(_stream(client, tools=TOOLS, stream_options={"include_obfuscation": True})) >= {
        "response.function_call_arguments.delta"
    }
    # the stored stream replays what was sent, padding and all
    sent = _stream(client, stream_options={"include_obfuscation": True})
    replay = client.get(f"/v1/responses/{sent[0]['response']['id']}", params={"stream": "true"})
    assert replay.status_code == 200 and check_sse(replay.text) == sent
    # a non-streamed answer has no events to pad
    res = client.post(
        "/v1/responses",
        json={
            "model": "orgate/echo",
            "input": "hi",
            "stream_options": {"include_obfuscation": True},
        },
    )
    assert res.status_code == 200 and "obfuscation" not in res.text
