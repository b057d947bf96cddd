"""The built-in offline test model (``orgate/echo``): deterministic, no key, no network.

It is a test model, not an LLM. Its behaviour is a documented contract
(docs/builtin-model.md):

- function tools offered, ``tool_choice`` not ``none`` and the last input item
  a user message → it calls one tool (the forced one; else the allowed tool
  whose name or description best matches the prompt; else the first allowed)
  with arguments generated from that tool's JSON Schema; a ``tool_choice`` that
  requires a call (``required``, a named function) gets one whatever the last item;
- last input item a ``function_call_output`` → text quoting that output;
- otherwise the text of the last user message, echoed; with a JSON
  ``text.format`` it answers a JSON value (schema-valid for ``json_schema``).

One "token" is one whitespace-separated word, a word longer than ``CHARS_PER_TOKEN``
characters being one token per ``CHARS_PER_TOKEN`` of them; output streams a token at a
time and stops at ``max_output_tokens``, or at the model's own cap, with
``Finish("length")``; asked for log probabilities, each token is certain (``logprob`` 0.0).
A value generated from a client's schema is bounded by that cap (``CHARS_PER_TOKEN``
characters a token), and is generated where ``orgate.gate.work`` decides: in a thread when
the schema's cost is small, in a worker process killed past ``[limits]
schema_work_seconds`` otherwise.
Directives in the last user message make it misbehave on purpose:
``orgate:fail`` (500 before any output), ``orgate:fail-mid`` (500 after half
the output), ``orgate:rate-limit`` (429 with ``Retry-After: 1``),
``orgate:refuse`` (a refusal), ``orgate:reason`` (a reasoning summary first),
``orgate:delay=MS`` (MS milliseconds between words), ``orgate:bad-args``
(tool arguments that break the tool's schema), ``orgate:bad-json`` (JSON
output with a wrong type, once: a retry's feedback message has no directive).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from typing import Any

from orgate.gate.cost import CHARS_PER_TOKEN, cost_of
from orgate.gate.work import SCHEMA_WORK, SchemaWorkFailed, SchemaWorkTimeout, small_generation
from orgate.neutral import (
    Deployment,
    Finish,
    ModelEvent,
    ModelRequest,
    Provider,
    ReasoningDelta,
    RefusalDelta,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)
from orgate.protocol.errors import ApiError, ErrorCode
from orgate.protocol.items import FunctionCallItemParam, FunctionCallOutputItemParam
from orgate.providers.custom_tools import custom_call_events, functions_only
from orgate.providers.plain import check_refusals
from orgate.providers.schema_example import example_for

_WORD = re.compile(rf"\S{{1,{CHARS_PER_TOKEN}}}\s*|\s+")
_WORDS = re.compile(r"[a-z0-9]{3,}")
_DIRECTIVE = re.compile(r"orgate:([a-z-]+)(?:=(\d+))?")


def tokens(text: str) -> list[str]:
    """The built-in model's tokens: words with their trailing whitespace, a long word cut
    every ``CHARS_PER_TOKEN`` characters."""
    return _WORD.findall(text)


def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for part in content:
        text = getattr(part, "text", None)
        if text is None:
            text = getattr(part, "refusal", None)
        if isinstance(text, str):
            parts.append(text)
    return " ".join(parts)


def _count_input_tokens(request: ModelRequest) -> int:
    total = len(tokens(request.instructions or ""))
    for item in request.input:
        if isinstance(item, FunctionCallItemParam):
            total += len(tokens(item.arguments)) + 1
        elif isinstance(item, FunctionCallOutputItemParam):
            total += len(tokens(_text_of(item.output)))
        else:
            total += len(tokens(_text_of(getattr(item, "content", None))))
    return total


def _last_prompt(request: ModelRequest) -> tuple[Any, str, bool]:
    """The last input item, the text of the last user message, and whether that message is the
    last item (directives are read only then: not again after a tool's output)."""
    last = request.input[-1] if request.input else None
    last_user = next(
        (item for item in reversed(request.input) if getattr(item, "role", None) == "user"),
        None,
    )
    return (
        last,
        _text_of(getattr(last_user, "content", None)),
        last is not None and last is last_user,
    )


def _cut_at_stop(text: str, stop: list[str] | None) -> str:
    """The chat adapter's ``stop``: the text ends before the first one."""
    if not stop:
        return text
    cut = min((i for i in (text.find(s) for s in stop if s) if i >= 0), default=-1)
    return text[:cut] if cut >= 0 else text


class BuiltinProvider(Provider):
    """The ``builtin`` provider: answers from the request alone, one event at a time."""

    def __init__(self, deployment: Deployment) -> None:
        self.deployment = deployment
        #: the model's output cap: what it emits, and the size of what it generates
        self.cap = deployment.capabilities.max_output_tokens

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        # Custom tools are functions with one string argument here,
        # as for any function-only upstream.
        return custom_call_events(request, self._events(functions_only(request)))

    async def count_input_tokens(self, request: ModelRequest) -> int | None:
        """Its own count: the words its answer's usage counts as input."""
        return _count_input_tokens(functions_only(request))

    async def _events(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        check_refusals(request)
        last, prompt, last_is_user = _last_prompt(request)
        directives = dict(_DIRECTIVE.findall(prompt)) if last_is_user else {}
        out = _Output(
            _budget(request.max_output_tokens, self.cap),
            _count_input_tokens(request),
            _delay_of(directives),
        )
        error = self._error_on_purpose(directives)
        if error is not None:
            raise error
        if "reason" in directives:
            async for event in out.emit(_reasoning_summary(), reasoning=True):
                yield event
            if out.cut:
                return
        tool = self._pick_tool(request, prompt) if _may_call(request, last_is_user) else None
        if tool is not None:
            async for event in self._tool_call(out, tool, prompt, directives):
                yield event
            return
        text = await self._answer_off_loop(request, last, prompt, directives)
        async for event in out.emit(self._answer_deltas(request, text, directives)):
            yield event
        if not out.cut:
            yield Finish("stop", out.usage())

    async def _tool_call(
        self,
        out: _Output,
        tool: tuple[str, dict[str, Any] | None],
        prompt: str,
        directives: dict[str, str],
    ) -> AsyncIterator[ModelEvent]:
        """One call of ``tool``, its arguments a word at a time, then ``Finish("tool_calls")``."""
        name, schema = tool
        arguments = await _tool_arguments(schema, prompt, directives, self.cap, name)
        yield ToolCallStart(0, "", name)
        async for event in out.emit(ToolCallDelta(0, piece) for piece in tokens(arguments)):
            yield event
        if not out.cut:
            yield Finish("tool_calls", out.usage())

    async def _answer_off_loop(
        self, request: ModelRequest, last: Any, prompt: str, directives: dict[str, str]
    ) -> str:
        """The answer's text; a JSON value generated from the client's schema off the event
        loop (``_generated``)."""
        fmt = request.text_format
        said = self._said(request, last, prompt, directives)
        if fmt is None or fmt.type != "json_schema" or isinstance(said, str):
            return self._answer(request, last, prompt, directives)
        prompt, directives = said
        schema = fmt.schema or {"type": "object"}
        value = await _generated(example_for, schema, prompt, self.cap, "text.format.schema")
        if "bad-json" in directives:
            value = _break_value(value)
        return json.dumps(value, ensure_ascii=False)

    def _answer_deltas(
        self, request: ModelRequest, text: str, directives: dict[str, str]
    ) -> Iterator[ModelEvent]:
        """The answer's words as text (or refusal) deltas; ``orgate:fail-mid`` raises half-way."""
        words = tokens(_cut_at_stop(text, request.stop))
        fail_at = max(len(words) // 2, 1) if "fail-mid" in directives else None
        refusal = "refuse" in directives
        for index, word in enumerate(words):
            if fail_at is not None and index >= fail_at:
                raise ApiError.of(
                    ErrorCode.MODEL_ERROR,
                    f"{self.deployment.name} failed mid-answer on purpose (the prompt "
                    "contains orgate:fail-mid)",
                )
            yield RefusalDelta(word) if refusal else text_token(word, request)

    def _error_on_purpose(self, directives: dict[str, str]) -> ApiError | None:
        """The error ``orgate:fail`` or ``orgate:rate-limit`` asks for, if the prompt holds one."""
        if "fail" in directives:
            return ApiError.of(
                ErrorCode.MODEL_ERROR,
                f"{self.deployment.name} failed on purpose (the prompt contains orgate:fail)",
            )
        if "rate-limit" in directives:
            return ApiError.of(
                ErrorCode.RATE_LIMIT_EXCEEDED,
                f"{self.deployment.name} is rate limited on purpose (the prompt "
                "contains orgate:rate-limit)",
                headers={"Retry-After": "1"},
            )
        return None

    # --- choices ---------------------------------------------------------------------------

    def _said(
        self, request: ModelRequest, last: Any, prompt: str, directives: dict[str, str]
    ) -> str | tuple[str, dict[str, str]]:
        """What the answer is about: (its text, the directives that still apply), or the
        whole answer when it is a refusal."""
        if getattr(last, "type", None) == "function_call_output":
            name = next(
                (
                    item.name
                    for item in request.input
                    if isinstance(item, FunctionCallItemParam) and item.call_id == last.call_id
                ),
                "the tool",
            )
            return f"{name} returned: {_text_of(last.output)}", {}
        if "refuse" in directives:
            return "I can't help with that: the prompt asked me to refuse (orgate:refuse)."
        return prompt, directives

    def _answer(
        self, request: ModelRequest, last: Any, prompt: str, directives: dict[str, str]
    ) -> str:
        """The answer's text when it is not generated from a schema."""
        said = self._said(request, last, prompt, directives)
        if isinstance(said, str):
            return said
        # What the answer says: the prompt, or the tool's output; JSON for a JSON format.
        prompt, directives = said
        fmt = request.text_format
        if fmt is not None and fmt.type == "json_object":
            return json.dumps(
                {"echo": 12.5 if "bad-json" in directives else prompt}, ensure_ascii=False
            )
        return prompt if prompt.strip() else "(no text)"

    def _pick_tool(
        self, request: ModelRequest, prompt: str
    ) -> tuple[str, dict[str, Any] | None] | None:
        tools = [t for t in request.tools if getattr(t, "type", "function") == "function"]
        if not tools:
            return None
        choice = request.tool_choice
        allowed = tools
        if choice == "none":
            return None
        kind = getattr(choice, "type", None)
        if kind == "function":
            forced = [t for t in tools if t.name == choice.name]
            return (forced[0].name, _parameters(forced[0])) if forced else None
        if kind == "allowed_tools":
            names = {getattr(t, "name", None) for t in choice.tools}
            allowed = [t for t in tools if t.name in names]
            if getattr(choice, "mode", "auto") == "none" or not allowed:
                return None
        best = max(allowed, key=lambda t: _score(prompt, t), default=None)
        if best is None:
            return None
        if _score(prompt, best) == 0:
            best = allowed[0]
        return best.name, _parameters(best)


class _Output:
    """The output so far: what is counted against ``max_output_tokens`` and reported as usage."""

    def __init__(self, budget: int | None, input_tokens: int, delay: float) -> None:
        self.budget = budget
        self.input_tokens = input_tokens
        self.delay = delay
        self.emitted = 0
        self.reasoning = 0  # reasoning words: output tokens too, as with OpenAI's reasoning_tokens
        self.cut = False  # the budget ran out: ``Finish("length")`` was the last event

    def usage(self) -> Usage:
        return Usage(self.input_tokens, self.emitted, reasoning_tokens=self.reasoning)

    async def emit(
        self, events: Iterable[ModelEvent], *, reasoning: bool = False
    ) -> AsyncIterator[ModelEvent]:
        """Each event, one token each, until the budget runs out (then ``Finish("length")``)."""
        for event in events:
            if self.budget is not None and self.emitted >= self.budget:
                self.cut = True
                yield Finish("length", self.usage())
                return
            yield event
            self.emitted += 1
            self.reasoning += reasoning
            if self.delay:
                await asyncio.sleep(self.delay)


def _delay_of(directives: dict[str, str]) -> float:
    """Seconds between words: ``orgate:delay=MS``."""
    return int(directives["delay"]) / 1000 if directives.get("delay") else 0.0


def _reasoning_summary() -> Iterator[ModelEvent]:
    return (ReasoningDelta(word, "summary") for word in tokens(_REASONING))


_REASONING = "The user asked me to think first, so I did."


def _may_call(request: ModelRequest, last_is_user: bool) -> bool:
    """Whether a tool may be called: after the user's message, or whenever a call is forced
    (required, a named function), even after a tool's output."""
    return last_is_user or _forces_a_call(request.tool_choice)


def _budget(asked: int | None, cap: int | None) -> int | None:
    """The tokens an answer may have: ``max_output_tokens``, never past the model's cap."""
    if asked is None:
        return cap
    return asked if cap is None else min(asked, cap)


async def _generated(
    job: Callable[[Any, str, int | None, float], Any],
    schema: Any,
    prompt: str,
    cap: int | None,
    param: str,
) -> Any:
    """``job(schema, prompt, max_chars, seconds)``: a value generated from a client's schema,
    no longer than the model's cap allows, where ``orgate.gate.work`` decides (a thread for a
    small schema, a killable worker process otherwise). The generator stops itself with its
    best effort at half the time limit; past the whole of it, the worker is killed and the
    request is a 400 naming the schema."""
    room = None if cap is None else cap * CHARS_PER_TOKEN
    seconds = SCHEMA_WORK.seconds / 2
    small = small_generation(cost_of(schema), len(prompt))
    try:
        return await SCHEMA_WORK.run(job, schema, prompt, room, seconds, small=small)
    except (SchemaWorkTimeout, SchemaWorkFailed) as exc:
        raise ApiError.of(
            ErrorCode.SCHEMA_TOO_COMPLEX,
            f"'{param}': generating a value for it failed: {exc} (limits.schema_work_seconds).",
            param=param,
        ) from None


async def _tool_arguments(
    schema: dict[str, Any] | None,
    prompt: str,
    directives: dict[str, str],
    cap: int | None,
    name: str,
) -> str:
    """The call's JSON arguments (schema-breaking for ``orgate:bad-args``), generated from the
    tool's schema as ``_generated`` says."""
    param = f"tools[{name}].parameters"
    schema = schema or {"type": "object"}
    if "bad-args" in directives:
        return str(await _generated(_schema_breaking_arguments, schema, "x", cap, param))
    value = await _generated(_arguments_for, schema, prompt, cap, param)
    return json.dumps(value if value is not None else {}, ensure_ascii=False)


def _arguments_for(schema: Any, prompt: str, max_chars: int | None, seconds: float) -> Any:
    """Tool-call arguments: the required properties, and the optional ones only when the prompt
    names them (a model leaves out what it has no value for); the whole schema when that fails."""
    props = schema.get("properties") if isinstance(schema, dict) else None
    if isinstance(props, dict):
        required = set(schema.get("required") or ())
        named = set(_NAME_WORD.findall(prompt.lower()))
        kept = {k: v for k, v in props.items() if k in required or k.lower() in named}
        if len(kept) < len(props):
            # No extra keys either: the value stays valid for the whole schema.
            value = example_for(
                {**schema, "properties": kept, "additionalProperties": False},
                prompt,
                max_chars,
                seconds,
            )
            if value is not None:
                return value
    return example_for(schema, prompt, max_chars, seconds)


_NAME_WORD = re.compile(r"[a-z0-9_]+")


def _forces_a_call(choice: Any) -> bool:
    """True for a ``tool_choice`` that requires a tool call: ``required``, a named function,
    ``allowed_tools`` in ``required`` mode."""
    if choice == "required":
        return True
    kind = getattr(choice, "type", None)
    return kind == "function" or (
        kind == "allowed_tools" and getattr(choice, "mode", "auto") == "required"
    )


def _parameters(tool: Any) -> dict[str, Any] | None:
    params = getattr(tool, "parameters", None)
    if params is None:
        return None
    if hasattr(params, "model_dump"):
        dumped: dict[str, Any] = params.model_dump(mode="json")
        return dumped
    return params if isinstance(params, dict) else None


def _score(prompt: str, tool: Any) -> int:
    words = set(_WORDS.findall(prompt.lower()))
    names = set(_WORDS.findall(re.sub(r"[_\-]", " ", tool.name.lower())))
    description = set(_WORDS.findall((getattr(tool, "description", None) or "").lower()))
    return 2 * len(words & names) + len(words & description)


def _break_value(value: Any) -> Any:
    """Turn a valid value into one with a wrong type (first string → number, else a string)."""
    if isinstance(value, dict):
        for key, inner in value.items():
            if isinstance(inner, str):
                return {**value, key: 12.5}
            if isinstance(inner, int | float) and not isinstance(inner, bool):
                return {**value, key: str(inner)}
        return {**value, "unexpected": True}
    return "not the expected value"


def _schema_breaking_arguments(
    schema: dict[str, Any], prompt: str, max_chars: int | None, seconds: float
) -> str:
    value = example_for(schema, prompt, max_chars, seconds)
    return json.dumps(_break_value(value if isinstance(value, dict) else {}))


def text_token(word: str, request: ModelRequest) -> TextDelta:
    """One word of a text answer, with its log probability when the request asks for them:
    the answer is deterministic, so each word is certain (0.0), and the only alternative
    with any probability is the word itself."""
    if not request.logprobs:
        return TextDelta(word)
    word_bytes = list(word.encode("utf-8"))
    alternatives = (
        [{"token": word, "logprob": 0.0, "bytes": word_bytes}] if request.top_logprobs else []
    )
    return TextDelta(
        word, [{"token": word, "logprob": 0.0, "bytes": word_bytes, "top_logprobs": alternatives}]
    )
