"""One ``/metrics`` for every worker of ``orgate serve --workers N``.

Each worker keeps its own lock-free registry (``local_metrics``) and writes a
snapshot of it into the server's private directory once a second (``<pid>.json``,
replaced atomically). Whichever worker answers ``/metrics`` adds its own live
numbers to its siblings' snapshots: counters and histograms are summed (a
``_created`` sample keeps the earliest), gauges are summed over the live workers.
When a worker exits, the supervisor folds its last snapshot into ``retired.json``
without its gauges, so counters never go backwards when a worker is replaced;
a worker that crashed loses at most its last second of updates.

A single-process server uses none of this: its registry is exposed as it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric

log = logging.getLogger("orgate.server")

#: Seconds between two snapshots of a worker's registry.
SNAPSHOT_EVERY = 1.0
RETIRED = "retired.json"

# One family: [name, documentation, type, [[sample name, labels, value], ...]]
Family = list[Any]


def snapshot(registry: Any) -> list[Family]:
    """The registry's families as plain JSON-able lists."""
    return [
        [
            metric.name,
            metric.documentation,
            metric.type,
            [[s.name, s.labels, s.value] for s in metric.samples],
        ]
        for metric in registry.collect()
    ]


def write_snapshot(directory: Path, name: str, families: list[Family]) -> None:
    """Write ``families`` to ``directory/name`` atomically (a reader never sees half a file)."""
    target = directory / name
    partial = directory / f".{name}.{os.getpid()}.tmp"
    partial.write_bytes(json.dumps(families).encode())
    os.replace(partial, target)


def read_snapshot(path: Path) -> list[Family]:
    try:
        families: list[Family] = json.loads(path.read_bytes())
        return families
    except (OSError, ValueError):
        return []  # gone (a worker retired meanwhile) or being replaced: the next scrape has it


def merge(parts: Iterable[list[Family]], *, keep_gauges: bool = True) -> list[Family]:
    """Sum the families of several workers, sample by sample (``_created``: the earliest)."""
    merged: dict[str, Family] = {}
    values: dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]] = {}
    for families in parts:
        for name, documentation, kind, samples in families:
            if kind == "gauge" and not keep_gauges:
                continue
            if name not in merged:
                merged[name] = [name, documentation, kind, []]
                values[name] = {}
            table = values[name]
            for sample_name, labels, value in samples:
                key = (sample_name, tuple(sorted(labels.items())))
                old = table.get(key)
                if old is None:
                    table[key] = value
                elif sample_name.endswith("_created"):
                    table[key] = min(old, value)
                else:
                    table[key] = old + value
    for name, family in merged.items():
        family[3] = [
            [sample, dict(labels), value] for (sample, labels), value in values[name].items()
        ]
    return list(merged.values())


class WorkersView:
    """A collector for ``generate_latest``: this worker's registry plus its siblings' snapshots."""

    def __init__(self, registry: CollectorRegistry, directory: Path) -> None:
        self.registry = registry
        self.directory = directory
        self.own = f"{os.getpid()}.json"

    def collect(self) -> Iterator[Metric]:
        parts = [snapshot(self.registry)]
        for path in self.directory.glob("*.json"):
            if path.name != self.own:
                parts.append(read_snapshot(path))
        for name, documentation, kind, samples in merge(parts):
            metric = Metric(name, documentation, kind)
            for sample_name, labels, value in samples:
                metric.add_sample(sample_name, labels, value)
            yield metric


async def keep_snapshots(
    registry: CollectorRegistry, directory: Path, every: float = SNAPSHOT_EVERY
) -> None:
    """Write this worker's snapshot every ``every`` seconds, and once more when cancelled."""
    name = f"{os.getpid()}.json"
    try:
        while True:
            _write_quietly(registry, directory, name)
            await asyncio.sleep(every)
    finally:
        _write_quietly(registry, directory, name)


def _write_quietly(registry: CollectorRegistry, directory: Path, name: str) -> None:
    try:
        write_snapshot(directory, name, snapshot(registry))
    except OSError as exc:
        log.warning("could not write the metrics snapshot: %s", exc)


def retire(directory: Path, pid: int) -> None:
    """Fold an exited worker's last snapshot into ``retired.json`` (counters kept,
    gauges dropped)."""
    path = directory / f"{pid}.json"
    if not path.exists():
        return
    retired = directory / RETIRED
    merged = merge([read_snapshot(retired), read_snapshot(path)], keep_gauges=False)
    # Written under another name first: a scrape meanwhile must not count the worker twice.
    write_snapshot(directory, f"{RETIRED}.next", merged)
    with contextlib.suppress(OSError):
        path.unlink()
    os.replace(directory / f"{RETIRED}.next", retired)
