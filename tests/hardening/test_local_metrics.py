"""The lock-free metrics of the request path expose exactly what prometheus_client's own types
do."""

from __future__ import annotations

import re

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from orgate.server.local_metrics import LocalCounter, LocalGauge, LocalHistogram

BUCKETS = (0.005, 0.1, 1.0, 30.0)
_CREATED = re.compile(rb"^(\w+_created\{?[^ ]*) [0-9.e+]+$", re.MULTILINE)


def _exposition(registry: CollectorRegistry) -> bytes:
    """The text format, with the ``_created`` timestamps (which differ by construction time)
    masked."""
    return _CREATED.sub(rb"\1 T", generate_latest(registry))


def _update(counter, histogram, gauge, plain_gauge) -> None:
    counter.labels("/v1/responses", "200").inc()
    counter.labels("/v1/responses", "200").inc(2.5)
    counter.labels("/v1/models", "401").inc()
    for seconds in (0.001, 0.005, 0.0051, 0.5, 1.0, 31.0, 300.0):  # on a bound, between, above all
        histogram.labels("fake-chat").observe(seconds)
    histogram.labels("other").observe(0.2)
    gauge.labels("fake-chat").inc()
    gauge.labels("fake-chat").inc()
    gauge.labels("fake-chat").dec()
    gauge.labels("idle").set(7)
    plain_gauge.inc()
    plain_gauge.inc(3)
    plain_gauge.dec()


def test_same_exposition_as_prometheus_client() -> None:
    reference, local = CollectorRegistry(), CollectorRegistry()
    _update(
        Counter("t_requests", "Requests.", ["route", "status"], registry=reference),
        Histogram("t_seconds", "Latency.", ["deployment"], buckets=BUCKETS, registry=reference),
        Gauge("t_running", "Running.", ["deployment"], registry=reference),
        Gauge("t_in_flight", "In flight.", registry=reference),
    )
    _update(
        LocalCounter("t_requests", "Requests.", ["route", "status"], registry=local),
        LocalHistogram("t_seconds", "Latency.", ["deployment"], buckets=BUCKETS, registry=local),
        LocalGauge("t_running", "Running.", ["deployment"], registry=local),
        LocalGauge("t_in_flight", "In flight.", registry=local),
    )
    expected = _exposition(reference)
    assert _exposition(local) == expected
    assert (
        b't_seconds_bucket{deployment="fake-chat",le="0.005"} 2.0' in expected
    )  # 0.005 is in the le="0.005" bucket
    families = {
        family.name: family
        for family in text_string_to_metric_families(generate_latest(local).decode())
    }
    assert families["t_seconds"].type == "histogram" and families["t_requests"].type == "counter"


def test_names_clash_like_prometheus_client_and_labels_are_checked() -> None:
    registry = CollectorRegistry()
    counter = LocalCounter("t_calls", "Calls.", ["deployment"], registry=registry)
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        Counter("t_calls", "Again.", registry=registry)
    with pytest.raises(ValueError, match="expected labels"):
        counter.labels("a", "b")
    with pytest.raises(ValueError, match="only go up"):
        counter.labels("a").inc(-1)
