"""One ``/metrics`` over several workers (``orgate.server.worker_metrics``), in process.

What the module promises: counters and histograms are summed over the workers sample by
sample (a ``_created`` sample keeps the earliest), gauges are summed over the live workers
only; a retired worker's counters are folded into ``retired.json`` so they never go
backwards, its gauges dropped; snapshots are written atomically and an unreadable one
counts as empty. Real ``prometheus_client`` registries, real files in a temporary directory.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from orgate.server.worker_metrics import (
    RETIRED,
    WorkersView,
    keep_snapshots,
    merge,
    read_snapshot,
    retire,
    snapshot,
    write_snapshot,
)
from tests.support.waiting import eventually


def worker(
    requests: dict[str, int], *, busy: int = 0, latencies: tuple[float, ...] = ()
) -> CollectorRegistry:
    """A worker's registry: requests by route, a busy gauge, a latency histogram."""
    registry = CollectorRegistry()
    counter = Counter("demo_requests", "Requests.", ["route"], registry=registry)
    for route, count in requests.items():
        counter.labels(route).inc(count)
    Gauge("demo_busy", "Busy slots.", registry=registry).set(busy)
    histogram = Histogram("demo_seconds", "Latency.", buckets=(0.1, 1.0), registry=registry)
    for value in latencies:
        histogram.observe(value)
    return registry


def samples(families: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """(sample name, sorted labels) → value, over snapshot families or parsed metric families."""
    out = {}
    for family in families:
        rows = (
            family[3]
            if isinstance(family, list)
            else [(s.name, s.labels, s.value) for s in family.samples]
        )
        for name, labels, value in rows:
            out[(name, tuple(sorted(labels.items())))] = value
    return out


def value(
    table: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str
) -> float | None:
    return table.get((name, tuple(sorted(labels.items()))))


def scrape(view: WorkersView) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """What ``/metrics`` shows, parsed back."""
    return samples(text_string_to_metric_families(generate_latest(view).decode()))  # type: ignore[arg-type]


# --- merging --------------------------------------------------------------------------------------


def test_counters_and_histograms_are_summed_sample_by_sample() -> None:
    a = snapshot(worker({"/v1/responses": 3, "/health": 1}, latencies=(0.05, 0.5)))
    b = snapshot(worker({"/v1/responses": 4}, latencies=(2.0,)))
    merged = samples(merge([a, b]))
    assert value(merged, "demo_requests_total", route="/v1/responses") == 7
    assert value(merged, "demo_requests_total", route="/health") == 1  # a label only one worker has
    assert value(merged, "demo_seconds_count") == 3
    assert value(merged, "demo_seconds_sum") == 2.55
    assert value(merged, "demo_seconds_bucket", le="0.1") == 1
    assert value(merged, "demo_seconds_bucket", le="1.0") == 2
    assert value(merged, "demo_seconds_bucket", le="+Inf") == 3


def test_created_keeps_the_earliest() -> None:
    family = ["demo_requests", "Requests.", "counter"]
    a = [[*family, [["demo_requests_total", {}, 2.0], ["demo_requests_created", {}, 200.0]]]]
    b = [[*family, [["demo_requests_total", {}, 5.0], ["demo_requests_created", {}, 100.0]]]]
    merged = samples(merge([a, b]))
    assert (
        value(merged, "demo_requests_created") == 100.0
        and value(merged, "demo_requests_total") == 7.0
    )


def test_gauges_are_summed_or_dropped() -> None:
    parts = [snapshot(worker({}, busy=2)), snapshot(worker({}, busy=5))]
    assert value(samples(merge(parts)), "demo_busy") == 7
    kept = merge(parts, keep_gauges=False)
    assert "demo_busy" not in [family[0] for family in kept]
    assert "demo_requests" in [family[0] for family in kept]


def test_merging_nothing_or_empty_parts_is_empty() -> None:
    assert merge([]) == [] and merge([[], []]) == []
    only = snapshot(worker({"/x": 1}))
    assert samples(merge([[], only])) == samples(only)


# --- snapshot files -------------------------------------------------------------------------------


def test_a_snapshot_round_trips_through_its_file(tmp_path: Path) -> None:
    families = snapshot(worker({"/x": 2}, busy=1))
    write_snapshot(tmp_path, "123.json", families)
    assert read_snapshot(tmp_path / "123.json") == json.loads(json.dumps(families))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["123.json"]  # no partial file left behind


def test_a_missing_or_unreadable_snapshot_counts_as_empty(tmp_path: Path) -> None:
    assert read_snapshot(tmp_path / "gone.json") == []
    (tmp_path / "half.json").write_text('[["demo_requests", "Requests.", "cou')
    assert read_snapshot(tmp_path / "half.json") == []


async def test_a_worker_writes_its_snapshot_while_running_and_once_more_when_stopped(
    tmp_path: Path,
) -> None:
    registry = worker({"/x": 1})
    task = asyncio.create_task(keep_snapshots(registry, tmp_path, every=3600))
    mine = tmp_path / f"{os.getpid()}.json"
    assert await eventually(mine.exists)  # the first snapshot comes at once
    assert value(samples(read_snapshot(mine)), "demo_requests_total", route="/x") == 1
    Counter("demo_late", "Late.", registry=registry).inc(4)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert (
        value(samples(read_snapshot(mine)), "demo_late_total") == 4
    )  # the last updates are not lost


# --- the view a scrape reads, and retired workers -------------------------------------------------


def test_the_view_adds_the_siblings_snapshots_to_the_live_registry(tmp_path: Path) -> None:
    own = CollectorRegistry()
    requests = Counter("demo_requests", "Requests.", ["route"], registry=own)
    requests.labels("/v1/responses").inc()
    Gauge("demo_busy", "Busy slots.", registry=own).set(1)
    write_snapshot(tmp_path, "1001.json", snapshot(worker({"/v1/responses": 10}, busy=2)))
    write_snapshot(tmp_path, "1002.json", snapshot(worker({"/health": 5}, busy=3)))
    write_snapshot(
        tmp_path, f"{os.getpid()}.json", snapshot(worker({"/v1/responses": 1000}))
    )  # own, stale
    view = WorkersView(own, tmp_path)
    shown = scrape(view)
    assert (
        value(shown, "demo_requests_total", route="/v1/responses") == 11
    )  # own live + sibling; not own stale
    assert value(shown, "demo_requests_total", route="/health") == 5
    assert value(shown, "demo_busy") == 6
    requests.labels("/v1/responses").inc()  # live numbers, not a snapshot of them
    assert value(scrape(view), "demo_requests_total", route="/v1/responses") == 12


def test_a_retired_workers_counters_stay_and_its_gauges_go(tmp_path: Path) -> None:
    view = WorkersView(worker({}), tmp_path)
    write_snapshot(tmp_path, "2001.json", snapshot(worker({"/x": 3}, busy=4)))
    write_snapshot(tmp_path, "2002.json", snapshot(worker({"/x": 2}, busy=1)))
    before = scrape(view)
    assert value(before, "demo_requests_total", route="/x") == 5 and value(before, "demo_busy") == 5
    retire(tmp_path, 2001)
    assert not (tmp_path / "2001.json").exists() and (tmp_path / RETIRED).exists()
    after = scrape(view)
    assert value(after, "demo_requests_total", route="/x") == 5  # never backwards
    assert value(after, "demo_busy") == 1  # only the live worker's
    write_snapshot(tmp_path, "2003.json", snapshot(worker({"/x": 7})))
    retire(tmp_path, 2003)  # a second retirement adds to the first
    retire(tmp_path, 2999)  # a worker that never wrote a snapshot: nothing to fold
    assert (
        value(samples(read_snapshot(tmp_path / RETIRED)), "demo_requests_total", route="/x") == 10
    )
    assert value(scrape(view), "demo_requests_total", route="/x") == 12
    assert sorted(p.name for p in tmp_path.iterdir()) == ["2002.json", RETIRED]
