"""What is wrong with a configuration, said so that an operator can fix it: pydantic's errors
folded into one line per key (unknown keys with the closest known one, union members folded),
booleans where numbers are expected, the environment variable behind a value, and variables
that look like mistyped overrides. ``config.loading`` loads; this module only reports.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

#: Where environment overrides landed: the config path (list indexes as ints) → (variable name,
#: raw value).
EnvOrigins = dict[tuple[str | int, ...], tuple[str, str]]


def env_origin(loc: tuple[str | int, ...], origins: EnvOrigins) -> str | None:
    """The variable behind an error at ``loc`` (its path and ``loc`` are prefixes of one
    another)."""
    for path, (name, _raw) in origins.items():
        common = min(len(path), len(loc))
        if common and tuple(loc[:common]) == path[:common]:
            return name
    return None


#: Error types that only say "not this member of a union" (``str | ApiKeySettings``...).
_UNION_MISMATCH = {
    "string_type",
    "model_type",
    "dict_type",
    "model_attributes_type",
    "int_type",
    "float_type",
    "bool_type",
    "list_type",
}


def _is_union_tag(part: str | int) -> bool:
    """pydantic names the member of a union in the error location (``str``,
    ``function-after[...]``)."""
    return isinstance(part, str) and (
        part in ("str", "int", "float", "bool", "dict", "list", "none")
        or "[" in part
        or "(" in part
    )


def config_errors(error: ValidationError) -> list[tuple[tuple[str | int, ...], str]]:
    """(location, message) per problem, union members folded: a table's own error rather than
    "not a string", one "expected a string or a table" when no member fits."""
    problems: list[tuple[tuple[str | int, ...], str]] = []
    unions: dict[tuple[str | int, ...], list[tuple[tuple[str | int, ...], ErrorDetails]]] = {}
    for item in error.errors():
        loc = tuple(item["loc"])
        tag = next((i for i, part in enumerate(loc) if _is_union_tag(part)), None)
        if tag is None:
            problems.append((loc, item["msg"]))
            continue
        clean = tuple(part for part in loc if not _is_union_tag(part))
        unions.setdefault(loc[:tag], []).append((clean, item))
    for where, items in unions.items():
        specific = [
            (loc, item["msg"].removeprefix("Value error, "))
            for loc, item in items
            if item["type"] not in _UNION_MISMATCH
        ]
        problems.extend(specific or [(where, "expected a string or a table")])
    return problems


def format_validation_error(
    error: ValidationError, source: str, origins: EnvOrigins | None, root: type[BaseModel]
) -> str:
    lines = [f"invalid configuration in {source}:"]
    for loc, message in config_errors(error):
        where = ".".join(str(part) for part in loc) or "(top level)"
        origin = env_origin(loc, origins) if origins else None
        note = f" (set by the environment variable {origin})" if origin else ""
        if message == "Extra inputs are not permitted":
            message = unknown_key(loc, root)
        lines.append(f"  - {where}: {message.removeprefix('Value error, ')}{note}")
    return "\n".join(lines)


def unknown_key(loc: tuple[str | int, ...], root: type[BaseModel]) -> str:
    """``unknown key``, with the closest known key of its table (``prot`` → did you mean
    ``port``?)."""
    model: Any = root
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = (
            model.model_fields.get(part)
            if isinstance(model, type) and issubclass(model, BaseModel)
            else None
        )
        if field is None:
            return "unknown key"
        model = next(
            (
                arg
                for member in field_types(field.annotation)
                for arg in (member, *typing.get_args(member))
                if isinstance(arg, type) and issubclass(arg, BaseModel)
            ),
            None,
        )
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return "unknown key"
    known = [name for name in model.model_fields if name != "source"]
    close = difflib.get_close_matches(str(loc[-1]), known, n=1)
    hint = f"did you mean `{close[0]}`? " if close else ""
    return f"unknown key ({hint}known keys: {', '.join(known)})"


def field_types(annotation: Any) -> tuple[Any, ...]:
    """The members of a (possibly optional / union) annotation."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return typing.get_args(annotation)
    return (annotation,)


Problems = list[tuple[tuple[str | int, ...], str]]


def _is_model(member: Any) -> bool:
    return isinstance(member, type) and issubclass(member, BaseModel)


def _boolean_for_number(members: tuple[Any, ...]) -> bool:
    """Whether a boolean is wrong for a field of these types: a number is expected, not a
    boolean."""
    return bool not in members and any(member in (int, float) for member in members)


def _nested_entries(
    member: Any, value: Any
) -> list[tuple[type[BaseModel], Any, tuple[str | int, ...]]]:
    """The (model, value, place) of every nested table ``value`` holds as a field of type
    ``member``: itself for a model, each entry of a list or mapping of models, none otherwise."""
    origin, args = typing.get_origin(member), typing.get_args(member)
    if _is_model(member):
        return [(member, value, ())]
    if origin is list and args and _is_model(args[0]) and isinstance(value, list):
        return [(args[0], entry, (index,)) for index, entry in enumerate(value)]
    if origin is dict and len(args) == 2 and _is_model(args[1]) and isinstance(value, dict):
        return [(args[1], entry, (name,)) for name, entry in value.items()]
    return []


def boolean_numbers(model: type[BaseModel], data: Any, loc: tuple[str | int, ...] = ()) -> Problems:
    """Booleans where a number is expected (pydantic would take ``port = true`` as 1)."""
    problems: Problems = []
    if not isinstance(data, dict):
        return problems
    for key, value in data.items():
        field = model.model_fields.get(key) if isinstance(key, str) else None
        if field is None:
            continue
        members = field_types(field.annotation)
        if isinstance(value, bool):
            if _boolean_for_number(members):
                problems.append(((*loc, key), "expected a number, not a boolean"))
            continue
        for member in members:
            for nested, entry, place in _nested_entries(member, value):
                problems += boolean_numbers(nested, entry, (*loc, key, *place))
    return problems


#: Variables named like an override with one underscore too few (``ORGATE_SERVER_PORT``) that are
#: not mistakes: read by ``orgate store`` (and commonly referenced as ``env:`` from the file).
_NOT_OVERRIDES = {"ORGATE_STORE_URL"}


def env_references(data: Any) -> set[str]:
    """Every ``env:NAME`` the configuration refers to."""
    if isinstance(data, str):
        return {data[4:]} if data.startswith("env:") else set()
    if isinstance(data, dict):
        return set().union(*(env_references(value) for value in data.values()))
    if isinstance(data, list):
        return set().union(*(env_references(value) for value in data))
    return set()


def mistyped_overrides(
    environ: Mapping[str, str], data: dict[str, Any], root: type[BaseModel], prefix: str
) -> list[str]:
    """``ORGATE_SERVER_PORT=9000`` is silently not an override: say so, with the name that would
    be."""
    referenced = env_references(data) | env_references(root().model_dump())
    warnings: list[str] = []
    for name in sorted(environ):
        upper = name.upper()
        if (
            not upper.startswith(prefix)
            or "__" in name
            or name in referenced
            or name in _NOT_OVERRIDES
        ):
            continue
        rest = upper[len(prefix) :].lower()
        for section, field in root.model_fields.items():
            if section == "source" or not rest.startswith(section + "_"):
                continue
            model = field_types(field.annotation)[0]
            key = rest[len(section) + 1 :]
            if (
                isinstance(model, type)
                and issubclass(model, BaseModel)
                and key in model.model_fields
            ):
                suggestion = f"{prefix}{section.upper()}__{key.upper()}"
                warnings.append(
                    f"environment variable {name} is not a configuration override"
                    f" (did you mean {suggestion}?)"
                )
    return warnings
