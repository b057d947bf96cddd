"""Routing configuration: the ``deployments`` list, ``[models.routing]``,
and what ``deployments()`` / ``route_table()`` derive."""

from __future__ import annotations

from pathlib import Path

import pytest

from orgate.config import ConfigError, load_settings, route_table
from orgate.config import deployments as deployment_table
from orgate.engine.router import RoutePolicy

ROUTED = """
[[models]]
name = "smart"
aliases = ["s"]
api_key = "env:KEY_A"
upstream_model = "base-model"
read_timeout = 30
headers = { "X-Team" = "core" }
capabilities = { max_output_tokens = 4096 }
[[models.deployments]]
provider = "openai-chat"
base_url = "http://a.example/v1/"
max_concurrency = 2
weight = 3

[[models.deployments]]
name = "smart-claude"
provider = "anthropic"
base_url = "http://b.example"
api_key = "env:KEY_B"
upstream_model = "claude-x"
read_timeout = 60
headers = { "anthropic-beta" = "x" }

[models.routing]
retries = 1
backoff_base = 0.5
circuit_failures = 3

[[models]]
name = "flat"
provider = "openai-chat"
base_url = "http://c.example/v1"

[[models]]
name = "limited"
provider = "openai-chat"
base_url = "http://d.example/v1"
max_concurrency = 4
"""

ENV = {"KEY_A": "secret-a", "KEY_B": "secret-b"}


def load(tmp_path: Path, text: str, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    path = tmp_path / "orgate.toml"
    path.write_text(text)
    return load_settings(path, environ=env or {})


def test_deployments_list_becomes_a_route(tmp_path: Path) -> None:
    settings = load(tmp_path, ROUTED)
    routes = route_table(settings, ENV)
    assert set(routes) == {"smart", "limited"}  # "flat" has no routing keys: called directly
    route = routes["smart"]
    assert route.policy == RoutePolicy(retries=1, backoff_base=0.5, circuit_failures=3)
    first, second = (t.deployment for t in route.targets)
    assert (first.name, first.provider, first.base_url, first.upstream_model, first.api_key) == (
        "smart[0]",
        "openai-chat",
        "http://a.example/v1",
        "base-model",
        "secret-a",
    )
    assert (first.read_timeout, first.headers) == (30, {"X-Team": "core"})
    assert (route.targets[0].max_concurrency, route.targets[0].weight) == (2, 3)
    assert (
        second.name,
        second.provider,
        second.upstream_model,
        second.api_key,
        second.read_timeout,
    ) == (
        "smart-claude",
        "anthropic",
        "claude-x",
        "secret-b",
        60,
    )
    assert second.headers == {"X-Team": "core", "anthropic-beta": "x"}
    assert first.capabilities.max_output_tokens == second.capabilities.max_output_tokens == 4096
    assert first.capabilities.schema_dialects == ("json_schema", "json_object_schema")
    assert second.capabilities.schema_dialects == ("output_config", "forced_tool")


def test_the_front_deployment_carries_the_shared_capabilities(tmp_path: Path) -> None:
    table = deployment_table(load(tmp_path, ROUTED), ENV)
    front = table["smart"]
    assert table["s"] is front
    assert front.name == "smart" and front.provider == "openai-chat"
    caps = front.capabilities
    assert (caps.json_schema, caps.json_object, caps.reasoning) == (
        False,
        False,
        False,
    )  # no schema dialect in common, anthropic lacks json_object, openai-chat reasoning
    assert caps.schema_dialects == ()
    assert (caps.tools, caps.images, caps.max_output_tokens) == (True, True, 4096)


def test_service_tier_is_a_capability_off_for_anthropic(tmp_path: Path) -> None:
    """Whether ``service_tier`` goes upstream: provider default (anthropic has none), the
    model's own ``capabilities``, and a routed model only when every deployment takes it."""
    table = deployment_table(load(tmp_path, ROUTED), ENV)
    assert table["flat"].capabilities.service_tier is True
    assert table["smart"].capabilities.service_tier is False  # one of its deployments is anthropic
    first, second = (
        t.deployment for t in route_table(load(tmp_path, ROUTED), ENV)["smart"].targets
    )
    assert (first.capabilities.service_tier, second.capabilities.service_tier) == (True, False)
    off = ROUTED.replace(
        "capabilities = { max_output_tokens = 4096 }",
        "capabilities = { max_output_tokens = 4096, service_tier = false }",
    )
    assert deployment_table(load(tmp_path, off), ENV)["smart"].capabilities.service_tier is False


def test_flat_models_are_unchanged(tmp_path: Path) -> None:
    table = deployment_table(load(tmp_path, ROUTED), ENV)
    flat = table["flat"]
    assert (flat.name, flat.provider, flat.base_url, flat.upstream_model) == (
        "flat",
        "openai-chat",
        "http://c.example/v1",
        "flat",
    )
    limited = route_table(load(tmp_path, ROUTED), ENV)["limited"]
    assert [t.name for t in limited.targets] == ["limited"] and limited.targets[
        0
    ].max_concurrency == 4
    assert limited.policy == RoutePolicy()


def test_routing_section_alone_routes_a_flat_model(tmp_path: Path) -> None:
    text = (
        '[[models]]\nname = "m"\nprovider = "openai-chat"\nbase_url = '
        '"http://x/v1"\n[models.routing]\nretries = 0\n'
    )
    route = route_table(load(tmp_path, text))["m"]
    assert (
        route.policy.retries == 0
        and route.targets[0].deployment == deployment_table(load(tmp_path, text))["m"]
    )


def test_environment_overrides_reach_routing(tmp_path: Path) -> None:
    settings = load(tmp_path, ROUTED, {"ORGATE_SERVER__PORT": "9001"})
    assert settings.server.port == 9001


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[[models]]\nname = "m"\n', "needs `provider`"),
        (
            '[[models]]\nname = "m"\ndeployments = [{ base_url = "http://x" }]\n',
            "deployments[0] needs `provider`",
        ),
        ('[[models]]\nname = "m"\ndeployments = [{ provider = "anthropic" }]\n', "needs base_url"),
        (
            '[[models]]\nname = "m"\ndeployments = [{ provider = "grpc", base_url = '
            '"http://x" }]\n',
            "unknown provider",
        ),
        (
            '[[models]]\nname = "m"\nmax_concurrency = 2\ndeployments = [{ provider = '
            '"openai-chat", base_url = "http://x" }]\n',
            "max_concurrency per deployment",
        ),
        (
            '[[models]]\nname = "m"\ndeployments = [{ name = "d", provider = '
            '"openai-chat", base_url = "http://x" },'
            ' { name = "d", provider = "openai-chat", base_url = "http://y" }]\n',
            "deployment name 'd' is used twice",
        ),
        (
            '[[models]]\nname = "m"\nprovider = "openai-chat"\nbase_url = '
            '"http://x"\nrouting = { strategy = "random" }\n',
            "routing.strategy",
        ),
        (
            '[[models]]\nname = "m"\nprovider = "openai-chat"\nbase_url = '
            '"http://x"\nrouting = { retries = -1 }\n',
            "routing.retries",
        ),
        (
            '[[models]]\nname = "m"\nprovider = "openai-chat"\nbase_url = '
            '"http://x"\nrouting = { backoff = 1 }\n',
            "routing.backoff",
        ),
    ],
)
def test_invalid_routing_config_names_the_problem(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, text)
    assert message in str(info.value)


def test_a_missing_deployment_secret_names_the_deployment(tmp_path: Path) -> None:
    settings = load(tmp_path, ROUTED)
    with pytest.raises(ConfigError) as info:
        route_table(settings, {"KEY_A": "a"})
    assert "deployments[1]" in str(info.value) and "KEY_B" in str(info.value)


HEADERS_FROM_ENV = """
[[models]]
name = "flat"
provider = "openai-chat"
base_url = "http://c.example/v1"
headers = { "X-Token" = "env:FLAT_TOKEN", "X-Plain" = "plain" }
redirects = "same-origin"

[[models]]
name = "routed"
provider = "anthropic"
base_url = "http://d.example"
headers = { "X-Token" = "env:ROUTED_TOKEN" }
[[models.deployments]]
headers = { "X-Entry" = "env:ENTRY_TOKEN" }
redirects = "none"
"""


def test_upstream_headers_take_env_references(tmp_path: Path) -> None:
    env = {"FLAT_TOKEN": "flat-1", "ROUTED_TOKEN": "routed-2", "ENTRY_TOKEN": "entry-3"}
    settings = load(tmp_path, HEADERS_FROM_ENV)
    flat = deployment_table(settings, env)["flat"]
    assert flat.headers == {"X-Token": "flat-1", "X-Plain": "plain"}
    assert flat.redirects == "same-origin"
    entry = route_table(settings, env)["routed"].targets[0].deployment
    assert entry.headers == {"X-Token": "routed-2", "X-Entry": "entry-3"}
    assert entry.redirects == "none"


def test_an_unset_header_variable_names_the_header(tmp_path: Path) -> None:
    settings = load(tmp_path, HEADERS_FROM_ENV)
    with pytest.raises(ConfigError) as info:
        deployment_table(settings, {"ROUTED_TOKEN": "r", "ENTRY_TOKEN": "e"})
    assert "headers.X-Token" in str(info.value) and "FLAT_TOKEN" in str(info.value)


def test_redirects_takes_two_values(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, HEADERS_FROM_ENV.replace('"same-origin"', '"all"'))
    assert "redirects" in str(info.value)
