"""Malformed requests: each gets a 4xx in the spec's error shape, and the server keeps serving."""

from __future__ import annotations

import httpx
import orjson
import pytest

from tests.server_process import OrgateServer

J = {"Content-Type": "application/json"}
DEEP = object()  # a body nested 200 levels deep, built in _body

# (name, raw body or JSON value, expected status, expected param or None)
CASES: list[tuple[str, object, int, str | None]] = [
    ("not_json", b"{not json", 400, None),
    ("empty_body", b"", 400, None),
    ("truncated_json", b'{"model": "orgate/echo", "input": "hi"', 400, None),
    ("array_body", [1, 2, 3], 400, None),
    ("string_body", "hello", 400, None),
    ("nan", b'{"model": "orgate/echo", "input": "hi", "temperature": NaN}', 400, None),
    ("missing_model", {"input": "hi"}, 400, "model"),
    ("model_not_string", {"model": 42, "input": "hi"}, 400, "model"),
    ("input_number", {"model": "orgate/echo", "input": 5}, 400, "input"),
    ("input_object", {"model": "orgate/echo", "input": {"role": "user"}}, 400, "input"),
    (
        "unknown_item_type",
        {"model": "orgate/echo", "input": [{"role": "user", "content": "a"}, {"type": "bogus"}]},
        400,
        "input[1].type",
    ),
    (
        "invalid_role",
        {"model": "orgate/echo", "input": [{"role": "wizard", "content": "a"}]},
        400,
        "input[0].role",
    ),
    (
        "unknown_content_type",
        {
            "model": "orgate/echo",
            "input": [{"role": "user", "content": [{"type": "input_audio", "data": "x"}]}],
        },
        400,
        "input[0].content[0].type",
    ),
    (
        "content_not_list",
        {"model": "orgate/echo", "input": [{"role": "user", "content": 7}]},
        400,
        "input[0].content",
    ),
    (
        "object_arguments",
        {
            "model": "orgate/echo",
            "input": [
                {"type": "function_call", "call_id": "c1", "name": "f", "arguments": {"a": 1}}
            ],
        },
        400,
        "input[0].arguments",
    ),
    (
        "missing_call_id",
        {"model": "orgate/echo", "input": [{"type": "function_call_output", "output": "x"}]},
        400,
        "input[0].call_id",
    ),
    (
        "bad_function_name",
        {
            "model": "orgate/echo",
            "input": "hi",
            "tools": [{"type": "function", "name": "has space"}],
        },
        400,
        "tools[0].name",
    ),
    (
        "unknown_tool_type",
        {"model": "orgate/echo", "input": "hi", "tools": [{"type": "teleport"}]},
        400,
        "tools[0].type",
    ),
    (
        "bad_tool_choice",
        {"model": "orgate/echo", "input": "hi", "tool_choice": "sometimes"},
        400,
        "tool_choice",
    ),
    (
        "temperature_string",
        {"model": "orgate/echo", "input": "hi", "temperature": "hot"},
        400,
        "temperature",
    ),
    (
        "max_output_tokens_small",
        {"model": "orgate/echo", "input": "hi", "max_output_tokens": 5},
        400,
        "max_output_tokens",
    ),
    (
        "max_output_tokens_float",
        {"model": "orgate/echo", "input": "hi", "max_output_tokens": 20.5},
        400,
        "max_output_tokens",
    ),
    ("stream_string", {"model": "orgate/echo", "input": "hi", "stream": "yes"}, 400, "stream"),
    (
        "metadata_not_strings",
        {"model": "orgate/echo", "input": "hi", "metadata": {"a": 1}},
        400,
        "metadata.a",
    ),
    (
        "unknown_parameter",
        {"model": "orgate/echo", "input": "hi", "frobnicate": True},
        400,
        "frobnicate",
    ),
    (
        "bad_text_format",
        {"model": "orgate/echo", "input": "hi", "text": {"format": {"type": "yaml"}}},
        400,
        "text.format.type",
    ),
    (
        "json_schema_without_schema",
        {
            "model": "orgate/echo",
            "input": "hi",
            "text": {"format": {"type": "json_schema", "name": "x"}},
        },
        400,
        "text.format.schema",
    ),
    (
        "top_logprobs_out_of_range",
        {"model": "orgate/echo", "input": "hi", "top_logprobs": 99},
        400,
        "top_logprobs",
    ),
    (
        "truncation_bad",
        {"model": "orgate/echo", "input": "hi", "truncation": "sometimes"},
        400,
        "truncation",
    ),
    ("no_input", {"model": "orgate/echo"}, 400, "input"),
    ("unknown_model", {"model": "no-such-model", "input": "hi"}, 404, "model"),
    ("deeply_nested", DEEP, 400, None),
    (
        "reasoning_effort_bad",
        {"model": "orgate/echo", "input": "hi", "reasoning": {"effort": "extreme"}},
        400,
        "reasoning.effort",
    ),
    (
        "previous_response_missing",
        {"model": "orgate/echo", "input": "hi", "previous_response_id": "resp_doesnotexist"},
        404,
        "previous_response_id",
    ),
]


def _nested(depth: int) -> dict:
    node: dict = {}
    for _ in range(depth):
        node = {"a": node}
    return node


def _body(value: object) -> bytes:
    if isinstance(value, bytes):
        return value
    if value is DEEP:
        value = {
            "model": "orgate/echo",
            "input": "hi",
            "text": {"format": {"type": "json_schema", "name": "x", "schema": _nested(200)}},
        }
    return orjson.dumps(value)


def _assert_error_shape(res: httpx.Response) -> dict:
    assert res.headers["content-type"].startswith("application/json"), res.text
    body = res.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"message", "type", "param", "code"}, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return body["error"]


@pytest.mark.parametrize(("name", "payload", "status", "param"), CASES, ids=[c[0] for c in CASES])
def test_malformed_request(
    http: httpx.Client, name: str, payload: object, status: int, param: str | None
) -> None:
    res = http.post("/v1/responses", content=_body(payload), headers=J)
    assert res.status_code == status, res.text
    error = _assert_error_shape(res)
    if param is not None:
        assert error["param"] == param, error
    assert http.get("/healthz").status_code == 200


def test_huge_body_is_413() -> None:
    with OrgateServer("[limits]\nmax_body_bytes = 4096\n") as server:
        res = httpx.post(
            f"{server.base_url}/responses",
            headers=server.headers() | J,
            content=b'{"model":"orgate/echo","input":"' + b"x" * 10000 + b'"}',
        )
        assert res.status_code == 413
        _assert_error_shape(res)


@pytest.mark.parametrize(
    ("headers", "status"),
    [({}, 401), ({"Authorization": "Bearer wrong"}, 401), ({"Authorization": "Basic abc"}, 401)],
)
def test_auth_errors(server: OrgateServer, headers: dict[str, str], status: int) -> None:
    res = httpx.post(
        f"{server.base_url}/responses",
        headers=headers | J,
        json={"model": "orgate/echo", "input": "hi"},
    )
    assert res.status_code == status
    assert _assert_error_shape(res)["type"] == "authentication_error"


def test_unknown_route_and_method(http: httpx.Client) -> None:
    assert http.get("/v1/nope").status_code == 404
    _assert_error_shape(http.get("/v1/nope"))
    res = http.put("/v1/responses", json={})
    assert res.status_code == 405
    _assert_error_shape(res)


def test_wrong_content_type(http: httpx.Client) -> None:
    res = http.post(
        "/v1/responses", content=b"model=x", headers={"Content-Type": "application/xml"}
    )
    assert res.status_code == 415
    _assert_error_shape(res)


def test_models_list(http: httpx.Client) -> None:
    body = http.get("/v1/models").json()
    assert body["object"] == "list"
    ids = {m["id"] for m in body["data"]}
    assert {"orgate/echo", "fake-chat"} <= ids
