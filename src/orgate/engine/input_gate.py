"""The replay gate on a request's input: portability, call/output pairing, call shape.

Applied to the whole context (``previous_response_id`` history + the new
input) before anything reaches a provider, under ``gate.policy``:

- ``enforce``: a ``function_call_output`` whose ``call_id`` matches no earlier
  ``function_call``, a second output for one call, an output attached to a
  call that fails the gate (the same for OpenAI's ``custom_tool_call`` and its
  ``custom_tool_call_output``; an output of the other kind is ``mismatched_output``),
  and a ``function_call`` in the input whose
  ``status`` is not ``completed``, whose ``arguments`` are not a string or do
  not parse, or fail the schema of a function tool the request defines → 400
  naming the item (``param`` = ``input[i].call_id`` / ``input[i]``) and the code.
  A ``function_call`` without ``status`` (or with ``null``) counts as completed
  (request inputs may omit it). Provider-namespaced items (``openai:...``) → 400
  ``non_portable_item``.
- ``warn``: the same findings are logged and returned as warnings (the HTTP
  layer sends them in ``X-Orgate-Gate-Warnings``); namespaced items are dropped.
- ``off``: nothing is checked here.

Only issues located in the new input are reported: stored history passed the
gate when it was stored.

Opaque history items (an upstream's own items kept in history, such as
``web_search_call``; ``orgate.neutral.items``) are never refused: they go
back only to a deployment of the same origin (provider kind + base URL). When
the deployment that serves the turn is of another origin, its provider leaves
them out and ``report_opaque`` says so (gate code ``namespaced``): a warning
(``X-Orgate-Gate-Warnings``) under ``enforce`` and ``warn``, a log line always.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any, Literal

from orgate.gate import Code, ToolCatalog, ToolsError, Verdict, check, check_pairing, load_tools
from orgate.neutral import Deployment, InputItem, OpaqueItem, origin_of
from orgate.protocol.error_codes import code_of
from orgate.protocol.errors import ApiError, ErrorCode

log = logging.getLogger("orgate.gate")

Policy = Literal["enforce", "warn", "off"]
_PAIRED_TYPES = frozenset(
    {"function_call", "function_call_output", "custom_tool_call", "custom_tool_call_output"}
)


class _Dropped(str):
    """A warning for an input item dropped before parsing; remembers the item's index in the
    client's input."""

    position: int  # not ``index``: that is ``str.index``

    def __new__(cls, text: str, position: int) -> _Dropped:
        self = super().__new__(cls, text)
        self.position = position
        return self


#: Gate codes a raw ``function_call`` is refused with before parsing
# (the parser's own errors would hide them).
_RAW_CALL_CODES = frozenset({Code.STATUS, Code.ARGUMENTS_TYPE, Code.ARGUMENTS_PARSE})


def split_namespaced(raw_input: Any, policy: Policy, warnings: list[str]) -> Any:
    """Handle provider-namespaced items (``slug:type``) in the raw JSON input, before parsing.

    Namespaced items are not portable: under ``enforce`` they are refused,
    under ``warn`` dropped with a warning; under ``off`` they are left for the
    parser (which refuses unknown types). Under ``enforce``, a ``function_call``
    whose ``status``/``arguments`` fail the gate is refused here too, with the
    gate's code, in the gate's order and item order — before the parser, whose
    generic errors (``arguments`` not a string, an unknown status) would hide it.
    Under every policy, a reasoning item's ``reasoning_text`` content is left out
    (``without_reasoning_text``).
    """
    if not isinstance(raw_input, list):
        return raw_input
    kept: list[Any] = []
    for index, item in enumerate(raw_input):
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "reasoning":
            item = without_reasoning_text(item)
        elif policy != "off" and isinstance(kind, str) and ":" in kind:
            if policy == "enforce":
                raise ApiError.of(
                    ErrorCode.NON_PORTABLE_ITEM,
                    f"input[{index}] has the provider-specific type '{kind}', which "
                    "cannot be replayed to another model.",
                    param=f"input[{index}].type",
                )
            warnings.append(
                _Dropped(f"input[{index}]: dropped non-portable item of type {kind}", index)
            )
            log.warning("gate: dropped non-portable input[%d] of type %s", index, kind)
            continue
        elif kind == "function_call" and policy == "enforce":
            probe = item
            if "status" in item and item["status"] is None:  # null is "not given", as after parsing
                probe = {k: v for k, v in item.items() if k != "status"}
            verdict = check(probe, None, require_status=False)
            if verdict.code in _RAW_CALL_CODES:
                # a wrong-typed field is named as the parser would name it;
                # other findings name the item
                where = (
                    f"input[{index}].arguments"
                    if verdict.code is Code.ARGUMENTS_TYPE
                    else f"input[{index}]"
                )
                _report(
                    policy,
                    warnings,
                    _call_message(index, verdict),
                    code=code_of(verdict.code),
                    param=where,
                )
        kept.append(item)
    return kept


def without_reasoning_text(item: dict[str, Any]) -> dict[str, Any]:
    """A ``reasoning`` input item without its ``content`` when that is only ``reasoning_text``
    parts.

    A response's reasoning items carry their text in ``content`` (an ``anthropic``
    thinking run, a chat upstream's ``reasoning_content``), and clients replay
    output items as input unchanged (the OpenAI Agents SDK does, as OpenAI accepts
    it). The spec's ``ReasoningItemParam`` allows only ``content: null``, and no
    provider sends that text back (an anthropic run travels in
    ``encrypted_content``; stored history drops it the same way), so it is dropped
    rather than refused. Any other ``content`` is left for the parser to refuse.
    """
    content = item.get("content")
    if isinstance(content, list) and all(
        isinstance(part, dict)
        and part.get("type") == "reasoning_text"
        and isinstance(part.get("text"), str)
        and set(part) <= {"type", "text"}
        for part in content
    ):
        return {k: v for k, v in item.items() if k != "content"}
    return item


def _call_message(index: int, verdict: Verdict, kind: str = "function_call") -> str:
    return (
        f"input[{index}] is a {kind} that fails the replay gate ({verdict.code.value}): "
        f"{verdict.message}"
    )


def check_context(
    history: list[InputItem],
    new_input: list[InputItem],
    policy: Policy,
    warnings: list[str],
    tools: Sequence[Any] | None = None,
) -> None:
    """Check call/output pairing and input calls over history + new input
    (items are protocol models).

    ``tools`` are the request's tools: a ``function_call`` in the new input that
    names one of its function tools must satisfy that tool's schema
    (``arguments_schema``). A call naming a tool the request does not define is
    not refused (the tools may have changed since it was made).
    ``param`` names the client's own input index, counting items that
    ``split_namespaced`` dropped under ``warn`` (whose messages, logged only,
    count without them).
    """
    if policy == "off":
        return
    for item in new_input:  # (a loop, not any() over a generator: this runs on every request)
        if getattr(item, "type", None) in _PAIRED_TYPES:
            break
    else:
        return
    dropped = sorted(w.position for w in warnings if isinstance(w, _Dropped))
    offset = len(history)

    def where(context_index: int) -> int:
        """The client's own input index of a history + new-input position."""
        local = context_index - offset
        for gone in dropped:
            if gone <= local:
                local += 1
        return local

    # Only history items sharing a call_id with the new input can change what is reported
    # about it (stored history passed the gate when it was stored): the others keep their
    # place, so that indexes hold, but are not dumped or checked again — a long agent loop's
    # history would otherwise be on every tool-output turn.
    referenced = {_call_id(item) for item in new_input}
    referenced.discard(None)
    items = [_as_dict(item) if _call_id(item) in referenced else _UNRELATED for item in history]
    items.extend(_as_dict(item) for item in new_input)
    catalog = _catalog(tools)
    for index in range(offset, len(items)):
        wire = items[index]
        kind = wire.get("type")
        if kind == "custom_tool_call":  # free-form input: its status and input's type only
            verdict = check(wire, None, require_status=False)
            if verdict.code is not Code.OK:
                _report(
                    policy,
                    warnings,
                    _call_message(where(index), verdict, kind),
                    code=code_of(verdict.code),
                    param=f"input[{where(index)}]",
                )
            continue
        if kind != "function_call":
            continue
        # Checked against the tool's schema only when the request defines that tool (see above).
        known = catalog is not None and wire.get("name") in catalog
        verdict = check(wire, catalog if known else None, require_status=False)
        if verdict.code is not Code.OK:
            _report(
                policy,
                warnings,
                _call_message(where(index), verdict),
                code=code_of(verdict.code),
                param=f"input[{where(index)}]",
            )
    result = check_pairing(items, None, require_status=False)
    for issue in result.issues:
        if issue.index < offset:
            continue
        _report(
            policy,
            warnings,
            _relocate(issue.message, offset),
            code=code_of(issue.kind),
            param=f"input[{where(issue.index)}].call_id",
        )


def _catalog(tools: Sequence[Any] | None) -> ToolCatalog | None:
    """The request's function tools; ``None`` when there are none or a schema is invalid
    (the tool guard reports that)."""
    if not tools:
        return None
    defs = [
        {
            "type": "function",
            "name": getattr(t, "name", None),
            "parameters": getattr(t, "parameters", None),
        }
        for t in tools
        if getattr(t, "type", None) == "function"
    ]
    if not defs:
        return None
    try:
        return load_tools(defs)
    except ToolsError:
        return None


def _relocate(message: str, offset: int) -> str:
    """Pairing messages name context indexes; the client only knows its own input's indexes."""
    if offset == 0:
        return message
    return (
        message + f" (indexes count from the start of the conversation, {offset} items of which "
        "came from previous_response_id)"
    )


def _report(
    policy: Policy, warnings: list[str], message: str, *, code: ErrorCode, param: str
) -> None:
    if policy == "enforce":
        raise ApiError.of(code, message, param=param)
    warnings.append(f"{param}: {code}")
    log.warning("gate: %s (%s at %s)", message, code, param)


def opaque_items(items: list[Any]) -> tuple[OpaqueItem, ...]:
    """The opaque history items among ``items`` (model input), in order."""
    return tuple(item for item in items if type(item) is OpaqueItem)


_UNSAFE = re.compile(r"[^A-Za-z0-9_.:/@-]")  # warnings travel in an HTTP header
_LISTED = 8


def report_opaque(
    items: tuple[OpaqueItem, ...], served: Deployment, policy: Policy, warnings: list[str]
) -> None:
    """Report the opaque items ``served`` does not send: those made by another origin
    (see the module docstring)."""
    origin = origin_of(served)
    dropped = [item for item in items if item.origin != origin]
    if not dropped:
        return
    named = [
        f"{_UNSAFE.sub('_', item.id or '?')} ({_UNSAFE.sub('_', item.item_type)})"
        for item in dropped[:_LISTED]
    ]
    if len(dropped) > _LISTED:
        named.append(f"and {len(dropped) - _LISTED} more")
    target = _UNSAFE.sub("_", served.name)
    message = (
        f"{len(dropped)} item(s) made by another upstream not sent to '{target}': "
        f"{', '.join(named)}"
    )
    log.warning(
        "gate: %s (origins %s; served by %s)",
        message,
        sorted({item.origin for item in dropped}),
        origin,
    )
    if policy != "off":
        warnings.append(f"history: {Code.NAMESPACED.value}, {message}")


_UNRELATED: dict[str, Any] = {}  # a history item the pairing check can skip (no type)


def _call_id(item: Any) -> object:
    """A paired item's call_id (``type`` first: a pydantic model's missing attribute is slow)."""
    if isinstance(item, dict):
        return item.get("call_id")
    return item.call_id if getattr(item, "type", None) in _PAIRED_TYPES else None


def _as_dict(item: Any) -> dict[str, Any]:
    if isinstance(item, dict):
        return item
    if type(item) is OpaqueItem:
        return {"type": item.type, "id": item.id, "origin": item.origin, "item": item.item}
    dumped: dict[str, Any] = item.model_dump(mode="json", exclude_none=True, by_alias=True)
    return dumped
