"""The probe requests: a handful of tiny calls through the model's own provider.

Each asks for a few output tokens at temperature 0. A schema dialect is tried with a schema
no model writes unconstrained (one key whose only allowed value is ``PROBE_VALUE``): the
answer tells a dialect the upstream enforces (``yes``) from one it takes and ignores
(``ignored``) and one it refuses (``refused``, with its error). The server software comes
from the models list (``owned_by``, free of charge), which some servers also fill with their
context size; others say it in the error to an impossible ``max_tokens``.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable
from typing import Any

import aiohttp

from orgate.neutral import (
    Deployment,
    Finish,
    ModelEvent,
    ModelRequest,
    Provider,
    ReasoningDelta,
    TextDelta,
    TextFormat,
    ToolCallDelta,
    ToolCallStart,
)
from orgate.neutral.dialects import PROVIDER_DIALECTS, SchemaDialect
from orgate.probe.report import Finding, ProbeReport, Verdict, dialect_finding
from orgate.protocol import FunctionToolParam, SpecificFunctionParam, UserMessageItemParam
from orgate.protocol.errors import ApiError

PROBE_VALUE = {"orgate_probe": "zq7-ok"}
PROBE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"orgate_probe": {"type": "string", "enum": ["zq7-ok"]}},
    "required": ["orgate_probe"],
    "additionalProperties": False,
}
PROBE_TOOL = FunctionToolParam(
    name="orgate_probe_echo",
    description="Echo one word.",
    parameters={
        "type": "object",
        "properties": {"word": {"type": "string"}},
        "required": ["word"],
        "additionalProperties": False,
    },
    strict=True,
)
#: ``owned_by`` in a models list → the server software (providers/servers.py).
OWNERS = {
    "me": "llama-cpp-python",
    "llamacpp": "llama.cpp",
    "vllm": "vllm",
    "library": "ollama",
    "ollama": "ollama",
    "organization_owner": "lmstudio",
    "openai": "openai",
    "system": "openai",
    "openai-internal": "openai",
}
#: A context size in a models list entry (vLLM, llama-server, LM Studio).
CONTEXT_KEYS = ("max_model_len", "n_ctx", "n_ctx_train", "context_length", "max_context_length")
#: A context size in an error (llama-cpp-python, vLLM and OpenAI, llama-server).
CONTEXT_PATTERNS = (
    re.compile(r"context window of (\d+)"),
    re.compile(r"maximum context length is (\d+)"),
    re.compile(r"context (?:size|length)[^\d]{0,40}(\d{3,})"),
)
IMPOSSIBLE_MAX_TOKENS = 10_000_000
TIMEOUT = 300.0  # seconds for one probe request: a small machine may generate a token a second

Events = list[ModelEvent]


async def ask(provider: Provider, request: ModelRequest) -> tuple[Events | ApiError, float]:
    """The request's events, or the error it met; and the seconds it took."""
    started = time.perf_counter()
    events: Events = []
    try:
        async with asyncio.timeout(TIMEOUT):
            async for batch in provider.stream_batches(request):
                events += batch
    except ApiError as error:
        return error, time.perf_counter() - started
    except TimeoutError:
        return ApiError(504, f"no answer within {TIMEOUT:.0f} s"), time.perf_counter() - started
    return events, time.perf_counter() - started


def _request(deployment: Deployment, prompt: str, **fields: Any) -> ModelRequest:
    fields.setdefault("max_output_tokens", 16)
    return ModelRequest(
        model=deployment.upstream_model,
        input=[UserMessageItemParam(content=prompt)],
        temperature=0,
        **fields,
    )


def _text(events: Events) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def _refused(name: str, error: ApiError, seconds: float) -> Finding:
    return Finding(
        name, "refused", f"{error.status} {error.code or ''}: {error.message}"[:300], seconds
    )


def _clip(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


async def streaming(provider: Provider, deployment: Deployment) -> list[Finding]:
    """Text deltas in a stream, and the usage chunk at its end."""
    got, seconds = await ask(provider, _request(deployment, "Reply with the word hello."))
    if isinstance(got, ApiError):
        return [_refused("streaming", got, seconds), Finding("usage in streams", "skipped")]
    deltas = sum(isinstance(e, TextDelta) for e in got)
    finish = next((e for e in got if isinstance(e, Finish)), None)
    verdict: Verdict = "yes" if deltas else "no"
    stream = Finding(
        "streaming", verdict, f"{deltas} text delta(s): {_clip(_text(got))!r}", seconds
    )
    usage = finish.usage if finish is not None else None
    if usage is None:
        return [stream, Finding("usage in streams", "no", "no usage chunk: usage counts as 0")]
    detail = f"{usage.input_tokens} input, {usage.output_tokens} output tokens"
    return [stream, Finding("usage in streams", "yes", detail)]


async def tool_calls(provider: Provider, deployment: Deployment) -> Finding:
    """A forced call of a one-argument tool: made, with valid arguments?"""
    request = _request(
        deployment,
        "Call the tool with the word hello.",
        tools=[PROBE_TOOL],
        tool_choice=SpecificFunctionParam(name=PROBE_TOOL.name),
        max_output_tokens=48,
    )
    got, seconds = await ask(provider, request)
    if isinstance(got, ApiError):
        return _refused("tool calls", got, seconds)
    calls = [e for e in got if isinstance(e, ToolCallStart)]
    arguments = "".join(e.arguments for e in got if isinstance(e, ToolCallDelta))
    if not calls:
        return Finding("tool calls", "ignored", f"no call, text: {_clip(_text(got))!r}", seconds)
    try:
        valid = isinstance(json.loads(arguments).get("word"), str)
    except (ValueError, AttributeError):
        valid = False
    detail = f"{calls[0].name}({_clip(arguments)}){'' if valid else ': invalid arguments'}"
    return Finding("tool calls", "yes" if valid else "no", detail, seconds)


async def dialect(provider: Provider, deployment: Deployment, name: SchemaDialect) -> Finding:
    """The probe schema in dialect ``name``: enforced, ignored or refused?"""
    fmt = TextFormat(
        "json_schema",
        "orgate_probe",
        PROBE_SCHEMA,
        True if name in ("json_schema", "output_config") else None,
        None,
        None if name == "json_schema" else name,
    )
    request = _request(deployment, "Say hello.", text_format=fmt, max_output_tokens=24)
    got, seconds = await ask(provider, request)
    label = dialect_finding(name)
    if isinstance(got, ApiError):
        return _refused(label, got, seconds)
    text = _text(got)
    try:
        enforced = json.loads(text) == PROBE_VALUE
    except ValueError:
        enforced = False
    verdict: Verdict = "yes" if enforced else "ignored"
    return Finding(label, verdict, f"answered {_clip(text)!r}", seconds)


async def json_object(provider: Provider, deployment: Deployment) -> Finding:
    request = _request(
        deployment,
        "Give a JSON object with one key, ok, set to true.",
        text_format=TextFormat("json_object"),
        max_output_tokens=24,
    )
    got, seconds = await ask(provider, request)
    if isinstance(got, ApiError):
        return _refused("json_object", got, seconds)
    text = _text(got)
    try:
        valid = isinstance(json.loads(text), dict)
    except ValueError:
        valid = False
    return Finding(
        "json_object", "yes" if valid else "ignored", f"answered {_clip(text)!r}", seconds
    )


async def reasoning(provider: Provider, deployment: Deployment) -> Finding:
    request = _request(deployment, "What is 2 + 3?", reasoning_effort="low", max_output_tokens=64)
    got, seconds = await ask(provider, request)
    if isinstance(got, ApiError):
        return _refused("reasoning", got, seconds)
    thought = "".join(e.text for e in got if isinstance(e, ReasoningDelta))
    if thought:
        return Finding("reasoning", "yes", f"reasoning text: {_clip(thought)!r}", seconds)
    return Finding(
        "reasoning", "ignored", "reasoning_effort taken, no reasoning came back", seconds
    )


async def context_from_error(provider: Provider, deployment: Deployment) -> tuple[int | None, str]:
    """The context size an upstream names when refusing an impossible ``max_tokens``."""
    request = _request(
        deployment, "Reply with OK.", max_output_tokens=IMPOSSIBLE_MAX_TOKENS, stop=["\n"]
    )
    got, _ = await ask(provider, request)
    if not isinstance(got, ApiError):
        return None, "the upstream took max_tokens=10000000 without naming its context size"
    for pattern in CONTEXT_PATTERNS:
        found = pattern.search(got.message)
        if found:
            return int(found.group(1)), f"named in its error: {_clip(got.message, 160)!r}"
    return None, f"not named in its error: {_clip(got.message, 160)!r}"


async def models_list(
    session: aiohttp.ClientSession, deployment: Deployment
) -> tuple[str | None, str, int | None]:
    """(server software, evidence, context size) from ``GET {base_url}/models``."""
    headers = dict(deployment.headers)
    if deployment.api_key:
        headers["Authorization"] = f"Bearer {deployment.api_key}"
    url = deployment.base_url.rstrip("/") + "/models"
    try:
        async with session.get(url, headers=headers) as resp:
            if resp.status != 200:
                return None, f"GET /models answered {resp.status}", None
            data = await resp.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        return None, f"GET /models failed: {type(exc).__name__}", None
    entries = data.get("data") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not entries:
        return None, "GET /models listed no model", None
    entry = next(
        (e for e in entries if isinstance(e, dict) and e.get("id") == deployment.upstream_model),
        entries[0],
    )
    owner = str(entry.get("owned_by", ""))
    server = OWNERS.get(owner)
    evidence = f"GET /models: owned_by {owner!r}" if owner else "GET /models: no owned_by"
    return server, evidence, _context_in(entry)


def _context_in(entry: dict[str, Any]) -> int | None:
    for where in (entry, entry.get("meta") if isinstance(entry.get("meta"), dict) else {}):
        for key in CONTEXT_KEYS:
            value = where.get(key) if isinstance(where, dict) else None
            if isinstance(value, int) and value > 0:
                return value
    return None


async def probe(
    deployment: Deployment,
    provider: Provider,
    session: aiohttp.ClientSession | None,
    *,
    skip: frozenset[str] = frozenset(),
    on_step: Callable[[str], None] | None = None,
) -> ProbeReport:
    """Every probe of ``deployment`` (one request at a time: a local server serves one);
    ``skip`` names probes left out (``tools``, ``dialects``, ``json_object``, ``reasoning``,
    ``context``); ``on_step`` is told each probe before it runs."""
    report = ProbeReport(
        deployment.name, deployment.provider, deployment.base_url, deployment.upstream_model
    )

    def step(name: str) -> None:
        if on_step is not None:
            on_step(name)

    if session is not None and deployment.provider == "openai-chat":
        step("models list")
        server, evidence, context = await models_list(session, deployment)
        report.server, report.server_evidence = server, evidence
        if context is not None:
            report.context_window, report.context_evidence = context, "GET /models"
    step("streaming")
    report.findings += await streaming(provider, deployment)
    if "tools" not in skip:
        step("tool calls")
        report.findings.append(await tool_calls(provider, deployment))
    if "dialects" not in skip:
        for name in PROVIDER_DIALECTS.get(deployment.provider, ()):
            step(dialect_finding(name))
            report.findings.append(await dialect(provider, deployment, name))
    if "json_object" not in skip and deployment.provider in ("openai-chat", "openai-responses"):
        step("json_object")
        report.findings.append(await json_object(provider, deployment))
    if "reasoning" not in skip:
        step("reasoning")
        report.findings.append(await reasoning(provider, deployment))
    if "context" not in skip and report.context_window is None:
        step("context")
        report.context_window, report.context_evidence = await context_from_error(
            provider, deployment
        )
    return report
