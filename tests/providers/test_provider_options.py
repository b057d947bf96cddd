"""``[models.chat]`` (and ``[models.anthropic]``): a provider's own settings,
from the config file to the wire.

OpenAI's Chat Completions deprecated ``max_tokens`` and its reasoning models refuse it;
most other servers only know ``max_tokens``. ``max_tokens_field = "auto"`` (the default)
picks by host; ``developer_role`` and ``include_usage`` serve servers that take the
``developer`` role, or refuse ``stream_options``. A deployment entry overrides its model
key by key; the settings are refused on other providers.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from tests.fakes.openai_chat_upstream import FakeOpenAIChat

from orgate.config import ConfigError, load_settings, route_table
from orgate.config import deployments as deployment_table
from orgate.neutral import Deployment, ModelRequest
from orgate.protocol import DeveloperMessageItemParam, UserMessageItemParam
from orgate.providers.http import HttpPool
from orgate.providers.openai_chat import OpenAIChatProvider
from orgate.providers.openai_chat.mapping import ChatOptions

CONFIG = """
[[models]]
name = "openai"
provider = "openai-chat"
base_url = "https://api.openai.com/v1"

[[models]]
name = "azure"
provider = "openai-chat"
base_url = "https://team.openai.azure.com/openai/deployments/o3"

[[models]]
name = "local"
provider = "openai-chat"
base_url = "http://127.0.0.1:8000/v1"
chat = { developer_role = "developer", include_usage = false }

[[models]]
name = "mixed"
provider = "openai-chat"
chat = { max_tokens_field = "max_completion_tokens", developer_role = "developer" }
[[models.deployments]]
base_url = "http://a.example/v1"
[[models.deployments]]
base_url = "http://b.example/v1"
chat = { max_tokens_field = "max_tokens" }
[[models.deployments]]
provider = "anthropic"
base_url = "http://c.example"
"""


def load(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "orgate.toml"
    path.write_text(text)
    return load_settings(path, environ={})


def test_the_field_follows_the_host_unless_configured(tmp_path: Path) -> None:
    table = deployment_table(load(tmp_path, CONFIG))
    options = {
        name: ChatOptions.for_deployment(table[name]) for name in ("openai", "azure", "local")
    }
    assert options["openai"] == ChatOptions(max_tokens_field="max_completion_tokens")
    assert options["azure"].max_tokens_field == "max_completion_tokens"
    assert options["local"] == ChatOptions(
        max_tokens_field="max_tokens", developer_role="developer", include_usage=False
    )


def test_an_entry_overrides_its_model_key_by_key(tmp_path: Path) -> None:
    a, b, claude = (t.deployment for t in route_table(load(tmp_path, CONFIG))["mixed"].targets)
    assert ChatOptions.for_deployment(a) == ChatOptions(
        max_tokens_field="max_completion_tokens", developer_role="developer"
    )
    assert ChatOptions.for_deployment(b) == ChatOptions(
        max_tokens_field="max_tokens", developer_role="developer"
    )
    assert claude.options == {}  # not an openai-chat deployment: the model's settings are not its


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[[models]]\nname = "m"\nprovider = "anthropic"\nbase_url = '
            '"http://x"\nchat = { include_usage = false }\n',
            "for provider 'openai-chat'",
        ),
        (
            '[[models]]\nname = "m"\nprovider = "openai-chat"\nbase_url = '
            '"http://x"\nchat = { max_tokens_field = "tokens" }\n',
            "max_tokens_field",
        ),
        (
            '[[models]]\nname = "m"\nprovider = "openai-chat"\nbase_url = '
            '"http://x"\nchat = { developer = true }\n',
            "developer",
        ),
        (
            '[[models]]\nname = "m"\nprovider = "openai-chat"\nbase_url = "http://x"\n'
            '[[models.deployments]]\nprovider = "anthropic"\nchat = { include_usage = false }\n',
            "deployments[0]",
        ),
    ],
)
def test_wrong_chat_settings_are_named_at_start_up(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, text)
    assert message in str(info.value)


def test_the_anthropic_section_reaches_anthropic_deployments_only(tmp_path: Path) -> None:
    text = (
        '[[models]]\nname = "claude"\nprovider = "anthropic"\nbase_url = '
        '"http://x"\nanthropic = { prompt_cache = true }\n'
        '[[models]]\nname = "mixed"\nprovider = "anthropic"\nanthropic = { prompt_cache = true }\n'
        '[[models.deployments]]\nbase_url = "http://a"\n'
        '[[models.deployments]]\nbase_url = "http://b"\nanthropic = { prompt_cache = false }\n'
        '[[models.deployments]]\nprovider = "openai-chat"\nbase_url = "http://c/v1"\n'
    )
    settings = load(tmp_path, text)
    assert deployment_table(settings)["claude"].options == {"prompt_cache": True}
    assert [t.deployment.options for t in route_table(settings)["mixed"].targets] == [
        {"prompt_cache": True},
        {"prompt_cache": False},
        {},
    ]
    with pytest.raises(ConfigError) as info:
        load(
            tmp_path,
            '[[models]]\nname = "m"\nprovider = "openai-chat"\nbase_url = '
            '"http://x"\nanthropic = { prompt_cache = true }\n',
        )
    assert "`anthropic` settings are for provider 'anthropic'" in str(info.value)


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAIChat]:
    async with FakeOpenAIChat() as server:
        yield server


async def test_the_options_shape_the_upstream_request(fake: FakeOpenAIChat) -> None:
    request = ModelRequest(
        model="up",
        input=[DeveloperMessageItemParam(content="be terse"), UserMessageItemParam(content="hi")],
        max_output_tokens=64,
    )
    pool = HttpPool()
    try:
        for options in (
            {},
            {
                "max_tokens_field": "max_completion_tokens",
                "developer_role": "developer",
                "include_usage": False,
            },
        ):
            deployment = Deployment(
                name="d",
                provider="openai-chat",
                upstream_model="up",
                base_url=fake.base_url,
                options=options,
            )
            events = [e async for e in OpenAIChatProvider(deployment, pool).stream(request)]
            assert events  # answered
    finally:
        await pool.aclose()
    default, configured = fake.bodies
    assert default["max_tokens"] == 64 and "max_completion_tokens" not in default
    assert default["messages"][0]["role"] == "system" and default["stream_options"] == {
        "include_usage": True
    }
    assert configured["max_completion_tokens"] == 64 and "max_tokens" not in configured
    assert configured["messages"][0]["role"] == "developer" and "stream_options" not in configured


SERVERS = """
[[models]]
name = "plain"
provider = "openai-chat"
base_url = "http://127.0.0.1:8000/v1"

[[models]]
name = "llama"
provider = "openai-chat"
base_url = "http://127.0.0.1:8001/v1"
chat = { server = "llama-cpp-python" }

[[models]]
name = "vllm"
provider = "openai-chat"
base_url = "http://127.0.0.1:8002/v1"
chat = { server = "vllm" }
capabilities = { schema_dialects = ["guided_json"] }
"""


def test_the_server_kind_picks_the_schema_dialects_and_the_config_may_declare_them(
    tmp_path: Path,
) -> None:
    path = tmp_path / "orgate.toml"
    path.write_text(SERVERS)
    table = deployment_table(load_settings(path), {})
    plain, llama, vllm = (table[n].capabilities for n in ("plain", "llama", "vllm"))
    # unknown software: the standard first, llama.cpp's form next; learnt, not declared
    assert plain.schema_dialects == ("json_schema", "json_object_schema")
    assert plain.strict_json_schema and not plain.schema_in_prompt and not plain.declared
    assert llama.schema_dialects == ("json_object_schema",) and llama.schema_in_prompt
    assert not llama.strict_json_schema and "schema_dialects" not in llama.declared
    assert vllm.schema_dialects == ("guided_json",) and "schema_dialects" in vllm.declared
    bad = SERVERS.replace('server = "vllm"', 'server = "tgi"')
    path.write_text(bad)
    with pytest.raises(ConfigError, match="server"):
        load_settings(path)
