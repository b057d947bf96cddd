"""How pytest-xdist spreads the suite over its workers: as ``--dist load``, except for the
multi-node tier.

The tests of ``tests/cluster/`` share one set of nodes (a session fixture of the worker that
runs them) and kill two of them last, so one worker must run them all, in file order. xdist's
``xdist_group`` mark would do that by suffixing node ids, which pytest 9 no longer lets a
plugin do; so the tier is found by its path, handed to the first worker before anything
else (it is the longest unit: the other worker runs the rest meanwhile), and every other
test is spread by xdist's own load scheduling.
"""

from __future__ import annotations

from typing import Any

import pytest
from xdist.scheduler import LoadScheduling

#: Tests under this directory are handed to one worker together.
TOGETHER = "tests/cluster/"


class ClusterTierTogether(LoadScheduling):
    def schedule(self) -> None:
        if self.collection is None and self.collection_is_completed and len(self.nodes) > 1:
            if not self._check_nodes_have_same_collection():
                return super().schedule()  # xdist reports the difference and aborts
            collection = next(iter(self.node2collection.values()))
            tier = [i for i, nodeid in enumerate(collection) if nodeid.startswith(TOGETHER)]
            if tier:
                self.collection = collection
                self.maxschedchunk = self.maxschedchunk or len(collection)
                together = set(tier)
                self.pending[:] = [i for i in range(len(collection)) if i not in together]
                first = self.nodes[0]
                self.node2pending[first].extend(tier)
                first.send_runtest_some(tier)
                for node in self.nodes:
                    self.check_schedule(node)
                return None
        return super().schedule()


def make_scheduler(config: pytest.Config, log: Any) -> ClusterTierTogether | None:
    """Our scheduler for ``--dist load`` (what ``-n N`` means), else xdist's choice."""
    if config.getvalue("dist") != "load":
        return None
    return ClusterTierTogether(config, log)
