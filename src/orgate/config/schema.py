"""The configuration's schema: the pydantic models of every section, validated as one
``Settings`` (names unique across models and deployments, provider sections checked against
the provider kinds). Reading the file and the environment is ``loading``; the runtime objects
made from the settings are ``building``.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    create_model,
    field_validator,
    model_validator,
)

from orgate.neutral import Translation
from orgate.neutral.dialects import SchemaDialect
from orgate.neutral.ledger import KINDS as KINDS_OF_TRANSLATION
from orgate.providers.kinds import BUILTIN_ALIASES, BUILTIN_MODELS, KINDS
from orgate.providers.settings import MisbehaveSettings
from orgate.store import check_url
from orgate.structured.settings import StructuredSettings

PROVIDERS = tuple(KINDS)  # the provider kinds (providers/kinds.py describes each)
ENV_PREFIX = "ORGATE_"


class ConfigError(Exception):
    """The configuration is invalid; the message says where and why."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ServerSettings(_Section):
    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    # one line per request on the orgate.access logger (a cost per request:
    # docs/configuration.md)
    access_log: bool = False
    public_url: str | None = None  # shown in the banner when behind a proxy
    log_format: Literal["text", "json"] = "text"  # json: one JSON object per log line
    drain_timeout: float = Field(
        30.0, ge=0
    )  # SIGTERM: seconds in-flight responses (HTTP, WebSocket, background) may take to finish

    @field_validator("host")
    @classmethod
    def _host_not_empty(cls, value: str) -> str:
        if (
            not value.strip()
        ):  # "" would listen on every interface, a surprise from an empty variable
            raise ValueError("must not be empty (use 0.0.0.0 to listen on every interface)")
        return value


class ApiKeySettings(_Section):
    """One accepted client key. ``key`` may be ``env:NAME``; ``sha256`` a hex digest instead of
    the key.

    ``name`` is required (``AuthSettings`` says which entry lacks it): it names the key in rate
    limits and logs and is its tenant unless ``tenant`` says otherwise. Keys share a tenant only
    when each names it (a key rotated with an old and a new secret). ``admin`` keys see every
    tenant's review queue entries."""

    name: str | None = None
    key: str | None = None
    sha256: str | None = None
    tenant: str | None = None  # defaults to the name
    admin: bool = False
    models: list[str] | None = None  # allowed models; None = all
    rpm: int | None = Field(None, ge=1)  # model calls per minute; None = unlimited
    tpm: int | None = Field(None, ge=1)  # tokens (input + output) per minute; None = unlimited

    @model_validator(mode="after")
    def _one_secret(self) -> ApiKeySettings:
        if not self.key and not self.sha256:
            raise ValueError("an API key needs `key` or `sha256`")
        if self.sha256 is not None and not _SHA256.fullmatch(self.sha256):
            raise ValueError("`sha256` must be the key's SHA-256 digest: 64 hexadecimal digits")
        return self


_SHA256 = re.compile(r"[0-9a-fA-F]{64}")

#: The tenant of the one key of a configuration that lists a single plain key.
SINGLE_KEY_TENANT = "default"


def key_label(entry: str | ApiKeySettings) -> str:
    """How an error names a configured key without its secret: its ``env:NAME``, its name, or
    the start of its digest; a literal key is never shown."""
    if isinstance(entry, ApiKeySettings):
        if entry.name:
            return f"name {entry.name!r}"
        if entry.key and entry.key.startswith("env:"):
            return entry.key
        return f"sha256 {entry.sha256[:8]}…" if entry.sha256 else "a literal key"
    return entry if entry.startswith("env:") else "a literal key"


def tenancy_problems(entries: list[str | ApiKeySettings]) -> list[str]:
    """Why these keys' tenants would depend on anything but explicit names: a plain key among
    several (its tenant would be its position), a table without a name, a name used twice."""
    problems: list[str] = []
    plain = [
        f"[{index}] ({key_label(entry)})"
        for index, entry in enumerate(entries)
        if isinstance(entry, str)
    ]
    if plain and len(entries) > 1:
        problems.append(
            f"{', '.join(plain)}: a plain key is accepted only as the only entry (tenant "
            f"{SINGLE_KEY_TENANT!r}); with several keys write each as a table "
            '{ name = "...", key = "env:..." }, so that its tenant is its name and not its position'
        )
    seen: dict[str, int] = {}
    for index, entry in enumerate(entries):
        if isinstance(entry, str):
            continue
        where = f"[{index}] ({key_label(entry)})"
        if not entry.name or not entry.name.strip():
            problems.append(
                f"{where} needs a `name` (its tenant, unless `tenant` is set):"
                ' { name = "...", key = ... }'
            )
            continue
        if entry.tenant is not None and not entry.tenant.strip():
            problems.append(f"{where}: `tenant` must not be empty")
        if entry.name in seen:
            problems.append(
                f"{where}: the name is already auth.api_keys[{seen[entry.name]}]'s;"
                " names must be unique"
            )
        seen.setdefault(entry.name, index)
    return problems


def _default_api_keys() -> list[str | ApiKeySettings]:
    return ["env:ORGATE_API_KEY"]


class AuthSettings(_Section):
    api_keys: list[str | ApiKeySettings] = Field(default_factory=_default_api_keys)

    @field_validator("api_keys")
    @classmethod
    def _explicit_tenants(cls, entries: list[str | ApiKeySettings]) -> list[str | ApiKeySettings]:
        problems = tenancy_problems(entries)
        if problems:
            raise ValueError("; ".join(problems))
        return entries


class RateLimitSettings(_Section):
    """``[ratelimit]``: per-key limits are shared between processes through Redis when
    ``redis_url`` is set."""

    redis_url: str | None = None  # may be env:NAME
    prefix: str = "orgate:rl"


class LoggingSettings(_Section):
    bodies: bool = (
        False  # log request bodies (may hold personal data): only when explicitly enabled
    )


class TracingSettings(_Section):
    """OpenTelemetry tracing, off by default (needs the opentelemetry packages when on)."""

    enabled: bool = False
    service_name: str = "orgate"
    otlp_endpoint: str | None = None  # None: the OTEL_EXPORTER_OTLP_* environment variables


class EndpointSwitch(_Section):
    enabled: bool = True


class ResponsesEndpoint(EndpointSwitch):
    # "openai": reasoning text streams under OpenAI's event names (response.reasoning_text.delta /
    # .done), which the openai SDKs' stream helpers require, instead of the spec's
    # response.reasoning.delta / .done (docs/configuration.md)
    event_names: Literal["spec", "openai"] = "spec"
    # Streams pad their delta events with `obfuscation` unless a request's
    # stream_options.include_obfuscation says otherwise (the spec's default: true).
    obfuscation: bool = True


class EndpointsSettings(_Section):
    responses: ResponsesEndpoint = Field(default_factory=lambda: ResponsesEndpoint(enabled=True))
    chat_completions: EndpointSwitch = Field(default_factory=lambda: EndpointSwitch(enabled=False))


class BuiltinSettings(_Section):
    enabled: bool = True
    # how the built-in ``orgate/flaky`` model misbehaves on JSON output (docs/builtin-model.md)
    misbehave: MisbehaveSettings = Field(default_factory=MisbehaveSettings)


class StoreSettings(_Section):
    enabled: bool = True
    url: str | None = (
        None  # sqlite:///path or postgresql://... or env:NAME; None = default SQLite path
    )
    ttl_days: float | None = Field(None, gt=0)  # None: kept forever
    # how long a background response's lease lasts unrenewed: a process silent that long has
    # its background responses taken over by another (docs/store.md#background-responses)
    background_lease_seconds: float = Field(30.0, ge=3, le=3600)
    # the decoded history of stored chains each process keeps between turns, in MB of their
    # items' JSON (docs/store.md#the-history-cache); 0 reads the whole chain every turn
    history_cache_mb: float = Field(64.0, ge=0)

    @field_validator("url")
    @classmethod
    def _known_scheme(cls, value: str | None) -> str | None:
        if value and not value.startswith("env:"):  # an env: reference is checked once resolved
            check_url(value)
        return value


class GateSettings(_Section):
    policy: Literal["enforce", "warn", "off"] = "enforce"
    tool_retries: int = Field(1, ge=0, le=5)


class SessionSettings(_Section):
    header: str = "X-Session-Id"
    use_user_field: bool = True


class LimitSettings(_Section):
    max_body_bytes: int = Field(32 * 1024 * 1024, ge=1024)
    max_input_items: int = Field(4096, ge=1)
    max_json_depth: int = Field(64, ge=4)
    max_tools: int = Field(128, ge=1)
    max_string_bytes: int = Field(
        16 * 1024 * 1024, ge=1024
    )  # any one JSON string or key (e.g. an image data URL)
    max_schema_bytes: int = Field(
        256 * 1024, ge=1024
    )  # one tool `parameters` / text.format schema, as JSON
    max_schema_nodes: int = Field(20_000, ge=100)  # JSON values in one schema
    max_schema_depth: int = Field(32, ge=4)  # nesting of one schema
    max_schema_min_length: int = Field(100_000, ge=1)  # a schema's `minLength`
    max_schema_min_items: int = Field(10_000, ge=1)  # a schema's `minItems` / `minContains`
    max_schema_min_properties: int = Field(1_000, ge=1)  # a schema's `minProperties`
    max_schema_pattern_length: int = Field(
        1_000, ge=16
    )  # characters of a `pattern` / `patternProperties` name
    max_schema_expansion: int = Field(
        200_000, ge=1000
    )  # objects a validator may visit once `$ref`s are followed
    # characters of JSON of the smallest value a schema admits (gate/cost.py)
    max_schema_min_chars: int = Field(1_000_000, ge=1000)
    # subschemas one value of an instance may be checked against (gate/cost.py)
    max_schema_fanout: int = Field(1_024, ge=16)
    # seconds one piece of schema work may take: checking a model's output against a client's
    # schema, the built-in model's generated value (gate/work.py)
    schema_work_seconds: float = Field(10.0, gt=0)
    # worker processes for the schema work that is not known to be small (gate/work.py)
    schema_work_processes: int = Field(2, ge=1, le=64)
    body_timeout: float = Field(60.0, gt=0)  # seconds to receive the whole request body
    header_timeout: float = Field(
        30.0, gt=0
    )  # seconds from a connection (or a request's first byte) to the end of its head


class CapabilitySettings(_Section):
    tools: bool | None = None
    images: bool | None = None
    json_schema: bool | None = None
    json_object: bool | None = None
    strict_json_schema: bool | None = None
    # how the upstream takes a JSON Schema, strongest first (neutral/dialects.py)
    schema_dialects: list[SchemaDialect] | None = None
    schema_in_prompt: bool | None = None
    reasoning: bool | None = None
    hosted_tools: bool | None = None
    service_tier: bool | None = None
    logprobs: bool | None = None
    max_output_tokens: int | None = None
    context_window: int | None = None


class RoutingSettings(_Section):
    """``[models.routing]``: fallbacks, retries, backoff, circuit breaker (see docs/routing.md)."""

    strategy: Literal["ordered", "weighted"] = "ordered"
    retries: int = Field(2, ge=0, le=10)
    backoff_base: float = Field(0.25, gt=0)
    backoff_max: float = Field(8.0, gt=0)
    circuit_failures: int = Field(5, ge=1)
    circuit_cooldown: float = Field(30.0, gt=0)
    queue_timeout: float = Field(1.0, ge=0)


def _check_provider(value: str | None) -> str | None:
    if value is not None and value not in PROVIDERS:
        raise ValueError(f"unknown provider {value!r}; expected one of {', '.join(PROVIDERS)}")
    return value


def _check_base_url(value: str | None) -> str | None:
    if value and not value.startswith(("http://", "https://")):
        raise ValueError(f"{value!r} is not an http:// or https:// URL")
    return value


#: How a model's upstream redirects are treated (see providers/http.py, docs/providers.md).
Redirects = Literal["none", "same-origin"]


#: The provider-specific sections of a model (and of a deployment entry), by the provider they
#: are for: ``[models.chat]`` for openai-chat... (each kind's ``section``, providers/kinds.py).
_PROVIDER_SECTIONS = {kind.section: kind.name for kind in KINDS.values() if kind.section}
SECTION_OF_PROVIDER = {owner: key for key, owner in _PROVIDER_SECTIONS.items()}

#: Those sections as optional fields, the base of a model and of a deployment entry; a
#: deployment entry's section overrides the model's, key by key.
_SECTION_FIELDS: dict[str, Any] = {
    kind.section: (kind.settings | None, None)
    for kind in KINDS.values()
    if kind.section and kind.settings is not None
}
_ProviderSections: Any = create_model("_ProviderSections", __base__=_Section, **_SECTION_FIELDS)


class DeploymentSettings(_ProviderSections):
    """One entry of a model's ``deployments``; unset fields come from the model's own fields."""

    name: str | None = None  # default: "<model>[<index>]"
    provider: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    upstream_model: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)  # added to the model's headers
    connect_timeout: float | None = Field(None, gt=0)
    read_timeout: float | None = Field(None, gt=0)
    total_timeout: float | None = Field(None, gt=0)
    max_connections: int | None = Field(None, ge=1)
    redirects: Redirects | None = None
    capabilities: CapabilitySettings = Field(default_factory=CapabilitySettings)
    weight: float = Field(1.0, gt=0)
    max_concurrency: int | None = Field(None, ge=1)

    @field_validator("provider")
    @classmethod
    def _known_provider(cls, value: str | None) -> str | None:
        return _check_provider(value)

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        return _check_base_url(value)


def _check_sections(settings: Any, provider: str, where: str) -> None:
    """A provider section set on a model or entry of another provider is a start-up error."""
    for key, owner in _PROVIDER_SECTIONS.items():
        if getattr(settings, key) is not None and provider != owner:
            raise ValueError(
                f"{where}: `{key}` settings are for provider {owner!r}, not {provider!r}"
            )


class ModelSettings(_ProviderSections):
    name: str = Field(min_length=1)
    provider: str | None = None  # required unless `deployments` is given
    base_url: str = ""
    api_key: str | None = None
    upstream_model: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    aliases: list[str] = Field(default_factory=list)
    connect_timeout: float = Field(10.0, gt=0)
    read_timeout: float = Field(300.0, gt=0)
    total_timeout: float | None = Field(None, gt=0)
    max_connections: int = Field(256, ge=1)
    redirects: Redirects = "none"  # or "same-origin": follow a 307 / 308 to the same origin
    capabilities: CapabilitySettings = Field(default_factory=CapabilitySettings)
    # Hosted tools (web_search…) that no deployment of this model runs: dropped with a warning,
    # or a 400.
    hosted_tools: Literal["drop", "refuse"] = "drop"
    max_concurrency: int | None = Field(None, ge=1)  # of the single deployment (flat form)
    deployments: list[DeploymentSettings] = Field(default_factory=list)
    routing: RoutingSettings | None = None

    @field_validator("provider")
    @classmethod
    def _known_provider(cls, value: str | None) -> str | None:
        return _check_provider(value)

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        return _check_base_url(value)

    @model_validator(mode="after")
    def _needs_url(self) -> ModelSettings:
        if not self.deployments:
            if self.provider is None:
                raise ValueError(f"model {self.name!r} needs `provider` (or a `deployments` list)")
            if KINDS[self.provider].http and not self.base_url:
                raise ValueError(f"model {self.name!r}: provider {self.provider!r} needs base_url")
            _check_sections(self, self.provider, f"model {self.name!r}")
            return self
        if self.max_concurrency is not None:
            raise ValueError(
                f"model {self.name!r}: with `deployments`, set max_concurrency per deployment"
            )
        for index, entry in enumerate(self.deployments):
            provider = entry.provider or self.provider
            if provider is None:
                raise ValueError(f"model {self.name!r}: deployments[{index}] needs `provider`")
            if KINDS[provider].http and not (entry.base_url or self.base_url):
                raise ValueError(
                    f"model {self.name!r}: deployments[{index}] (provider {provider!r})"
                    " needs base_url"
                )
            _check_sections(entry, provider, f"model {self.name!r}: deployments[{index}]")
        return self

    @property
    def routed(self) -> bool:
        """Whether requests to this model go through the router (a flat model without routing
        keys does not)."""
        return (
            bool(self.deployments) or self.routing is not None or self.max_concurrency is not None
        )

    def deployment_names(self) -> list[str]:
        """The names of this model's deployments: its own name in the flat form."""
        if not self.deployments:
            return [self.name]
        return [
            entry.name or f"{self.name}[{index}]" for index, entry in enumerate(self.deployments)
        ]


class WebSocketSettings(_Section):
    """``[websocket]``: WebSocket mode of ``/v1/responses`` (see server/websocket.py,
    docs/websocket.md)."""

    enabled: bool = True
    max_connection_seconds: float = Field(3600.0, gt=0)
    drain_seconds: float = Field(30.0, ge=0)
    cache_responses: int = Field(16, ge=0)
    max_connections: int = Field(1024, ge=1)  # open sockets per process (server/ws_limits.py)
    max_connections_per_key: int = Field(256, ge=1)  # open sockets per API key
    idle_seconds: float = Field(
        900.0, ge=0
    )  # closed after this long without a message or a response; 0: never
    # ``stream_id`` lanes on one connection (OpenAI's multiplexing); off: the spec's one lane
    multiplexing: bool = False
    max_active_responses: int = Field(16, ge=1)  # running or queued, per multiplexed connection
    max_streams: int = Field(32, ge=1)  # named streams per multiplexed connection


class TranslationSettings(_Section):
    """``[translation]``: what a deployment refuses rather than translate (docs/translation.md)."""

    # codes of the ledger's catalogue, or kinds ("dropped", "approximated", "mapped"): a
    # request-side translation of one of them is a 400 naming what, before any upstream call
    refuse: list[str] = Field(default_factory=list)

    @field_validator("refuse")
    @classmethod
    def _known(cls, refuse: list[str]) -> list[str]:
        known = {code.value for code in Translation} | set(KINDS_OF_TRANSLATION)
        for name in refuse:
            if name not in known:
                raise ValueError(
                    f"unknown translation code or kind {name!r} "
                    f"(kinds: {', '.join(KINDS_OF_TRANSLATION)}; codes: docs/translation.md)"
                )
        return refuse


class CompactionSettings(_Section):
    """``[compaction]``: the sealing key of compaction items and the policy (see
    server/compact.py, docs/compaction.md)."""

    secret: str | None = "env:ORGATE_COMPACTION_SECRET"
    key_file: str | None = None
    keep_turns: int = Field(2, ge=0)


class ConsoleSettings(_Section):
    """``[console]``: the web console at /console (see docs/console.md)."""

    enabled: bool = True
    session_minutes: int = Field(480, ge=1)  # a signed-in browser's session lifetime
    # signs session cookies; None = a random secret per process (sessions end on restart)
    session_secret: str | None = None


class McpSettings(_Section):
    """``[mcp]``: what a request may name itself (docs/mcp.md). Servers are ``[[mcp_servers]]``."""

    request_origins: list[str] = Field(
        default_factory=list
    )  # origins a request's server_url may name
    max_tool_calls: int = Field(
        16, ge=1
    )  # MCP calls one response may run when the request sets no max_tool_calls


class McpServerSettings(_Section):
    """One ``[[mcp_servers]]`` entry: an MCP server the gateway calls tools on (docs/mcp.md)."""

    label: str = Field(pattern=r"^[A-Za-z0-9_-]{1,32}$")
    url: str
    transport: Literal["streamable-http", "sse"] = "streamable-http"
    headers: dict[str, str] = Field(default_factory=dict)  # values may be env:NAME
    allowed_tools: list[str] | None = None
    require_approval: Literal["always", "never"] | dict[str, Literal["always", "never"]] = "always"
    tenants: list[str] = Field(default_factory=lambda: ["*"])
    connect_timeout: float = Field(10.0, gt=0)
    call_timeout: float = Field(60.0, gt=0)
    list_ttl: float = Field(300.0, ge=0)
    max_tools: int = Field(128, ge=1)
    max_result_bytes: int = Field(100_000, ge=1)
    max_list_bytes: int = Field(1_000_000, ge=1)
    # true: its results reach the model unmarked (the operator vouches for them)
    trust_output: bool = False
    # true: its tools ask for approval once the model read untrusted output in the response
    approval_after_untrusted: bool = False

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        checked = _check_base_url(value)
        assert checked is not None
        return checked


class Settings(BaseModel):
    """The whole validated configuration."""

    model_config = ConfigDict(extra="forbid")

    server: ServerSettings = Field(default_factory=ServerSettings)
    auth: AuthSettings = Field(default_factory=AuthSettings)
    endpoints: EndpointsSettings = Field(default_factory=EndpointsSettings)
    builtin: BuiltinSettings = Field(default_factory=BuiltinSettings)
    store: StoreSettings = Field(default_factory=StoreSettings)
    gate: GateSettings = Field(default_factory=GateSettings)
    sessions: SessionSettings = Field(default_factory=SessionSettings)
    limits: LimitSettings = Field(default_factory=LimitSettings)
    ratelimit: RateLimitSettings = Field(default_factory=RateLimitSettings)
    logging: LoggingSettings = Field(default_factory=LoggingSettings)
    tracing: TracingSettings = Field(default_factory=TracingSettings)
    websocket: WebSocketSettings = Field(default_factory=WebSocketSettings)
    compaction: CompactionSettings = Field(default_factory=CompactionSettings)
    translation: TranslationSettings = Field(default_factory=TranslationSettings)
    console: ConsoleSettings = Field(default_factory=ConsoleSettings)
    structured: StructuredSettings = Field(default_factory=StructuredSettings)
    models: list[ModelSettings] = Field(default_factory=list)
    mcp: McpSettings = Field(default_factory=McpSettings)
    mcp_servers: list[McpServerSettings] = Field(default_factory=list)
    # filled by load_settings: the path the settings came from (None = embedded default)
    source: str | None = None
    # filled by load_settings: environment variables that look like mistyped overrides (printed
    # by `serve`)
    _warnings: list[str] = PrivateAttr(default_factory=list)

    @property
    def warnings(self) -> list[str]:
        return self._warnings

    @model_validator(mode="after")
    def _unique_names(self) -> Settings:
        seen: set[str] = set()
        builtin = {*BUILTIN_MODELS, *BUILTIN_ALIASES} if self.builtin.enabled else set()
        for model in self.models:
            for name in (model.name, *model.aliases):
                if name in builtin:
                    raise ValueError(
                        f"model name {name!r} is a built-in model's name: choose another,"
                        " or set [builtin] enabled = false"
                    )
                if name in seen:
                    raise ValueError(f"model name {name!r} is configured twice")
                seen.add(name)
        deployment_names: set[str] = set()
        for model in self.models:
            for name in model.deployment_names():
                if name in deployment_names:
                    raise ValueError(f"deployment name {name!r} is used twice")
                deployment_names.add(name)
        return self
