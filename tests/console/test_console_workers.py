"""The console's shared state under ``orgate serve --workers 2`` (one SQLite store): a sign-out
made through one worker holds on the other, and the sign-in throttle counts a client's wrong
keys whichever worker takes them. Which worker serves a connection is read from ``/proc``
(``tests/server/test_workers.py``); the clients connect from several loopback addresses, which
the server sees as several clients."""

from __future__ import annotations

import json
import math
import re
import sys
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.console.conftest import KEYS, SESSION_SECRET
from tests.server.test_workers import Conn, deadline_loop, one_on_each
from tests.server_process import OrgateServer

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="workers and /proc: Linux"),
    pytest.mark.timeout(600),
]

CONFIG = f"""
[auth]
api_keys = [
  {{ name = "alpha", key = "{KEYS["alpha"]}", tenant = "alpha" }},
  {{ name = "beta", key = "{KEYS["beta"]}", tenant = "beta" }},
]

[console]
session_secret = "{SESSION_SECRET}"
"""
FREE = 5  # wrong keys a subject may send before it is held up (console/throttle.py)


@pytest.fixture(scope="module")
def server() -> Iterator[OrgateServer]:
    with OrgateServer(CONFIG, api_key=KEYS["alpha"], args=("--workers", "2")) as running:
        yield running


def sign_in(conn: Conn, key: str) -> tuple[int, dict, dict[str, str]]:
    """POST the key on ``conn``: status, body, response headers."""
    conn.send("POST", "/console/api/session", {"key": key})
    response = conn.http.getresponse()
    return response.status, json.loads(response.read()), dict(response.getheaders())


def test_a_sign_out_through_one_worker_is_refused_by_both(server: OrgateServer) -> None:
    first, second = one_on_each(server).values()
    status, session, headers = sign_in(first, KEYS["alpha"])
    assert status == 200
    cookie = headers["set-cookie"].split(";", 1)[0]  # orgate_console=…, as a copied cookie
    for conn in (first, second):
        assert conn.request("GET", "/console/api/session", headers={"Cookie": cookie})[0] == 200
    status, _ = first.request(
        "DELETE",
        "/console/api/session",
        headers={"Cookie": cookie, "X-CSRF-Token": session["csrf_token"]},
    )
    assert status == 200
    for conn in (second, first):
        status, body = conn.request("GET", "/console/api/responses", headers={"Cookie": cookie})
        assert status == 401
        assert json.loads(body)["error"]["code"] == "console_session_required"
    # And on fresh connections, wherever they land.
    replays = [
        httpx.get(f"{server.url}/console/api/session", headers={"Cookie": cookie}, timeout=60)
        for _ in range(20)
    ]
    assert {r.status_code for r in replays} == {401}


def most_wrong_keys(seconds: float) -> int:
    """The most wrong keys one subject can get checked in ``seconds``: its free ones, then one
    each time its block (1, 2, 4 … s) is over."""
    return FREE + math.floor(math.log2(seconds + 1)) + 1


def test_wrong_keys_from_one_address_are_held_up_on_both_workers(server: OrgateServer) -> None:
    attacker = "127.0.0.5"
    conns = list(one_on_each(server, source=attacker).values())
    statuses: list[int] = []
    by_worker: dict[int, list[int]] = {conn.pid: [] for conn in conns}  # type: ignore[misc]
    started = time.monotonic()
    for attempt in range(300):
        conn = conns[attempt % 2]  # one worker, then the other
        status, body, headers = sign_in(conn, f"wrong-key-{attempt:04}")
        statuses.append(status)
        by_worker[conn.pid].append(status)  # type: ignore[index]
        if status == 429:
            assert body["error"]["code"] == "too_many_sign_in_attempts"
            assert int(headers["retry-after"]) >= 1
        else:
            assert status == 401 and body["error"]["code"] == "invalid_api_key"
    elapsed = time.monotonic() - started
    assert statuses[:FREE] == [401] * FREE
    # Counted once for both workers: two workers counting apart would let 2 x 5 through first.
    assert statuses.count(401) <= most_wrong_keys(elapsed)
    assert all(429 in seen for seen in by_worker.values())
    # Held up, the address gets 429 even with the right key; another address signs in.
    assert sign_in(conns[0], KEYS["alpha"])[0] == 429
    assert sign_in(Conn(server, source="127.0.0.6"), KEYS["alpha"])[0] == 200
    # A metric and a log line say so (every worker's, in one /metrics, as their snapshots land).
    for _ in deadline_loop():
        if throttled_total(server) >= statuses.count(429):
            break
    assert "console sign-in throttled: address=127.0.0.5" in server.output()


def throttled_total(server: OrgateServer) -> float:
    metrics = httpx.get(f"{server.url}/metrics", headers=server.headers(), timeout=60).text
    found = re.search(r'orgate_console_sign_ins_total\{outcome="throttled"\} (\S+)', metrics)
    return float(found.group(1)) if found else 0.0


def test_one_wrong_key_tried_from_many_addresses_is_held_up(server: OrgateServer) -> None:
    statuses = []
    started = time.monotonic()
    for n in range(40):
        conn = Conn(server, source=f"127.0.1.{n + 1}")  # a new address each time
        statuses.append(sign_in(conn, "the-same-wrong-key")[0])
        conn.close()
    assert statuses[:FREE] == [401] * FREE
    assert statuses.count(401) <= most_wrong_keys(time.monotonic() - started)
    # The right key is another key: not held up, from any of those addresses.
    assert sign_in(Conn(server, source="127.0.1.7"), KEYS["beta"])[0] == 200
