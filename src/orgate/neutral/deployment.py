"""How to reach one upstream deployment, and what it can do."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from orgate.neutral.dialects import SchemaDialect


@dataclass(slots=True, frozen=True)
class Capabilities:
    """What a deployment accepts. Requests needing more are refused with a 400 before any upstream
    call."""

    tools: bool = True
    images: bool = True
    json_schema: bool = True  # takes a JSON Schema to constrain its output (in some dialect)
    json_object: bool = True  # json_object response format
    # Takes the strict subset of JSON Schema (what strict mode cannot express moves into
    # descriptions, for a model to read). False: the schema is sent as the client gave it
    # (the built-in model generates from the schema itself and reads no descriptions).
    strict_json_schema: bool = True
    # How it takes that schema (neutral/dialects.py), strongest first: the safety net sends
    # the first one it has not seen refused (the rest are the ladder it goes down).
    schema_dialects: tuple[SchemaDialect, ...] = ("json_schema",)
    # Its json_schema dialect constrains decoding without showing the model the schema (a
    # grammar engine: vLLM, llama.cpp, Ollama…): the schema goes in the instructions too.
    schema_in_prompt: bool = False
    reasoning: bool = False
    # Runs OpenAI's hosted tool types (``web_search``, ``file_search``…, ``namespace``) itself:
    # a native Responses upstream. Elsewhere they are dropped or refused
    # (``Deployment.hosted_tools``).
    hosted_tools: bool = False
    # Takes ``service_tier`` upstream (OpenAI's APIs). False: it is not sent, and the
    # response reports the tier used, ``default``.
    service_tier: bool = True
    logprobs: bool = True  # returns token log probabilities (``top_logprobs``, ``include``)
    max_output_tokens: int | None = None  # the model's output cap, if known
    context_window: int | None = None
    # The names of the flags above that the configuration set: what the engine learns of an
    # upstream at run time (a JSON mode it refuses) never overrides them.
    declared: frozenset[str] = frozenset()


@dataclass(slots=True, frozen=True)
class Deployment:
    """One upstream: a provider protocol at a base URL serving an upstream model name."""

    name: str  # the model name clients send (or the deployment's own label)
    provider: str  # its provider kind (providers/kinds.py): "builtin", "openai-chat"…
    upstream_model: str
    base_url: str = ""
    api_key: str | None = None  # already resolved from env:NAME; never logged
    headers: dict[str, str] = field(default_factory=dict)
    connect_timeout: float = 10.0
    read_timeout: float = 300.0  # max silence between upstream bytes
    total_timeout: float | None = None
    capabilities: Capabilities = field(default_factory=Capabilities)
    max_connections: int = 256
    # "none": an upstream's redirect is an error; "same-origin": a 307 / 308 to the same
    # scheme, host and port is followed (never one to another origin: it would get the key).
    redirects: str = "none"
    # The provider's own settings, as configured (``openai-chat``: ``[models.chat]``,
    # ``anthropic``: ``[models.anthropic]``); the provider reads them, the engine never does.
    options: dict[str, Any] = field(default_factory=dict)
    # Hosted tools its upstreams cannot run: "drop" (with a warning) or "refuse" (400).
    hosted_tools: str = "drop"
