"""Sessions over HTTP: ``X-Session-Id`` (or ``user``) continues the session's latest response;
one turn at a time."""

from __future__ import annotations

from collections.abc import Iterator

import httpx

from tests.fakes.openai_chat_upstream import FakeOpenAIChat
from tests.store_e2e.helpers import assert_error, create, messages_of, uid
from tests.support.spec import check_sse


def _first_event(lines: Iterator[str]) -> None:
    """Consume the stream up to its first event."""
    for line in lines:
        if line.startswith("data:"):
            return


def test_session_header_continues_from_the_latest_turn(
    a: httpx.Client, fake: FakeOpenAIChat
) -> None:
    sid = f"sess-{uid()}"
    headers = {"X-Session-Id": sid}
    r1 = a.post("/v1/responses", json={"model": "fake-chat", "input": "s one"}, headers=headers)
    assert r1.status_code == 200 and r1.headers.get("x-session-id") == sid
    r2 = a.post("/v1/responses", json={"model": "fake-chat", "input": "s two"}, headers=headers)
    assert r2.status_code == 200 and r2.headers.get("x-session-id") == sid
    assert r2.json()["previous_response_id"] == r1.json()["id"]
    r3 = a.post(
        "/v1/responses",
        json={"model": "fake-chat", "input": "s three", "stream": True},
        headers=headers,
    )
    assert r3.status_code == 200 and r3.headers.get("x-session-id") == sid
    check_sse(r3.content)
    assert messages_of(fake.bodies[1]) == [
        ("user", "s one"),
        ("assistant", "You said: s one"),
        ("user", "s two"),
    ]
    assert messages_of(fake.bodies[2])[-3:] == [
        ("user", "s two"),
        ("assistant", "You said: s two"),
        ("user", "s three"),
    ]
    assert len(fake.bodies[2]["messages"]) == 5


def test_user_field_is_the_fallback_session_key(a: httpx.Client, fake: FakeOpenAIChat) -> None:
    user = f"user-{uid()}"
    first = create(a, model="fake-chat", input="u one", user=user)
    second = create(a, model="fake-chat", input="u two", user=user)
    assert second["previous_response_id"] == first["id"]
    assert messages_of(fake.bodies[1]) == [
        ("user", "u one"),
        ("assistant", "You said: u one"),
        ("user", "u two"),
    ]
    other = create(a, model="fake-chat", input="u other", user=f"user-{uid()}")
    assert other["previous_response_id"] is None
    assert messages_of(fake.bodies[2]) == [("user", "u other")]


def test_explicit_previous_response_id_wins_over_the_session(
    a: httpx.Client, fake: FakeOpenAIChat
) -> None:
    headers = {"X-Session-Id": f"sess-{uid()}"}
    root = create(a, model="fake-chat", input="root", headers=headers)
    create(a, model="fake-chat", input="middle", headers=headers)
    fork = create(
        a, model="fake-chat", input="fork", previous_response_id=root["id"], headers=headers
    )
    assert fork["previous_response_id"] == root["id"]
    assert messages_of(fake.bodies[-1]) == [
        ("user", "root"),
        ("assistant", "You said: root"),
        ("user", "fork"),
    ]


def test_concurrent_turn_in_one_session_is_409_and_the_first_completes(a: httpx.Client) -> None:
    sid = f"sess-{uid()}"
    headers = {"X-Session-Id": sid}
    slow = {"model": "orgate/echo", "input": "orgate:delay=200 slow words here now", "stream": True}
    with a.stream("POST", "/v1/responses", json=slow, headers=headers) as first:
        assert first.status_code == 200
        lines = first.iter_lines()
        _first_event(lines)
        r = a.post(
            "/v1/responses", json={"model": "orgate/echo", "input": "impatient"}, headers=headers
        )
        assert_error(r, 409, "session_busy")
        r = a.post(
            "/v1/responses",
            json={"model": "orgate/echo", "input": "impatient", "stream": True},
            headers=headers,
        )
        assert_error(r, 409, "session_busy")
        rest = "\n".join(lines)
    assert "response.completed" in rest and "[DONE]" in rest
    # The lease is released with the first turn: the next one continues from it.
    after = create(a, input="now my turn", headers=headers)
    assert after["status"] == "completed" and after["previous_response_id"] is not None


def test_sessions_are_scoped_per_api_key(
    a: httpx.Client, b: httpx.Client, fake: FakeOpenAIChat
) -> None:
    sid = f"shared-{uid()}"
    headers = {"X-Session-Id": sid}
    create(a, model="fake-chat", input="a secret", headers=headers)
    from_b = create(b, model="fake-chat", input="b hello", headers=headers)
    assert from_b["previous_response_id"] is None
    assert messages_of(fake.bodies[-1]) == [("user", "b hello")], (
        "tenant b must not see tenant a's session"
    )
    # A busy turn of tenant a does not make the same session id busy for tenant b.
    slow = {"model": "orgate/echo", "input": "orgate:delay=200 a is slow here", "stream": True}
    with a.stream("POST", "/v1/responses", json=slow, headers=headers) as first:
        lines = first.iter_lines()
        _first_event(lines)
        r = b.post(
            "/v1/responses", json={"model": "fake-chat", "input": "b again"}, headers=headers
        )
        assert r.status_code == 200, r.text
        assert r.json()["previous_response_id"] == from_b["id"]
        assert "response.completed" in "\n".join(lines)
    assert messages_of(fake.bodies[-1]) == [
        ("user", "b hello"),
        ("assistant", "You said: b hello"),
        ("user", "b again"),
    ]
