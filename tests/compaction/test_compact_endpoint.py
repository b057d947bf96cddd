"""POST /v1/responses/compact end to end, and compaction items coming back as input."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest

from orgate.config import Settings
from orgate.engine.compaction import core as compaction
from orgate.server.compact import compaction_key
from tests.fakes.openai_chat_upstream import FakeOpenAIChat
from tests.support.spec import validate
from tests.ws.conftest import create, ws_connect
from tests.ws.inproc import InProcessServer

CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "my cat is called Turing"},
    {"role": "assistant", "content": "nice name", "phase": "final_answer"},
    {"role": "user", "content": "second question"},
    {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "c1", "output": "42"},
    {"role": "assistant", "content": "second answer"},
    {"role": "user", "content": "third question"},
    {"role": "assistant", "content": "third answer", "phase": "commentary"},
]


@pytest.fixture
def http(app_server: InProcessServer) -> Any:
    with httpx.Client(base_url=app_server.url, headers=app_server.headers(), timeout=20) as client:
        yield client


def compact(http: httpx.Client, **body: Any) -> dict[str, Any]:
    response = http.post("/v1/responses/compact", json=body)
    assert response.status_code == 200, response.text
    data = response.json()
    validate("CompactResource", data)
    return data


def flip(token: str) -> str:
    body = token[len(compaction.TOKEN_PREFIX) :]
    raw = bytearray(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    raw[len(raw) // 2] ^= 0x01
    return compaction.TOKEN_PREFIX + base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()


def as_text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content)
    return content or ""


def test_compact_returns_the_kept_items_then_one_sealed_item(http: httpx.Client) -> None:
    data = compact(http, model="orgate/echo", input=CONVERSATION)
    assert data["object"] == "response.compaction" and data["id"].startswith("resp_")
    output = data["output"]
    kept, sealed = output[:-1], output[-1]
    assert [(i["type"], i.get("role")) for i in kept] == [
        ("message", "system"),
        ("message", "user"),
        ("function_call", None),
        ("function_call_output", None),
        ("message", "assistant"),
        ("message", "user"),
        ("message", "assistant"),
    ]
    assert kept[1]["content"] == [{"type": "input_text", "text": "second question"}]
    assert kept[-1]["phase"] == "commentary"
    assert sealed["type"] == "compaction" and sealed["id"].startswith("cmp_")
    assert (
        sealed["encrypted_content"].startswith("ogc1_")
        and "Turing" not in sealed["encrypted_content"]
    )
    assert (
        data["usage"]["input_tokens"] > 0 and data["usage"]["output_tokens"] > 0
    )  # the model summarised


def test_nothing_older_means_no_model_call(http: httpx.Client) -> None:
    data = compact(http, model="orgate/echo", input="just one turn")
    assert [i["type"] for i in data["output"]] == ["message", "compaction"]
    assert data["usage"]["total_tokens"] == 0


def test_round_trip_the_model_sees_summary_and_kept_items(
    http: httpx.Client, fake: FakeOpenAIChat
) -> None:
    data = compact(http, model="orgate/echo", input=CONVERSATION)
    follow = http.post(
        "/v1/responses",
        json={
            "model": "fake-chat",
            "input": [*data["output"], {"role": "user", "content": "what is my cat called?"}],
        },
    )
    assert follow.status_code == 200, follow.text
    assert follow.json()["status"] == "completed"
    messages = fake.requests[-1].body["messages"]
    texts = [as_text(m.get("content")) for m in messages]
    summary = [t for t in texts if t.startswith(compaction.SUMMARY_HEADER)]
    assert len(summary) == 1
    assert (
        "my cat is called Turing" in summary[0]
    )  # orgate/echo's "summary" quotes the transcript it was given
    assert "second question" in texts and "third answer" in texts
    assert texts[-1] == "what is my cat called?"
    assert (
        texts.index("third answer") < texts.index(summary[0]) < len(texts) - 1
    )  # expanded in place
    assert "nice name" not in texts  # the older assistant answer is only in the summary


def test_compacting_again_summarises_the_older_summary(http: httpx.Client) -> None:
    first = compact(http, model="orgate/echo", input=CONVERSATION)
    more = [
        *first["output"],
        {"role": "user", "content": "fourth"},
        {"role": "assistant", "content": "four"},
        {"role": "user", "content": "fifth"},
    ]
    second = compact(http, model="orgate/echo", input=more)
    assert [i.get("role") for i in second["output"][:-1]] == ["system", "user", "assistant", "user"]
    follow = http.post(
        "/v1/responses",
        json={
            "model": "orgate/echo",
            "input": [*second["output"], {"role": "user", "content": "go"}],
        },
    )
    assert follow.status_code == 200, follow.text


def test_a_tampered_compaction_item_is_a_400(http: httpx.Client) -> None:
    data = compact(http, model="orgate/echo", input=CONVERSATION)
    item = dict(data["output"][-1], encrypted_content=flip(data["output"][-1]["encrypted_content"]))
    response = http.post(
        "/v1/responses",
        json={"model": "orgate/echo", "input": [item, {"role": "user", "content": "hi"}]},
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_compaction" and error["param"] == "input[0].encrypted_content"
    again = http.post(
        "/v1/responses/compact",
        json={"model": "orgate/echo", "input": [item, {"role": "user", "content": "hi"}]},
    )
    assert again.status_code == 400 and again.json()["error"]["code"] == "invalid_compaction"


def test_another_tenant_cannot_open_the_item(app_server: InProcessServer) -> None:
    # A compaction item sealed for one tenant does not open for another
    # (the tenant is the associated data).
    token = compaction.seal(
        compaction.make_payload("secret summary", covered=1),
        app_server.services.compaction.key,
        context="someone-else",
    )
    with httpx.Client(base_url=app_server.url, headers=app_server.headers(), timeout=20) as http:
        response = http.post(
            "/v1/responses",
            json={
                "model": "orgate/echo",
                "input": [
                    {"type": "compaction", "encrypted_content": token},
                    {"role": "user", "content": "x"},
                ],
            },
        )
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_compaction"


@pytest.mark.parametrize(
    ("body", "status", "code", "param"),
    [
        ({"input": "hi"}, 400, "missing_required_parameter", "model"),
        ({"model": "nope", "input": "hi"}, 404, "model_not_found", "model"),
        ({"model": "orgate/echo"}, 400, "missing_required_parameter", "input"),
        (
            {"model": "orgate/echo", "input": "hi", "stream": True},
            400,
            "unknown_parameter",
            "stream",
        ),
        (
            {"model": "orgate/echo", "previous_response_id": "resp_missing"},
            404,
            "previous_response_not_found",
            "previous_response_id",
        ),
    ],
)
def test_bad_compact_requests(
    http: httpx.Client, body: dict[str, Any], status: int, code: str, param: str
) -> None:
    response = http.post("/v1/responses/compact", json=body)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert (error["code"], error["param"]) == (code, param)


def test_compact_from_previous_response_id(app_server: InProcessServer, http: httpx.Client) -> None:
    assert app_server.services.responses.store is not None  # the test server runs with its store
    first = http.post(
        "/v1/responses", json={"model": "orgate/echo", "input": CONVERSATION[:3]}
    ).json()
    second = http.post(
        "/v1/responses",
        json={"model": "orgate/echo", "input": "and then?", "previous_response_id": first["id"]},
    ).json()
    third = http.post(
        "/v1/responses",
        json={"model": "orgate/echo", "input": "last one", "previous_response_id": second["id"]},
    ).json()
    data = compact(http, model="orgate/echo", previous_response_id=third["id"], input="one more")
    roles = [i.get("role") for i in data["output"][:-1]]
    assert roles == ["system", "user", "assistant", "user"]
    assert data["output"][1]["content"][0]["text"] == "last one"


async def test_compaction_item_over_websocket(app_server: InProcessServer) -> None:
    with httpx.Client(base_url=app_server.url, headers=app_server.headers(), timeout=20) as http:
        data = compact(http, model="orgate/echo", input=CONVERSATION)
    async with ws_connect(app_server) as ws:
        events = await create(
            ws,
            model="orgate/echo",
            input=[*data["output"], {"role": "user", "content": "over the socket"}],
        )
    assert events[-1]["type"] == "response.completed"
    plain = [*CONVERSATION[:1], *CONVERSATION[3:], {"role": "user", "content": "over the socket"}]
    async with ws_connect(app_server) as ws:
        without_summary = await create(ws, model="orgate/echo", input=plain)
    # same items plus the summary message: the model read more
    assert (
        events[-1]["response"]["usage"]["input_tokens"]
        > without_summary[-1]["response"]["usage"]["input_tokens"]
    )


def test_the_key_comes_from_the_secret_or_one_shared_key_file(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = Settings.model_validate({"store": {"url": f"sqlite:///{tmp_path / 'orgate.db'}"}})
    monkeypatch.delenv("ORGATE_COMPACTION_SECRET", raising=False)
    first = compaction_key(settings)
    assert (tmp_path / "compaction.key").stat().st_mode & 0o777 == 0o600
    assert compaction_key(settings) == first  # a second process reads the same file
    monkeypatch.setenv("ORGATE_COMPACTION_SECRET", "correct horse battery staple")
    from_secret = compaction_key(settings)
    assert from_secret != first and len(from_secret) == 32
    assert compaction_key(settings) == from_secret


def test_compact_does_not_echo_keys_the_spec_does_not_have(http: httpx.Client) -> None:
    """Request items keep a client's unknown keys; the compaction's output items are the spec's."""
    marked = [
        {
            "role": "user",
            "content": [{"type": "input_text", "text": "first", "x_part": "P1"}],
            "x_item": "I1",
        },
        {"role": "assistant", "content": "one"},
        {"role": "user", "content": "second"},
        {
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "s", "x_summary": "S1"}],
            "x_reasoning": "R1",
        },
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}", "x_call": "C1"},
        {
            "type": "function_call_output",
            "call_id": "c1",
            "output": [{"type": "input_text", "text": "42", "x_out": "O1"}],
            "x_output": "O2",
        },
        {
            "role": "assistant",
            "content": [{"type": "output_text", "text": "two", "annotations": [], "x_text": "T1"}],
        },
    ]
    response = http.post("/v1/responses/compact", json={"model": "orgate/echo", "input": marked})
    assert response.status_code == 200, response.text
    validate("CompactResource", response.json())
    assert len(response.json()["output"]) > 1  # items were kept (and checked)
    for marker in ("P1", "I1", "S1", "R1", "C1", "O1", "O2", "T1"):
        assert f'"{marker}"' not in response.text
