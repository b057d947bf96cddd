"""The history cache's numbers as Prometheus series (``orgate_history_cache_*``), read from the
process's ``HistoryCache`` when scraped: nothing is counted on a turn besides its counters."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from orgate.engine.history_cache import HistoryCache


class HistoryCacheCollector:
    """A collector of one process's history cache."""

    def __init__(self, cache: HistoryCache) -> None:
        self.cache = cache

    def collect(self) -> Iterator[Metric]:
        cache = self.cache
        turns = CounterMetricFamily(
            "orgate_history_cache_turns",
            "Continuations of stored chains, by where their history came from: a history the "
            "process held (held) or the whole chain read from the store (store).",
            labels=["source"],
        )
        turns.add_metric(["held"], cache.reused)
        turns.add_metric(["store"], cache.whole)
        yield turns
        yield CounterMetricFamily(
            "orgate_history_cache_decoded_responses",
            "Stored responses whose items a continuation read and decoded.",
            value=cache.decoded,
        )
        yield CounterMetricFamily(
            "orgate_history_cache_evictions",
            "Histories dropped to stay within [store] history_cache_mb.",
            value=cache.evicted,
        )
        yield GaugeMetricFamily(
            "orgate_history_cache_bytes",
            "The JSON size of the items of the histories held.",
            value=cache.size,
        )
        yield GaugeMetricFamily("orgate_history_cache_entries", "Histories held.", value=len(cache))


def register_history_metrics(registry: CollectorRegistry, cache: HistoryCache | None) -> None:
    """Show the cache's numbers on ``registry`` (nothing without a cache)."""
    if cache is not None:
        registry.register(HistoryCacheCollector(cache))
