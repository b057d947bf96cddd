"""Black-box: OpenAI's Conversations API through the real ``openai`` SDK and the OpenAI Agents
SDK, against ``orgate serve`` (the built-in model and the openai-chat and anthropic fakes).

A conversation is a session: ``conversations.create``, turns with ``conversation=…``, the
items listed, added, fetched and deleted; another tenant's conversation is a 404; one turn at
a time (409 ``session_busy``); ``X-Session-Id`` sessions are conversations too.
"""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest
from agents import (
    Agent,
    OpenAIConversationsSession,
    OpenAIResponsesModel,
    RunConfig,
    Runner,
    set_tracing_disabled,
)
from agents.models.multi_provider import MultiProvider
from openai import AsyncOpenAI

from tests.clients_api.conftest import MODELS, texts, upstream_saw
from tests.fakes._base import LoopbackFake
from tests.server_process import OrgateServer
from tests.store_e2e.helpers import uid
from tests.support.spec import check_sse, validate

set_tracing_disabled(True)  # no network: nothing may try to export traces


def code_of(error: openai.APIStatusError) -> tuple[int, str | None, str | None]:
    body: Any = error.body
    return error.status_code, body.get("code"), body.get("param")


@pytest.mark.parametrize("model", MODELS)
def test_two_turns_in_a_conversation_are_its_items(
    client: openai.OpenAI, ups: dict[str, LoopbackFake], model: str
) -> None:
    conv = client.conversations.create(
        items=[{"type": "message", "role": "user", "content": "I am Ada."}],
        metadata={"app": "tests"},
    )
    assert conv.object == "conversation" and conv.id.startswith("conv_")
    assert conv.metadata == {"app": "tests"}
    first = client.responses.create(model=model, input="first question", conversation=conv.id)
    second = client.responses.create(
        model=model, input="second question", conversation={"id": conv.id}
    )
    for made in (first, second):
        assert made.conversation is not None and made.conversation.id == conv.id
        assert made.previous_response_id is None  # OpenAI's shape: the conversation says it
        validate("ResponseResource", made.model_dump(mode="json", exclude_unset=True))
    items = list(client.conversations.items.list(conv.id, order="asc"))
    assert texts(items) == [
        ("user", "I am Ada."),
        ("user", "first question"),
        ("assistant", first.output_text),
        ("user", "second question"),
        ("assistant", second.output_text),
    ]
    assert items[2].id == first.output[0].id and items[4].id == second.output[0].id
    seen = upstream_saw(ups, model)
    if seen:  # the second turn's upstream got the conversation so far
        assert len(seen) == 2
        assert "I am Ada." in seen[1] and "first question" in seen[1]
        assert first.output_text in seen[1]
    else:  # the built-in model counts the words it read: 3 + 2 + 2 + 2
        assert second.usage is not None and second.usage.input_tokens == 9


def test_a_streamed_turn_in_a_conversation(client: openai.OpenAI, gateway: OrgateServer) -> None:
    conv = client.conversations.create()
    with client.responses.stream(
        model="orgate/echo", input="streamed into it", conversation=conv.id
    ) as stream:
        events = list(stream)
        final = stream.get_final_response()
    assert events[0].type == "response.created"
    assert events[0].response.conversation is not None
    assert final.conversation is not None and final.conversation.id == conv.id
    raw = httpx.post(
        f"{gateway.base_url}/responses",
        headers={"Authorization": "Bearer key-a"},
        json={"model": "orgate/echo", "input": "raw", "conversation": conv.id, "stream": True},
        timeout=30,
    )
    check_sse(raw.content)
    listed = texts(list(client.conversations.items.list(conv.id, order="asc")))
    assert listed == [
        ("user", "streamed into it"),
        ("assistant", "streamed into it"),
        ("user", "raw"),
        ("assistant", "raw"),
    ]


def test_another_tenants_conversation_is_a_404(client: openai.OpenAI, other: openai.OpenAI) -> None:
    conv = client.conversations.create(metadata={"owner": "a"})
    turn = client.responses.create(model="orgate/echo", input="mine", conversation=conv.id)
    item_id = turn.output[0].id
    attempts = [
        lambda: other.conversations.retrieve(conv.id),
        lambda: other.conversations.update(conv.id, metadata={"owner": "b"}),
        lambda: other.conversations.delete(conv.id),
        lambda: other.conversations.items.list(conv.id),
        lambda: other.conversations.items.create(
            conv.id, items=[{"type": "message", "role": "user", "content": "theirs"}]
        ),
        lambda: other.conversations.items.retrieve(item_id, conversation_id=conv.id),
        lambda: other.conversations.items.delete(item_id, conversation_id=conv.id),
        lambda: other.responses.create(model="orgate/echo", input="x", conversation=conv.id),
    ]
    for attempt in attempts:
        with pytest.raises(openai.NotFoundError) as caught:
            attempt()
        status, code, _ = code_of(caught.value)
        assert (status, code) == (404, "conversation_not_found")
    # nothing of it changed for its owner
    assert client.conversations.retrieve(conv.id).metadata == {"owner": "a"}
    assert texts(list(client.conversations.items.list(conv.id, order="asc"))) == [
        ("user", "mine"),
        ("assistant", "mine"),
    ]


def test_items_are_added_listed_by_page_fetched_and_deleted(
    client: openai.OpenAI, ups: dict[str, LoopbackFake]
) -> None:
    conv = client.conversations.create()
    added = client.conversations.items.create(
        conv.id,
        items=[
            {"type": "message", "role": "user", "content": "one"},
            {"type": "message", "role": "assistant", "content": "two"},
            {"type": "message", "role": "user", "content": "three"},
        ],
    )
    assert added.object == "list" and added.has_more is False
    assert [item.content[0].text for item in added.data] == ["one", "two", "three"]
    assert added.first_id == added.data[0].id and added.last_id == added.data[2].id
    client.responses.create(model="chat", input="four", conversation=conv.id)
    ids = [item.id for item in client.conversations.items.list(conv.id, order="asc")]
    assert len(ids) == 5 and ids[:3] == [item.id for item in added.data]
    page = client.conversations.items.list(conv.id, limit=2, order="asc")
    assert [i.id for i in page.data] == ids[:2] and page.has_more is True
    assert page.last_id == ids[1]
    page = client.conversations.items.list(conv.id, limit=2, order="asc", after=ids[1])
    assert [i.id for i in page.data] == ids[2:4] and page.has_more is True
    newest = client.conversations.items.list(conv.id, limit=3)  # desc by default
    assert [i.id for i in newest.data] == ids[::-1][:3]
    # the SDK's auto-pagination walks every page
    assert [i.id for i in client.conversations.items.list(conv.id, limit=2, order="asc")] == ids
    fetched = client.conversations.items.retrieve(ids[1], conversation_id=conv.id)
    assert fetched.type == "message" and fetched.role == "assistant"
    assert fetched.content[0].text == "two"
    after_delete = client.conversations.items.delete(ids[1], conversation_id=conv.id)
    assert after_delete.object == "conversation" and after_delete.id == conv.id
    left = list(client.conversations.items.list(conv.id, order="asc"))
    assert [i.id for i in left] == [ids[0], *ids[2:]]
    with pytest.raises(openai.NotFoundError):
        client.conversations.items.retrieve(ids[1], conversation_id=conv.id)
    with pytest.raises(openai.NotFoundError):
        client.conversations.items.delete(ids[1], conversation_id=conv.id)
    # the next turn's model does not read the deleted item
    client.responses.create(model="chat", input="five", conversation=conv.id)
    seen = upstream_saw(ups, "chat")[-1]
    assert '"one"' in seen and '"three"' in seen and '"two"' not in seen


def test_metadata_update_and_delete(client: openai.OpenAI) -> None:
    conv = client.conversations.create(metadata={"a": "1"})
    turn = client.responses.create(model="orgate/echo", input="kept", conversation=conv.id)
    updated = client.conversations.update(conv.id, metadata={"b": "2"})
    assert updated.metadata == {"b": "2"} and updated.created_at == conv.created_at
    assert client.conversations.update(conv.id, metadata=None).metadata == {}
    with pytest.raises(openai.BadRequestError) as caught:
        client.conversations.update(conv.id, metadata={"k": 7})  # type: ignore[dict-item]
    assert code_of(caught.value)[2] == "metadata"
    deleted = client.conversations.delete(conv.id)
    assert (deleted.id, deleted.deleted, deleted.object) == (conv.id, True, "conversation.deleted")
    with pytest.raises(openai.NotFoundError):
        client.conversations.retrieve(conv.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="orgate/echo", input="again", conversation=conv.id)
    assert client.responses.retrieve(turn.id).id == turn.id  # its responses stay


def test_a_session_header_and_a_conversation_are_one_thing(
    client: openai.OpenAI, gateway: OrgateServer
) -> None:
    key = f"sess-{uid()}"
    headers = {"X-Session-Id": key}
    one = client.responses.create(model="orgate/echo", input="by header", extra_headers=headers)
    found = client.conversations.retrieve(key)
    assert found.id == key and found.metadata == {}
    listed = texts(list(client.conversations.items.list(key, order="asc")))
    assert listed == [("user", "by header"), ("assistant", "by header")]
    two = client.responses.create(model="orgate/echo", input="by field", conversation=key)
    assert two.conversation is not None and two.conversation.id == key
    # the body's conversation wins over the header (and over `user`)
    elsewhere = client.conversations.create()
    raw = httpx.post(
        f"{gateway.base_url}/responses",
        headers={"Authorization": "Bearer key-a", "X-Session-Id": key},
        json={
            "model": "orgate/echo",
            "input": "field wins",
            "conversation": elsewhere.id,
            "user": f"u-{uid()}",
        },
        timeout=30,
    )
    assert raw.status_code == 200 and raw.headers["x-session-id"] == elsewhere.id
    three = client.responses.create(
        model="orgate/echo", input="header again", extra_headers=headers
    )
    assert three.previous_response_id == two.id  # a header session echoes the link it continues
    assert [t for _, t in texts(list(client.conversations.items.list(key, order="asc")))] == [
        "by header",
        "by header",
        "by field",
        "by field",
        "header again",
        "header again",
    ]
    assert one.id != two.id
    assert texts(list(client.conversations.items.list(elsewhere.id, order="asc")))[0] == (
        "user",
        "field wins",
    )


def test_refusals(client: openai.OpenAI) -> None:
    conv = client.conversations.create()
    first = client.responses.create(model="orgate/echo", input="one")
    cases: list[tuple[dict[str, Any], tuple[int, str, str | None]]] = [
        (
            {"conversation": conv.id, "previous_response_id": first.id},
            (400, "mutually_exclusive_parameters", None),
        ),
        ({"conversation": "conv_nothere"}, (404, "conversation_not_found", "conversation")),
        ({"conversation": 7}, (400, "invalid_type", "conversation")),
        ({"conversation": {"id": conv.id, "x": 1}}, (400, "unknown_parameter", "conversation.x")),
        ({"conversation": ""}, (400, "invalid_value", "conversation")),
        ({"conversation": conv.id, "store": False}, (400, "invalid_value", "store")),
    ]
    for extra, expected in cases:
        with pytest.raises(openai.APIStatusError) as caught:
            client.responses.create(model="orgate/echo", input="x", extra_body=extra)
        assert code_of(caught.value) == expected, extra
    error = caught.value.body
    assert isinstance(error, dict) and set(error) >= {"message", "type", "param", "code"}
    # OpenAI's message for the conflict
    with pytest.raises(openai.BadRequestError) as conflict:
        client.responses.create(
            model="orgate/echo", input="x", conversation=conv.id, previous_response_id=first.id
        )
    assert conflict.value.body["message"] == (  # type: ignore[index]
        "Mutually exclusive parameters. Ensure you are only providing one of: "
        "'previous_response_id' or 'conversation'."
    )
    assert list(client.conversations.items.list(conv.id)) == []  # nothing was added


def test_one_turn_at_a_time(client: openai.OpenAI) -> None:
    conv = client.conversations.create()
    slow = client.responses.create(
        model="orgate/echo",
        input="orgate:delay=300 slow words come one by one",
        conversation=conv.id,
        stream=True,
    )
    events = iter(slow)
    assert next(events).type == "response.created"  # the turn holds the conversation now
    busy = [
        lambda: client.responses.create(model="orgate/echo", input="x", conversation=conv.id),
        lambda: client.conversations.items.create(
            conv.id, items=[{"type": "message", "role": "user", "content": "x"}]
        ),
        lambda: client.conversations.delete(conv.id),
    ]
    for attempt in busy:
        with pytest.raises(openai.ConflictError) as caught:
            attempt()
        assert code_of(caught.value)[:2] == (409, "session_busy")
    assert [e.type for e in events][-1] == "response.completed"
    slow.close()
    after = client.responses.create(model="orgate/echo", input="free again", conversation=conv.id)
    assert after.status == "completed"
    assert len(list(client.conversations.items.list(conv.id))) == 4


# --------------------------------------------------------------------------- the OpenAI Agents SDK


@pytest.mark.parametrize("model", MODELS)
async def test_agents_sdk_conversations_session_runs_two_turns(
    gateway: OrgateServer, ups: dict[str, LoopbackFake], model: str
) -> None:
    """``OpenAIConversationsSession``: the SDK keeps the history in a conversation (create,
    items.list, items.create) and sends it whole each turn."""
    client = AsyncOpenAI(base_url=gateway.base_url, api_key="key-a", max_retries=0, timeout=30)
    session = OpenAIConversationsSession(openai_client=client)
    agent = Agent(name="a", instructions="Be brief.", model=OpenAIResponsesModel(model, client))
    first = await Runner.run(agent, "My name is Ada.", session=session)
    second = await Runner.run(agent, "What is my name?", session=session)
    items = await session.get_items()
    said = [
        (item["role"], item["content"][0]["text"] if isinstance(item["content"], list) else "")
        for item in items
    ]
    assert said == [
        ("user", "My name is Ada."),
        ("assistant", first.final_output),
        ("user", "What is my name?"),
        ("assistant", second.final_output),
    ]
    conv = await client.conversations.retrieve(session.session_id)
    assert conv.id == session.session_id
    seen = upstream_saw(ups, model)
    if seen:
        assert len(seen) == 2 and "My name is Ada." in seen[1]
    popped = await session.pop_item()  # items.delete of the newest
    assert popped is not None and len(await session.get_items()) == 3
    await session.clear_session()  # conversations.delete
    with pytest.raises(openai.NotFoundError):
        await client.conversations.retrieve(conv.id)


@pytest.mark.parametrize("model", MODELS)
async def test_agents_sdk_server_managed_conversation(
    gateway: OrgateServer, ups: dict[str, LoopbackFake], model: str
) -> None:
    """``Runner.run(..., conversation_id=…)``: the SDK sends ``conversation`` and only the new
    input."""
    client = AsyncOpenAI(base_url=gateway.base_url, api_key="key-a", max_retries=0, timeout=30)
    conv = await client.conversations.create()
    agent = Agent(name="a", instructions="Be brief.", model=OpenAIResponsesModel(model, client))
    await Runner.run(agent, "Remember: the key is blue.", conversation_id=conv.id)
    await Runner.run(agent, "Which colour is the key?", conversation_id=conv.id)
    listed = [item async for item in client.conversations.items.list(conv.id, order="asc")]
    assert [(role, text) for role, text in texts(listed) if role == "user"] == [
        ("user", "Remember: the key is blue."),
        ("user", "Which colour is the key?"),
    ]
    assert len(listed) == 4
    seen = upstream_saw(ups, model)
    if seen:
        assert "the key is blue" in seen[1]


async def test_agents_sdk_model_names_without_a_slash(gateway: OrgateServer) -> None:
    """The SDK reads ``orgate/echo`` as a provider prefix; ``orgate-echo`` is the same model."""
    client = AsyncOpenAI(base_url=gateway.base_url, api_key="key-a", max_retries=0, timeout=30)
    config = RunConfig(
        model_provider=MultiProvider(openai_client=client, openai_use_responses=True)
    )
    result = await Runner.run(
        Agent(name="a", model="orgate-echo"), "named plainly", run_config=config
    )
    assert result.final_output == "named plainly"
    with pytest.raises(Exception, match="Unknown prefix: orgate"):
        await Runner.run(Agent(name="a", model="orgate/echo"), "prefixed", run_config=config)
    prefixed = await Runner.run(
        Agent(name="a", model="openai/orgate/echo"), "prefixed", run_config=config
    )
    assert prefixed.final_output == "prefixed"
