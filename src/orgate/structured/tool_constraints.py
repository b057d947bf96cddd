"""Tool-call arguments constrained by the upstream itself, where it can: the tool guard
(engine/tool_guard.py) still checks every call, but fewer need a retry.

Two rewrites of a request with function tools, neither changing what a valid call is:

- ``tool_choice: "required"`` with exactly one function tool becomes that function, named:
  the same constraint, in the form grammar servers decode under the tool's schema
  (llama-cpp-python constrains a named tool choice and ignores ``required``; vLLM does
  guided decoding for both);
- on an ``openai-chat`` deployment whose upstream takes the strict subset of JSON Schema
  (``capabilities.strict_json_schema``: OpenAI and compatible clouds, where Chat Completions
  tools are not strict by default), a tool the client left ``strict`` unset on and whose
  parameters already are strict-compatible as written (``strict.check``) is sent
  ``strict: true``: the upstream then only writes calls valid against it. A schema strict
  mode would have to change (optional keys made nullable) is left as it is.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import AsyncIterator
from typing import Any

import orjson

from orgate.neutral import Deployment, ModelEvent, ModelRequest, Provider, WrapperProvider
from orgate.protocol import FunctionToolParam, SpecificFunctionParam
from orgate.structured import strict


@functools.lru_cache(maxsize=512)
def _strict_as_written(schema_json: bytes) -> bool:
    return strict.is_strict(orjson.loads(schema_json))


def strict_as_written(schema: dict[str, Any]) -> bool:
    """Whether ``schema`` is strict-compatible unchanged (cached by its canonical JSON)."""
    return _strict_as_written(orjson.dumps(schema, option=orjson.OPT_SORT_KEYS))


def _required(choice: Any) -> bool:
    value: object = getattr(choice, "value", choice)
    return value == "required"


def constrain_tools(request: ModelRequest, deployment: Deployment) -> ModelRequest:
    """``request`` with its tool calls constrained where the upstream can (module docstring);
    the request itself when nothing changes."""
    functions = [t for t in request.tools if isinstance(t, FunctionToolParam)]
    if not functions:
        return request
    changes: dict[str, Any] = {}
    if _required(request.tool_choice) and len(request.tools) == 1 and functions:
        changes["tool_choice"] = SpecificFunctionParam(name=functions[0].name)
    if deployment.provider == "openai-chat" and deployment.capabilities.strict_json_schema:
        tools = [
            t.model_copy(update={"strict": True})
            if isinstance(t, FunctionToolParam)
            and t.strict is None
            and t.parameters is not None
            and strict_as_written(t.parameters)
            else t
            for t in request.tools
        ]
        if any(a is not b for a, b in zip(tools, request.tools, strict=True)):
            changes["tools"] = tools
    return dataclasses.replace(request, **changes) if changes else request


class ConstrainedTools(WrapperProvider):
    """Every request of one turn through ``constrain_tools`` (the net's retries too)."""

    def __init__(self, inner: Provider, deployment: Deployment) -> None:
        super().__init__(inner)
        self.deployment = deployment

    def stream_batches(self, request: ModelRequest) -> AsyncIterator[list[ModelEvent]]:
        return self.inner.stream_batches(constrain_tools(request, self.deployment))
