"""Strict ``json_schema`` extractions through orgate with a plain ``openai-chat`` entry for the
real model's server (llama-cpp-python), no capability hint: the safety net goes down the
refusal ladder to the server's own grammar (``json_object`` with the ``schema``) on the first
request, and stays there; every answer is schema-valid or an explicit failure, never an
upstream error nor a ``completed`` answer that fails its schema.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from jsonschema import Draft202012Validator

from tests.real_model.conftest import MODEL, REQUEST_TIMEOUT, model_config
from tests.server_process import OrgateServer
from tests.support.spec import validate

PRODUCT = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "price": {"type": "number"},
        "in_stock": {"type": "boolean"},
    },
    "required": ["name", "price", "in_stock"],
    "additionalProperties": False,
}
ITEMS = (
    "Blue kettle, 39.90 EUR, in stock.",
    "Red toaster, 25 USD, out of stock.",
    "Green mug, 7.50 GBP, available.",
    "Steel fork set, 12 EUR, sold out.",
    "Wooden chair, 89.99 USD, in stock.",
    "Glass vase, 15.25 EUR, not available.",
)


@pytest.fixture(scope="module")
def api() -> Iterator[httpx.Client]:
    with (
        OrgateServer(model_config()) as gateway,
        httpx.Client(
            base_url=gateway.url, headers=gateway.headers(), timeout=REQUEST_TIMEOUT
        ) as client,
    ):
        yield client


def test_strict_extractions_come_back_schema_valid_in_the_servers_own_grammar(
    api: httpx.Client,
) -> None:
    valid, modes = 0, []
    for item in ITEMS:
        res = api.post(
            "/v1/responses",
            json={
                "model": MODEL,
                "input": f"Extract the product: {item}",
                "max_output_tokens": 64,
                "temperature": 0,
                "text": {
                    "format": {
                        "type": "json_schema",
                        "name": "product",
                        "schema": PRODUCT,
                        "strict": True,
                    }
                },
            },
        )
        body = res.json()
        if res.status_code != 200:  # the budget was spent: said so, never an upstream error
            assert res.status_code == 400, body
            assert body["error"]["code"] == "structured_output_invalid", body
            continue
        validate("ResponseResource", body)
        modes.append(res.headers["x-orgate-structured-mode"])
        assert body["status"] == "completed", body
        text = "".join(
            part["text"]
            for out in body["output"]
            if out["type"] == "message"
            for part in out["content"]
            if part["type"] == "output_text"
        )
        Draft202012Validator(PRODUCT).validate(json.loads(text))  # a completed answer is valid
        valid += 1
    assert valid >= 5, (valid, modes)
    assert set(modes) == {"json_object_schema"}, modes  # the grammar, learnt at once
