"""Configuration of the structured-output safety net (the ``[structured]`` config section).

``StructuredSettings`` is the validated TOML section; ``StructuredPolicy`` is the
runtime view built from it once at start-up, with every semantic check
(``"module:function"``) imported and checked to be callable, so that a typo in
the config fails the start, not the first request.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

OnExhaustion = Literal["error", "default", "review"]

SemanticCheck = Callable[[Any], list[str]]
"""A domain check: takes the parsed JSON value, returns error strings (empty = fine)."""


@dataclass(slots=True, frozen=True)
class AskedCheck:
    """A domain check of two parameters: the parsed value and what was asked (the request's
    instructions and input messages, as text), to hold the answer to the question: a number
    in the answer must appear in the input, say."""

    fn: Callable[[Any, str], list[str]]

    def __call__(self, value: Any, asked: str = "") -> list[str]:
        return self.fn(value, asked)


def _positional(fn: Callable[..., Any]) -> int:
    """How many positional arguments ``fn`` takes (any number: a large one)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: the value only
        return 1
    kinds = [p.kind for p in params]
    if inspect.Parameter.VAR_POSITIONAL in kinds:
        return 1_000
    return sum(
        k in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        for k in kinds
    )


def as_check(fn: Callable[..., Any]) -> SemanticCheck:
    """``fn`` as the net calls it: a function of two positional parameters gets what was
    asked too (``AskedCheck``)."""
    return AskedCheck(fn) if _positional(fn) >= 2 else fn


_NO_DEFAULT: Any = object()


class FormatSettings(BaseModel):
    """Per format ``name`` (``text.format.name``; ``json_object`` requests use the name
    ``json_object``)."""

    model_config = ConfigDict(extra="forbid")

    semantic: list[str] = Field(default_factory=list, description='Checks as "module:function".')
    default: Any = Field(
        default=_NO_DEFAULT, description="The object returned when the budget is spent."
    )
    on_exhaustion: OnExhaustion | None = None
    retries: int | None = Field(default=None, ge=0)
    semantic_retries: int | None = Field(default=None, ge=0)
    seconds: float | None = Field(default=None, gt=0)

    @property
    def has_default(self) -> bool:
        return self.default is not _NO_DEFAULT

    @field_validator("semantic")
    @classmethod
    def _check_refs(cls, refs: list[str]) -> list[str]:
        for ref in refs:
            module, sep, name = ref.partition(":")
            if not sep or not module or not name:
                raise ValueError(f'semantic check {ref!r} must look like "package.module:function"')
        return refs

    @model_validator(mode="after")
    def _default_needed(self) -> FormatSettings:
        if self.on_exhaustion == "default" and not self.has_default:
            raise ValueError('on_exhaustion = "default" needs a `default` object for this format')
        return self


class StructuredSettings(BaseModel):
    """The ``[structured]`` section. Every field has a safe default."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    retries: int = Field(
        default=2, ge=0, description="Feedback retries after a parse/schema/semantic failure."
    )
    semantic_retries: int = Field(
        default=1, ge=0, description="How many of those may be spent on semantic failures."
    )
    truncation_retries: int = Field(
        default=2, ge=0, description="Re-asks with a larger max_output_tokens after a length cut."
    )
    seconds: float | None = Field(
        default=30.0, gt=0, description="Wall-clock budget for all retries of one request."
    )
    strip_fences: bool = Field(
        default=False, description="Accept ```json fenced output (fences are removed)."
    )
    strip_prose: bool = Field(
        default=False, description="Accept prose before/after the JSON value (it is removed)."
    )
    truncation_growth: float = Field(default=2.0, gt=1.0)
    default_output_cap: int = Field(
        default=32768, gt=0, description="Output cap when the deployment declares none."
    )
    prefer_strict: bool = Field(
        default=True, description="Use strict json_schema when the schema can be made strict."
    )
    on_exhaustion: OnExhaustion = "error"
    review_db: str | None = Field(
        default=None,
        description="SQLite file of the review queue (default: review.db in the data directory).",
    )
    override_max_retries: int = Field(
        default=5, ge=0, description="Ceiling for per-request retry overrides."
    )
    override_max_seconds: float = Field(
        default=120.0, gt=0, description="Ceiling for per-request seconds overrides."
    )
    max_feedback_chars: int = Field(
        default=20000, gt=0, description="Failed output longer than this is cut in feedback."
    )
    formats: dict[str, FormatSettings] = Field(default_factory=dict)

    def review_path(self) -> str:
        """``review_db``, else ``review.db`` in orgate's data directory."""
        from orgate.datadir import REVIEW_FILE, data_dir

        return self.review_db or str(data_dir() / REVIEW_FILE)

    def uses_review(self) -> bool:
        """Whether any exhausted budget may go to the review queue."""
        return self.enabled and (
            self.on_exhaustion == "review"
            or any(f.on_exhaustion == "review" for f in self.formats.values())
        )


def load_check(ref: str) -> SemanticCheck:
    """Import ``"module:function"`` (dots allowed after the colon for attributes)."""
    module_name, _, attr_path = ref.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"semantic check {ref!r}: cannot import {module_name!r}: {exc}") from exc
    for part in attr_path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError as exc:
            raise ValueError(
                f"semantic check {ref!r}: {module_name!r} has no attribute {attr_path!r}"
            ) from exc
    if not callable(obj):
        raise ValueError(f"semantic check {ref!r} is not callable")
    return cast(SemanticCheck, obj)  # callable, checked above; its signature is the user's


@dataclass(slots=True, frozen=True)
class FormatPolicy:
    """The resolved policy of one format name."""

    name: str
    checks: tuple[tuple[str, SemanticCheck], ...] = ()
    default: Any = _NO_DEFAULT
    on_exhaustion: OnExhaustion = "error"
    retries: int | None = None
    semantic_retries: int | None = None
    seconds: float | None = None
    # whether a check reads what was asked (``AskedCheck``): the net then gathers the text
    reads_asked: bool = False

    @property
    def has_default(self) -> bool:
        return self.default is not _NO_DEFAULT


@dataclass(slots=True, frozen=True)
class StructuredPolicy:
    """Runtime policy: settings plus imported semantic checks, per format name."""

    settings: StructuredSettings = field(default_factory=StructuredSettings)
    formats: Mapping[str, FormatPolicy] = field(default_factory=dict)

    @classmethod
    def from_settings(
        cls,
        settings: StructuredSettings,
        *,
        extra_checks: Mapping[str, list[SemanticCheck]] | None = None,
    ) -> StructuredPolicy:
        """Resolve every ``module:function``; raises ``ValueError`` naming the bad reference.

        ``extra_checks`` adds callables directly (tests, embedding applications).
        """
        formats: dict[str, FormatPolicy] = {}
        names = set(settings.formats) | set(extra_checks or {})
        for name in sorted(names):
            fs = settings.formats.get(name, FormatSettings())
            checks = [(ref, as_check(load_check(ref))) for ref in fs.semantic]
            for fn in (extra_checks or {}).get(name, []):
                checks.append((getattr(fn, "__qualname__", repr(fn)), as_check(fn)))
            formats[name] = FormatPolicy(
                name=name,
                checks=tuple(checks),
                reads_asked=any(isinstance(check, AskedCheck) for _, check in checks),
                default=fs.default,
                on_exhaustion=fs.on_exhaustion or settings.on_exhaustion,
                retries=fs.retries,
                semantic_retries=fs.semantic_retries,
                seconds=fs.seconds,
            )
        return cls(settings=settings, formats=formats)

    def format(self, name: str) -> FormatPolicy:
        found = self.formats.get(name)
        if found is not None:
            return found
        return FormatPolicy(name=name, on_exhaustion=self.settings.on_exhaustion)
