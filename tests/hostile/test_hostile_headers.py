"""Values a client controls that come back in a response header, against a real ``orgate serve``.

``"user": "a\\nb"`` (or a NUL) once had the upstream called and billed and the response stored,
and the client got a closed connection: the session key is echoed in ``X-Session-Id``, which the
server then refused to send. A session key a header cannot carry is now a 400 naming it, before
the model is asked; every other echoed value (gate warnings quoting a client's item types) is
sent escaped, and a non-Latin-1 key comes back as UTF-8.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.fakes.openai_chat_upstream import FakeOpenAIChat, text
from tests.server_process import OrgateServer
from tests.support.configs import model_block


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeOpenAIChat]:
    with FakeOpenAIChat.start_in_thread() as fake:
        fake.handler = lambda body: text("fine")
        yield fake


@pytest.fixture(scope="module")
def server(upstream: FakeOpenAIChat) -> Iterator[OrgateServer]:
    config = '[gate]\npolicy = "warn"\n' + model_block(
        "fake", "openai-chat", upstream.base_url, "fake-model"
    )
    with OrgateServer(config) as running:
        yield running


def post(server: OrgateServer, body: dict, **headers: str) -> httpx.Response:
    return httpx.post(
        f"{server.base_url}/responses",
        json={"model": "fake", "input": "hi", **body},
        headers={**server.headers(), **headers},
        timeout=60,
    )


@pytest.mark.parametrize("user", ["a\nb", "a\x00b", "a\r\nSet-Cookie: x=1", "x" * 257])
def test_a_user_no_header_can_carry_is_refused_before_the_model_is_asked(
    server: OrgateServer, upstream: FakeOpenAIChat, user: str
) -> None:
    asked = len(upstream.bodies)
    answer = post(server, {"user": user})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["param"] == "user" and error["code"] == "invalid_value"
    assert len(upstream.bodies) == asked
    assert "Traceback" not in server.output()


def test_a_session_header_with_a_tab_is_refused_the_same_way(
    server: OrgateServer, upstream: FakeOpenAIChat
) -> None:
    asked = len(upstream.bodies)
    answer = post(server, {}, **{"X-Session-Id": "a\tb"})
    assert answer.status_code == 400 and answer.json()["error"]["param"] == "X-Session-Id"
    assert len(upstream.bodies) == asked


@pytest.mark.parametrize("user", ["张三", "José", "plain-user"])
def test_any_printable_user_comes_back_in_x_session_id(server: OrgateServer, user: str) -> None:
    first = post(server, {"user": user})
    assert first.status_code == 200 and first.headers["x-session-id"] == user
    # The session continues from that key: the second turn's history holds the first's answer.
    second = post(server, {"user": user, "input": "again"})
    assert second.status_code == 200
    assert second.json()["previous_response_id"] == first.json()["id"]


@pytest.mark.parametrize("stream", [False, True])
def test_gate_warnings_quoting_a_client_s_item_type_are_sent_escaped(
    server: OrgateServer, stream: bool
) -> None:
    hostile = {"type": "acme:x\r\nSet-Cookie: stolen=1\x00", "data": 1}
    items = [hostile, {"role": "user", "content": "hi"}] + [
        {"type": f"acme:{n:04}"}
        for n in range(500)  # a warnings header far past 16 KiB
    ]
    answer = post(server, {"input": items, "stream": stream})
    assert answer.status_code == 200, answer.text
    warnings = answer.headers["x-orgate-gate-warnings"]
    assert "acme:x\\r\\nSet-Cookie: stolen=1\\x00" in warnings
    assert "set-cookie" not in answer.headers and len(warnings) <= 4096
    assert warnings.endswith("... (cut)")
    if stream:
        assert answer.text.rstrip().endswith("data: [DONE]")
    else:
        assert answer.json()["status"] == "completed"
