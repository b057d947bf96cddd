"""What the running gateway is built from the settings: the client API keys (resolved and
hashed), the deployments and their routes, the MCP servers' registry.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
)

from orgate.config.loading import resolve_secret
from orgate.config.schema import (
    SECTION_OF_PROVIDER,
    SINGLE_KEY_TENANT,
    ConfigError,
    DeploymentSettings,
    ModelSettings,
    RoutingSettings,
    Settings,
)
from orgate.mcptools.servers import McpRegistry, McpServer
from orgate.mcptools.servers import origin as mcp_origin
from orgate.neutral import Capabilities, Deployment
from orgate.neutral.route import Route, RoutePolicy, Target, intersect_capabilities
from orgate.providers.kinds import BUILTIN_ALIASES, BUILTIN_MODELS, KINDS
from orgate.providers.servers import SERVERS

# --- derived values ----------------------------------------------------------------------------


class ResolvedKey(BaseModel):
    """A client API key ready for comparison (secret material never printed)."""

    model_config = ConfigDict(frozen=True)

    name: str
    tenant: str
    secret: bytes | None  # the key itself, utf-8
    sha256: bytes | None  # digest, when configured as a hash
    models: tuple[str, ...] | None
    generated: bool = False
    admin: bool = False
    rpm: int | None = None
    tpm: int | None = None


_DEFAULT_KEY_REF = "env:ORGATE_API_KEY"


def resolve_api_keys(
    settings: Settings, environ: dict[str, str] | None = None
) -> list[ResolvedKey]:
    """Resolve configured keys (``ConfigError`` for an ``env:NAME`` whose variable is unset, except
    ``env:ORGATE_API_KEY``). With none resolvable, one key is generated (and printed by
    ``serve``)."""
    env = os.environ if environ is None else environ
    keys: list[ResolvedKey] = []
    for index, entry in enumerate(settings.auth.api_keys):
        where = f"auth.api_keys[{index}]"
        if isinstance(entry, str):
            # a key the configuration names must exist; only ORGATE_API_KEY may be unset (a key
            # is then generated)
            value = resolve_secret(
                entry, where=where, required=entry != _DEFAULT_KEY_REF, environ=env
            )
            if value:  # the only entry (AuthSettings refuses a plain key among several)
                keys.append(
                    ResolvedKey(
                        name=SINGLE_KEY_TENANT,
                        tenant=SINGLE_KEY_TENANT,
                        secret=value.encode(),
                        sha256=None,
                        models=None,
                    )
                )
            continue
        required = entry.key != _DEFAULT_KEY_REF and not entry.sha256
        secret = (
            resolve_secret(entry.key, where=where, required=required, environ=env)
            if entry.key
            else None
        )
        digest = bytes.fromhex(entry.sha256) if entry.sha256 else None
        if secret is None and digest is None:
            continue
        assert entry.name  # AuthSettings refuses a table without a name
        keys.append(
            ResolvedKey(
                name=entry.name,
                tenant=entry.tenant or entry.name,
                admin=entry.admin,
                secret=secret.encode() if secret else None,
                sha256=digest,
                models=tuple(entry.models) if entry.models is not None else None,
                rpm=entry.rpm,
                tpm=entry.tpm,
            )
        )
    extra = env.get("ORGATE_API_KEY")
    if extra and not any(k.secret == extra.encode() for k in keys):
        if any("ORGATE_API_KEY" in (k.name, k.tenant) for k in keys):
            raise ConfigError(
                "auth.api_keys: a key is named ORGATE_API_KEY, the name of the key that the"
                " variable "
                'ORGATE_API_KEY adds; rename it or set it as that key (key = "env:ORGATE_API_KEY")'
            )
        keys.append(
            ResolvedKey(
                name="ORGATE_API_KEY",
                tenant="ORGATE_API_KEY",
                secret=extra.encode(),
                sha256=None,
                models=None,
            )
        )
    if not keys:
        generated = "sk-orgate-" + secrets.token_urlsafe(24)
        keys.append(
            ResolvedKey(
                name="generated",
                tenant="generated",
                secret=generated.encode(),
                sha256=None,
                models=None,
                generated=True,
            )
        )
    return keys


def _capabilities(model: ModelSettings, entry: DeploymentSettings | None = None) -> Capabilities:
    """Provider defaults, then the model's ``capabilities``, then the deployment entry's."""
    provider = (entry.provider if entry is not None else None) or model.provider
    assert provider is not None  # validated
    caps = _server_capabilities(KINDS[provider].capabilities, _provider_options(model, entry))
    for layer in (model.capabilities, entry.capabilities if entry is not None else None):
        overrides = (
            {k: v for k, v in layer.model_dump().items() if v is not None}
            if layer is not None
            else {}
        )
        if "schema_dialects" in overrides:
            overrides["schema_dialects"] = tuple(overrides["schema_dialects"])
        if overrides:
            caps = dataclasses.replace(caps, **overrides, declared=caps.declared | set(overrides))
    return caps


def _server_capabilities(caps: Capabilities, options: dict[str, Any]) -> Capabilities:
    """A provider's defaults with its server kind's structured output (``[models.chat] server``):
    starting points the safety net may still learn around, not declared capabilities."""
    server = SERVERS.get(str(options.get("server", "")))
    if server is None:
        return caps
    return dataclasses.replace(
        caps,
        schema_dialects=server.schema_dialects,
        strict_json_schema=server.strict_json_schema,
        json_object=server.json_object,
        schema_in_prompt=server.schema_in_prompt,
    )


def _provider_options(
    model: ModelSettings, entry: DeploymentSettings | None = None
) -> dict[str, Any]:
    """A deployment's provider section (its kind's ``section``: ``chat`` for openai-chat...):
    the model's, then the entry's (set keys); a model's section applies only to its
    deployments of that provider."""
    provider = (entry.provider if entry is not None else None) or model.provider
    key = SECTION_OF_PROVIDER.get(provider or "")
    options: dict[str, Any] = {}
    if key is None:
        return options
    for layer in (getattr(model, key), getattr(entry, key) if entry is not None else None):
        if layer is not None:
            options.update(layer.model_dump(exclude_unset=True))
    return options


def _api_key(value: str | None, env: Any, where: str) -> str | None:
    return resolve_secret(value, where=f"{where}: api_key", environ=env)


def _headers(values: dict[str, str], env: Any, where: str) -> dict[str, str]:
    """Configured upstream headers, each value resolved like ``api_key`` (``env:NAME``)."""
    return {
        name: resolve_secret(value, where=f"{where}: headers.{name}", environ=env) or ""
        for name, value in values.items()
    }


def _targets(index: int, model: ModelSettings, env: Any) -> list[Target]:
    """The deployments of one configured model, in fallback order, with secrets resolved."""
    if not model.deployments:
        deployment = Deployment(
            name=model.name,
            provider=model.provider or "",
            upstream_model=model.upstream_model or model.name,
            base_url=model.base_url.rstrip("/"),
            api_key=_api_key(model.api_key, env, f"models[{index}] ({model.name})"),
            headers=_headers(model.headers, env, f"models[{index}] ({model.name})"),
            connect_timeout=model.connect_timeout,
            read_timeout=model.read_timeout,
            total_timeout=model.total_timeout,
            capabilities=_capabilities(model),
            max_connections=model.max_connections,
            redirects=model.redirects,
            options=_provider_options(model),
            hosted_tools=model.hosted_tools,
        )
        return [Target(deployment, max_concurrency=model.max_concurrency)]
    targets: list[Target] = []
    names = model.deployment_names()
    for position, entry in enumerate(model.deployments):
        where = f"models[{index}] ({model.name}) deployments[{position}]"
        provider = entry.provider or model.provider or ""
        deployment = Deployment(
            name=names[position],
            provider=provider,
            upstream_model=entry.upstream_model or model.upstream_model or model.name,
            base_url=(entry.base_url or model.base_url).rstrip("/"),
            api_key=_api_key(
                entry.api_key if entry.api_key is not None else model.api_key, env, where
            ),
            headers=_headers({**model.headers, **entry.headers}, env, where),
            connect_timeout=entry.connect_timeout or model.connect_timeout,
            read_timeout=entry.read_timeout or model.read_timeout,
            total_timeout=entry.total_timeout or model.total_timeout,
            capabilities=_capabilities(model, entry),
            max_connections=entry.max_connections or model.max_connections,
            redirects=entry.redirects or model.redirects,
            options=_provider_options(model, entry),
            hosted_tools=model.hosted_tools,
        )
        targets.append(
            Target(deployment, weight=entry.weight, max_concurrency=entry.max_concurrency)
        )
    return targets


def _policy(model: ModelSettings) -> RoutePolicy:
    return RoutePolicy(**(model.routing or RoutingSettings()).model_dump())


def deployments(settings: Settings, environ: dict[str, str] | None = None) -> dict[str, Deployment]:
    """Client-facing model name (and every alias) → its deployment, with secrets resolved.

    A model with several deployments is represented by its first one, renamed to
    the model's name, with the capabilities that all of them share (requests are
    validated against those); ``route_table()`` lists the deployments behind it.
    """
    env = os.environ if environ is None else environ
    table: dict[str, Deployment] = {}
    if settings.builtin.enabled:
        for name in BUILTIN_MODELS:
            table[name] = Deployment(
                name=name,
                provider="builtin",
                upstream_model=name,
                capabilities=_capabilities(ModelSettings(name=name, provider="builtin")),
            )
        for alias, name in BUILTIN_ALIASES.items():
            table[alias] = table[name]
    for index, model in enumerate(settings.models):
        targets = _targets(index, model, env)
        first = targets[0].deployment
        deployment = first
        if len(targets) > 1 or first.name != model.name:
            capabilities = intersect_capabilities([t.deployment.capabilities for t in targets])
            deployment = dataclasses.replace(first, name=model.name, capabilities=capabilities)
        for name in (model.name, *model.aliases):
            table[name] = deployment
    return table


def mcp_registry(settings: Settings, environ: dict[str, str] | None = None) -> McpRegistry:
    """The configured MCP servers (secrets resolved) and the origins a request may name."""
    env = os.environ if environ is None else environ
    servers: dict[str, McpServer] = {}
    for index, entry in enumerate(settings.mcp_servers):
        if entry.label in servers:
            raise ConfigError(f"mcp_servers[{index}]: the label {entry.label!r} is used twice")
        policy = entry.require_approval
        servers[entry.label] = McpServer(
            label=entry.label,
            url=entry.url,
            transport=entry.transport,
            headers=_headers(entry.headers, env, f"mcp_servers[{index}] ({entry.label})"),
            allowed_tools=tuple(entry.allowed_tools) if entry.allowed_tools is not None else None,
            require_approval=policy if isinstance(policy, str) else policy.get("*", "always"),
            approval_per_tool={}
            if isinstance(policy, str)
            else {k: v for k, v in policy.items() if k != "*"},
            tenants=tuple(entry.tenants),
            connect_timeout=entry.connect_timeout,
            call_timeout=entry.call_timeout,
            list_ttl=entry.list_ttl,
            max_tools=entry.max_tools,
            max_result_bytes=entry.max_result_bytes,
            max_list_bytes=entry.max_list_bytes,
            trust_output=entry.trust_output,
            approval_after_untrusted=entry.approval_after_untrusted,
        )
    return McpRegistry(
        servers=servers,
        request_origins=frozenset(mcp_origin(o) for o in settings.mcp.request_origins),
    )


def route_table(settings: Settings, environ: dict[str, str] | None = None) -> dict[str, Route]:
    """Model name → its ``Route``, for the models that are routed (``deployments``, ``routing`` or
    ``max_concurrency`` configured). Keyed by the name ``deployments()`` gives their deployment."""
    env = os.environ if environ is None else environ
    return {
        model.name: Route(model.name, tuple(_targets(index, model, env)), _policy(model))
        for index, model in enumerate(settings.models)
        if model.routed
    }
