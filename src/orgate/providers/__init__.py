"""Upstream providers: one module per wire protocol, each turning a ``ModelRequest`` into neutral events.

``ProviderRegistry`` builds one provider per deployment (lazily, inside the
running loop) around one shared HTTP connection pool, and closes them all.
"""

from __future__ import annotations

from collections.abc import Callable

from orgate.neutral import Deployment, Provider
from orgate.providers.anthropic import AnthropicProvider
from orgate.providers.builtin import BuiltinProvider
from orgate.providers.http import HttpPool
from orgate.providers.openai_chat import OpenAIChatProvider
from orgate.providers.openai_responses import OpenAIResponsesProvider

_FACTORIES: dict[str, Callable[[Deployment, HttpPool], Provider]] = {
    "builtin": lambda deployment, pool: BuiltinProvider(deployment),
    "openai-chat": OpenAIChatProvider,
    "openai-responses": OpenAIResponsesProvider,
    "anthropic": AnthropicProvider,
}


class ProviderRegistry:
    """Deployment → provider instance, sharing one ``HttpPool``."""

    def __init__(self, wrap: Callable[[Provider, Deployment], Provider] | None = None) -> None:
        self.pool = HttpPool()
        self._providers: dict[tuple[str, str, str], Provider] = {}
        self._wrap = wrap

    def __call__(self, deployment: Deployment) -> Provider:
        key = (deployment.name, deployment.provider, deployment.base_url)
        provider = self._providers.get(key)
        if provider is None:
            factory = _FACTORIES.get(deployment.provider)
            if factory is None:
                raise KeyError(f"no provider implementation for {deployment.provider!r}")
            provider = factory(deployment, self.pool)
            if self._wrap is not None:
                provider = self._wrap(provider, deployment)
            self._providers[key] = provider
        return provider

    async def aclose(self) -> None:
        providers, self._providers = list(self._providers.values()), {}
        for provider in providers:
            await provider.aclose()
        await self.pool.aclose()
