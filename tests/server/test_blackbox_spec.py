"""Black-box spec conformance: what an outside tester checks against the OpenAPI document.

Each test pins a place where orgate once answered otherwise than the spec (the
schema, or a limit the spec states in a field's description): request values
the spec rules out are a 400 naming the offending path, a 405 names the allowed
methods, and a response's listed input items have the spec's item shape.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.support.spec import errors as spec_errors
from tests.support.spec import validate

OK = {"model": "orgate/echo", "input": "hi"}


def _error(res: httpx.Response, status: int = 400) -> dict[str, Any]:
    assert res.status_code == status, res.text
    assert res.headers["content-type"].startswith("application/json")
    body = res.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}, (
        body
    )
    return body["error"]


# --------------------------------------------------------------------------- null means absent


@pytest.mark.parametrize(
    "field", ["stream", "store", "background", "truncation", "service_tier", "include"]
)
def test_null_for_an_optional_non_nullable_field_means_absent(
    http: httpx.Client, field: str
) -> None:
    """Not nullable in the schema, but OpenAI takes ``null`` as "not given" and clients send it:
    so do we."""
    res = http.post("/v1/responses", json={**OK, field: None})
    assert res.status_code == 200, res.text
    validate("ResponseResource", res.json())


def test_null_for_nullable_fields_is_still_accepted(http: httpx.Client) -> None:
    nullable = [
        "previous_response_id",
        "tools",
        "tool_choice",
        "metadata",
        "text",
        "temperature",
        "top_p",
        "max_output_tokens",
        "reasoning",
        "instructions",
        "top_logprobs",
        "safety_identifier",
        "prompt_cache_key",
        "stream_options",
        "max_tool_calls",
        "parallel_tool_calls",
    ]
    body = {**OK, **dict.fromkeys(nullable)}
    assert not spec_errors("CreateResponseBody", body)
    res = http.post("/v1/responses", json=body)
    assert res.status_code == 200, res.text
    validate("ResponseResource", res.json())


# --------------------------------------------------------------------------- limits stated in
# descriptions


@pytest.mark.parametrize(
    ("patch", "param"),
    [
        (
            {"metadata": {"k" * 65: "v"}},
            "metadata",
        ),  # "Keys are strings with a maximum length of 64 characters"
        ({"metadata": {"K" * 65: "v"}}, "metadata"),
        (
            {
                "text": {
                    "format": {
                        "type": "json_schema",
                        "name": "has space",
                        "schema": {"type": "object"},
                    }
                }
            },
            "text.format.name",
        ),
        (
            {
                "text": {
                    "format": {
                        "type": "json_schema",
                        "name": "n" * 65,
                        "schema": {"type": "object"},
                    }
                }
            },
            "text.format.name",
        ),
        ({"temperature": 2.5}, "temperature"),  # "between 0 and 2"
        ({"temperature": -0.1}, "temperature"),
        ({"top_p": 1.5}, "top_p"),  # "between 0 and 1"
        ({"top_p": -0.5}, "top_p"),
    ],
)
def test_described_limits_are_enforced(
    http: httpx.Client, patch: dict[str, Any], param: str
) -> None:
    error = _error(http.post("/v1/responses", json={**OK, **patch}))
    assert error["param"] == param, error


@pytest.mark.parametrize(
    "patch",
    [
        {"metadata": {"k" * 64: "v" * 512}},
        {
            "text": {
                "format": {"type": "json_schema", "name": "Out_put-1", "schema": {"type": "object"}}
            }
        },
        {"temperature": 2, "top_p": 1},
        {"temperature": 0, "top_p": 0},
    ],
)
def test_values_at_the_limits_are_accepted(http: httpx.Client, patch: dict[str, Any]) -> None:
    res = http.post("/v1/responses", json={**OK, **patch})
    assert res.status_code == 200, res.text
    body = res.json()
    validate("ResponseResource", body)
    for key, value in patch.items():
        if key != "text":
            assert body[key] == value


# --------------------------------------------------------------------------- unknown nested
# parameters


@pytest.mark.parametrize(
    ("patch", "param"),
    [
        ({"text": {"format": {"type": "text"}, "colour": "red"}}, "text.colour"),
        ({"text": {"format": {"type": "text", "colour": "red"}}}, "text.format.colour"),
        ({"reasoning": {"effort": None, "budget": 5}}, "reasoning.budget"),
        ({"stream_options": {"include_usage": True}}, "stream_options.include_usage"),
        ({"tools": [{"type": "function", "name": "f", "returns": "int"}]}, "tools[0].returns"),
        (
            {
                "tools": [{"type": "function", "name": "f"}],
                "tool_choice": {"type": "function", "name": "f", "force": True},
            },
            "tool_choice.force",
        ),
    ],
)
def test_unknown_nested_parameters_are_400_not_dropped(
    http: httpx.Client, patch: dict[str, Any], param: str
) -> None:
    error = _error(http.post("/v1/responses", json={**OK, **patch}))
    assert error["param"] == param and error["code"] == "unknown_parameter", error


# --------------------------------------------------------------------------- 405


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("PATCH", "/v1/responses/resp_x", {"GET", "DELETE"}),
        ("PUT", "/v1/responses", {"POST"}),
        ("GET", "/v1/responses/resp_x/cancel", {"POST"}),
        ("POST", "/v1/models", {"GET"}),
        ("PUT", "/v1/responses/compact", {"POST"}),
        ("PATCH", "/v1/responses/compact", {"POST"}),
        ("GET", "/v1/responses/compact", {"POST"}),
        ("DELETE", "/v1/responses/compact", {"POST"}),
    ],
)
def test_method_not_allowed_names_the_allowed_methods(
    http: httpx.Client, method: str, path: str, allowed: set[str]
) -> None:
    res = http.request(method, path)
    error = _error(res, 405)
    assert error["code"] == "method_not_allowed"
    listed = {m.strip() for m in res.headers["allow"].split(",")}
    assert allowed <= listed and method not in listed, res.headers["allow"]
    if path.endswith("/compact"):  # the spec's only operation there: nothing else may be listed
        assert listed == {"POST"}, res.headers["allow"]


# --------------------------------------------------------------------------- listed input items


IMAGE = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQ"
    "AAAABJRU5ErkJggg=="
)
TOOL = {
    "type": "function",
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def test_input_items_have_the_spec_item_shape(http: httpx.Client) -> None:
    sent = [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "look"},
                {"type": "input_image", "image_url": IMAGE},
            ],
        },
        {"type": "message", "role": "assistant", "content": "A pixel."},
        {"role": "user", "content": "Weather?"},
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"city":"Paris"}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
    ]
    created = http.post(
        "/v1/responses", json={"model": "orgate/echo", "input": sent, "tools": [TOOL]}
    )
    assert created.status_code == 200, created.text
    page = http.get(
        f"/v1/responses/{created.json()['id']}/input_items", params={"order": "asc"}
    ).json()
    assert set(page) == {"object", "data", "first_id", "last_id", "has_more"}
    items = page["data"]
    assert [i["type"] for i in items] == [i.get("type", "message") for i in sent]
    for item in items:
        validate("ItemField", item)  # the spec's item: status, content parts...
        validate("ItemParam", item)  # ... and still an input item a client may send back
    assert items[0]["content"] == [{"type": "input_text", "text": "Be brief."}]
    assert items[1]["content"][1]["detail"] == "auto"
    assert items[2]["content"] == [{"type": "output_text", "text": "A pixel.", "annotations": []}]
    assert {i["status"] for i in items} == {"completed"}
    # what was listed is accepted back as input
    again = http.post(
        "/v1/responses", json={"model": "orgate/echo", "input": items, "tools": [TOOL]}
    )
    assert again.status_code == 200, again.text


# --------------------------------------------------------------------------- /openapi.json


def test_the_served_document_requires_the_model_the_server_requires(http: httpx.Client) -> None:
    """The spec lets ``model`` be absent or null (a server with a default model); orgate has no
    default and answers 400, so the document it serves says ``model`` is a required string."""
    body = http.get("/openapi.json").json()["components"]["schemas"]["CreateResponseBody"]
    assert "model" in body["required"]
    assert (
        body["properties"]["model"]["type"] == "string"
        and "anyOf" not in body["properties"]["model"]
    )
    for sent in ({"input": "hi"}, {"model": None, "input": "hi"}):
        assert _error(http.post("/v1/responses", json=sent))["param"] == "model"
