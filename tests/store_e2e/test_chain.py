"""``previous_response_id`` and ``item_reference`` end to end: what the upstream model actually
receives."""

from __future__ import annotations

import httpx

from tests.fakes.openai_chat_upstream import FakeOpenAIChat
from tests.store_e2e.helpers import assert_error, create, messages_of, text_of


def test_four_turn_chain_sends_history_in_order_and_does_not_inherit_instructions(
    a: httpx.Client, fake: FakeOpenAIChat
) -> None:
    t1 = create(a, model="fake-chat", input="turn one", instructions="INSTR-ONE")
    assert text_of(t1) == "You said: turn one"
    t2 = create(a, model="fake-chat", input="turn two", previous_response_id=t1["id"])
    t3 = create(
        a,
        model="fake-chat",
        input=[
            {"role": "user", "content": "turn three a"},
            {"role": "user", "content": "turn three b"},
        ],
        instructions="INSTR-THREE",
        previous_response_id=t2["id"],
    )
    t4 = create(a, model="fake-chat", input="turn four", previous_response_id=t3["id"])
    t5 = create(a, model="fake-chat", input="turn five", previous_response_id=t4["id"])
    assert [t["previous_response_id"] for t in (t1, t2, t3, t4, t5)] == [
        None,
        t1["id"],
        t2["id"],
        t3["id"],
        t4["id"],
    ]
    assert [t["instructions"] for t in (t1, t2, t3, t4, t5)] == [
        "INSTR-ONE",
        None,
        "INSTR-THREE",
        None,
        None,
    ]

    bodies = fake.bodies
    assert len(bodies) == 5
    seen = [messages_of(body) for body in bodies]
    h1 = [("user", "turn one"), ("assistant", "You said: turn one")]
    h2 = [*h1, ("user", "turn two"), ("assistant", "You said: turn two")]
    h3 = [
        *h2,
        ("user", "turn three a"),
        ("user", "turn three b"),
        ("assistant", "You said: turn three b"),
    ]
    h4 = [*h3, ("user", "turn four"), ("assistant", "You said: turn four")]
    assert seen[0] == [("system", "INSTR-ONE"), ("user", "turn one")]
    assert seen[1] == [*h1, ("user", "turn two")], "turn 2 must not inherit turn 1's instructions"
    assert seen[2] == [
        ("system", "INSTR-THREE"),
        *h2,
        ("user", "turn three a"),
        ("user", "turn three b"),
    ]
    assert seen[3] == [*h3, ("user", "turn four")]
    assert seen[4] == [*h4, ("user", "turn five")]


def test_forks_from_one_parent_keep_their_own_histories(
    a: httpx.Client, fake: FakeOpenAIChat
) -> None:
    root = create(a, model="fake-chat", input="root")
    left = create(a, model="fake-chat", input="left", previous_response_id=root["id"])
    create(a, model="fake-chat", input="right", previous_response_id=root["id"])
    create(a, model="fake-chat", input="left again", previous_response_id=left["id"])
    assert messages_of(fake.bodies[-1]) == [
        ("user", "root"),
        ("assistant", "You said: root"),
        ("user", "left"),
        ("assistant", "You said: left"),
        ("user", "left again"),
    ]


def test_unknown_deleted_and_foreign_previous_ids_are_404(
    a: httpx.Client, b: httpx.Client, fake: FakeOpenAIChat
) -> None:
    def cont(client: httpx.Client, rid: str) -> httpx.Response:
        return client.post(
            "/v1/responses",
            json={"model": "fake-chat", "input": "more", "previous_response_id": rid},
        )

    assert_error(
        cont(a, "resp_0000000000000000000000000000000000000000000000"),
        404,
        "not_found",
        "previous_response_id",
    )
    deleted = create(a, input="soon gone")["id"]
    assert a.delete(f"/v1/responses/{deleted}").status_code == 200
    assert_error(cont(a, deleted), 404, "not_found", "previous_response_id")
    mine = create(a, input="tenant a only")["id"]
    assert_error(cont(b, mine), 404, "not_found", "previous_response_id")
    assert fake.bodies == [], "a refused continuation must not reach the model"


def test_item_reference_resolves_stored_output_and_input_items(
    a: httpx.Client, fake: FakeOpenAIChat
) -> None:
    first = create(a, model="fake-chat", input="the question")
    output_id = first["output"][0]["id"]
    input_id = a.get(f"/v1/responses/{first['id']}/input_items").json()["data"][0]["id"]
    second = create(
        a,
        model="fake-chat",
        input=[
            {"type": "item_reference", "id": input_id},
            {"type": "item_reference", "id": output_id},
            {"role": "user", "content": "follow-up"},
        ],
    )
    assert messages_of(fake.bodies[-1]) == [
        ("user", "the question"),
        ("assistant", "You said: the question"),
        ("user", "follow-up"),
    ]
    # The stored input of the new response holds the resolved items, not the references.
    page = a.get(f"/v1/responses/{second['id']}/input_items", params={"order": "asc"}).json()
    assert [item["type"] for item in page["data"]] == ["message", "message", "message"]
    assert [item["role"] for item in page["data"]] == ["user", "assistant", "user"]


def test_unknown_item_reference_is_404_naming_the_input_index(
    a: httpx.Client, fake: FakeOpenAIChat
) -> None:
    r = a.post(
        "/v1/responses",
        json={
            "model": "fake-chat",
            "input": [
                {"role": "user", "content": "hi"},
                {"type": "item_reference", "id": "msg_unknown"},
            ],
        },
    )
    assert_error(r, 404, "not_found", "input[1].id")
    assert fake.bodies == []
