"""JSON modes an upstream refuses: asked again one mode down, remembered, declared ones kept."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from orgate.neutral import Capabilities, Deployment, ModelEvent, ModelRequest, TextFormat
from orgate.protocol.errors import ApiError
from orgate.structured import (
    Outcome,
    SafetyNet,
    StructuredMetrics,
    StructuredPolicy,
    StructuredSettings,
)
from orgate.structured.downgrades import ModeDowngrades, refuses_format
from orgate.structured.outcome import DOWNGRADE_HEADER
from tests.structured.fakes import answer
from tests.structured.test_net import GOOD, request
from tests.support.scripted import ScriptedProvider, Turn

REFUSED = ApiError(
    502,
    "upstream 'm' failed (HTTP 500): Internal Server Error",
    type="server_error",
    code="upstream_error",
)


def refusing(*refused: str, error: ApiError = REFUSED) -> ScriptedProvider:
    """An upstream that fails every request carrying a response format in ``refused``, as
    llama.cpp's server does for json_schema (a 500, passed on as a 502 upstream_error)."""

    def reply(request: ModelRequest) -> Turn | list[ModelEvent]:
        fmt = request.text_format
        return Turn(error) if fmt is not None and fmt.type in refused else answer(GOOD)

    return ScriptedProvider(otherwise=reply)


def net_for(
    provider: ScriptedProvider,
    downgrades: ModeDowngrades,
    caps: Capabilities | None = None,
    metrics: StructuredMetrics | None = None,
) -> SafetyNet:
    deployment = Deployment("local", "openai-chat", "up", capabilities=caps or Capabilities())
    policy = StructuredPolicy.from_settings(StructuredSettings())
    return SafetyNet(provider, deployment, policy, metrics, downgrades=downgrades)


async def drain(net: SafetyNet, req: ModelRequest) -> Outcome:
    outcome = Outcome()
    [e async for e in net.stream(req, outcome=outcome)]
    return outcome


async def test_a_refused_json_schema_is_asked_again_as_json_object_and_remembered() -> None:
    upstream, memory = refusing("json_schema"), ModeDowngrades()
    metrics = StructuredMetrics(CollectorRegistry())
    outcome = await drain(net_for(upstream, memory, metrics=metrics), request())
    sent = [r.text_format.type if r.text_format else None for r in upstream.requests]
    assert sent == ["json_schema", "json_object"]
    assert '"sku"' in (upstream.requests[1].instructions or "")  # the schema, in the prompt
    assert outcome.status == "ok" and outcome.mode == "json_object_instructions"
    assert outcome.headers()[DOWNGRADE_HEADER] == "json_schema"
    counted = metrics.downgrades.labels(
        model="local", format="product", refused="json_schema", mode="json_object_instructions"
    )
    assert counted._value.get() == 1
    # the next request to the same deployment starts one mode down: one upstream call
    again = await drain(net_for(upstream, memory), request())
    assert len(upstream.requests) == 3 and upstream.requests[2].text_format.type == "json_object"
    assert again.headers()[DOWNGRADE_HEADER] == "json_schema"


async def test_a_server_refusing_both_formats_gets_the_schema_in_the_prompt_only() -> None:
    upstream, memory = refusing("json_schema", "json_object"), ModeDowngrades()
    outcome = await drain(net_for(upstream, memory), request())
    assert [r.text_format for r in upstream.requests][2] is None
    assert outcome.mode == "instructions" and outcome.status == "ok"
    assert memory.refused("local") == {"json_schema", "json_object"}
    json_object = await drain(net_for(upstream, memory), request(TextFormat("json_object")))
    assert json_object.mode == "instructions" and len(upstream.requests) == 4


async def test_declared_capabilities_win_the_refusal_reaches_the_client() -> None:
    upstream, memory = refusing("json_schema"), ModeDowngrades()
    declared = Capabilities(declared=frozenset({"json_schema"}))
    with pytest.raises(ApiError) as info:
        await drain(net_for(upstream, memory, caps=declared), request())
    assert info.value.code == "upstream_error" and len(upstream.requests) == 1
    assert memory.refused("local") == frozenset()


async def test_an_upstream_that_is_down_teaches_nothing() -> None:
    memory = ModeDowngrades()
    down = ScriptedProvider(otherwise=Turn(REFUSED))
    with pytest.raises(ApiError):
        await drain(net_for(down, memory), request())
    assert len(down.requests) == 3  # json_schema, json_object, instructions: all failed
    assert memory.refused("local") == frozenset()


@pytest.mark.parametrize(
    ("error", "counts"),
    [
        (
            ApiError(
                400,
                "upstream 'm' rejected the request: response_format json_schema is not supported",
                code="upstream_bad_request",
            ),
            True,
        ),
        (
            ApiError(
                400,
                "upstream 'm' rejected the request: messages must alternate",
                code="upstream_bad_request",
            ),
            False,
        ),
        (ApiError(502, "upstream 'm' failed (HTTP 500)", code="upstream_error"), True),
        (ApiError(502, "stream cut", code="upstream_stream_truncated"), True),
        (ApiError(502, "credentials", code="upstream_auth_failed"), False),
        (ApiError(429, "slow down", code="rate_limit_exceeded"), False),
    ],
)
def test_which_upstream_errors_may_be_a_refused_format(error: ApiError, counts: bool) -> None:
    assert refuses_format(error) is counts


def refusing_levels(*refused: str) -> ScriptedProvider:
    """Refuses by what a mode sends: its dialect (None = the standard json_schema) or
    ``json_object``; ``refused`` names them."""

    def reply(request: ModelRequest) -> Turn | list[ModelEvent]:
        fmt = request.text_format
        level = None if fmt is None else (fmt.dialect or fmt.type)
        return Turn(REFUSED) if level in refused else answer(GOOD)

    return ScriptedProvider(otherwise=reply)


LLAMA_LADDER = Capabilities(schema_dialects=("json_schema", "json_object_schema"))


async def test_the_ladder_goes_through_the_dialects_before_json_object() -> None:
    """llama-cpp-python's server: a 500 to json_schema, its grammar with json_object + schema."""
    upstream, memory = refusing_levels("json_schema"), ModeDowngrades()
    outcome = await drain(net_for(upstream, memory, caps=LLAMA_LADDER), request())
    second = upstream.requests[1].text_format
    assert second is not None and second.dialect == "json_object_schema"
    assert outcome.status == "ok" and outcome.mode == "json_object_schema"
    assert memory.refused("local") == {"json_schema"}
    again = await drain(net_for(upstream, memory, caps=LLAMA_LADDER), request())
    assert again.mode == "json_object_schema" and len(upstream.requests) == 3


async def test_a_refusal_of_a_level_that_answered_before_is_not_remembered() -> None:
    """A grammar compiler that cannot take one schema says nothing of the deployment."""
    memory = ModeDowngrades()
    await drain(net_for(refusing_levels(), memory, caps=LLAMA_LADDER), request())  # answered
    refusing = refusing_levels("json_schema")
    outcome = await drain(net_for(refusing, memory, caps=LLAMA_LADDER), request())
    assert outcome.mode == "json_object_schema" and memory.refused("local") == frozenset()


async def test_declared_dialects_are_not_learnt_around() -> None:
    upstream, memory = refusing_levels("json_object_schema"), ModeDowngrades()
    declared = Capabilities(
        schema_dialects=("json_object_schema",), declared=frozenset({"schema_dialects"})
    )
    with pytest.raises(ApiError):
        await drain(net_for(upstream, memory, caps=declared), request())
    assert len(upstream.requests) == 1
