"""Prometheus counters, gauges and histograms updated without a lock: the request path's metrics.

``prometheus_client``'s metric objects take a ``threading.Lock`` on every update,
and a request updates a dozen of them (hot path — see docs/performance.md). The gateway updates its
own series from the event
loop's thread only, so these keep plain Python numbers (an update is an
attribute add, a histogram's a ``bisect`` and two adds) and hand them to the
registry as a custom collector when it is scraped, with the exposition
``prometheus_client`` gives its own types: ``_total`` and ``_created`` for a
counter; ``_bucket`` (cumulative, ``le``), ``_count``, ``_sum`` and ``_created``
for a histogram.

Only for updates made on one thread (the event loop's); a scrape from another
thread may see a histogram between two of its adds, never a torn number.
"""

from __future__ import annotations

import bisect
import math
import time
from collections.abc import Iterator, Sequence
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric
from prometheus_client.utils import floatToGoString


class _Family:
    """A metric name with label names; ``labels(*values)`` gives the child holding the numbers."""

    kind = ""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str] = (),
        *,
        registry: CollectorRegistry,
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self._children: dict[tuple[str, ...], Any] = {}
        registry.register(self)

    def labels(self, *values: str) -> Any:
        child = self._children.get(values)
        if child is None:
            if len(values) != len(self.labelnames):
                raise ValueError(f"{self.name}: expected labels {self.labelnames}, got {values!r}")
            child = self._children[values] = self._child()
        return child

    def _child(self) -> Any:
        raise NotImplementedError

    def describe(self) -> list[Metric]:
        return [Metric(self.name, self.documentation, self.kind)]

    def collect(self) -> Iterator[Metric]:
        metric = Metric(self.name, self.documentation, self.kind)
        for values, child in list(self._children.items()):
            child.samples(metric, dict(zip(self.labelnames, values, strict=True)))
        yield metric


class _CounterCell:
    __slots__ = ("value", "created")

    def __init__(self) -> None:
        self.value = 0.0
        self.created = time.time()

    def inc(self, amount: float = 1) -> None:
        if amount < 0:
            raise ValueError("counters only go up")
        self.value += amount

    def samples(self, metric: Metric, labels: dict[str, str]) -> None:
        metric.add_sample(metric.name + "_total", labels, self.value)
        metric.add_sample(metric.name + "_created", labels, self.created)


class LocalCounter(_Family):
    """``prometheus_client.Counter``'s exposition; ``labels(...).inc(n)``."""

    kind = "counter"

    def _child(self) -> _CounterCell:
        return _CounterCell()


class _GaugeCell:
    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1) -> None:
        self.value += amount

    def dec(self, amount: float = 1) -> None:
        self.value -= amount

    def set(self, value: float) -> None:
        self.value = float(value)

    def samples(self, metric: Metric, labels: dict[str, str]) -> None:
        metric.add_sample(metric.name, labels, self.value)


class LocalGauge(_Family):
    """``prometheus_client.Gauge``'s exposition; ``labels(...).inc()`` / ``.dec()`` / ``.set(v)``.

    A gauge without label names is its own child (``gauge.inc()``)."""

    kind = "gauge"

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str] = (),
        *,
        registry: CollectorRegistry,
    ) -> None:
        super().__init__(name, documentation, labelnames, registry=registry)
        if not self.labelnames:
            own = self.labels()
            self.inc, self.dec, self.set = own.inc, own.dec, own.set

    def _child(self) -> _GaugeCell:
        return _GaugeCell()


class _HistogramCell:
    __slots__ = ("bounds", "counts", "sum", "created")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last one: above every finite bound (+Inf)
        self.sum = 0.0
        self.created = time.time()

    def observe(self, value: float) -> None:
        # bisect_left: a value equal to a bound falls in that bound's bucket (le = "less or equal")
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value

    def samples(self, metric: Metric, labels: dict[str, str]) -> None:
        total = 0
        name = metric.name
        for bound, count in zip((*self.bounds, math.inf), self.counts, strict=True):
            total += count
            metric.add_sample(name + "_bucket", {**labels, "le": floatToGoString(bound)}, total)
        metric.add_sample(name + "_count", labels, total)
        metric.add_sample(name + "_sum", labels, self.sum)
        metric.add_sample(name + "_created", labels, self.created)


class LocalHistogram(_Family):
    """``prometheus_client.Histogram``'s exposition; ``labels(...).observe(seconds)``."""

    kind = "histogram"

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str] = (),
        *,
        buckets: Sequence[float],
        registry: CollectorRegistry,
    ) -> None:
        bounds = tuple(sorted(float(b) for b in buckets if b != math.inf))
        if not bounds:
            raise ValueError("a histogram needs at least one finite bucket bound")
        self.bounds = bounds
        super().__init__(name, documentation, labelnames, registry=registry)

    def _child(self) -> _HistogramCell:
        return _HistogramCell(self.bounds)
