"""A schema no answer of the model could satisfy completely is refused before the model is asked.

The smallest value a ``text.format`` schema or a function tool's ``parameters`` admits
(``orgate.gate.cost``) is held against the deployment's output token cap, at
``CHARS_PER_TOKEN`` characters a token. Past the cap no answer can be complete, whatever
``max_output_tokens`` says — the model would be run (and billed) to its cap for an answer
sure to be cut — so the request is a 400 ``schema_exceeds_output`` naming the schema, as
OpenAI refuses a schema past what it serves. Within the cap, a smaller ``max_output_tokens``
is the client's choice: the answer goes as far as that budget and ends ``incomplete``
(reason ``max_output_tokens``), as OpenAI's does. A deployment that declares no cap is not
checked here (the schema bounds of ``[limits]`` still apply at the edge).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from orgate.gate.bounds import dotted
from orgate.gate.cost import CHARS_PER_TOKEN, cost_of, min_tokens
from orgate.neutral import Deployment
from orgate.protocol.errors import ApiError, ErrorCode


def check_output_fits(deployment: Deployment, schemas: Iterable[tuple[str, Any]]) -> None:
    """400 ``schema_exceeds_output`` for the first of ``schemas`` (param, schema) whose smallest
    value is longer than the deployment can output."""
    cap = deployment.capabilities.max_output_tokens
    if cap is None:
        return
    for param, schema in schemas:
        if type(schema) is not dict:
            continue
        cost = cost_of(schema)
        if cost.min_chars > cap * CHARS_PER_TOKEN:
            where = dotted(param, cost.min_at)
            raise ApiError.of(
                ErrorCode.SCHEMA_EXCEEDS_OUTPUT,
                f"'{where}': the smallest value '{param}' admits is {cost.min_chars:,} "
                f"characters of JSON, at least {min_tokens(cost):,} output tokens; model "
                f"'{deployment.name}' outputs at most {cap:,} tokens.",
                param=where,
            )


def output_schemas(text_schema: Any, tools: Iterable[Any] | None) -> list[tuple[str, Any]]:
    """The schemas a model's answer is generated against: ``text.format.schema`` and each
    function tool's ``parameters`` (by its param path)."""
    out: list[tuple[str, Any]] = []
    if text_schema is not None:
        out.append(("text.format.schema", text_schema))
    for index, tool in enumerate(tools or ()):
        if getattr(tool, "type", None) == "function":
            parameters = getattr(tool, "parameters", None)
            if parameters is not None:
                out.append((f"tools[{index}].parameters", parameters))
    return out
