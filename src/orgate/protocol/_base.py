"""Shared building blocks of the protocol models: base classes and union helpers.

Owns the two model bases (strict request-side ``ParamModel``, lax response-side
``WireModel``), ``omittable`` for optional fields that are left out of dumps when
unset, and the discriminated-union builders. Every union tag is the CamelCase
name of its member class, so a validation location such as
``("input", 2, "UserMessageItemParam", "content")`` maps to the spec ``param``
``input[2].content`` by dropping the tags (see ``errors.param_from_loc``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeAlias, Union, cast

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, create_model


def _is_none(value: Any) -> bool:
    return value is None


def omittable(**kwargs: Any) -> Any:
    """An optional field that is absent from dumps while it is ``None``.

    For fields the spec marks optional but not nullable: dumping ``null`` there
    would not validate, so the key is left out instead.
    """
    return Field(default=None, exclude_if=_is_none, **kwargs)


FunctionName: TypeAlias = Annotated[
    str, Field(min_length=1, max_length=64, pattern=r"^[a-zA-Z0-9_-]+$")
]
"""A function's (or custom tool's) name, as the spec constrains it."""


class ParamModel(BaseModel):
    """Base of request-side models (``...Param``): strict types, unknown fields kept.

    Strict: a number is not accepted for a string, a string not for a number or a
    boolean, an object not for a string. ``null`` for an optional field means absent.
    """

    model_config = ConfigDict(
        strict=True,
        extra="allow",
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )


class WireModel(BaseModel):
    """Base of response-side models: built by orgate, dumped in the spec's exact shape."""

    model_config = ConfigDict(
        extra="ignore",
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )


def unknown_type_model(name: str, types: tuple[str, ...]) -> type[BaseModel]:
    """A model that only exists to fail: its ``type`` must be one of ``types``.

    Unions route objects with a missing or unknown ``type`` here, so the error is
    reported at ``<path>.type`` with the list of accepted values.
    """
    # A Literal of values known only at run time: no static type to check it against.
    accepted = cast(Any, Literal)[types]
    return create_model(name, __base__=ParamModel, type=(accepted, ...))


def type_union(
    *models: type[BaseModel],
    unknown: str,
    extra: Callable[[Any], str | None] | None = None,
    extra_members: tuple[tuple[Any, str], ...] = (),
    error_message: str | None = None,
) -> Any:
    """A request-side union of ``models`` discriminated on their ``type`` default.

    Objects with a missing/unknown ``type`` go to a failing model named ``unknown``
    (error at ``.type``). ``extra`` may claim values first (returning a tag of one of
    ``extra_members``, pairs of (annotation, tag)). Non-objects fail with one error
    (``error_message``) at the union's own location.
    """
    by_type: dict[str, str] = {}
    for m in models:
        default = m.model_fields["type"].default
        by_type[default] = m.__name__
    invalid = unknown_type_model(unknown, tuple(by_type))

    def tag(value: Any) -> str | None:
        if extra is not None:
            claimed = extra(value)
            if claimed is not None:
                return claimed
        if isinstance(value, dict):
            t = value.get("type")
        elif isinstance(value, BaseModel):
            t = getattr(value, "type", None)
        else:
            return None
        if isinstance(t, str):
            return by_type.get(t, unknown)
        return unknown

    members: list[Any] = [Annotated[m, Tag(m.__name__)] for m in models]
    members += [Annotated[ann, Tag(t)] for ann, t in extra_members]
    members.append(Annotated[invalid, Tag(unknown)])
    return Annotated[
        Union[tuple(members)],  # noqa: UP007
        Discriminator(
            tag,
            custom_error_type="invalid_union_member",
            custom_error_message=error_message
            or f"Input should be an object with a 'type' of {', '.join(map(repr, by_type))}",
        ),
    ]


def _str_or_list(value: Any) -> str | None:
    if isinstance(value, str):
        return "String"
    if isinstance(value, list):
        return "Array"
    return None


def str_or_list(string: Any, array: Any) -> Any:
    """``string | array`` told apart by the Python type; errors carry no branch noise."""
    return Annotated[
        Union[Annotated[string, Tag("String")], Annotated[array, Tag("Array")]],  # noqa: UP007
        Discriminator(
            _str_or_list,
            custom_error_type="string_or_array_type",
            custom_error_message="Input should be a string or an array",
        ),
    ]
