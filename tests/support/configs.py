"""TOML snippets for tests that put orgate in front of fake upstreams."""

from __future__ import annotations

from typing import Any


def model_block(
    name: str,
    provider: str,
    base_url: str,
    upstream_model: str,
    *,
    api_key: str | None = None,
    read_timeout: float = 5,
    extra: str = "",
) -> str:
    """One ``[[models]]`` entry (``extra``: more TOML lines, e.g. ``capabilities = {...}``)."""
    key = f'api_key = "{api_key}"\n' if api_key is not None else ""
    more = f"{extra}\n" if extra else ""
    return (
        f'\n[[models]]\nname = "{name}"\nprovider = "{provider}"\nbase_url = "{base_url}"\n'
        f'{key}upstream_model = "{upstream_model}"\nread_timeout = {read_timeout:g}\n{more}'
    )


def native_and_claude(
    native: Any,
    claude: Any,
    *,
    native_other: bool = False,
    native_key: str | None = None,
    claude_key: str = "k",
    native_extra: str = "",
) -> str:
    """``native`` (openai-responses), optionally ``native-other`` (the same fake under another
    base_url, so another origin), and ``claude`` (anthropic): the extension-item tests' models."""
    config = model_block(
        "native",
        "openai-responses",
        native.base_url,
        "gpt-fake-1",
        api_key=native_key,
        extra=native_extra,
    )
    if native_other:
        config += model_block(
            "native-other", "openai-responses", f"http://127.0.0.1:{native.port}", "gpt-fake-1"
        )
    return config + model_block(
        "claude", "anthropic", claude.base_url, "claude-fake-1", api_key=claude_key
    )
