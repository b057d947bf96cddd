"""The server software behind an ``openai-chat`` URL, and what each takes for structured output.

Every OpenAI-compatible server constrains decoding to a JSON Schema, each in its own dialect
(neutral/dialects.py). ``[models.chat] server`` names the software; its ``ServerKind`` gives
the deployment's starting ``Capabilities``: the schema dialects to try, strongest first,
whether the strict subset of JSON Schema is wanted, whether ``json_object`` is taken. With
``auto`` (the default) the safety net starts from the standard ``json_schema`` and goes
down the ladder on the first refusal (structured/downgrades.py).

Imported by the configuration: no provider, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from orgate.neutral.dialects import SchemaDialect

ServerName = Literal[
    "auto", "openai", "vllm", "vllm-legacy", "llama.cpp", "llama-cpp-python", "ollama", "lmstudio"
]


@dataclass(frozen=True, slots=True)
class ServerKind:
    """One server software: the capabilities its structured output starts from."""

    name: ServerName
    schema_dialects: tuple[SchemaDialect, ...]
    # OpenAI's strict mode wants the strict subset (strict.strictify); a grammar engine takes
    # the client's schema as it is (optional keys stay optional, constraints stay in force).
    strict_json_schema: bool = False
    json_object: bool = True
    # a grammar engine: its json_schema dialect does not show the model the schema
    schema_in_prompt: bool = True


SERVERS: dict[str, ServerKind] = {
    kind.name: kind
    for kind in (
        # unknown: the standard first, then llama.cpp's form (what llama-cpp-python takes)
        ServerKind(
            "auto",
            ("json_schema", "json_object_schema"),
            strict_json_schema=True,
            schema_in_prompt=False,
        ),
        ServerKind("openai", ("json_schema",), strict_json_schema=True, schema_in_prompt=False),
        # vLLM: response_format json_schema (guided decoding); structured_outputs from 0.10
        ServerKind("vllm", ("json_schema", "structured_outputs")),
        # vLLM before 0.6 refuses json_schema; guided_json until 0.11
        ServerKind("vllm-legacy", ("guided_json", "json_schema")),
        # llama-server: json_object + schema in every version, json_schema since late 2024
        ServerKind("llama.cpp", ("json_object_schema", "json_schema", "json_schema_field")),
        # its server answers 500 to json_schema: json_object + schema is its grammar
        ServerKind("llama-cpp-python", ("json_object_schema",)),
        # Ollama ≥ 0.5 turns response_format json_schema into its `format`
        ServerKind("ollama", ("json_schema",)),
        # LM Studio takes json_schema, and refuses json_object
        ServerKind("lmstudio", ("json_schema",), json_object=False),
    )
}
