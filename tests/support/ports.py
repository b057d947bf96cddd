"""Ports for the servers tests start, handed over without a race.

A port found free, released and then given to a server is a race under ``pytest -n 2``: the
other worker's servers bind port 0 and its clients take ephemeral ports from the same range,
so the number may be taken before the server binds it. So, in order of preference:

- the server binds port 0 itself and says which port it got (``orgate serve --port 0`` reads
  back from its ``listening on`` line: tests/server_process.py; the fakes and the MCP servers
  bind their own sockets);
- the server is handed a socket the test bound (``listening_socket``: uvicorn's
  ``sockets=``, HAProxy's ``bind fd@N``);
- a server that can do neither (redis-server, PostgreSQL, nginx) gets a *reserved* port
  (``reserved_port``): the test keeps a socket bound to it with ``SO_REUSEADDR``, never
  listening, on the address the server binds (``0.0.0.0`` for one that binds every address),
  for as long as the server may use the port. The kernel then gives that number
  to no other ``bind`` to port 0 and to no outgoing connection, while the server (which sets
  ``SO_REUSEADDR`` itself, as these three do) binds and listens beside it — also again after
  a restart on the same port.

``closed_port`` is a port where nothing listens and nothing will while the test holds it
(bound, never listening): connecting there is refused, as at a dead upstream.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager


def listening_socket(host: str = "127.0.0.1", backlog: int = 128) -> socket.socket:
    """A socket listening on a port of ``host`` the kernel picked: hand it to the server."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    sock.listen(backlog)
    return sock


def port_of(sock: socket.socket) -> int:
    return int(sock.getsockname()[1])


def reservation(host: str = "127.0.0.1") -> socket.socket:
    """The socket that reserves a port of ``host`` (``port_of`` it) until it is closed."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    return sock


@contextmanager
def reserved_port(host: str = "127.0.0.1") -> Iterator[int]:
    """A port of ``host`` kept for a server that binds it with ``SO_REUSEADDR`` (see above)."""
    with reservation(host) as sock:
        yield port_of(sock)


@contextmanager
def closed_port(host: str = "127.0.0.1") -> Iterator[int]:
    """A port of ``host`` where connections are refused, held so while the block runs."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.bind((host, 0))
        yield port_of(sock)
