"""Every provider wrapper hands an upstream's batches on intact where it passes events through:
one write per upstream read reaches the HTTP layer (neutral/provider.py)."""

from __future__ import annotations

from orgate.engine.router import Route, Router, Target
from orgate.engine.tool_guard import ToolGuard
from orgate.neutral import (
    Capabilities,
    Deployment,
    Finish,
    ModelEvent,
    ModelRequest,
    Provider,
    TextDelta,
    TextFormat,
    Usage,
)
from orgate.protocol import FunctionToolParam
from orgate.providers.builtin_misbehave import FlakyProvider, MisbehaveSettings
from orgate.structured import SafetyNet, StructuredPolicy
from orgate.structured.settings import StructuredSettings
from tests.support.scripted import ScriptedProvider, Turn

USAGE = Usage(input_tokens=3, output_tokens=2)
BATCHES: list[list[ModelEvent]] = [
    [TextDelta("a"), TextDelta("b")],
    [TextDelta("c")],
    [Finish("stop", USAGE)],
]
DEPLOYMENT = Deployment("d", "openai-chat", "up", base_url="http://d", capabilities=Capabilities())


def batched() -> ScriptedProvider:
    """An upstream answering in ``BATCHES``, one network read each."""
    return ScriptedProvider(Turn(*BATCHES))


def request(**fields: object) -> ModelRequest:
    return ModelRequest(model="up", input=[{"role": "user", "content": "hi"}], **fields)  # type: ignore[arg-type]


async def batches_of(provider: Provider, req: ModelRequest) -> list[list[ModelEvent]]:
    return [batch async for batch in provider.stream_batches(req)]


async def test_the_tool_guard_keeps_text_batches_of_a_request_with_tools() -> None:
    tool = FunctionToolParam(name="f", parameters={"type": "object"})
    guarded = await batches_of(ToolGuard(batched()), request(tools=[tool]))
    # text streams live, batch by batch; the Finish leaves with the checked calls (none here)
    assert guarded == BATCHES


async def test_the_tool_guard_passes_a_request_without_tools_through() -> None:
    assert await batches_of(ToolGuard(batched()), request()) == BATCHES


async def test_the_safety_net_passes_a_text_request_through() -> None:
    policy = StructuredPolicy.from_settings(StructuredSettings())
    assert await batches_of(SafetyNet(batched(), DEPLOYMENT, policy), request()) == BATCHES


async def test_the_flaky_model_passes_a_text_request_through() -> None:
    flaky = FlakyProvider(batched(), MisbehaveSettings())
    assert await batches_of(flaky, request(text_format=TextFormat())) == BATCHES


async def test_a_routed_model_keeps_its_upstream_batches() -> None:
    route = Route("m", (Target(DEPLOYMENT),))
    router = Router({"m": route}, lambda deployment: batched())
    provider, trace = router.open(Deployment("m", "openai-chat", "front", base_url="http://d"))
    assert await batches_of(provider, request()) == BATCHES
    assert trace.served_by == "d"
