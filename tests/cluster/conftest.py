"""Three ``orgate serve`` nodes, each on a host of its own, sharing a real PostgreSQL and Redis,
behind Debian's HAProxy: the deployment docs/deployment.md describes for several machines
(``nginx`` puts Debian's nginx in front of the same nodes, ``front`` is each balancer in turn).

``cluster`` (one per test session; one xdist worker runs every test of this directory, in file
order: tests/support/scheduling.py) starts, in this order: the hosts
(network namespaces on a bridge, else loopback addresses: ``hosts.py``), PostgreSQL and Redis
listening where the nodes reach them (and an MCP server of the test's tools, and the
``counted`` model's upstream: a fake OpenAI-compatible server that records every call, so that
a test counts how often each request ran and ran to its end, whichever node called it), the
three nodes with one configuration and one set of secrets, then HAProxy with
``deploy/haproxy.cfg``. Everything is stopped and removed when the
session ends, whatever happened. Nodes may be SIGKILLed by the tests (``test_node_loss.py``
does, last); tests that need every node check first.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cluster.hosts import Network, make_network
from tests.cluster.nodes import Node
from tests.cluster.services import Balancer, Nginx, PostgresCluster, RedisServer
from tests.fakes.openai_chat_upstream import FakeOpenAIChat, Script, last_user_text
from tests.mcp.servers import Running, tools_server
from tests.server_process import START_TIMEOUT

#: The API keys of every node: two tenants, an admin and a rate-limited key (4 calls a minute).
KEYS = {
    "alpha": "sk-cluster-alpha-0001",
    "beta": "sk-cluster-beta-0002",
    "root": "sk-cluster-root-0003",
    "limited": "sk-cluster-limited-0004",
}
LIMITED_RPM = 4
#: How long a background response's lease lasts unrenewed ([store] background_lease_seconds).
LEASE_SECONDS = 6
#: Seconds between two words of the ``counted`` model's answers.
COUNTED_PAUSE = 0.25

#: The one configuration of every node; secrets come from the environment (``env:NAME``).
CONFIG = f"""
[server]
log_format = "json"
drain_timeout = 10

[auth]
api_keys = [
  {{ name = "alpha", key = "env:CLUSTER_KEY_ALPHA", tenant = "alpha" }},
  {{ name = "beta", key = "env:CLUSTER_KEY_BETA", tenant = "beta" }},
  {{ name = "root", key = "env:CLUSTER_KEY_ROOT", tenant = "ops", admin = true }},
  {{ name = "limited", key = "env:CLUSTER_KEY_LIMITED", tenant = "limited", rpm = {LIMITED_RPM} }},
]

[store]
url = "env:ORGATE_STORE_URL"
# short, so that a killed node's background responses are taken over within the tier's time
background_lease_seconds = {LEASE_SECONDS}

[ratelimit]
redis_url = "env:ORGATE_REDIS_URL"

[structured]
retries = 0
on_exhaustion = "review"
"""


def counted_model(url: str) -> str:
    """The ``counted`` model: the counting upstream every node calls."""
    return (
        f'\n[[models]]\nname = "counted"\nprovider = "openai-chat"\nbase_url = "{url}"\n'
        'api_key = "upstream-secret"\nupstream_model = "fake-model"\nread_timeout = 30\n'
    )


def echo_slowly(body: dict[str, Any]) -> Script:
    """The counting upstream's answer: the request's last user message, word by word."""
    return Script(content=last_user_text(body), delay=COUNTED_PAUSE)


def mcp_servers(url: str) -> str:
    """The MCP server of the test's tools (tests/mcp/servers.py), every call approved first."""
    return f'\n[[mcp_servers]]\nlabel = "tools"\nurl = "{url}"\nrequire_approval = "always"\n'


#: Shared by every node, as docs/deployment.md asks: sealed compaction items and console
#: sessions (signed with a key derived from it) are then valid on every node.
COMPACTION_SECRET = "cluster-compaction-secret-0123456789"


@dataclass
class Cluster:
    network: Network
    postgres: PostgresCluster
    redis: RedisServer
    nodes: list[Node]
    balancer: Balancer
    workdir: Path
    upstream: FakeOpenAIChat  # the ``counted`` model's

    @property
    def url(self) -> str:
        """The load balancer: what clients use."""
        return self.balancer.url

    def live(self) -> list[Node]:
        return [node for node in self.nodes if node.alive]

    def require_all_nodes(self) -> None:
        dead = [node.name for node in self.nodes if not node.alive]
        if dead:
            pytest.fail(f"this test needs every node, and {', '.join(dead)} is gone")

    def client(self, base: str | Node | None = None, key: str = "alpha") -> httpx.Client:
        """A client of ``base`` (a node, a URL; default the load balancer) with ``key``'s key."""
        url = base.url if isinstance(base, Node) else (base or self.url)
        return httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {KEYS[key]}"}, timeout=120
        )

    def wait_balancer(self, want: dict[str, str]) -> dict[str, str]:
        """Poll HAProxy until each named server has the wanted status (``UP``, ``DOWN``)."""
        deadline = time.monotonic() + START_TIMEOUT
        states: dict[str, str] | None = None
        while time.monotonic() < deadline:
            states = self.balancer.states() or {}
            if all(states.get(name, "").split(" ")[0] == status for name, status in want.items()):
                return states
            time.sleep(0.2)
        raise AssertionError(f"HAProxy's servers: {states}, wanted {want}")

    def server_name(self, node: Node) -> str:
        """HAProxy's name of ``node``."""
        return f"orgate-{self.nodes.index(node) + 1}"


def node_env(postgres: PostgresCluster, redis: RedisServer) -> dict[str, str]:
    return {
        "ORGATE_STORE_URL": postgres.url,
        "ORGATE_REDIS_URL": redis.url,
        "ORGATE_COMPACTION_SECRET": COMPACTION_SECRET,
        "CLUSTER_KEY_ALPHA": KEYS["alpha"],
        "CLUSTER_KEY_BETA": KEYS["beta"],
        "CLUSTER_KEY_ROOT": KEYS["root"],
        "CLUSTER_KEY_LIMITED": KEYS["limited"],
        "ORGATE_API_KEY": "",
    }


def stop_nodes(nodes: list[Node]) -> None:
    """SIGTERM to every live node at once, then wait for each (SIGKILL past its drain)."""
    for node in nodes:
        if node.alive and node.proc is not None:
            node.proc.terminate()
    for node in nodes:
        node.stop()


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    workdir = tmp_path_factory.mktemp("cluster")
    with contextlib.ExitStack() as stack:
        network = make_network(3)
        stack.callback(network.remove)
        if not network.isolated:
            warnings.warn(
                "the multi-node tests run on loopback addresses (127.0.0.2-4), not in network "
                f"namespaces: {network.note}",
                stacklevel=1,
            )
        # Not under pytest's directory: PostgreSQL runs as the postgres user, who must reach it.
        pg_dir = Path(tempfile.mkdtemp(prefix="orgate-cluster-pg."))
        postgres = PostgresCluster(pg_dir, network.gateway, network.subnet)
        stack.callback(postgres.remove)
        postgres.start()
        redis = RedisServer(network.gateway, workdir)
        stack.callback(redis.stop)
        redis.start()
        mcp = Running(tools_server(), host=network.gateway).start()
        stack.callback(mcp.stop)
        upstream = FakeOpenAIChat.start_in_thread(handler=echo_slowly, host=network.gateway)
        stack.callback(upstream.stop_thread)
        config = workdir / "orgate.toml"
        config.write_text(CONFIG + mcp_servers(mcp.url) + counted_model(upstream.base_url))
        env = node_env(postgres, redis)
        nodes = [Node(host, config, env, workdir) for host in network.hosts]
        stack.callback(stop_nodes, nodes)
        with ThreadPoolExecutor(len(nodes)) as pool:
            list(pool.map(Node.start, nodes))
        balancer = Balancer([node.address for node in nodes], workdir)
        stack.callback(balancer.stop)
        balancer.start()
        running = Cluster(network, postgres, redis, nodes, balancer, workdir, upstream)
        running.wait_balancer({running.server_name(node): "UP" for node in nodes})
        yield running


@pytest.fixture(scope="session")
def nginx(cluster: Cluster) -> Iterator[Nginx]:
    """Debian's nginx with ``deploy/nginx.conf`` in front of the same nodes."""
    proxy = Nginx([node.address for node in cluster.nodes], cluster.workdir)
    try:
        yield proxy.start()
    finally:
        proxy.stop()


@pytest.fixture(params=["haproxy", "nginx"])
def front(request: pytest.FixtureRequest, cluster: Cluster) -> str:
    """The URL of each balancer the docs show, in turn."""
    if request.param == "nginx":
        return str(request.getfixturevalue("nginx").url)
    return cluster.url
