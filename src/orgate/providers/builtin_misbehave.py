"""``orgate/flaky``: the built-in test model, misbehaving on JSON output at configured rates.

A deterministic *misbehaviour plan* wraps the built-in provider. For every
attempt of a JSON request (``text.format`` ``json_schema`` or ``json_object``)
it draws one of

- ``truncate``    — about half the answer, then ``Finish("length")``;
- ``wrong_type``  — the first value of the object gets a wrong type
  (string → ``12.5``, number → ``"7"``…); for ``json_object`` the root becomes
  an array;
- ``extra_key``   — an ``unexpected_note`` key is added (fails only where the
  schema forbids extra keys, e.g. every strict schema);
- ``missing_key`` — the first required key (else the first key) is removed;
- ``valid``       — the built-in model's own, schema-valid answer,

with the probabilities of ``MisbehaveSettings`` (the rest is ``valid``). The
draw is ``sha256(seed, attempt key)`` mapped to ``[0, 1)``: the same seed and
the same request always misbehave the same way, so rates measured over a
fixed set of requests are reproducible. The attempt key is the request's
content — ``metadata`` (``orgate_eval_case`` / ``orgate_eval_run`` tell runs
of one case apart), instructions, every input item's text and
``max_output_tokens`` — so a retry (which carries the feedback message, or a
larger ``max_output_tokens``) is a new, independent draw.

Text requests, tool calls and answers the built-in model already cut at
``max_output_tokens`` are passed through unchanged.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from orgate.neutral import (
    Deployment,
    Finish,
    ModelEvent,
    ModelRequest,
    Provider,
    TextDelta,
    Usage,
    WrapperProvider,
    batches_of_one,
)
from orgate.providers.builtin import text_token, tokens
from orgate.providers.settings import FLAKY_MODEL, KINDS, MisbehaveSettings, Misbehaviour

__all__ = [
    "FLAKY_MODEL",
    "KINDS",
    "EXTRA_KEY",
    "FlakyProvider",
    "MisbehaveSettings",
    "Misbehaviour",
    "flaky_wrapper",
]

EXTRA_KEY = "unexpected_note"


def _item_text(item: Any) -> str:
    content = getattr(item, "content", None)
    if content is None:
        return str(getattr(item, "arguments", None) or getattr(item, "output", None) or "")
    if isinstance(content, str):
        return content
    return " ".join(str(getattr(part, "text", "") or "") for part in content)


def attempt_key(request: ModelRequest) -> str:
    """What identifies one attempt: the request's content (see the module docstring)."""
    fmt = request.text_format
    parts = {
        "metadata": sorted((request.metadata or {}).items()),
        "instructions": request.instructions,
        "input": [
            [getattr(item, "type", None), getattr(item, "role", None), _item_text(item)]
            for item in request.input
        ],
        "max_output_tokens": request.max_output_tokens,
        "format": [fmt.type, fmt.name] if fmt is not None else None,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def _wrong(value: Any) -> Any:
    if isinstance(value, bool):
        return "yes"
    if isinstance(value, str):
        return 12.5
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return 0  # null


def break_value(
    value: Any, kind: Misbehaviour, schema: dict[str, Any] | None, is_object_format: bool
) -> Any:
    """``value`` changed by ``kind`` (``valid``/``truncate`` leave it as it is)."""
    if kind == "wrong_type":
        if is_object_format or not isinstance(value, dict) or not value:
            return [value] if isinstance(value, dict) else _wrong(value)
        first = next(iter(value))
        return {**value, first: _wrong(value[first])}
    if kind == "extra_key" and isinstance(value, dict):
        return {**value, EXTRA_KEY: "not in the schema"}
    if kind == "missing_key" and isinstance(value, dict) and value:
        required = (schema or {}).get("required") or []
        victim = next((k for k in required if k in value), next(iter(value)))
        return {k: v for k, v in value.items() if k != victim}
    return value


class FlakyProvider(WrapperProvider):
    """Wraps the built-in provider and applies the misbehaviour plan to JSON answers."""

    def __init__(self, inner: Provider, settings: MisbehaveSettings) -> None:
        super().__init__(inner)
        self.settings = settings

    def stream_batches(self, request: ModelRequest) -> AsyncIterator[list[ModelEvent]]:
        fmt = request.text_format
        if fmt is None or fmt.type not in ("json_schema", "json_object"):
            return self.inner.stream_batches(request)
        kind = self.settings.choose(attempt_key(request))
        if kind == "valid":
            return self.inner.stream_batches(request)
        return batches_of_one(self._misbehave(request, kind))

    async def _misbehave(
        self, request: ModelRequest, kind: Misbehaviour
    ) -> AsyncIterator[ModelEvent]:
        events = [ev async for ev in self.inner.stream(request)]
        finish = next((ev for ev in events if isinstance(ev, Finish)), None)
        text = "".join(ev.text for ev in events if isinstance(ev, TextDelta))
        if (
            finish is None
            or finish.reason != "stop"
            or any(not isinstance(ev, TextDelta | Finish) for ev in events)
        ):
            for ev in events:  # tool calls, refusals, a cut the model made itself: as they came
                yield ev
            return
        usage_in = finish.usage.input_tokens if finish.usage is not None else 0
        if kind == "truncate":
            words = tokens(text)
            keep = words[: max(1, len(words) // 2)] if len(words) > 1 else [text[: len(text) // 2]]
            for word in keep:
                yield text_token(word, request)
            yield Finish("length", Usage(usage_in, len(keep)))
            return
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = None
        fmt = request.text_format
        assert fmt is not None
        broken = break_value(value, kind, fmt.schema, fmt.type == "json_object")
        words = tokens(json.dumps(broken, ensure_ascii=False))
        for word in words:
            yield text_token(word, request)
        yield Finish("stop", Usage(usage_in, len(words)))


def flaky_wrapper(settings: MisbehaveSettings) -> Callable[[Provider, Deployment], Provider]:
    """A ``ProviderRegistry(wrap=...)`` hook: ``orgate/flaky`` gets the plan,
    every other provider is left alone."""

    def wrap(provider: Provider, deployment: Deployment) -> Provider:
        if deployment.provider == "builtin" and deployment.name == FLAKY_MODEL:
            return FlakyProvider(provider, settings)
        return provider

    return wrap
