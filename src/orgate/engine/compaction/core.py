"""Compaction's pure core: the policy, the sealed ``compaction`` item, its expansion, and the
context-window decision.

Pure functions, no I/O (the summariser call lives in ``service.py``):

- ``partition(items, keep_turns)`` splits a conversation into the *older* part,
  which the model summarises, and the part kept verbatim. Policy: a turn starts
  at each user message; the last ``keep_turns`` turns are kept, and so are every
  ``system`` / ``developer`` message (instructions are not conversation) and any
  ``compaction`` item inside the kept turns (it stays sealed). Everything else
  (older user/assistant messages, tool calls and outputs, reasoning, older
  compaction items) is replaced by the summary.
- ``compact(items, summary, keep_turns=...)`` → ``Compacted(kept, payload)``;
  ``seal(payload, key)`` → the opaque ``encrypted_content`` string;
  ``open_sealed(token, key)`` → the payload, or a 400 ``invalid_compaction``.
  Sealing is AES-256-GCM with a random 96-bit nonce; the associated data binds
  the token to a context (orgate passes the tenant), so a token altered by one
  bit, made with another key, or presented by another tenant does not open.
- ``expand(items, key)`` replaces each ``compaction`` input item, in place, by
  what it encodes: one developer message carrying the summary (nothing when the
  compaction covered no older items), then the extension items it holds.
- ``extensions_payload(items)``: an upstream's own items (``OpaqueItem``,
  e.g. ``web_search_call``; ``orgate.neutral.items``) kept verbatim by a
  compaction cannot be shown to the client (they are not spec items), so each
  run of them is sealed, in place, into a compaction item of its own whose
  payload carries them (``"items"``: their stored wrappers, origin included;
  no summary); ``expand`` gives them back as ``OpaqueItem``s, which only their
  origin's provider sends upstream.
- ``fit_context(...)`` is the ``truncation`` decision: with ``disabled`` a context
  over the model's window is a 400 ``context_length_exceeded``; with ``auto`` the
  oldest turns are dropped (same partition rule) until it fits.

Token counts are estimates: characters / 4, plus a few tokens per item.
"""

from __future__ import annotations

import base64
import binascii
import os
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from pydantic import ValidationError

from orgate.engine import ids
from orgate.neutral import ModelRequest, OpaqueItem, extension_wire
from orgate.protocol import CompactionSummaryItemParam, DeveloperMessageItemParam
from orgate.protocol.errors import ApiError, ErrorCode

TOKEN_PREFIX = "ogc1_"
#: Payload key of a compaction made on create: the item stands for the whole context before it.
WHOLE_CONTEXT = "context"
PAYLOAD_VERSION = 1
SUMMARY_HEADER = (
    "Summary of the earlier part of this conversation (compacted by orgate; it covers what came "
    "before the messages kept verbatim):"
)
_AAD = b"orgate-compaction-v1\x00"
_NONCE = 12
_ITEM_OVERHEAD_TOKENS = 4
_MAX_PLAINTEXT = 64 * 1024 * 1024

# --------------------------------------------------------------------------- policy


def _kind(item: Any) -> str | None:
    return item.get("type") if isinstance(item, dict) else getattr(item, "type", None)


def _role(item: Any) -> str | None:
    return item.get("role") if isinstance(item, dict) else getattr(item, "role", None)


def _is_instruction(item: Any) -> bool:
    """A system / developer message, but not the summary message an earlier compaction item
    expanded to (stored that way in a response's input, so met again through
    ``previous_response_id``): that one is conversation, summarised like the compaction item it
    came from."""
    return _role(item) in ("system", "developer") and not _is_summary(item)


def _is_summary(item: Any) -> bool:
    content = _field(item, "content")
    if isinstance(content, list) and len(content) == 1:
        content = _field(content[0], "text")
    return isinstance(content, str) and content.startswith(SUMMARY_HEADER)


def turn_starts(items: list[Any]) -> list[int]:
    """Indexes where a turn begins: every user message."""
    return [i for i, item in enumerate(items) if _role(item) == "user"]


def partition(items: list[Any], keep_turns: int) -> tuple[list[Any], list[Any]]:
    """``(older, kept)``: what the summary replaces, and what stays verbatim (in input order)."""
    starts = turn_starts(items)
    if keep_turns <= 0:
        cut = len(items)  # summarise everything but the instructions
    elif len(starts) <= keep_turns:
        cut = 0  # not more turns than kept: nothing is older
    else:
        cut = starts[-keep_turns]
    older: list[Any] = []
    kept: list[Any] = []
    for index, item in enumerate(items):
        if index >= cut or _is_instruction(item):
            kept.append(item)
        else:
            older.append(item)
    return older, kept


@dataclass(frozen=True, slots=True)
class Compacted:
    """What ``/v1/responses/compact`` returns: the kept items and the payload to seal."""

    kept: list[Any]
    payload: dict[str, Any]


def make_payload(
    summary: str | None, *, covered: int, model: str | None = None, created_at: int | None = None
) -> dict[str, Any]:
    """The sealed content of a compaction item."""
    return {
        "v": PAYLOAD_VERSION,
        "summary": summary if summary else None,
        "covered": covered,
        "model": model,
        "created_at": int(time.time()) if created_at is None else created_at,
    }


def extensions_payload(items: list[OpaqueItem], *, model: str | None = None) -> dict[str, Any]:
    """The content of a compaction item that holds extension items kept verbatim (and no
    summary)."""
    payload = make_payload(None, covered=0, model=model)
    payload["items"] = [
        extension_wire(item.id or ids.new_id("ext"), item.origin, item.item) for item in items
    ]
    return payload


def compact(
    items: list[Any], summary: str | None, *, keep_turns: int, model: str | None = None
) -> Compacted:
    """Apply the policy: the kept items, and a payload carrying the summary of the older ones."""
    older, kept = partition(items, keep_turns)
    return Compacted(
        kept=kept, payload=make_payload(summary if older else None, covered=len(older), model=model)
    )


# --------------------------------------------------------------------------- sealing


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def seal(payload: dict[str, Any], key: bytes, *, context: str = "") -> str:
    """Encrypt and authenticate ``payload`` (AES-256-GCM); ``context`` must match at opening."""
    plain = zlib.compress(orjson.dumps(payload), 6)
    nonce = os.urandom(_NONCE)
    sealed = AESGCM(key).encrypt(nonce, plain, _AAD + context.encode())
    return TOKEN_PREFIX + _b64(nonce + sealed)


def _invalid(param: str | None, why: str) -> ApiError:
    return ApiError.of(
        ErrorCode.INVALID_COMPACTION,
        f"Invalid compaction item: {why}. Send the compaction item exactly as orgate returned it, "
        "to the same orgate deployment (same compaction secret) and with the same API key's"
        " tenant.",
        param=param,
    )


def open_sealed(
    token: str, key: bytes, *, context: str = "", param: str | None = "encrypted_content"
) -> dict[str, Any]:
    """The payload of a sealed token; a 400 ``invalid_compaction`` if it was altered or is
    foreign."""
    if not token.startswith(TOKEN_PREFIX):
        raise _invalid(param, "encrypted_content was not produced by orgate")
    try:
        raw = _unb64(token[len(TOKEN_PREFIX) :])
    except (binascii.Error, ValueError):
        raise _invalid(param, "encrypted_content is not valid base64url") from None
    if len(raw) < _NONCE + 16:
        raise _invalid(param, "encrypted_content is too short")
    try:
        plain = AESGCM(key).decrypt(raw[:_NONCE], raw[_NONCE:], _AAD + context.encode())
    except InvalidTag:
        raise _invalid(
            param,
            "encrypted_content failed authentication (it was altered, or sealed with another key"
            " or for another tenant)",
        ) from None
    try:
        inflater = zlib.decompressobj()
        data = inflater.decompress(plain, _MAX_PLAINTEXT)
        payload = orjson.loads(data)
    except (zlib.error, orjson.JSONDecodeError):
        raise _invalid(param, "encrypted_content does not decode") from None
    if not isinstance(payload, dict) or payload.get("v") != PAYLOAD_VERSION:
        raise _invalid(param, "encrypted_content has an unknown version")
    return payload


# --------------------------------------------------------------------------- expansion


def summary_message(summary: str) -> DeveloperMessageItemParam:
    """The input item a summary expands to."""
    return DeveloperMessageItemParam(role="developer", content=f"{SUMMARY_HEADER}\n\n{summary}")


def expand(
    items: list[Any], key: bytes, *, context: str = "", param_prefix: str = "input"
) -> list[Any]:
    """Replace every ``compaction`` item by the items it encodes (a summary message, or nothing).

    A compaction item that stands for the whole context before it (made on create by
    ``context_management``, ``is_whole``) stays as it is, checked: ``model_view`` opens it
    where it applies (it replaces what precedes it, the stored history included)."""
    for item in items:  # (a loop, not any() over a generator: this runs on every request)
        if isinstance(item, CompactionSummaryItemParam):
            break
    else:
        return items
    out: list[Any] = []
    for index, item in enumerate(items):
        if not isinstance(item, CompactionSummaryItemParam):
            out.append(item)
            continue
        param = f"{param_prefix}[{index}].encrypted_content"
        payload = open_sealed(item.encrypted_content, key, context=context, param=param)
        if is_whole(payload):
            out.append(item)
            continue
        summary = payload.get("summary")
        if isinstance(summary, str) and summary:
            out.append(summary_message(summary))
        held = payload.get("items")
        if held:
            out.extend(_opaque_items(held, param))
    return out


def is_whole(payload: dict[str, Any]) -> bool:
    """True for the payload of a compaction item that stands for the whole context before it."""
    return payload.get(WHOLE_CONTEXT) is True


def whole_payload(
    summary: str, kept: list[dict[str, Any]], *, covered: int, model: str | None
) -> dict[str, Any]:
    """The content of a compaction made on create: the summary of the older items and the kept
    items themselves (their stored form), so that the item stands for the whole context before
    it."""
    payload = make_payload(summary, covered=covered, model=model)
    payload[WHOLE_CONTEXT] = True
    payload["items"] = kept
    return payload


def has_compaction(items: list[Any]) -> bool:
    """True when ``items`` hold a ``compaction`` item (after ``expand``: one made on create)."""
    return CompactionSummaryItemParam in map(type, items)  # compared in C


def model_view(
    history: list[Any],
    new_input: list[Any],
    key: bytes,
    *,
    context: str = "",
    read: Callable[[list[dict[str, Any]]], list[Any]],
) -> tuple[list[Any], list[Any]]:
    """The context the model reads, as (history, new input): the latest whole-context compaction
    item in history + new input replaces everything before it by the summary and the items it
    holds (``read`` turns their stored form back into input items). Unchanged without one."""
    context_items = [*history, *new_input]
    for index in range(len(context_items) - 1, -1, -1):
        item = context_items[index]
        if type(item) is not CompactionSummaryItemParam:
            continue
        in_input = index >= len(history)
        param = (
            f"input[{index - len(history)}].encrypted_content"
            if in_input
            else "previous_response_id"
        )
        payload = open_sealed(item.encrypted_content, key, context=context, param=param)
        if is_whole(payload):
            break
    else:
        return history, new_input
    summary = payload.get("summary")
    expanded: list[Any] = [summary_message(summary)] if isinstance(summary, str) and summary else []
    try:
        expanded += read(list(payload.get("items") or ()))
    except (ApiError, TypeError, ValidationError):
        raise _invalid(param, "encrypted_content holds items this orgate cannot read") from None
    if in_input:
        return [], [*expanded, *new_input[index - len(history) + 1 :]]
    return [*expanded, *history[index + 1 :]], new_input


def _opaque_items(held: Any, param: str) -> list[OpaqueItem]:
    """The extension items a compaction item holds (authenticated, so a failure here is a foreign
    format)."""
    try:
        return [OpaqueItem.model_validate(wire) for wire in held]
    except (TypeError, ValidationError):
        raise _invalid(param, "encrypted_content holds items this orgate cannot read") from None


# ------------------------------------------------------------- transcript for the summariser


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for part in content:
        kind = _kind(part)
        get = part.get if isinstance(part, dict) else (lambda name, p=part: getattr(p, name, None))
        text = get("text") or get("refusal")
        if isinstance(text, str):
            parts.append(text)
        elif kind in ("input_image", "input_file", "input_video"):
            parts.append(f"[{kind.removeprefix('input_')}]")
    return " ".join(parts)


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def render_item(item: Any) -> str:
    """One line (or block) of a plain-text transcript."""
    if (
        type(item) is OpaqueItem
    ):  # an upstream's own item (e.g. a hosted web search): named, not rendered
        return f"[{item.item_type} item]"
    kind = _kind(item)
    role = _role(item)
    if role is not None and kind in ("message", None):
        phase = _field(item, "phase")
        label = f"{role} ({phase})" if phase else str(role)
        return f"{label}: {_text(_field(item, 'content'))}"
    if kind == "function_call":
        return (
            f"assistant called {_field(item, 'name')}({_field(item, 'arguments')})"
            f" [call_id {_field(item, 'call_id')}]"
        )
    if kind == "custom_tool_call":
        return (
            f"assistant called {_field(item, 'name')} with input: {_field(item, 'input')}"
            f" [call_id {_field(item, 'call_id')}]"
        )
    if kind in ("function_call_output", "custom_tool_call_output"):
        output = _field(item, "output")
        text = output if isinstance(output, str) else _text(output)
        return f"tool result [call_id {_field(item, 'call_id')}]: {text}"
    if kind == "reasoning":
        summary = _field(item, "summary") or []
        return f"assistant reasoning: {_text(summary)}" if summary else ""
    return f"[{kind} item]"


def transcript(items: list[Any]) -> str:
    return "\n\n".join(line for line in (render_item(item) for item in items) if line)


SUMMARISER_INSTRUCTIONS = (
    "You compact conversations. Write a concise summary of the conversation transcript you are "
    "given, keeping every fact, decision, name, number, open question and tool result a later "
    "turn may need. Write the summary only, no preamble."
)


def summariser_prompt(older: list[Any], instructions: str | None = None) -> str:
    """The user message asking for the summary of ``older`` (the transcript follows the request)."""
    head = "Summarise this conversation transcript:"
    if instructions:
        head = f"The conversation ran under these instructions:\n{instructions}\n\n{head}"
    return f"{head}\n\n{transcript(older)}"


# --------------------------------------------------------------------------- context window


def estimate_tokens(items: list[Any], instructions: str | None = None) -> int:
    """A cheap estimate: characters / 4 of the text the model reads, plus a few tokens per item."""
    chars = len(instructions or "")
    for item in items:
        chars += len(render_item(item))
        if type(item) is OpaqueItem:
            chars += len(orjson.dumps(item.item))  # sent upstream as it is
            continue
        encrypted = _field(item, "encrypted_content")
        if isinstance(encrypted, str):
            chars += len(encrypted)
    return chars // 4 + _ITEM_OVERHEAD_TOKENS * len(items)


def estimate_request_tokens(request: ModelRequest) -> int:
    """``estimate_tokens`` of a model request: its input and instructions, and its tools' JSON."""
    estimate = estimate_tokens(request.input, request.instructions)
    tools = [*request.tools, *request.hosted_tools]
    if tools:
        wire = [t if isinstance(t, dict) else t.model_dump(mode="json") for t in tools]
        estimate += len(orjson.dumps(wire)) // 4
    return estimate


@dataclass(frozen=True, slots=True)
class Fit:
    """The decision: the items to send, the ones dropped (``auto`` only) and the estimate."""

    items: list[Any]
    dropped: list[Any]
    estimated_tokens: int


def _too_long(estimate: int, budget: int, window: int, truncation: str) -> ApiError:
    hint = (
        ""
        if truncation == "auto"
        else " Set truncation to 'auto' to drop the oldest turns, or compact the conversation"
        " (POST /v1/responses/compact)."
    )
    return ApiError.of(
        ErrorCode.CONTEXT_LENGTH_EXCEEDED,
        f"The input is about {estimate} tokens, more than the {budget} this model can take"
        f" (context window {window}, minus the output reserve).{hint}",
        param="input",
    )


def fit_context(
    items: list[Any],
    *,
    context_window: int | None,
    truncation: str | None,
    instructions: str | None = None,
    reserve: int = 0,
) -> Fit:
    """Decide what the model is sent. ``context_window`` None = unknown, everything goes."""
    if context_window is None:
        return Fit(items, [], 0)  # the hot path: no estimate needed
    estimate = estimate_tokens(items, instructions)
    budget = max(context_window - reserve, 0)
    if estimate <= budget:
        return Fit(items, [], estimate)
    if truncation != "auto":
        raise _too_long(estimate, budget, context_window, "disabled")
    for keep in range(len(turn_starts(items)) - 1, 0, -1):
        dropped, kept = partition(items, keep)
        estimate = estimate_tokens(kept, instructions)
        if estimate <= budget:
            return Fit(kept, dropped, estimate)
    raise _too_long(estimate, budget, context_window, "auto")


__all__ = [
    "SUMMARISER_INSTRUCTIONS",
    "SUMMARY_HEADER",
    "WHOLE_CONTEXT",
    "Compacted",
    "Fit",
    "compact",
    "estimate_request_tokens",
    "estimate_tokens",
    "expand",
    "extensions_payload",
    "fit_context",
    "is_whole",
    "has_compaction",
    "model_view",
    "whole_payload",
    "make_payload",
    "open_sealed",
    "partition",
    "render_item",
    "seal",
    "summariser_prompt",
    "summary_message",
    "transcript",
    "turn_starts",
]
