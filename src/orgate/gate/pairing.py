"""``check_pairing(items, tools)``: may the ``function_call_output`` items of a
trajectory be attached where they are?

Every ``function_call_output`` must follow a ``function_call`` with the same
``call_id`` that passed the gate (``ok``), and there must be at most one
output per call. The same holds for OpenAI's custom tools: a
``custom_tool_call_output`` answers a ``custom_tool_call``. Issues carry the item's index and a
``param`` such as
``input[3].call_id`` that the gateway puts straight into a 400 error body.

Issue kinds:

* ``missing_call_id`` — an output (or a call) whose ``call_id`` is not a non-empty string;
* ``orphan_output`` — no earlier ``function_call`` has this ``call_id``
  (a call that comes *after* its output does not count);
* ``duplicate_output`` — a second output for the same call;
* ``mismatched_output`` — the output's kind does not answer the call's (a
  ``function_call_output`` for a ``custom_tool_call``, or the other way round);
* ``failed_call`` — the output attaches to a call whose verdict is not ``ok``
  (the message names the call's code); this includes provider-namespaced calls;
* ``duplicate_call`` — a second call (either kind) reusing an earlier ``call_id``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from orgate.gate.checks import check
from orgate.gate.tools import ToolCatalog, load_tools
from orgate.gate.verdict import Verdict

PAIRING_KINDS: tuple[str, ...] = (
    "missing_call_id",
    "orphan_output",
    "duplicate_output",
    "mismatched_output",
    "failed_call",
    "duplicate_call",
)


@dataclass(frozen=True, slots=True)
class PairingIssue:
    """One pairing problem at ``items[index]``."""

    index: int
    kind: str
    call_id: str | None
    message: str
    param: str
    call_index: int | None = None  # the function_call the output refers to, when there is one

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "kind": self.kind,
            "call_id": self.call_id,
            "message": self.message,
            "param": self.param,
            "call_index": self.call_index,
        }


@dataclass(frozen=True, slots=True)
class PairingResult:
    """Issues in item order, plus the gate verdict of every function_call by index."""

    issues: tuple[PairingIssue, ...] = ()
    calls: dict[int, Verdict] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.issues

    def error(self) -> dict[str, Any] | None:
        """The first issue as the spec's error object (for a 400), or ``None`` when ok."""
        if not self.issues:
            return None
        first = self.issues[0]
        return {
            "message": first.message,
            "type": "invalid_request_error",
            "param": first.param,
            "code": first.kind,
        }


# Each call type and the output type that answers it.
_OUTPUT_OF = {
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
}
_CALL_OF = {output: call for call, output in _OUTPUT_OF.items()}


def _type(item: Any) -> str | None:
    typ = item.get("type") if isinstance(item, dict) else None
    return typ if isinstance(typ, str) else None


def check_pairing(
    items: Iterable[Any],
    tools: Any = None,
    *,
    param_prefix: str = "input",
    require_status: bool = True,
) -> PairingResult:
    """Check call/output pairing over a trajectory (see the module doc).

    ``tools`` is as for ``check``; ``require_status`` is passed through to it.
    """
    catalog: ToolCatalog | None = None if tools is None else load_tools(tools)
    calls: dict[int, Verdict] = {}
    by_call_id: dict[str, int] = {}
    answered: dict[str, int] = {}
    issues: list[PairingIssue] = []

    items_seen: list[Any] = []
    for index, item in enumerate(items):
        items_seen.append(item)
        typ = _type(item)
        if typ is None:
            continue
        param = f"{param_prefix}[{index}].call_id"
        if typ in _OUTPUT_OF:
            verdict = check(item, catalog, require_status=require_status)
            calls[index] = verdict
            cid = item.get("call_id")
            if not isinstance(cid, str) or not cid:
                issues.append(
                    PairingIssue(index, "missing_call_id", None, f"{typ} has no call_id", param)
                )
            elif cid in by_call_id:
                issues.append(
                    PairingIssue(
                        index,
                        "duplicate_call",
                        cid,
                        f"call_id {cid!r} is already used by {param_prefix}[{by_call_id[cid]}]",
                        param,
                        by_call_id[cid],
                    )
                )
            else:
                by_call_id[cid] = index
        elif typ in _CALL_OF:
            cid = item.get("call_id")
            if not isinstance(cid, str) or not cid:
                issues.append(
                    PairingIssue(index, "missing_call_id", None, f"{typ} has no call_id", param)
                )
                continue
            call_index = by_call_id.get(cid)
            call_type = _type(items_seen[call_index]) if call_index is not None else None
            if call_index is None:
                issues.append(
                    PairingIssue(
                        index,
                        "orphan_output",
                        cid,
                        f"no earlier {_CALL_OF[typ]} has call_id {cid!r}",
                        param,
                    )
                )
            elif call_type in _OUTPUT_OF and _OUTPUT_OF[call_type] != typ:
                issues.append(
                    PairingIssue(
                        index,
                        "mismatched_output",
                        cid,
                        f"call {cid!r} at {param_prefix}[{call_index}] is a {call_type}: "
                        f"its output is a {_OUTPUT_OF[call_type]}, not a {typ}",
                        param,
                        call_index,
                    )
                )
                answered[cid] = index
            elif cid in answered:
                issues.append(
                    PairingIssue(
                        index,
                        "duplicate_output",
                        cid,
                        f"call {cid!r} already has an output at {param_prefix}[{answered[cid]}]",
                        param,
                        call_index,
                    )
                )
            elif not calls[call_index].ok:
                verdict = calls[call_index]
                issues.append(
                    PairingIssue(
                        index,
                        "failed_call",
                        cid,
                        f"call {cid!r} at {param_prefix}[{call_index}] did not pass the gate "
                        f"({verdict.code.value}: {verdict.message})",
                        param,
                        call_index,
                    )
                )
                answered[cid] = index
            else:
                answered[cid] = index
        elif (
            isinstance(typ, str)
            and ":" in typ
            and not typ.endswith("_output")
            and isinstance(item.get("call_id"), str)
        ):
            # A provider-namespaced call: remember it so that an output naming it is
            # reported as attached to a non-replayable call rather than as an orphan.
            cid = item["call_id"]
            calls[index] = check(item, catalog, require_status=require_status)
            by_call_id.setdefault(cid, index)
    return PairingResult(tuple(issues), calls)
