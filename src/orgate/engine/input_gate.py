"""The replay gate on a request's input: portability, call/output pairing, call shape.

Applied to the whole context (``previous_response_id`` history + the new
input) before anything reaches a provider, under ``gate.policy``:

- ``enforce``: a ``function_call_output`` whose ``call_id`` matches no earlier
  ``function_call``, a second output for one call, an output attached to a
  call that fails the gate, and a ``function_call`` in the input whose
  ``status`` is not ``completed`` or whose ``arguments`` do not parse → 400
  naming the item (``param`` = ``input[i].call_id`` / ``input[i]``) and the code.
  A ``function_call`` without ``status`` counts as completed (request inputs
  may omit it). Provider-namespaced items (``openai:...``) → 400
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
from typing import Any, Literal

from orgate.gate import Code, check, check_pairing
from orgate.neutral import Deployment, OpaqueItem, origin_of
from orgate.protocol.errors import ApiError

log = logging.getLogger("orgate.gate")

Policy = Literal["enforce", "warn", "off"]
_PAIRED_TYPES = frozenset({"function_call", "function_call_output"})


def split_namespaced(raw_input: Any, policy: Policy, warnings: list[str]) -> Any:
    """Handle provider-namespaced items (``slug:type``) in the raw JSON input, before parsing.

    Namespaced items are not portable: under ``enforce`` they are refused,
    under ``warn`` dropped with a warning; under ``off`` they are left for the
    parser (which refuses unknown types).
    """
    if policy == "off" or not isinstance(raw_input, list):
        return raw_input
    kept: list[Any] = []
    for index, item in enumerate(raw_input):
        kind = item.get("type") if isinstance(item, dict) else None
        if isinstance(kind, str) and ":" in kind:
            if policy == "enforce":
                raise ApiError(
                    400,
                    f"input[{index}] has the provider-specific type '{kind}', which cannot be replayed to another model.",
                    code="non_portable_item",
                    param=f"input[{index}].type",
                )
            warnings.append(f"input[{index}]: dropped non-portable item of type {kind}")
            log.warning("gate: dropped non-portable input[%d] of type %s", index, kind)
            continue
        kept.append(item)
    return kept


def check_context(history: list[Any], new_input: list[Any], policy: Policy, warnings: list[str]) -> None:
    """Check call/output pairing and input calls over history + new input (items are protocol models)."""
    if policy == "off":
        return
    if not any(getattr(item, "type", None) in _PAIRED_TYPES for item in new_input):
        return
    offset = len(history)
    items = [_as_dict(item) for item in (*history, *new_input)]
    for index in range(offset, len(items)):
        item = items[index]
        if item.get("type") != "function_call":
            continue
        verdict = check(item, None, require_status=False)
        if verdict.code is not Code.OK:
            _report(
                policy,
                warnings,
                f"input[{index - offset}] is a function_call that fails the replay gate ({verdict.code.value}): {verdict.message}",
                code=verdict.code.value,
                param=f"input[{index - offset}]",
            )
    result = check_pairing(items, None, require_status=False)
    for issue in result.issues:
        if issue.index < offset:
            continue
        local = issue.index - offset
        _report(policy, warnings, _relocate(issue.message, offset), code=issue.kind, param=f"input[{local}].call_id")


def _relocate(message: str, offset: int) -> str:
    """Pairing messages name context indexes; the client only knows its own input's indexes."""
    if offset == 0:
        return message
    return message + f" (indexes count from the start of the conversation, {offset} items of which came from previous_response_id)"


def _report(policy: Policy, warnings: list[str], message: str, *, code: str, param: str) -> None:
    if policy == "enforce":
        raise ApiError(400, message, code=code, param=param)
    warnings.append(f"{param}: {code}")
    log.warning("gate: %s (%s at %s)", message, code, param)


def opaque_items(items: list[Any]) -> tuple[OpaqueItem, ...]:
    """The opaque history items among ``items`` (model input), in order."""
    return tuple(item for item in items if type(item) is OpaqueItem)


_UNSAFE = re.compile(r"[^A-Za-z0-9_.:/@-]")  # warnings travel in an HTTP header
_LISTED = 8


def report_opaque(items: tuple[OpaqueItem, ...], served: Deployment, policy: Policy, warnings: list[str]) -> None:
    """Report the opaque items ``served`` does not send: those made by another origin (see the module docstring)."""
    origin = origin_of(served)
    dropped = [item for item in items if item.origin != origin]
    if not dropped:
        return
    named = [f"{_UNSAFE.sub('_', item.id or '?')} ({_UNSAFE.sub('_', item.item_type)})" for item in dropped[:_LISTED]]
    if len(dropped) > _LISTED:
        named.append(f"and {len(dropped) - _LISTED} more")
    target = _UNSAFE.sub("_", served.name)
    message = f"{len(dropped)} item(s) made by another upstream not sent to '{target}': {', '.join(named)}"
    log.warning("gate: %s (origins %s; served by %s)", message, sorted({item.origin for item in dropped}), origin)
    if policy != "off":
        warnings.append(f"history: {Code.NAMESPACED.value}, {message}")


def _as_dict(item: Any) -> dict[str, Any]:
    if isinstance(item, dict):
        return item
    if type(item) is OpaqueItem:
        return {"type": item.type, "id": item.id, "origin": item.origin, "item": item.item}
    return item.model_dump(mode="json", exclude_none=True, by_alias=True)
