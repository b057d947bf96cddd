"""Token log probabilities: an upstream's lists in the spec's ``LogProb`` shape.

The Responses and Chat Completions APIs give a token's log probability in the same
shape, ``{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]}``,
and compatible servers vary on the edges (``bytes: null``, no ``top_logprobs``).
``logprob_list`` turns what an upstream sent into spec ``LogProb`` dicts: ``bytes``
filled from the token's UTF-8 when missing, ``top_logprobs`` ``[]`` when missing. An
entry without a string ``token`` or a numeric ``logprob`` has nothing to show and is left
out. These dicts travel on ``TextDelta.logprobs`` into the builder's events unchanged.
"""

from __future__ import annotations

from typing import Any

LogProb = dict[str, Any]


def _number(value: Any) -> bool:
    return type(value) is float or type(value) is int  # not a bool


def _bytes(entry: dict[str, Any], token: str) -> list[int]:
    raw = entry.get("bytes")
    if type(raw) is list and all(type(b) is int and 0 <= b <= 255 for b in raw):
        return raw
    return list(token.encode("utf-8", "surrogatepass"))


def _top(entry: Any) -> LogProb | None:
    if type(entry) is not dict:
        return None
    token, logprob = entry.get("token"), entry.get("logprob")
    if type(token) is not str or not _number(logprob):
        return None
    return {"token": token, "logprob": logprob, "bytes": _bytes(entry, token)}


def logprob_entry(entry: Any) -> LogProb | None:
    """One upstream token entry as a spec ``LogProb`` (None when it has no token or logprob)."""
    top = _top(entry)
    if top is None:
        return None
    alternatives = entry.get("top_logprobs")
    top["top_logprobs"] = (
        [alt for alt in map(_top, alternatives) if alt is not None]
        if type(alternatives) is list
        else []
    )
    return top


def logprob_list(raw: Any) -> list[LogProb]:
    """An upstream's list of token entries as spec ``LogProb`` dicts ([] for anything else)."""
    if type(raw) is not list:
        return []
    return [entry for entry in map(logprob_entry, raw) if entry is not None]
