"""``orgate models probe``: a fake upstream that behaves like llama-cpp-python's server, asked
with the command itself; its findings, the mode orgate will use and why, and ``--write``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orgate.cli import main as cli_main
from tests.fakes.openai_chat_upstream import FakeOpenAIChat, Script, http_error, text, tool_calls

ENFORCED = '{"orgate_probe": "zq7-ok"}'


def llama_cpp_python(body: dict[str, Any]) -> Script:
    """What llama-cpp-python's server does with each probe (as seen live)."""
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return http_error(500, "Input should be 'text' or 'json_object'")
    if fmt.get("type") == "json_object":
        return text(ENFORCED if "schema" in fmt else '{"ok": true}')
    if body.get("max_tokens", 0) > 100_000:
        return http_error(400, "Requested tokens (10000011) exceed context window of 2048")
    if body.get("tool_choice"):
        return tool_calls(("orgate_probe_echo", '{"word": "hello"}'))
    return text("hello")  # guided_json, structured_outputs, the json_schema field: ignored


@pytest.fixture
def upstream() -> Iterator[FakeOpenAIChat]:
    with FakeOpenAIChat.start_in_thread() as fake:
        fake.handler = llama_cpp_python
        fake.owned_by = "me"
        yield fake


CONFIG = """# my gateway
[[models]]
name = "local"  # the small one
provider = "openai-chat"
base_url = "{url}"
upstream_model = "fake-model"
read_timeout = 30
"""


def test_the_probe_finds_the_servers_dialect_and_writes_it(
    upstream: FakeOpenAIChat, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "orgate.toml"
    config.write_text(CONFIG.format(url=upstream.base_url))
    assert cli_main(["models", "probe", "local", "--config", str(config), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    verdicts = {f["name"]: f["verdict"] for f in report["findings"]}
    assert verdicts == {
        "streaming": "yes",
        "usage in streams": "yes",
        "tool calls": "yes",
        "dialect json_schema": "refused",
        "dialect json_object_schema": "yes",
        "dialect guided_json": "ignored",
        "dialect structured_outputs": "ignored",
        "dialect json_schema_field": "ignored",
        "json_object": "yes",
        "reasoning": "ignored",
    }
    assert report["server"] == "llama-cpp-python" and report["context_window"] == 2048
    # as configured (server "auto"): the ladder refuses json_schema once, then the grammar
    assert report["mode"]["now"] == "json_object_schema"
    assert report["mode"]["why"].startswith("json_schema refused")
    assert report["suggested"] == {
        "chat.server": "llama-cpp-python",
        "capabilities.schema_dialects": ["json_object_schema"],
        "capabilities.json_object": True,
        "capabilities.context_window": 2048,
    }
    calls = len(upstream.bodies)
    assert calls == 10 and all(b.get("temperature") == 0 for b in upstream.bodies)

    assert cli_main(["models", "probe", "local", "--config", str(config), "--write"]) == 0
    written = config.read_text()
    assert written.startswith("# my gateway") and 'name = "local"  # the small one' in written
    assert 'chat = {server = "llama-cpp-python"}' in written
    assert 'schema_dialects = ["json_object_schema"]' in written
    # the written file is a valid configuration whose model starts where the probe ended
    from orgate.config import deployments, load_settings

    caps = deployments(load_settings(config))["local"].capabilities
    assert caps.schema_dialects == ("json_object_schema",) and caps.context_window == 2048
    assert "schema_dialects" in caps.declared


def test_an_unknown_model_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "orgate.toml"
    config.write_text(CONFIG.format(url="http://127.0.0.1:9/v1"))
    assert cli_main(["models", "probe", "nope", "--config", str(config)]) == 2
    assert "'nope' is not a configured upstream model" in capsys.readouterr().err
    assert cli_main(["models", "probe", "local", "--config", str(config), "--skip", "x"]) == 2
