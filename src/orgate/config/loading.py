"""Loading the configuration: the TOML file (or the embedded default), the
``ORGATE_<SECTION>__<KEY>`` environment overrides, ``env:NAME`` secret references, the command
line's overrides, and validation into ``Settings`` with one clear line per problem. Nothing here
does I/O beyond reading the file and the environment.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson
from pydantic import (
    ValidationError,
)

from orgate.config.report import (
    EnvOrigins,
    boolean_numbers,
    env_origin,
    format_validation_error,
    mistyped_overrides,
)
from orgate.config.schema import ENV_PREFIX, ConfigError, ServerSettings, Settings
from orgate.store import check_url

# --- secrets ---------------------------------------------------------------------------------


def resolve_secret(
    value: str | None,
    *,
    where: str,
    required: bool = True,
    environ: Mapping[str, str] | None = None,
) -> str | None:
    """Resolve ``env:NAME`` to the variable's value (``ConfigError`` if unset and required);
    other strings are literal."""
    if value is None or not value.startswith("env:"):
        return value
    name = value[4:]
    resolved = (os.environ if environ is None else environ).get(name)
    if not resolved:
        if required:
            raise ConfigError(f"{where}: environment variable {name} is not set")
        return None
    return resolved


# --- loading ---------------------------------------------------------------------------------


def _parse_env_value(raw: str) -> Any:
    """Environment values are TOML/JSON scalars or arrays when they parse as such, else strings."""
    text = raw.strip()
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        pass
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


def apply_env_overrides(
    data: dict[str, Any], environ: Mapping[str, str], origins: EnvOrigins | None = None
) -> dict[str, Any]:
    """Apply ``ORGATE_<SECTION>__<KEY>[__<SUBKEY>...]`` variables onto ``data`` (nested,
    lower-cased).

    A numeric part indexes a list the file already has (``ORGATE_MODELS__0__API_KEY``);
    ``origins``, when given, records which variable set which path (for error messages).
    """
    for name, raw in sorted(environ.items()):
        if not name.upper().startswith(ENV_PREFIX) or "__" not in name:
            continue
        parts = [part.lower() for part in name[len(ENV_PREFIX) :].split("__")]
        if not all(parts):
            continue
        path: list[str | int] = []
        node: Any = data
        for position, key in enumerate(parts):
            last = position == len(parts) - 1
            if isinstance(node, list):
                where = ".".join(str(part) for part in path)
                if not key.isdigit() or int(key) >= len(node):
                    raise ConfigError(
                        f"environment variable {name}: `{where}` is a list of {len(node)}"
                        f" entr{'y' if len(node) == 1 else 'ies'}"
                        f" in the configuration; {key!r} is not the index of one"
                    )
                index = int(key)
                path.append(index)
                if last:
                    node[index] = _parse_env_value(raw)
                elif isinstance(node[index], dict):
                    node = node[index]
                else:
                    raise ConfigError(
                        f"environment variable {name}: `{where}[{index}]` is not a table"
                    )
                continue
            path.append(key)
            if last:
                node[key] = _parse_env_value(raw)
                continue
            child = node.get(key)
            if not isinstance(child, (dict, list)):
                child = (
                    [] if parts[position + 1].isdigit() else {}
                )  # a missing list has no index to override
                if isinstance(child, dict):
                    node[key] = child
            node = child
        if origins is not None:
            origins[tuple(path)] = (name, raw)
    return data


def _retry_as_strings(data: dict[str, Any], error: ValidationError, origins: EnvOrigins) -> bool:
    """Environment values parsed as numbers (or dates...) where a string is expected are taken as
    written; a plain string where a list is expected is a comma-separated list. True if one
    changed."""
    changed = False
    for item in error.errors():
        loc = tuple(item["loc"])
        if loc not in origins:
            continue
        raw = origins[loc][1]
        if item["type"] == "string_type":
            value: Any = raw
        elif item["type"] == "list_type" and not isinstance(item["input"], list):
            value = [part.strip() for part in raw.split(",") if part.strip()]
        else:
            continue
        node: Any = data
        for key in loc[:-1]:
            node = node[key]
        if node[loc[-1]] != value:
            node[loc[-1]] = value
            changed = True
    return changed


def _read_toml(file: Path) -> dict[str, Any]:
    """The configuration file's tables; ``ConfigError`` saying why it cannot be read or parsed."""
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {file}") from None
    except IsADirectoryError:
        raise ConfigError(f"config file {file} is a directory, not a TOML file") from None
    except PermissionError:
        raise ConfigError(f"cannot read config file {file}: permission denied") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{file}: not valid TOML: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {file}: {exc.strerror or exc}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: not valid TOML: {exc}") from None


def _refuse_boolean_numbers(data: dict[str, Any], source: str, origins: EnvOrigins) -> None:
    """``ConfigError`` listing every boolean given where a number is expected (and its variable)."""
    booleans = boolean_numbers(Settings, data)
    if not booleans:
        return
    lines = [f"invalid configuration in {source}:"]
    for loc, message in booleans:
        origin = env_origin(loc, origins)
        note = f" (set by the environment variable {origin})" if origin else ""
        lines.append(f"  - {'.'.join(str(part) for part in loc)}: {message}{note}")
    raise ConfigError("\n".join(lines))


def _validate(data: dict[str, Any], source: str, origins: EnvOrigins) -> Settings:
    """``Settings`` of ``data``; an environment value pydantic refused is retried as the string
    it was."""
    for _ in range(8):  # each retry fixes at least one environment value
        try:
            return Settings.model_validate(data)
        except ValidationError as exc:
            if not _retry_as_strings(data, exc, origins):
                raise ConfigError(format_validation_error(exc, source, origins, Settings)) from None
    raise ConfigError(
        f"invalid configuration in {source}"
    )  # pragma: no cover - a value that keeps changing


def load_settings(
    path: str | Path | None = None, environ: dict[str, str] | None = None
) -> Settings:
    """Read, override and validate the configuration; ``ConfigError`` with a clear message."""
    env = dict(os.environ if environ is None else environ)
    if path is None:
        path = env.get("ORGATE_CONFIG") or None
    data: dict[str, Any] = {}
    source = "the embedded default configuration"
    if path is not None:
        source = str(Path(path))
        data = _read_toml(Path(path))
    origins: EnvOrigins = {}
    data = apply_env_overrides(data, env, origins)
    _refuse_boolean_numbers(data, source, origins)
    settings = _validate(data, source, origins)
    settings.source = None if path is None else source
    if settings.store.enabled and settings.store.url and settings.store.url.startswith("env:"):
        # `url = "env:ORGATE_STORE_URL"`: a PostgreSQL URL holds a password, so it may live in
        # the environment
        settings.store.url = resolve_secret(settings.store.url, where="store.url", environ=env)
        try:
            check_url(settings.store.url)
        except ValueError as exc:
            raise ConfigError(f"invalid configuration in {source}:\n  - store.url: {exc}") from None
    # resolved where it is used (server/ratelimit.py, only when a key has limits): an unset
    # variable is still a mistake to report now
    resolve_secret(settings.ratelimit.redis_url, where="ratelimit.redis_url", environ=env)
    settings._warnings = mistyped_overrides(env, data, Settings, ENV_PREFIX)
    return settings


def apply_cli_overrides(
    settings: Settings,
    *,
    host: str | None = None,
    port: int | None = None,
    log_level: str | None = None,
    log_format: str | None = None,
) -> None:
    """``serve --host/--port/--log-level/--log-format``: over the file and the environment,
    validated like them (``ConfigError``)."""
    values = settings.server.model_dump()
    if host:
        values["host"] = host
    for key, value in (("port", port), ("log_level", log_level), ("log_format", log_format)):
        if value is not None:
            values[key] = value
    try:
        settings.server = ServerSettings.model_validate(values)
    except ValidationError as exc:
        problems = "; ".join(
            f"--{str(item['loc'][0]).replace('_', '-')} {values[str(item['loc'][0])]}: "
            f"{item['msg']}"
            for item in exc.errors()
        )
        raise ConfigError(f"invalid command line: {problems}") from None
