"""Hosts of the multi-node tests: one network namespace per node, or loopback addresses.

``make_network(count)`` makes a bridge in this (the host's) namespace holding the first
address of a free ``10.213.N.0/24``, and ``count`` namespaces, each joined to it by a veth
pair and holding the next address: every node is a machine of its own on one LAN, and the
host side (PostgreSQL, Redis, the load balancer, the test's clients) reaches each of them at
its address. Making them needs root and Debian's iproute2 (``ip``); where they cannot be made
the hosts are the loopback addresses 127.0.0.2, .3, .4… instead (``Network.isolated`` is
False and ``Network.note`` says why). ``Network.remove()`` deletes whatever was made, and runs
at exit too, so an interrupted run leaves nothing behind.

A command run on a host (``Host.command``) also gets a UTS namespace of its own with the
host's name as hostname (``unshare --uts``, where it works): orgate then tells its peers'
owner ids apart the way separate machines do (by heartbeat, not by pid).
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import random
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

#: The /16 the test networks are taken from (a free /24 of it per run).
PREFIX = "10.213"
#: Serialises the choice of a free /24 between runs on one machine.
LOCK = Path("/tmp/orgate-cluster-network.lock")


@dataclass(frozen=True)
class Host:
    """A machine of the test: its name, its address, and its namespace (None on loopback)."""

    name: str
    address: str
    netns: str | None
    own_hostname: bool

    def command(self, argv: list[str]) -> list[str]:
        """``argv`` run on this host: inside its namespace, under its own hostname."""
        inner = argv
        if self.own_hostname:
            inner = ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', self.name]
            inner += argv
        if self.netns is None:
            return inner
        return ["ip", "netns", "exec", self.netns, *inner]


@dataclass
class Network:
    """The hosts, the address the host side has on their network, and how to remove it all."""

    hosts: list[Host]
    gateway: str  # the host side's address, as the hosts see it
    isolated: bool  # True: network namespaces; False: loopback addresses
    note: str = ""
    subnet: str = ""
    _made: list[list[str]] = field(default_factory=list)  # undo commands, newest last

    def remove(self) -> None:
        """Delete the namespaces and the bridge (their veth pairs go with them)."""
        while self._made:
            subprocess.run(self._made.pop(), capture_output=True, check=False)


def _ip(*args: str) -> None:
    result = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise OSError(f"ip {' '.join(args)}: {result.stderr.strip()}")


def _can_unshare_uts() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "--uts", "true"], capture_output=True, check=False, timeout=30
    )
    return probe.returncode == 0


@contextlib.contextmanager
def _network_lock() -> Iterator[None]:
    with LOCK.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _used_subnets() -> set[int]:
    """The third octets of PREFIX.N.0/24 networks this host already has an address or route in."""
    shown = subprocess.run(
        ["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True, check=False
    ).stdout
    shown += subprocess.run(
        ["ip", "-4", "route", "show"], capture_output=True, text=True, check=False
    ).stdout
    return {int(n) for n in re.findall(re.escape(PREFIX) + r"\.(\d+)\.", shown)}


def _remove_leftovers() -> None:
    """Namespaces and bridges of earlier runs whose process is gone (a run killed outright)."""
    listed = subprocess.run(
        ["ip", "netns", "list"], capture_output=True, text=True, check=False
    ).stdout
    for name in re.findall(r"^(ogc(\d+)-\d+)", listed, re.M):
        if not Path(f"/proc/{name[1]}").exists():
            subprocess.run(["ip", "netns", "del", name[0]], capture_output=True, check=False)
    links = subprocess.run(
        ["ip", "-o", "link", "show", "type", "bridge"], capture_output=True, text=True, check=False
    ).stdout
    for bridge, pid in re.findall(r"^\d+: (ogc(\d+)br):", links, re.M):
        if not Path(f"/proc/{pid}").exists():
            subprocess.run(["ip", "link", "del", bridge], capture_output=True, check=False)


def _namespaces(count: int, own_hostname: bool) -> Network:
    pid = os.getpid()
    bridge = f"ogc{pid}br"
    network = Network([], "", True)
    atexit.register(network.remove)
    try:
        with _network_lock():
            _remove_leftovers()
            free = sorted(set(range(1, 255)) - _used_subnets())
            if not free:
                raise OSError(f"no free {PREFIX}.N.0/24 on this host")
            third = random.choice(free)
            network.subnet = f"{PREFIX}.{third}.0/24"
            network.gateway = f"{PREFIX}.{third}.1"
            _ip("link", "add", bridge, "type", "bridge")
            network._made.append(["ip", "link", "del", bridge])
            _ip("addr", "add", f"{network.gateway}/24", "dev", bridge)
            _ip("link", "set", bridge, "up")
        for index in range(1, count + 1):
            netns = f"ogc{pid}-{index}"
            outside, inside = f"ogc{pid}h{index}", f"ogc{pid}n{index}"
            address = f"{PREFIX}.{third}.{index + 1}"
            _ip("netns", "add", netns)
            network._made.append(["ip", "netns", "del", netns])
            _ip("link", "add", outside, "type", "veth", "peer", "name", inside)
            _ip("link", "set", outside, "master", bridge)
            _ip("link", "set", outside, "up")
            _ip("link", "set", inside, "netns", netns)
            _ip("-n", netns, "link", "set", inside, "name", "eth0")
            _ip("-n", netns, "addr", "add", f"{address}/24", "dev", "eth0")
            _ip("-n", netns, "link", "set", "eth0", "up")
            _ip("-n", netns, "link", "set", "lo", "up")
            network.hosts.append(Host(f"node-{index}", address, netns, own_hostname))
    except BaseException:
        network.remove()
        raise
    return network


def _loopback(count: int, own_hostname: bool, why: str) -> Network:
    hosts = [Host(f"node-{i}", f"127.0.0.{i + 1}", None, own_hostname) for i in range(1, count + 1)]
    return Network(hosts, "127.0.0.1", False, note=why)


def make_network(count: int) -> Network:
    """``count`` hosts in network namespaces, else on loopback addresses (``note`` says why).

    ``ORGATE_TEST_CLUSTER_NETWORK=loopback`` asks for the loopback addresses outright.
    """
    own_hostname = _can_unshare_uts()
    if os.environ.get("ORGATE_TEST_CLUSTER_NETWORK") == "loopback":
        return _loopback(count, own_hostname, "ORGATE_TEST_CLUSTER_NETWORK=loopback")
    if shutil.which("ip") is None:
        return _loopback(count, own_hostname, "no `ip` command (Debian's iproute2)")
    try:
        return _namespaces(count, own_hostname)
    except OSError as exc:
        return _loopback(count, own_hostname, f"network namespaces cannot be made here: {exc}")
