"""Black-box: compaction on create (``context_management``) through the real ``openai`` SDK.

Over a long chain and a low threshold the response completes with a compaction item first in
its output; the model read the summary and the last turns only, and so does the next turn,
continued by ``previous_response_id``, by a conversation, or by a client that sends the output
back. Built-in model, openai-chat and anthropic fakes."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
from openai.types.responses import ResponseCompactionCompactingEvent

from orgate.engine.compaction.core import SUMMARISER_INSTRUCTIONS, SUMMARY_HEADER
from tests.clients_api.conftest import MODELS, upstream_saw
from tests.fakes._base import LoopbackFake
from tests.support.spec import check_events

COMPACT = [{"type": "compaction", "compact_threshold": 40}]


def chain(client: openai.OpenAI, model: str, turns: int) -> str:
    """``turns`` responses chained by ``previous_response_id``: ``turn N about topicN``."""
    previous = None
    for n in range(turns):
        made = client.responses.create(
            model=model, input=f"turn {n} about topic{n}", previous_response_id=previous
        )
        previous = made.id
    assert previous is not None
    return previous


def user_texts(model: str, body: dict[str, Any]) -> list[str]:
    """The user messages' texts of a model request a fake received."""
    out = []
    for message in body["messages"]:
        if message["role"] != "user":
            continue
        content = message["content"]
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if p.get("type") == "text")
        out.append(content)
    return out


@pytest.mark.parametrize("model", MODELS)
def test_a_long_chain_is_compacted_and_the_next_turn_continues_from_it(
    client: openai.OpenAI, ups: dict[str, LoopbackFake], model: str
) -> None:
    last = chain(client, model, 6)
    calls = len(upstream_saw(ups, model))
    compacted = client.responses.create(
        model=model,
        input="compact now",
        previous_response_id=last,
        extra_body={"context_management": COMPACT},
    )
    assert compacted.status == "completed"
    assert [item.type for item in compacted.output] == ["compaction", "message"]
    item = compacted.output[0]
    assert item.id.startswith("cmp_") and item.encrypted_content.startswith("ogc1_")
    stored = client.responses.retrieve(compacted.id)
    assert stored.output[0].model_dump() == item.model_dump()
    follow = client.responses.create(
        model=model, input="after it", previous_response_id=compacted.id
    )
    assert follow.status == "completed" and [o.type for o in follow.output] == ["message"]
    seen = upstream_saw(ups, model)
    if not seen:  # the built-in model: its usage counts the summary's words
        assert compacted.usage is not None and follow.usage is not None
        return
    fake = ups[model]
    summariser, turn, after = fake.bodies[calls:]
    assert SUMMARISER_INSTRUCTIONS in json.dumps(summariser)  # one model call for the summary
    assert "turn 0 about topic0" in json.dumps(summariser)
    # the model read the summary and the last turns: not turns 0 to 4 as messages
    assert SUMMARY_HEADER in json.dumps(turn)
    assert user_texts(model, turn) == ["turn 5 about topic5", "compact now"]
    assert SUMMARY_HEADER in json.dumps(after)
    assert user_texts(model, after) == ["turn 5 about topic5", "compact now", "after it"]
    assert compacted.output_text in json.dumps(after)
    # the summary's usage is the response's too
    assert compacted.usage is not None and compacted.usage.output_tokens > len(
        compacted.output_text.split()
    )


def test_streaming_events_of_the_compaction(client: openai.OpenAI) -> None:
    last = chain(client, "chat", 4)
    events = list(
        client.responses.create(
            model="chat",
            input="stream it",
            previous_response_id=last,
            stream=True,
            extra_body={"context_management": COMPACT},
        )
    )
    kinds = [event.type for event in events]
    assert kinds[:5] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.compaction.compacting",
        "response.output_item.done",
    ]
    added, compacting, done = events[2], events[3], events[4]
    assert added.item.type == "compaction" and added.item.encrypted_content == ""
    assert isinstance(compacting, ResponseCompactionCompactingEvent)
    assert (compacting.item_id, compacting.output_index) == (added.item.id, 0)
    final = events[-1].response
    assert done.item.encrypted_content == final.output[0].encrypted_content
    assert [item.type for item in final.output] == ["compaction", "message"]
    # every other event is the spec's, in the spec's grammar
    check_events(
        [
            event.model_dump(mode="json", exclude_unset=True)
            for event in events
            if event.type != compacting.type
        ]
    )


def test_a_stateless_client_sends_the_output_back(
    client: openai.OpenAI, ups: dict[str, LoopbackFake]
) -> None:
    history: list[Any] = []
    for n in range(5):
        history.append({"role": "user", "content": f"turn {n} about topic{n}"})
        made = client.responses.create(model="chat", input=history, store=False)
        history += [item.model_dump(exclude_none=True) for item in made.output]
    history.append({"role": "user", "content": "compact here"})
    compacted = client.responses.create(
        model="chat", input=history, store=False, extra_body={"context_management": COMPACT}
    )
    assert compacted.output[0].type == "compaction"
    # the whole history again, then what the compaction returned: the items before the
    # compaction item count for nothing (it stands for them)
    more = [
        *history,
        *(item.model_dump(exclude_none=True) for item in compacted.output),
        {"role": "user", "content": "next one"},
    ]
    client.responses.create(model="chat", input=more, store=False)
    body = ups["chat"].bodies[-1]
    assert user_texts("chat", body) == ["turn 4 about topic4", "compact here", "next one"]
    # the same without the items before it (OpenAI's latency tip)
    client.responses.create(model="chat", input=more[len(history) :], store=False)
    assert user_texts("chat", ups["chat"].bodies[-1]) == user_texts("chat", body)


def test_in_a_conversation(client: openai.OpenAI, ups: dict[str, LoopbackFake]) -> None:
    conv = client.conversations.create()
    for n in range(4):
        client.responses.create(
            model="anth", input=f"turn {n} about topic{n}", conversation=conv.id
        )
    compacted = client.responses.create(
        model="anth",
        input="compact the conversation",
        conversation=conv.id,
        extra_body={"context_management": COMPACT},
    )
    assert compacted.output[0].type == "compaction"
    listed = list(client.conversations.items.list(conv.id, limit=3))  # the newest first
    assert [i.type for i in listed][:3] == ["message", "compaction", "message"]
    client.responses.create(model="anth", input="and then", conversation=conv.id)
    assert user_texts("anth", ups["anth"].bodies[-1]) == [
        "turn 3 about topic3",
        "compact the conversation",
        "and then",
    ]


def test_below_the_threshold_or_nothing_older(
    client: openai.OpenAI, ups: dict[str, LoopbackFake]
) -> None:
    short = client.responses.create(
        model="chat",
        input="short",
        extra_body={"context_management": [{"type": "compaction", "compact_threshold": 10_000}]},
    )
    assert [o.type for o in short.output] == ["message"]
    one_turn = client.responses.create(
        model="chat",
        input="a single long turn " * 40,
        extra_body={"context_management": [{"type": "compaction", "compact_threshold": 5}]},
    )
    assert [o.type for o in one_turn.output] == ["message"]  # the kept turns are all there is
    assert len(ups["chat"].bodies) == 2  # no summariser call


def test_another_tenant_cannot_open_the_compaction_item(
    client: openai.OpenAI, other: openai.OpenAI
) -> None:
    last = chain(client, "orgate/echo", 4)
    compacted = client.responses.create(
        model="orgate/echo",
        input="compact",
        previous_response_id=last,
        extra_body={"context_management": COMPACT},
    )
    sealed = compacted.output[0].model_dump(exclude_none=True)
    with pytest.raises(openai.BadRequestError) as caught:
        other.responses.create(
            model="orgate/echo", input=[sealed, {"role": "user", "content": "x"}]
        )
    body: Any = caught.value.body
    assert (body["code"], body["param"]) == ("invalid_compaction", "input[0].encrypted_content")


@pytest.mark.parametrize(
    ("value", "code", "param"),
    [
        ({"type": "compaction"}, "invalid_type", "context_management"),
        ([{"type": "truncate"}], "invalid_value", "context_management[0].type"),
        ([{"compact_threshold": 5}], "missing_required_parameter", "context_management[0].type"),
        (
            [{"type": "compaction", "compact_threshold": 0}],
            "invalid_value",
            "context_management[0].compact_threshold",
        ),
        (
            [{"type": "compaction", "threshold": 5}],
            "unknown_parameter",
            "context_management[0].threshold",
        ),
        (
            [{"type": "compaction"}],  # no threshold, and the model's window is unknown
            "missing_required_parameter",
            "context_management[0].compact_threshold",
        ),
    ],
)
def test_refusals(client: openai.OpenAI, value: Any, code: str, param: str) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(
            model="orgate/echo", input="x", extra_body={"context_management": value}
        )
    body: Any = caught.value.body
    assert (body["code"], body["param"]) == (code, param)
