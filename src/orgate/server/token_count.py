"""``POST /v1/responses/input_tokens``: how many input tokens a create request would send.

The body is a create body's subset OpenAI's endpoint takes (``model``, ``input``,
``previous_response_id``, ``conversation``, ``instructions``, ``tools``, ``tool_choice``,
``text``, ``reasoning``, ``parallel_tool_calls``, ``truncation``); any other field is a 400
``unknown_parameter``. The request is prepared as ``create`` prepares it (history, items
referenced, compaction items opened), then counted by the model's upstream where it has a
count of its own (an ``openai-responses`` upstream's ``/responses/input_tokens``,
Anthropic's ``/v1/messages/count_tokens``, the built-in model's words), else estimated as
the truncation estimates (characters / 4 and a few tokens per item). No model is called.

The answer is OpenAI's ``{"object": "response.input_tokens", "input_tokens": N}``; the
header ``X-Orgate-Input-Tokens`` says ``upstream`` or ``estimate``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from orgate.engine.input_gate import split_namespaced
from orgate.engine.request_body import parse_body
from orgate.protocol.errors import unknown_parameter
from orgate.server.auth import caller_of
from orgate.server.body import check_request_limits, read_json
from orgate.server.compact import OnlyPost
from orgate.server.request_state import request_state
from orgate.server.routes import json_response

if TYPE_CHECKING:
    from orgate.server.services import Services

#: Says whether ``input_tokens`` is the upstream's count or orgate's estimate.
COUNT_HEADER = "X-Orgate-Input-Tokens"

#: The fields OpenAI's ``POST /v1/responses/input_tokens`` takes.
FIELDS = frozenset(
    {
        "model",
        "input",
        "previous_response_id",
        "conversation",
        "instructions",
        "tools",
        "tool_choice",
        "text",
        "reasoning",
        "parallel_tool_calls",
        "truncation",
    }
)


def token_count_routes(services: Services) -> Sequence[BaseRoute]:
    limits = services.settings.limits

    async def count(request: Request) -> Response:
        caller = caller_of(request.scope)
        data = await read_json(request, limits)
        if isinstance(data, dict):
            request_state(request.scope).note_model(data.get("model"))
            for name in data:
                if name not in FIELDS:
                    raise unknown_parameter(name)
            check_request_limits(data, limits)
            if "input" in data:
                data["input"] = split_namespaced(data["input"], services.settings.gate.policy, [])
        body = parse_body(data)
        tokens, upstream = await services.responses.count_input_tokens(body, caller)
        return json_response(
            {"object": "response.input_tokens", "input_tokens": tokens},
            headers={COUNT_HEADER: "upstream" if upstream else "estimate"},
        )

    return [
        Route("/v1/responses/input_tokens", count, methods=["POST"]),
        Route("/v1/responses/input_tokens", OnlyPost()),  # every other method; before stored routes
    ]


__all__ = ["COUNT_HEADER", "token_count_routes"]
