"""Secrets in a configuration: finding the ones written literally in a config file (they belong
in the environment, as ``env:NAME``) and masking every secret in a printed configuration.

A secret is the value of a key named like one (``api_key``, ``key``, ``secret``, ``password``,
``token``) or a URL carrying a password (``postgresql://user:PASSWORD@host/db``). ``orgate
serve`` and ``orgate config check`` warn about literal ones; ``orgate config check`` prints the
resolved configuration through ``masked``.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from orgate.config.schema import Settings

SECRET_KEYS = frozenset({"api_key", "key", "secret", "password", "token", "api_keys"})
MASK = "***"


def _url_password(value: str) -> str | None:
    if "://" not in value or "@" not in value:
        return None
    try:
        return urlsplit(value).password
    except ValueError:
        return None


def _is_literal_secret(key: str | None, value: str) -> bool:
    if not value or value.startswith("env:"):
        return False
    return key in SECRET_KEYS or _url_password(value) is not None


def _walk(node: Any, path: str, key: str | None) -> list[str]:
    """The dotted paths of literal secrets under ``node`` (``key``: the name it is stored under)."""
    if isinstance(node, dict):
        found: list[str] = []
        for name, value in node.items():
            found += _walk(value, f"{path}.{name}" if path else str(name), str(name))
        return found
    if isinstance(node, list):
        found = []
        for index, value in enumerate(node):
            found += _walk(value, f"{path}[{index}]", key)  # a list's items share its key's meaning
        return found
    if isinstance(node, str) and _is_literal_secret(key, node):
        return [path]
    return []


def literal_secrets_in(data: dict[str, Any], source: str) -> list[str]:
    """One warning per secret written literally in a parsed config file."""
    return [
        f"{where} in {source} is a literal secret: keep secrets out of config files "
        f'(write "env:NAME" and set the variable NAME)'
        for where in _walk(data, "", None)
    ]


def literal_secrets(settings: Settings) -> list[str]:
    """Warnings for the literal secrets of the file ``settings`` were loaded from (the environment's
    overrides are where secrets belong, so they are not counted)."""
    if not settings.source:
        return []
    try:
        data = tomllib.loads(Path(settings.source).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        # it was read a moment ago; a file that changed since is not this check's business
        return []
    return literal_secrets_in(data, settings.source)


def masked(node: Any, key: str | None = None) -> Any:
    """A copy of a configuration tree with every secret value (literal or resolved) replaced by
    ``***`` and a URL's password hidden; ``env:NAME`` references are shown as written."""
    if isinstance(node, dict):
        return {name: masked(value, str(name)) for name, value in node.items()}
    if isinstance(node, list):
        return [masked(value, key) for value in node]
    if isinstance(node, str) and not node.startswith("env:"):
        password = _url_password(node)
        if password is not None:
            return node.replace(f":{password}@", f":{MASK}@", 1)
        if key in SECRET_KEYS and node:
            return MASK
    return node
