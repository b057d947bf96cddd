"""The chat messages mapped from a conversation's stored history, kept between its turns.

A continuation sends the whole history again, and mapping it into Chat Completions
messages is most of what a long conversation's turn costs beyond a short one's (see
bench/conversation_instructions.py). The history's decoded items are the same objects from
one turn to the next (``engine/history_cache.py`` never changes them in place), so a turn
whose items start with the items of an earlier turn's history — compared by identity —
resumes the mapping where that one stood after them: their messages, whether the last one
could still take tool calls (and how many it had), and the ledger entries they noted.

An entry holds its items (so no other object can take their ids while it is kept) and is
keyed by the id of the first. Only a history the engine's history cache holds is kept
(``ModelRequest.history_length`` is 0 otherwise), never a request's own input. The entries
are bounded by the JSON size of their messages (each serialized once, as it is mapped),
``MAX_BYTES`` in all (a history larger than that is not kept); the least recently kept go
first. Messages handed out are shared with the memo: nothing after the mapping changes a
message in place (a resumed open assistant message is copied).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import orjson

from orgate.neutral import Translation

MAX_BYTES = 32 * 1024 * 1024  # the JSON size of the messages held, over every conversation
_CALLS_KEY = len(b',"tool_calls":')


@dataclass(slots=True)
class Mapping:
    """Messages mapped from ``items``, with where the mapping stood after each item."""

    items: list[Any] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    # after item i: len(messages), and the tool calls of an open (joinable) last assistant
    # message, -1 when none is open
    ends: list[int] = field(default_factory=list)
    open_calls: list[int] = field(default_factory=list)
    # after item i: the JSON size of what the items so far added (each message, or call
    # joining one, serialized once: as it is added)
    sizes: list[int] = field(default_factory=list)
    notes: list[tuple[int, Translation, str]] = field(default_factory=list)  # (item, code, path)
    open_assistant: dict[str, Any] | None = None

    @property
    def size(self) -> int:
        return self.sizes[-1] if self.sizes else 0

    def checkpoint(self) -> None:
        """Record where the mapping stands after the item just mapped."""
        start = self.ends[-1] if self.ends else 0
        opened = self.open_assistant
        calls = -1 if opened is None else len(opened.get("tool_calls", ()))
        size = self.size
        if len(self.messages) > start:
            size += len(orjson.dumps(self.messages[start:]))
        elif opened is not None and self.open_calls and calls > self.open_calls[-1] >= 0:
            had = self.open_calls[-1]
            size += len(orjson.dumps(opened["tool_calls"][had:])) + (0 if had else _CALLS_KEY)
        self.ends.append(len(self.messages))
        self.open_calls.append(calls)
        self.sizes.append(size)

    def resumed(self, count: int) -> Mapping:
        """A mapping of this one's first ``count`` items, ready to go on (its lists new, an
        open assistant message copied with the calls it had then)."""
        length, calls = self.ends[count - 1], self.open_calls[count - 1]
        messages = self.messages[:length]
        opened = None
        if calls >= 0:
            opened = dict(messages[-1])
            if calls:
                opened["tool_calls"] = opened["tool_calls"][:calls]
            else:
                opened.pop("tool_calls", None)
            messages[-1] = opened
        return Mapping(
            items=self.items[:count],
            messages=messages,
            ends=self.ends[:count],
            open_calls=self.open_calls[:count],
            sizes=self.sizes[:count],
            notes=[note for note in self.notes if note[0] < count],
            open_assistant=opened,
        )


class MessageMemo:
    """Mappings of histories, by the id of their first item (see the module docstring)."""

    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self.size = 0  # the JSON size of every entry's messages
        self._entries: OrderedDict[tuple[int, Any], Mapping] = OrderedDict()
        self._lock = threading.Lock()  # mapped on the event loop and in worker threads alike

    def resume(self, items: list[Any], options: Any) -> Mapping:
        """The longest kept mapping of a prefix of ``items`` (same objects), or a new one."""
        if not items:
            return Mapping()
        with self._lock:
            kept = self._entries.get((id(items[0]), options))
        if kept is None or kept.items[0] is not items[0]:
            return Mapping()
        count = 0
        for mine, theirs in zip(items, kept.items, strict=False):
            if mine is not theirs:
                break
            count += 1
        return kept.resumed(count)

    def keep(self, mapping: Mapping, options: Any, history_length: int) -> None:
        """Keep the mapping of the first ``history_length`` items of ``mapping``."""
        count = min(history_length, len(mapping.items))
        if count == 0:
            return
        # a copy as it stood after those items: what the request maps after them (its own
        # input, perhaps joining the last message) stays out of it
        entry = mapping.resumed(count)
        key = (id(entry.items[0]), options)
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self.size -= old.size
            if entry.size > self.max_bytes:
                return
            self._entries[key] = entry
            self.size += entry.size
            while self.size > self.max_bytes:
                _, evicted = self._entries.popitem(last=False)
                self.size -= evicted.size


MEMO = MessageMemo()
