"""The cluster view: every process serving one store, and their numbers, seen from any of them.

Each process records itself in the store's ``owners`` table (its heartbeat is the store's
own): ``keep_node`` adds its version and the address it serves on, then writes a snapshot of
its metrics there every ``METRICS_EVERY`` seconds (the families ``/metrics`` exposes, as JSON:
``worker_metrics.snapshot``). ``cluster_view`` is what the console's overview reads: this
process's live numbers plus every other process's latest snapshot (one that stopped or went
silent keeps its counters and histograms, not its gauges), so the overview counts the
traffic of every node, a few seconds late for the others. ``node_list`` is the console's
list of nodes with their health. ``/metrics`` stays each node's own: scrape every node.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import orjson
from prometheus_client.metrics_core import Metric

from orgate import __version__
from orgate.server.worker_metrics import Family, merge, snapshot
from orgate.store.base import NodeRecord, ResponseStore, StoreError

if TYPE_CHECKING:
    from orgate.server.services import Services

log = logging.getLogger("orgate.server")

#: Seconds between two metrics snapshots of a process in the store.
METRICS_EVERY = 5.0
#: A process whose heartbeat is older than this is silent (the store's ``stale_after``).
SILENT_AFTER = 30.0
#: Processes silent or stopped for longer are left out of the node list (not of the figures).
FORGET_AFTER = 3600.0

_REQUESTS = "orgate_http_requests"


def node_address(host: str, port: int, public_url: str | None) -> str:
    """Where this process serves: ``public_url``, else its listen address (a wildcard one
    named by the machine's host name, as its peers would reach it)."""
    if public_url:
        return public_url.rstrip("/")
    if host in ("", "0.0.0.0", "::"):
        host = socket.gethostname()
    elif ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}"


async def keep_node(services: Services, store: ResponseStore, every: float = METRICS_EVERY) -> None:
    """Record this process in the store, then its metrics every ``every`` seconds (and once more
    when cancelled, so that a drained process's last numbers are kept)."""
    server = services.settings.server
    address = node_address(server.host, server.port, server.public_url)
    with contextlib.suppress(StoreError):
        await store.describe_node(version=__version__, address=address)
    try:
        while True:
            await _write_metrics(services, store)
            await asyncio.sleep(every)
    finally:
        await asyncio.shield(_write_metrics(services, store))


async def _write_metrics(services: Services, store: ResponseStore) -> None:
    try:
        await store.write_metrics(orjson.dumps(snapshot(services.metrics)))
    except StoreError as exc:
        log.debug("could not write this process's metrics to the store: %s", exc)


def _alive(node: NodeRecord, now: float) -> bool:
    return node.stopped_at is None and node.heartbeat_at > now - SILENT_AFTER


def _families(node: NodeRecord) -> list[Family]:
    if node.metrics is None:
        return []
    try:
        families: list[Family] = orjson.loads(node.metrics)
    except orjson.JSONDecodeError:
        return []
    return families


class ClusterView:
    """A collector (``registry.collect()``'s shape) of merged families."""

    def __init__(self, families: list[Family]) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        for name, documentation, kind, samples in self.families:
            metric = Metric(name, documentation, kind)
            for sample_name, labels, value in samples:
                metric.add_sample(sample_name, labels, value)
            yield metric


async def cluster_view(services: Services, store: ResponseStore) -> ClusterView:
    """Every process's numbers: this one's live, the others' latest snapshots."""
    nodes = await store.nodes()
    now = time.time()
    me = store.owner_id
    live = [snapshot(services.metrics)]
    live += [_families(node) for node in nodes if node.owner_id != me and _alive(node, now)]
    gone = [_families(node) for node in nodes if node.owner_id != me and not _alive(node, now)]
    merged = merge(live)
    if gone:
        merged = merge([merged, merge(gone, keep_gauges=False)])
    return ClusterView(merged)


def _requests(families: list[Family]) -> tuple[float, float]:
    """``/v1/responses`` requests and errors (4xx, 5xx) in a snapshot."""
    total = errors = 0.0
    for name, _doc, _kind, samples in families:
        if name != _REQUESTS:
            continue
        for sample_name, labels, value in samples:
            if sample_name.endswith("_total") and labels.get("route") == "/v1/responses":
                total += value
                if str(labels.get("status", "")).startswith(("4", "5")):
                    errors += value
    return total, errors


def _status(node: NodeRecord, now: float) -> str:
    if node.stopped_at is not None:
        return "stopped"
    return "up" if node.heartbeat_at > now - SILENT_AFTER else "silent"


def node_list(nodes: list[NodeRecord], me: str, now: float | None = None) -> list[dict[str, Any]]:
    """The console's node list: each server process (a machine, or a worker of one: one that
    recorded its version, unlike the commands that open the store) with its health:
    ``up`` (heartbeat within 30 s), ``silent`` (none since: taken for dead; its background
    responses are taken over once their lease expires) or ``stopped`` (drained or closed)."""
    now = time.time() if now is None else now
    listed = []
    for node in nodes:
        last = node.stopped_at or node.heartbeat_at
        if node.owner_id != me and (node.version is None or last < now - FORGET_AFTER):
            continue  # a command (`orgate store …`) or an older orgate, or long gone
        host, _, rest = node.owner_id.partition(":")
        requests, errors = _requests(_families(node))
        listed.append(
            {
                "id": node.owner_id,
                "host": host,
                "pid": rest.partition(":")[0],
                "version": node.version,
                "address": node.address,
                "status": _status(node, now),
                "this": node.owner_id == me,
                "started_at": node.started_at,
                "heartbeat_at": node.heartbeat_at,
                "stopped_at": node.stopped_at,
                "metrics_at": node.metrics_at,
                "background": node.background,
                "requests": requests,
                "errors": errors,
            }
        )
    return listed
