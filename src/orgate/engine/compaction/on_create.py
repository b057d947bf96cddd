"""Compaction on create (``context_management``): the decision, and the compaction item in the
output.

A request with ``context_management: [{"type": "compaction", "compact_threshold": N}]``
whose context (history + new input + instructions) is estimated at more than ``N`` tokens
(``compaction.estimate_tokens``, the truncation's estimate) is compacted before the model is
called, as ``POST /v1/responses/compact`` compacts (``service.py``): the older
turns summarised by the requested model, the last ``keep_turns`` kept. The model then reads
the summary and the kept items; the response's output starts with one ``compaction`` item
that stands for that whole context (summary and kept items sealed in it), so the next turn —
through ``previous_response_id``, a conversation, or a client that sends the output back —
continues from it (``compaction.model_view``). Without ``compact_threshold`` the model's
context window is the threshold.

``CompactedProvider`` puts the item first in the output (``CompactionItem``, the builder's
events for it) and adds the summariser's usage to the response's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from orgate.neutral import (
    CompactionItem,
    Deployment,
    Finish,
    ModelEvent,
    ModelRequest,
    Provider,
    Usage,
    WrapperProvider,
    aclose_quietly,
)
from orgate.protocol import CreateResponseBody
from orgate.protocol.errors import missing_required_parameter

if TYPE_CHECKING:
    from orgate.engine.service import Caller


@dataclass(frozen=True, slots=True)
class ServerCompaction:
    """A compaction made for a turn: what the model reads instead of the context, the sealed
    item the output starts with, and what the summary cost."""

    items: list[Any]
    encrypted_content: str
    usage: Usage


class ContextCompactor(Protocol):
    """What the responses service asks of the compaction service (``CompactionService``)."""

    async def compact_context(
        self, items: list[Any], body: CreateResponseBody, caller: Caller
    ) -> ServerCompaction | None:
        """The compaction of ``items`` (the model's context); None when nothing is older than the
        turns kept verbatim (nothing to summarise)."""
        ...


def threshold(given: int | None, deployment: Deployment) -> int:
    """The token count above which a turn is compacted: the request's, else the model's window."""
    if given is not None:
        return given
    window = deployment.capabilities.context_window
    if window is None:
        raise missing_required_parameter(
            f"context_management: model '{deployment.name}' has no known context window; "
            "give the compaction entry a 'compact_threshold'.",
            param="context_management[0].compact_threshold",
        )
    return window


class CompactedProvider(WrapperProvider):
    """The turn's provider with the compaction before its answer: a ``CompactionItem`` first in
    the first batch (so a failure before any output is still an HTTP error), the summariser's
    usage added to the ``Finish``."""

    def __init__(self, inner: Provider, compaction: ServerCompaction) -> None:
        super().__init__(inner)
        self.compaction = compaction

    async def stream_batches(self, request: ModelRequest) -> AsyncIterator[list[ModelEvent]]:
        batches = self.inner.stream_batches(request)
        first: list[ModelEvent] = [CompactionItem(self.compaction.encrypted_content)]
        try:
            async for batch in batches:
                yield [*first, *(self._counted(event) for event in batch)]
                first = []
        finally:
            await aclose_quietly(batches)

    def _counted(self, event: ModelEvent) -> ModelEvent:
        if type(event) is Finish:
            return Finish(event.reason, (event.usage or Usage()) + self.compaction.usage)
        return event


__all__ = ["CompactedProvider", "ContextCompactor", "ServerCompaction", "threshold"]
