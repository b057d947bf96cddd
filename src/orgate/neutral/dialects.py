"""Schema dialects: the wire forms in which an upstream takes a JSON Schema that constrains
its decoding (a grammar, guided decoding, a strict format), so that what it generates is
valid against the schema by construction.

Every server spells it its own way; the safety net (structured/) picks one per deployment,
strongest first (``Capabilities.schema_dialects``), and the provider of the deployment puts
it on the wire (``TextFormat.dialect``):

====================== ===================== ===========================================
dialect                provider              sent upstream
====================== ===================== ===========================================
``json_schema``        openai-chat           ``response_format: {type: json_schema, …}``
                       openai-responses      ``text.format`` as it is
``json_object_schema`` openai-chat           ``response_format: {type: json_object,
                                             schema}`` (llama-cpp-python, llama.cpp)
``guided_json``        openai-chat           the body field ``guided_json`` (vLLM before
                                             0.12)
``structured_outputs`` openai-chat           the body field ``structured_outputs: {json}``
                                             (vLLM from 0.10)
``json_schema_field``  openai-chat           the body field ``json_schema`` (llama.cpp's
                                             ``llama-server``)
``output_config``      anthropic             structured outputs: ``output_config.format``
``forced_tool``        anthropic             a tool whose input schema is the format,
                                             forced; its input decoded back into text
====================== ===================== ===========================================
"""

from __future__ import annotations

from typing import Literal, get_args

SchemaDialect = Literal[
    "json_schema",
    "json_object_schema",
    "guided_json",
    "structured_outputs",
    "json_schema_field",
    "output_config",
    "forced_tool",
]
DIALECTS: tuple[SchemaDialect, ...] = get_args(SchemaDialect)

#: The dialects each provider kind can put on the wire.
PROVIDER_DIALECTS: dict[str, tuple[SchemaDialect, ...]] = {
    "builtin": ("json_schema",),
    "openai-chat": (
        "json_schema",
        "json_object_schema",
        "guided_json",
        "structured_outputs",
        "json_schema_field",
    ),
    "openai-responses": ("json_schema",),
    "anthropic": ("output_config", "forced_tool"),
}

#: The dialects of grammar engines: the model never reads the schema they constrain it to.
GRAMMAR_DIALECTS: frozenset[SchemaDialect] = frozenset(
    {"json_object_schema", "guided_json", "structured_outputs", "json_schema_field"}
)

#: The name of the tool that carries a ``forced_tool`` answer (its input is the JSON).
FORCED_TOOL_NAME = "json_answer"
