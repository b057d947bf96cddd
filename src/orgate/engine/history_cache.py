"""The decoded history of stored chains, kept by the process between turns (``[store]
history_cache_mb``), and reading a chain's history through it.

A continuation needs every item of the chain it continues, decoded into the models the
providers take. Reading and decoding them all again each turn makes a turn cost more the
longer the conversation: here a turn asks the store for the chain's path and its last
response's own items only (``ResponseStore.chain_tail``: one round trip, every link of the
path checked to exist, be the tenant's and be unexpired — so a response deleted or expired
through any process is never continued from a cached copy), finds the deepest response of
the path whose history it holds, reads the items of the responses after it
(``link_items``, only when there are any besides the last) and decodes those alone.

Only a chain whose responses have all ended is kept (the items of a running one may still
change). Entries are keyed by (tenant, response id); a history derived from a cached
ancestor replaces it (one entry per conversation, whose prefix its successor shares), and the
least recently used go first past the bound, which counts the JSON size of the items held.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from orgate.engine.history_items import items_from_wire
from orgate.store import ResponseStore


@dataclass(frozen=True, slots=True)
class History:
    """A chain's items, decoded, with their ids (as ``context_items`` gives them)."""

    ids: tuple[str, ...]
    items: tuple[Any, ...]  # shared by every turn that reads them: never changed in place
    size: int  # the items' JSON size in bytes: what the cache's bound counts

    def extended(self, pairs: Sequence[tuple[str, dict[str, Any]]]) -> History:
        """This history followed by stored (id, item) pairs, decoded."""
        if not pairs:
            return self
        decoded = items_from_wire([item for _, item in pairs])
        size = sum(len(orjson.dumps(item)) for _, item in pairs)
        return History(
            self.ids + tuple(i for i, _ in pairs), self.items + tuple(decoded), self.size + size
        )

    def without(self, hidden: Sequence[str]) -> list[Any]:
        """The items, less the ones whose ids are ``hidden`` (deleted from a conversation)."""
        if not hidden:
            return list(self.items)
        gone = set(hidden)
        return [item for i, item in zip(self.ids, self.items, strict=True) if i not in gone]


EMPTY = History((), (), 0)


class HistoryCache:
    """Decoded histories by (tenant, response id), least recently used first, bounded in size."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.size = 0  # the JSON bytes of every history held
        self._entries: OrderedDict[tuple[str, str], History] = OrderedDict()
        # what the metrics show: turns that started from a held history and turns that read
        # the whole chain, responses whose items were decoded, histories dropped for room
        self.reused = 0
        self.whole = 0
        self.decoded = 0
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, tenant: str, response_id: str) -> History | None:
        history = self._entries.get((tenant, response_id))
        if history is not None:
            self._entries.move_to_end((tenant, response_id))
        return history

    def deepest(self, tenant: str, path: Sequence[str]) -> tuple[int, History] | None:
        """The deepest response of ``path`` held, with its position, if any."""
        for position in range(len(path) - 1, -1, -1):
            history = self._entries.get((tenant, path[position]))
            if history is not None:
                return position, history
        return None

    def put(self, tenant: str, response_id: str, history: History, replaces: str | None) -> None:
        """Keep ``history`` as ``response_id``'s; ``replaces``: the ancestor it was derived from
        (dropped: its successor holds its items)."""
        if replaces is not None:
            self._drop((tenant, replaces))
        key = (tenant, response_id)
        self._drop(key)
        if history.size > self.max_bytes:
            return
        self._entries[key] = history
        self.size += history.size
        while self.size > self.max_bytes:
            _, evicted = self._entries.popitem(last=False)
            self.size -= evicted.size
            self.evicted += 1

    def _drop(self, key: tuple[str, str]) -> None:
        history = self._entries.pop(key, None)
        if history is not None:
            self.size -= history.size


async def read_history(
    store: ResponseStore, cache: HistoryCache, response_id: str, tenant: str
) -> History | None:
    """The history of the chain ending at ``response_id`` (its own items included); None when
    it or any response of its chain is missing, expired or another tenant's."""
    tail = await store.chain_tail(response_id, tenant)
    if tail is None:
        return None
    cached = cache.get(tenant, response_id)
    if cached is not None:
        cache.reused += 1
        return cached
    ancestors = tail.path[:-1]
    found = cache.deepest(tenant, ancestors)
    start, base = (0, EMPTY) if found is None else (found[0] + 1, found[1])
    if found is None:
        cache.whole += 1
    else:
        cache.reused += 1
    cache.decoded += len(tail.path) - start
    pairs: list[tuple[str, dict[str, Any]]] = []
    if start < len(ancestors):
        links = await store.link_items(ancestors[start:], tenant)
        if links is None:
            return None  # a response of the chain went away since the path was read
        for link in links:
            pairs += link
    history = base.extended(pairs + tail.items)
    if tail.settled:
        cache.put(tenant, response_id, history, None if found is None else ancestors[found[0]])
    return history
