"""Upstream providers: one module per wire protocol, each turning a ``ModelRequest`` into neutral
events.

``ProviderRegistry`` builds one provider per deployment (lazily, inside the
running loop) around one shared HTTP connection pool, and closes them all.

The provider kinds are described in ``kinds.py`` (class, default capabilities, settings).
A provider's module (and the HTTP client an upstream one needs) is imported when a registry
is made for a deployment of its kind, not with this package: a gateway that serves only the
built-in model, or a tool that reads one setting, does not pay for the HTTP client.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from orgate.neutral import Deployment, Provider
from orgate.providers.kinds import KINDS, ProviderKind

if TYPE_CHECKING:
    from orgate.providers.http import HttpPool

#: Builds a deployment's provider; the second argument gives the shared pool (creating it).
Factory = Callable[[Deployment, Callable[[], "HttpPool"]], Provider]


def load_factory(kind: ProviderKind) -> Factory:
    """Import ``kind``'s provider class and return how to build one for a deployment."""
    module, _, name = kind.provider.partition(":")
    cls = getattr(importlib.import_module(module), name)
    if kind.http:
        return lambda deployment, pool: cls(deployment, pool())
    return lambda deployment, pool: cls(deployment)


class ProviderRegistry:
    """Deployment → provider instance, sharing one ``HttpPool`` (made for the first upstream one).

    ``kinds``: the provider kinds to import now (a server's configured deployments), so that
    no request waits for a module import; any other kind is imported on its first use.
    """

    def __init__(
        self,
        wrap: Callable[[Provider, Deployment], Provider] | None = None,
        *,
        kinds: Iterable[str] = (),
    ) -> None:
        self._pool: HttpPool | None = None
        self._providers: dict[tuple[str, str, str], Provider] = {}
        self._wrap = wrap
        self._factories: dict[str, Factory] = {}
        for kind in kinds:
            self._factory(kind)

    @property
    def pool(self) -> HttpPool:
        """The connection pool the upstream providers share."""
        if self._pool is None:
            from orgate.providers.http import HttpPool

            self._pool = HttpPool()
        return self._pool

    def _factory(self, kind: str) -> Factory | None:
        factory = self._factories.get(kind)
        if factory is None:
            described = KINDS.get(kind)
            if described is None:
                return None
            factory = self._factories[kind] = load_factory(described)
        return factory

    def __call__(self, deployment: Deployment) -> Provider:
        key = (deployment.name, deployment.provider, deployment.base_url)
        provider = self._providers.get(key)
        if provider is None:
            factory = self._factory(deployment.provider)
            if factory is None:
                raise KeyError(f"no provider implementation for {deployment.provider!r}")
            provider = factory(deployment, lambda: self.pool)
            if self._wrap is not None:
                provider = self._wrap(provider, deployment)
            self._providers[key] = provider
        return provider

    async def aclose(self) -> None:
        providers, self._providers = list(self._providers.values()), {}
        for provider in providers:
            await provider.aclose()
        if self._pool is not None:
            await self._pool.aclose()
