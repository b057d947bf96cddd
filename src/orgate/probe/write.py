"""The findings of a probe written into a configuration file: the model's ``[[models]]`` table
gets the keys (``chat.server``, ``capabilities.schema_dialects``…), the rest of the file —
its comments, order and layout — is kept (tomlkit)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.items import AoT, Table


class WriteError(ValueError):
    """The file has no ``[[models]]`` table for the model (it may come from the environment)."""


def _entry(doc: tomlkit.TOMLDocument, model: str) -> Table:
    models = doc.get("models")
    tables = list(models) if isinstance(models, AoT | list) else []
    for table in tables:
        if table.get("name") == model or model in (table.get("aliases") or []):
            found: Table = table  # an array of tables holds tables
            return found
    raise WriteError(f"no [[models]] table named {model!r} in the file to write")


def write_keys(path: Path, model: str, keys: dict[str, Any]) -> list[str]:
    """Set ``keys`` (``section.key`` → value) on ``model``'s table of the TOML file at ``path``;
    the lines set, as ``key = value``."""
    doc = tomlkit.parse(path.read_text(encoding="utf-8"))
    entry = _entry(doc, model)
    written = []
    for dotted, value in keys.items():
        section, key = dotted.split(".", 1)
        table = entry.get(section)
        if table is None:
            table = tomlkit.inline_table()
            entry[section] = table
        table[key] = value
        written.append(f"{dotted} = {tomlkit.item(value).as_string()}")
    path.write_text(tomlkit.dumps(doc), encoding="utf-8")
    return written
