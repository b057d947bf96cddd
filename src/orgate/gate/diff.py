"""``diff(left, right)``: the same item or trajectory as produced by two providers.

Items are paired first by ``call_id`` (a call with its call, an output with its
output; the n-th repeat with the n-th repeat), then items without a
``call_id`` by position among themselves; call-like items left over on both
sides (``function_call``/``function_call_output`` or anything carrying a
``call_id``) are paired by position, and a ``call_id`` difference is reported
when their call_ids differ.
What is still unpaired is ``missing`` (left only) or ``extra`` (right only).

For each pair the diff reports ``type`` changes, ``name`` changes, ``status``
changes and ``arguments`` that differ as parsed JSON (key order and
whitespace do not count, ``1`` equals ``1.0`` but not ``true``; an unparseable
string is compared as a string).

The verdict is ``block`` — the next request must not be sent — when a type
differs and either side is namespaced (above all a portable type that became
``provider:...``), or when call_ids do not pair (a ``call_id`` change, or a
missing/extra call-like item); otherwise ``ok``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import orjson

DIFF_KINDS: tuple[str, ...] = ("type", "call_id", "name", "arguments", "status", "missing", "extra")


@dataclass(frozen=True, slots=True)
class Difference:
    """One difference; ``left``/``right`` are item indexes (``None`` when absent)."""

    kind: str
    left: int | None
    right: int | None
    detail: dict[str, Any]
    blocking: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "left": self.left,
            "right": self.right,
            "blocking": self.blocking,
            "detail": self.detail,
        }


@dataclass(frozen=True, slots=True)
class DiffResult:
    verdict: Literal["ok", "block"]
    differences: tuple[Difference, ...]

    @property
    def blocked(self) -> bool:
        return self.verdict == "block"

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "differences": [d.to_dict() for d in self.differences]}


def as_items(value: Any) -> list[Any]:
    """An item, a list of items, or a document holding items (see ``container_items``) → a list of
    items."""
    if isinstance(value, list):
        return value
    items = container_items(value)
    return [value] if items is None else items


def is_response(value: Any) -> bool:
    """A stored response: an object with an ``output`` list that is not itself an item."""
    return (
        isinstance(value, dict)
        and "output" in value
        and isinstance(value["output"], list)
        and (value.get("object") == "response" or "type" not in value)
    )


def container_items(value: Any) -> list[Any] | None:
    """The items of a document that holds items, else ``None`` (the value is an item):

    * a stored response — its ``output``;
    * a page of items, as ``GET /v1/responses/{id}/input_items`` returns it
      (``{"object": "list", "data": [...]}``) — its ``data``;
    * a request body (``{"model", "input": [...]}``) — its ``input`` (a string
      input is one user message).

    Nothing with a ``type`` or a ``role`` is a container: that is an item.
    """
    if value.__class__ is not dict:
        return None
    if is_response(value):
        return list(value["output"])
    if "type" in value or "role" in value:
        return None
    data = value.get("data")
    if value.get("object") == "list" and isinstance(data, list):
        return list(data)
    inp = value.get("input")
    if isinstance(inp, list):
        return list(inp)
    if isinstance(inp, str) and "model" in value:
        return [{"role": "user", "content": inp}]
    return None


def _get(item: Any, key: str) -> Any:
    return item.get(key) if isinstance(item, dict) else None


def _call_id(item: Any) -> str | None:
    cid = _get(item, "call_id")
    return cid if isinstance(cid, str) else None


def _type(item: Any) -> Any:
    """The item's ``type``; an item with no ``type`` key but a string ``role`` is the
    spec's shorthand message (as in ``check``), so it counts as ``message``."""
    if isinstance(item, dict) and "type" not in item and isinstance(item.get("role"), str):
        return "message"
    return _get(item, "type")


def _namespaced(typ: Any) -> bool:
    return not isinstance(typ, str) or ":" in typ


def _role(item: Any) -> str:
    typ = _type(item)
    return "output" if isinstance(typ, str) and typ.endswith("_output") else "call"


def _call_like(item: Any) -> bool:
    return _call_id(item) is not None or _type(item) in (
        "function_call",
        "function_call_output",
    )


def json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values: booleans are not numbers, ``1 == 1.0``, key order ignored."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b if isinstance(a, bool) and isinstance(b, bool) else False
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is not type(b):
        return False
    return bool(a == b)


def _arguments(value: Any) -> tuple[str, Any]:
    if isinstance(value, str):
        try:
            return "json", orjson.loads(value)
        except ValueError:
            return "raw", value
    return "json", value


def _compare(li: int, ri: int, a: Any, b: Any, out: list[Difference]) -> None:
    ta, tb = _type(a), _type(b)
    if ta != tb or type(ta) is not type(tb):
        became = _namespaced(tb) and not _namespaced(ta)
        blocking = _namespaced(ta) or _namespaced(tb)
        out.append(
            Difference(
                "type",
                li,
                ri,
                {"left": ta, "right": tb, "became_namespaced": became},
                blocking,
            )
        )
    for key in ("name", "status"):
        va, vb = _get(a, key), _get(b, key)
        if not json_equal(va, vb):
            out.append(Difference(key, li, ri, {"left": va, "right": vb}))
    has_a = isinstance(a, dict) and "arguments" in a
    has_b = isinstance(b, dict) and "arguments" in b
    if has_a or has_b:
        va, vb = _get(a, "arguments"), _get(b, "arguments")
        (ka, pa), (kb, pb) = _arguments(va), _arguments(vb)
        if ka != kb or not json_equal(pa, pb):
            detail = {
                "left": va,
                "right": vb,
                "compared_as": "json" if ka == kb == "json" else "string",
            }
            out.append(Difference("arguments", li, ri, detail))


def _pair_by_call_id(
    litems: Sequence[Any], ritems: Sequence[Any], lfree: list[bool], rfree: list[bool]
) -> list[tuple[int, int]]:
    """Step 1: items with the same ``call_id`` and role, in order of occurrence."""
    rkeyed: dict[tuple[str, str], list[int]] = defaultdict(list)
    for j, item in enumerate(ritems):
        cid = _call_id(item)
        if cid is not None:
            rkeyed[(cid, _role(item))].append(j)
    pairs: list[tuple[int, int]] = []
    for i, item in enumerate(litems):
        cid = _call_id(item)
        if cid is None:
            continue
        queue = rkeyed.get((cid, _role(item)))
        if queue:
            j = queue.pop(0)
            pairs.append((i, j))
            lfree[i] = rfree[j] = False
    return pairs


def _pair_by_position(
    litems: Sequence[Any],
    ritems: Sequence[Any],
    lfree: list[bool],
    rfree: list[bool],
    *,
    call_like: bool,
) -> list[tuple[int, int]]:
    """Steps 2 and 3: the unpaired items that are (or are not) call-like, by position."""
    lrest = [i for i, it in enumerate(litems) if lfree[i] and _call_like(it) == call_like]
    rrest = [j for j, it in enumerate(ritems) if rfree[j] and _call_like(it) == call_like]
    pairs = list(zip(lrest, rrest, strict=False))
    for i, j in pairs:
        lfree[i] = rfree[j] = False
    return pairs


def _call_id_change(i: int, j: int, a: Any, b: Any) -> Difference | None:
    """A blocking ``call_id`` difference of two call-like items paired by position,
    if their ids differ."""
    va, vb = _get(a, "call_id"), _get(b, "call_id")
    if json_equal(va, vb):
        return None
    return Difference("call_id", i, j, {"left": va, "right": vb}, True)


def _unpaired(kind: Literal["missing", "extra"], index: int, item: Any) -> Difference:
    """An item one side has and the other does not (blocking when it is call-like)."""
    left, right = (index, None) if kind == "missing" else (None, index)
    return Difference(
        kind, left, right, {"type": _type(item), "call_id": _call_id(item)}, _call_like(item)
    )


def diff(left: Any, right: Any) -> DiffResult:
    """Compare two items / trajectories / stored responses (see the module doc)."""
    litems, ritems = as_items(left), as_items(right)
    lfree = [True] * len(litems)
    rfree = [True] * len(ritems)
    # 1. by call_id (+ role, + occurrence); 2. items without call_id (and not call-like) by position
    pairs = _pair_by_call_id(litems, ritems, lfree, rfree)
    pairs += _pair_by_position(litems, ritems, lfree, rfree, call_like=False)
    # 3. leftover call-like items by position: their call_ids do not pair
    changed = set(_pair_by_position(litems, ritems, lfree, rfree, call_like=True))

    differences: list[Difference] = []
    for i, j in sorted([*pairs, *changed]):
        if (i, j) in changed and (
            change := _call_id_change(i, j, litems[i], ritems[j])
        ) is not None:
            differences.append(change)
        _compare(i, j, litems[i], ritems[j], differences)
    differences += [_unpaired("missing", i, item) for i, item in enumerate(litems) if lfree[i]]
    differences += [_unpaired("extra", j, item) for j, item in enumerate(ritems) if rfree[j]]
    verdict: Literal["ok", "block"] = "block" if any(d.blocking for d in differences) else "ok"
    return DiffResult(verdict, tuple(differences))
