"""The settings models of the provider kinds, and nothing else: the configuration reads
them (through ``providers/kinds.py``) without importing any provider.

``ChatSettings`` is ``[models.chat]`` (``openai-chat``), ``AnthropicSettings`` is
``[models.anthropic]``; a deployment gets its section's set keys as ``Deployment.options``,
which only its provider reads. ``MisbehaveSettings`` is ``[builtin] misbehave``, the plan of
the built-in ``orgate/flaky`` model (``builtin_misbehave.py``).
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from orgate.providers.servers import ServerName


class ChatSettings(BaseModel):
    """``[models.chat]``: how an ``openai-chat`` upstream wants its request
    (docs/configuration.md)."""

    model_config = ConfigDict(extra="forbid")

    # "auto": max_completion_tokens for api.openai.com and Azure OpenAI (whose reasoning
    # models refuse max_tokens), max_tokens for every other server.
    max_tokens_field: Literal["auto", "max_tokens", "max_completion_tokens"] = "auto"
    developer_role: Literal["system", "developer"] = "system"  # the role developer messages get
    include_usage: bool = True  # stream_options.include_usage (the usage chunk)
    # "auto": text-only user content as a string, parts only for images and files
    content_format: Literal["auto", "string", "parts"] = "auto"
    # The server software behind the URL (providers/servers.py): how it constrains JSON output.
    server: ServerName = "auto"


class AnthropicSettings(BaseModel):
    """``[models.anthropic]``: Anthropic-only request options (docs/configuration.md)."""

    model_config = ConfigDict(extra="forbid")

    # Cache breakpoints on the system prompt, the last tool and the last message: repeated
    # prefixes are read at a tenth of the input price, but each write costs a quarter more.
    prompt_cache: bool = False


FLAKY_MODEL = "orgate/flaky"
Misbehaviour = Literal["valid", "truncate", "wrong_type", "extra_key", "missing_key"]
KINDS: tuple[Misbehaviour, ...] = ("truncate", "wrong_type", "extra_key", "missing_key")


class MisbehaveSettings(BaseModel):
    """Rates (probabilities per attempt, summing to at most 1) and the seed of the plan.

    As TOML: ``[builtin] misbehave = { truncate = 0.1, wrong_type = 0.15,
    extra_key = 0.05, missing_key = 0.1, seed = 7 }``; as a command-line spec:
    ``truncate=0.1,wrong_type=0.15,extra_key=0.05,missing_key=0.1,seed=7``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    truncate: float = Field(default=0.1, ge=0, le=1)
    wrong_type: float = Field(default=0.15, ge=0, le=1)
    extra_key: float = Field(default=0.05, ge=0, le=1)
    missing_key: float = Field(default=0.1, ge=0, le=1)
    seed: int = 7

    @model_validator(mode="after")
    def _at_most_one(self) -> MisbehaveSettings:
        total = self.truncate + self.wrong_type + self.extra_key + self.missing_key
        if total > 1 + 1e-9:
            raise ValueError(f"misbehave rates add up to {total:g}, more than 1")
        return self

    @classmethod
    def parse(cls, spec: str) -> MisbehaveSettings:
        """``"truncate=0.1,seed=7"`` → settings; rates not named are 0. ValueError if bad."""
        fields: dict[str, Any] = dict.fromkeys(KINDS, 0.0)
        for raw in spec.split(","):
            part = raw.strip()
            if not part:
                continue
            key, sep, value = part.partition("=")
            key = key.strip()
            if not sep or key not in (*KINDS, "seed"):
                raise ValueError(
                    f"{part!r}: expected key=value with key one of {', '.join((*KINDS, 'seed'))}"
                )
            try:
                fields[key] = int(value) if key == "seed" else float(value)
            except ValueError:
                kind = "an integer" if key == "seed" else "a number from 0 to 1"
                raise ValueError(f"--misbehave {part!r}: {key} must be {kind}") from None
        try:
            return cls.model_validate(fields)
        except ValidationError as exc:  # one line per value, without pydantic's links
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'rates'}: "
                f"{e['msg'].removeprefix('Value error, ')}"
                for e in exc.errors()
            )
            raise ValueError(f"--misbehave {spec!r}: {problems}") from None

    def draw(self, key: str) -> float:
        """A uniform number in ``[0, 1)`` fixed by (seed, key)."""
        digest = hashlib.sha256(f"{self.seed}\x1f{key}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64

    def choose(self, key: str) -> Misbehaviour:
        """The misbehaviour of the attempt identified by ``key``."""
        u = self.draw(key)
        edge = 0.0
        for kind in KINDS:
            edge += getattr(self, kind)
            if u < edge:
                return kind
        return "valid"
