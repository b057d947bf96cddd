"""Every provider kind described in one place: what the registry builds and the configuration reads.

A ``ProviderKind`` names a wire protocol (the ``provider`` key of a model), its provider
class (as ``module:Class``, imported on the first deployment of that kind: a gateway that
serves only the built-in model never loads the HTTP client), the ``Capabilities`` its
deployments start from (a model's ``capabilities`` table overrides them), and its own
settings: the key of a model's table for them and their pydantic model
(``providers/settings.py``), passed to the provider as ``Deployment.options``.

This module imports no provider: the configuration (``orgate.config``) reads it at start-up.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel

from orgate.neutral import Capabilities
from orgate.providers.servers import SERVERS
from orgate.providers.settings import FLAKY_MODEL, AnthropicSettings, ChatSettings


@dataclass(frozen=True, slots=True)
class ProviderKind:
    """One provider kind: see the module docstring."""

    name: str  # the ``provider`` value in the configuration, ``Deployment.provider``
    # ``module:Class``; the class is built as ``Class(deployment, pool)`` (the shared
    # ``HttpPool``), or ``Class(deployment)`` when ``http`` is false
    provider: str
    capabilities: Capabilities
    http: bool = True  # talks to an upstream: needs a ``base_url`` and the shared pool
    section: str | None = None  # the key of its own settings on a model and a deployment entry
    settings: type[BaseModel] | None = None  # the model of that section


BUILTIN = ProviderKind(
    "builtin",
    "orgate.providers.builtin:BuiltinProvider",
    Capabilities(
        tools=True,
        images=True,
        json_schema=True,
        json_object=True,
        strict_json_schema=False,  # it generates from the schema itself and reads no descriptions
        reasoning=True,
        max_output_tokens=8192,
    ),
    http=False,
)

#: The models the built-in provider serves without any configuration (``[builtin] enabled``).
BUILTIN_MODELS = ("orgate/echo", FLAKY_MODEL)
#: Their other names, without ``/``: a client that reads ``orgate/…`` as a provider prefix
#: (the OpenAI Agents SDK, LiteLLM) sends these as they are.
BUILTIN_ALIASES = {"orgate-echo": "orgate/echo", "orgate-flaky": FLAKY_MODEL}

KINDS: dict[str, ProviderKind] = {
    kind.name: kind
    for kind in (
        BUILTIN,
        ProviderKind(
            "openai-chat",
            "orgate.providers.openai_chat.provider:OpenAIChatProvider",
            # server "auto" (providers/servers.py): the standard first, llama.cpp's form next
            Capabilities(schema_dialects=SERVERS["auto"].schema_dialects),
            section="chat",
            settings=ChatSettings,
        ),
        ProviderKind(
            "openai-responses",
            "orgate.providers.openai_responses.provider:OpenAIResponsesProvider",
            Capabilities(reasoning=True, hosted_tools=True),
        ),
        ProviderKind(
            "anthropic",
            "orgate.providers.anthropic.provider:AnthropicProvider",
            Capabilities(
                # structured outputs (output_config.format) where the model has them, else a
                # forced tool whose input schema is the format
                schema_dialects=("output_config", "forced_tool"),
                json_object=False,
                reasoning=True,
                service_tier=False,
                logprobs=False,
            ),
            section="anthropic",
            settings=AnthropicSettings,
        ),
    )
}
