"""Black-box audit of the operational surface through ``orgate serve``: metrics, logs, rate limits,
graceful shutdown, overload. Each test named in a bullet failed before its fix:

- ``test_retry_after_is_the_longer_wait_of_both_buckets``: with the request bucket empty *and* the
  token bucket in debt, ``Retry-After`` named the request bucket's short wait (30 s for a debt of
  ~110 s), so a client that waited as told was refused again (in-process and Redis limiters);
- ``test_redis_outage_and_restart``: after a Redis restart every pooled connection was stale and
  failed open once, so a burst right after the restart was admitted whole (30 of 30 for a limit of
  10); and an outage logged one warning per request (a log flood on a busy gateway);
- ``test_text_log_lines_cannot_be_forged``: a model name with a line break wrote a forged access-log
  line in the text format;
- ``test_protocol_level_errors_carry_a_request_id``: the 431 / 400 answers given below the app had
  no ``X-Request-Id`` (operations.md: every answer carries one);
- ``test_upstream_error_codes_are_a_bounded_label``: a Responses upstream's ``response.failed``
  code became a label value as it was, one series per distinct code;
- ``test_in_flight_gauges_return_to_zero`` (new series ``orgate_http_requests_in_flight`` and
  ``orgate_upstream_requests_in_flight``): there was no saturation gauge at all.

The rest pin what the audit found right: exact counter moves after a known mix of requests,
bounded labels under client-chosen values, JSON logs without secrets, exact rpm under 50
concurrent requests with an honest ``Retry-After``, limits shared through Redis, SIGTERM draining
50 streams and exiting 0, clean 429s past ``max_concurrency`` while ``/healthz`` stays fast.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import math
import os
import signal
import socket
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.fakes._base import Raw
from tests.fakes.openai_chat_upstream import FakeOpenAIChat, Script, http_error, rate_limited, text
from tests.fakes.responses_upstream import FakeResponses
from tests.hardening.conftest import (
    UPSTREAM_KEY,
    assert_error,
    hardened_config,
    server_env,
    sse_events,
)
from tests.server_process import OrgateServer
from tests.support.configs import model_block
from tests.support.ports import closed_port
from tests.support.redis import Redis
from tests.support.waiting import PATIENCE, eventually, wait_until

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(url: str) -> Samples:
    """Every sample of ``/metrics`` (parsed by prometheus_client's own parser),
    ``_created`` left out."""
    res = httpx.get(f"{url}/metrics", timeout=10)
    assert res.status_code == 200 and res.headers["content-type"].startswith("text/plain")
    samples: Samples = {}
    for family in text_string_to_metric_families(res.text):
        for sample in family.samples:
            if not sample.name.endswith("_created"):
                samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def moved(before: Samples, after: Samples, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """How each series of ``name`` moved between two scrapes (series that did not move left out)."""
    out = {}
    for (sample, labels), value in after.items():
        if sample == name and value != before.get((sample, labels), 0.0):
            out[labels] = value - before.get((sample, labels), 0.0)
    return out


def lab(**labels: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(labels.items()))


def post(
    url: str, key: str, body: dict[str, Any], headers: dict[str, str] | None = None
) -> httpx.Response:
    return httpx.post(
        f"{url}/v1/responses",
        json=body,
        headers={"Authorization": f"Bearer {key}", **(headers or {})},
        timeout=30,
    )


def json_lines(output: str) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in output.splitlines() if line.startswith("{")]


# --- metrics --------------------------------------------------------------------------------------


def test_metrics_move_by_exactly_the_expected_amounts(
    hardened: OrgateServer, fake: FakeOpenAIChat
) -> None:
    """A known mix: every counter and histogram count moves by exactly what was sent, with the right
    labels; tokens equal the usage the responses reported."""
    url, key = hardened.url, hardened.api_key
    before = scrape(url)
    usage = Counter[tuple[str, str]]()

    def count_usage(model: str, response: dict[str, Any]) -> None:
        usage[(model, "input")] += response["usage"]["input_tokens"]
        usage[(model, "output")] += response["usage"]["output_tokens"]

    for _ in range(2):
        res = post(url, key, {"model": "orgate/echo", "input": "one two three"})
        assert res.status_code == 200
        count_usage("orgate/echo", res.json())
    res = post(url, key, {"model": "orgate/echo", "input": "four five", "stream": True})
    count_usage("orgate/echo", sse_events(res.text)[-1]["response"])
    fake.enqueue(text("alpha beta gamma"), text("delta epsilon"))
    count_usage("fake-chat", post(url, key, {"model": "fake-chat", "input": "x y"}).json())
    res = post(url, key, {"model": "fake-chat", "input": "x y z", "stream": True})
    count_usage("fake-chat", sse_events(res.text)[-1]["response"])
    # 4xx of several kinds
    assert_error(
        httpx.post(
            f"{url}/v1/responses",
            content=b"{bad",
            headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        ),
        400,
        "invalid_json",
    )
    assert_error(post(url, key, {"model": "no-such-model", "input": "x"}), 404, "model_not_found")
    assert_error(
        post(url, "wrong-key", {"model": "orgate/echo", "input": "x"}), 401, "invalid_api_key"
    )
    assert_error(
        post(url, key, {"model": "orgate/echo", "input": "x" * 70000}), 413, "request_too_large"
    )
    # upstream 429, 5xx and timeout (read_timeout = 1.5 s)
    fake.enqueue(rate_limited("3"), http_error(503, "down"), Script(stall_before_headers=30))
    assert_error(post(url, key, {"model": "fake-chat", "input": "x"}), 429, "rate_limit_exceeded")
    assert_error(post(url, key, {"model": "fake-chat", "input": "x"}), 502, "upstream_error")
    assert_error(post(url, key, {"model": "fake-chat", "input": "x"}), 504, "upstream_timeout")
    # a client leaving mid-stream
    with httpx.stream(
        "POST",
        f"{url}/v1/responses",
        json={"model": "orgate/echo", "input": "a b c d e f g h orgate:delay=200", "stream": True},
        headers=hardened.headers(),
        timeout=10,
    ) as res:
        next(res.iter_bytes())

    def recorded() -> bool:
        now = scrape(url)
        cancelled = moved(before, now, "orgate_upstream_duration_seconds_count").get(
            lab(deployment="orgate/echo", outcome="cancelled")
        )
        return (
            cancelled == 1
            and moved(before, now, "orgate_http_requests_total").get(
                lab(route="/v1/responses", method="POST", status="200", model="orgate/echo")
            )
            == 4
        )

    assert wait_until(recorded)
    after = scrape(url)

    route = {"route": "/v1/responses", "method": "POST"}
    assert moved(before, after, "orgate_http_requests_total") == {
        lab(**route, status="200", model="orgate/echo"): 4,  # 2 plain, 1 stream, 1 left mid-stream
        lab(**route, status="200", model="fake-chat"): 2,
        lab(**route, status="400", model=""): 1,
        lab(**route, status="404", model="other"): 1,
        lab(**route, status="401", model=""): 1,
        lab(**route, status="413", model=""): 1,
        lab(**route, status="429", model="fake-chat"): 1,
        lab(**route, status="502", model="fake-chat"): 1,
        lab(**route, status="504", model="fake-chat"): 1,
        # the scrapes of wait_until
        **{
            k: v
            for k, v in moved(before, after, "orgate_http_requests_total").items()
            if dict(k)["route"] == "/metrics"
        },
    }
    assert moved(before, after, "orgate_http_request_duration_seconds_count")[lab(**route)] == 13
    assert moved(before, after, "orgate_stream_time_to_first_chunk_seconds_count") == {
        lab(route="/v1/responses", model="orgate/echo"): 2,
        lab(route="/v1/responses", model="fake-chat"): 1,
    }
    assert moved(before, after, "orgate_upstream_duration_seconds_count") == {
        lab(deployment="orgate/echo", outcome="ok"): 3,
        lab(deployment="orgate/echo", outcome="cancelled"): 1,
        lab(deployment="fake-chat", outcome="ok"): 2,
        lab(deployment="fake-chat", outcome="error"): 3,
    }
    timeout_sum = moved(before, after, "orgate_upstream_duration_seconds_sum")[
        lab(deployment="fake-chat", outcome="error")
    ]
    # The read_timeout (1.5 s), not the stall (30 s): what a loaded machine adds to the first
    # is far less than the gap between them.
    assert 1.4 < timeout_sum < 15
    assert moved(before, after, "orgate_upstream_errors_total") == {
        lab(deployment="fake-chat", code="rate_limit_exceeded"): 1,
        lab(deployment="fake-chat", code="upstream_error"): 1,
        lab(deployment="fake-chat", code="upstream_timeout"): 1,
    }
    assert moved(before, after, "orgate_tokens_total") == {
        lab(deployment=m, direction=d): float(n) for (m, d), n in usage.items()
    }
    assert sum(usage.values()) > 0


def test_no_label_grows_with_client_input(hardened: OrgateServer) -> None:
    """Unknown model names, random paths, request ids, session ids and ``user`` values:
    after a first
    round, a second round with other values adds no series to any metric."""

    def round_of(tag: str) -> None:
        for i in range(8):
            value = f"{tag}-{i}-{os.urandom(4).hex()}"
            headers = {**hardened.headers(), "X-Request-Id": value, "X-Session-Id": value}
            httpx.post(
                f"{hardened.url}/v1/responses",
                json={"model": f"model-{value}", "input": "x"},
                headers=headers,
                timeout=10,
            )
            httpx.post(
                f"{hardened.url}/v1/responses",
                json={"model": "orgate/echo", "input": "x", "user": value, "store": False},
                headers={**hardened.headers(), "X-Request-Id": value},
                timeout=10,
            )
            httpx.get(f"{hardened.url}/{value}/{value}", headers=headers, timeout=10)
            httpx.get(f"{hardened.url}/v1/responses/resp_{value}", headers=headers, timeout=10)
            httpx.request("PATCH", f"{hardened.url}/v1/responses", headers=headers, timeout=10)

    round_of("first")
    series = set(scrape(hardened.url))
    round_of("second")
    grown = set(scrape(hardened.url)) - series
    assert not grown, sorted(grown)
    names = " ".join(str(labels) for _, labels in series)
    assert "first-" not in names and "model-" not in names


def test_upstream_error_codes_are_a_bounded_label() -> None:
    """A Responses upstream's ``response.failed`` passes its own ``code`` on: as a label value it is
    bounded (the first codes keep their name, then ``other``), not one series per code."""
    with FakeResponses.start_in_thread() as fake:
        config = model_block(
            "resp", "openai-responses", fake.base_url, "gpt-x", api_key="k", read_timeout=10
        )
        with OrgateServer(config, env=server_env()) as server:
            for i in range(80):
                failed = {
                    "type": "response.failed",
                    "sequence_number": 0,
                    "response": {
                        "id": f"resp_{i}",
                        "object": "response",
                        "status": "failed",
                        "output": [],
                        "error": {"code": f"code_{i}_{os.urandom(3).hex()}", "message": "no"},
                    },
                }
                fake.enqueue(
                    Raw([b"event: response.failed\ndata: " + orjson.dumps(failed) + b"\n\n"])
                )
                assert (
                    post(server.url, server.api_key, {"model": "resp", "input": "x"}).status_code
                    == 502
                )
            errors = moved({}, scrape(server.url), "orgate_upstream_errors_total")
    assert sum(errors.values()) == 80
    assert len(errors) <= 65, len(errors)
    assert errors[lab(deployment="resp", code="other")] >= 16


def test_in_flight_gauges_return_to_zero(hardened: OrgateServer, fake: FakeOpenAIChat) -> None:
    """``orgate_http_requests_in_flight`` and ``orgate_upstream_requests_in_flight`` count what runs
    (streams until their end) and return to 0 after completions, disconnects mid-stream, clients
    leaving before the first event and upstream timeouts. The scrape counts itself."""
    url = hardened.url
    # ~8 s each: all three still run when the third has begun, on a loaded machine too
    fake.handler = lambda body: text(" ".join(["w"] * 40), delay=0.2)
    started: set[int] = set()

    def stream() -> None:
        with httpx.stream(
            "POST",
            f"{url}/v1/responses",
            json={"model": "fake-chat", "input": "x", "stream": True},
            headers=hardened.headers(),
            timeout=30,
        ) as res:
            for _ in res.iter_bytes():
                started.add(threading.get_ident())

    threads = [threading.Thread(target=stream) for _ in range(3)]
    for thread in threads:
        thread.start()
    assert wait_until(lambda: len(started) == 3)
    during = scrape(url)
    assert during[("orgate_http_requests_in_flight", ())] == 4  # three streams and this scrape
    assert during[("orgate_upstream_requests_in_flight", lab(deployment="fake-chat"))] == 3
    for thread in threads:
        thread.join(PATIENCE)
    fake.handler = None
    # a client leaving mid-stream, one leaving before the first event, an upstream timeout
    with httpx.stream(
        "POST",
        f"{url}/v1/responses",
        json={"model": "orgate/echo", "input": "a b c d e f orgate:delay=300", "stream": True},
        headers=hardened.headers(),
        timeout=10,
    ) as res:
        next(res.iter_bytes())
    fake.enqueue(Script(stall_before_headers=4))
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(
            f"{url}/v1/responses",
            json={"model": "fake-chat", "input": "x"},
            headers=hardened.headers(),
            timeout=0.5,
        )
    fake.enqueue(Script(stall_before_headers=4))
    assert_error(
        post(url, hardened.api_key, {"model": "fake-chat", "input": "x"}), 504, "upstream_timeout"
    )

    def idle() -> bool:
        now = scrape(url)
        upstream = [
            v for (name, _), v in now.items() if name == "orgate_upstream_requests_in_flight"
        ]
        return now[("orgate_http_requests_in_flight", ())] == 1 and not any(upstream)

    assert wait_until(idle), scrape(url)


# --- logs -----------------------------------------------------------------------------------------


def test_json_logs_hold_no_secret_at_any_level() -> None:
    """``log_level = "debug"``, JSON: every line the server writes after its banner is one JSON
    object; lines written inside a request carry its id; neither the client key nor the upstream key
    (echoed back by an upstream in errors, streamed or not) nor a database password appears
    anywhere."""
    client_key = "sk-client-0123456789"
    with FakeOpenAIChat.start_in_thread() as fake:
        config = hardened_config(fake.base_url).replace(
            "[server]\n", '[server]\nlog_level = "debug"\n'
        )
        with OrgateServer(config, api_key=client_key, env=server_env()) as server:
            echoed = f"you sent Authorization: Bearer {UPSTREAM_KEY} and x-api-key: {UPSTREAM_KEY}"
            fake.enqueue(
                http_error(500, echoed),
                http_error(500, echoed),
                http_error(401, echoed),
                http_error(400, echoed),
                http_error(429, echoed),
            )
            bodies = [
                post(
                    server.url, client_key, {"model": "fake-chat", "input": "x", "stream": stream}
                ).text
                for stream in (False, True, False, False, False)
            ]
            chunk = (
                b"data: "
                b'{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n'
            )
            fake.enqueue(
                Raw(
                    [
                        chunk,
                        b'data: {"error":{"message":"failed for Bearer '
                        + UPSTREAM_KEY.encode()
                        + b'","type":"server_error"}}\n\n',
                    ]
                )
            )
            bodies.append(
                post(
                    server.url, client_key, {"model": "fake-chat", "input": "x", "stream": True}
                ).text
            )
            fake.enqueue(Raw([b"data: {broken " + UPSTREAM_KEY.encode() + b"\n\n"]))
            bodies.append(
                post(
                    server.url, client_key, {"model": "fake-chat", "input": "x", "stream": True}
                ).text
            )
            bodies.append(
                post(server.url, client_key + "x", {"model": "orgate/echo", "input": "x"}).text
            )
            bodies.append(
                post(
                    server.url,
                    client_key,
                    {"model": "orgate/echo", "input": "x", "user": client_key},
                    headers={"X-Request-Id": "json-log-1"},
                ).text
            )
            assert wait_until(
                lambda: any(
                    e.get("request_id") == "json-log-1" for e in json_lines(server.output())
                )
            )
            output = server.output()
    for secret in (UPSTREAM_KEY, client_key):
        assert secret not in output
        for body in bodies:
            assert secret not in body
    after_banner = output[output.index("Started server process") - 60 :].splitlines()
    entries = [orjson.loads(line) for line in after_banner[1:] if line.strip()]
    assert all({"ts", "level", "logger", "msg"} <= set(e) for e in entries)
    access = [e for e in entries if e["logger"] == "orgate.access"]
    assert len(access) >= 10 and all(len(e["request_id"]) >= 8 for e in access)

    password = "pgS3cretPassw0rd"
    with closed_port() as port:
        broken = OrgateServer(
            '[server]\nlog_format = "json"\nlog_level = "debug"\n',
            env=server_env(
                {"ORGATE_STORE__URL": f"postgresql://orgate:{password}@127.0.0.1:{port}/db"}
            ),
        )
        with pytest.raises(RuntimeError) as failure:
            broken.start()  # it exits at once: the deadline only bounds a hang
    assert "cannot open the response store" in str(failure.value)
    assert password not in str(failure.value)


def test_text_log_lines_cannot_be_forged() -> None:
    """Text format: a line break in a client-chosen value (the model name) is escaped; it used to
    write a second, forged access-log line."""
    with OrgateServer("[server]\naccess_log = true\n", env=server_env()) as server:
        forged = (
            "2026-01-01 00:00:00,000 INFO orgate.access: GET /admin 200 1.0ms request_id=forged"
        )
        res = httpx.post(
            f"{server.url}/v1/responses",
            json={"model": f"evil\n{forged}", "input": "x"},
            headers={**server.headers(), "X-Request-Id": "inject-1"},
            timeout=10,
        )
        assert_error(res, 404, "model_not_found")
        assert wait_until(lambda: "request_id=inject-1" in server.output())
        lines = server.output().splitlines()
    assert not any(line.startswith(forged) for line in lines), lines[-3:]
    line = next(line for line in lines if "request_id=inject-1" in line)
    assert "\\n2026-01-01" in line and "model=" in line


def test_protocol_level_errors_carry_a_request_id(hardened: OrgateServer) -> None:
    """The answers uvicorn's protocol gives without the app (431,
    400) carry an ``X-Request-Id`` too."""
    for request in (
        b"GET /healthz?q=" + b"a" * 300_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
        b"POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
    ):
        with socket.create_connection(("127.0.0.1", hardened.port), timeout=10) as sock:
            sock.sendall(request)
            sock.settimeout(10)
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
        head = data.partition(b"\r\n\r\n")[0].decode().lower()
        assert head.split()[1] in ("431", "400"), head
        ids = [
            line.split(":", 1)[1].strip()
            for line in head.split("\r\n")
            if line.startswith("x-request-id:")
        ]
        assert len(ids) == 1 and len(ids[0]) == 32, head


# --- rate limits ----------------------------------------------------------------------------------

RATE_KEYS = """
[auth]
api_keys = [
  { name = "burst", key = "sk-burst", rpm = 30 },
  { name = "both", key = "sk-both", rpm = 2, tpm = 30 },
  { name = "shared", key = "sk-shared", rpm = 10 },
]
"""


async def _burst(urls: list[str], key: str, count: int) -> list[httpx.Response]:
    """``count`` concurrent model calls (every other one streamed), spread over ``urls``."""
    async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=count)) as client:
        return await asyncio.gather(
            *[
                client.post(
                    f"{urls[i % len(urls)]}/v1/responses",
                    json={"model": "orgate/echo", "input": "hi", "stream": i % 2 == 0},
                    headers={"Authorization": f"Bearer {key}"},
                )
                for i in range(count)
            ]
        )


def admitted_of(statuses: Counter[int], rpm: int, elapsed: float) -> int:
    """How many calls a full bucket of ``rpm`` admitted, checked: all of it, and no more than the
    tokens refilled during the ``elapsed`` seconds the calls took (none on an idle machine, where
    a burst takes a fraction of a second; a loaded one may take seconds, and may admit those)."""
    admitted = statuses[200]
    assert set(statuses) <= {200, 429}, statuses
    assert rpm <= admitted <= rpm + math.floor(elapsed * rpm / 60), (statuses, elapsed)
    return admitted


@pytest.fixture(scope="module")
def limited() -> Iterator[OrgateServer]:
    with OrgateServer(
        '[server]\nlog_format = "json"\n' + RATE_KEYS,
        api_key="",
        env=server_env({"ORGATE_API_KEY": ""}),
    ) as server:
        yield server


def test_rpm_is_exact_under_50_concurrent_requests_and_retry_after_is_honest(
    limited: OrgateServer,
) -> None:
    """rpm = 30, 50 concurrent calls (half streamed): exactly 30 admitted (and what refilled
    meanwhile, on a machine slow enough), the others refused in the spec's shape; the metrics say
    so; a client that waits ``Retry-After`` gets in, and only one does."""
    before = scrape(limited.url)
    started = time.monotonic()
    responses = asyncio.run(_burst([limited.url], "sk-burst", 50))
    statuses = Counter(res.status_code for res in responses)
    admitted = admitted_of(statuses, 30, time.monotonic() - started)
    refused = 50 - admitted
    waits = set()
    for res in responses:
        if res.status_code == 429:
            error = assert_error(res, 429, "rate_limit_exceeded")
            assert error["type"] == "rate_limit_error" and "'burst'" in error["message"]
            waits.add(int(res.headers["Retry-After"]))
        else:
            assert res.text.rstrip().endswith("data: [DONE]") or res.json()["status"] == "completed"
    after = scrape(limited.url)
    assert moved(before, after, "orgate_rate_limited_total") == {lab(key="burst"): refused}
    assert (
        moved(before, after, "orgate_http_requests_total")[
            lab(route="/v1/responses", method="POST", status="429", model="")
        ]
        == refused
    )
    assert waits and max(waits) <= 2  # 30 per minute: one request every 2 s
    time.sleep(max(waits))  # a client doing as Retry-After says: the scenario
    # Two at once after the wait: one gets in, one is refused, on an idle machine. Sent one after
    # the other, the second could find a refilled token; and over both bursts no more got in than
    # the bucket and its refill since the first (one token per 2 s) allow.
    again = asyncio.run(_burst([limited.url], "sk-burst", 2))
    statuses = Counter(res.status_code for res in again)
    assert statuses[200] >= 1, [res.text[:200] for res in again]
    admitted_of(Counter({200: admitted + statuses[200]}), 30, time.monotonic() - started)


@pytest.mark.parametrize("backend", ["local", "redis"])
def test_retry_after_is_the_longer_wait_of_both_buckets(backend: str) -> None:
    """rpm = 2 and tpm = 30: after a small call and a large one (~80 tokens), both buckets block the
    key. ``Retry-After`` is the token debt's wait (> 100 s), not the request bucket's 30 s."""
    with contextlib.ExitStack() as stack:
        extra = ""
        if backend == "redis":
            redis = stack.enter_context(Redis())
            extra = f'[ratelimit]\nredis_url = "{redis.url}"\n'
        with OrgateServer(
            RATE_KEYS + extra, api_key="", env=server_env({"ORGATE_API_KEY": ""})
        ) as server:
            assert (
                post(server.url, "sk-both", {"model": "orgate/echo", "input": "hi"}).status_code
                == 200
            )
            assert (
                post(
                    server.url,
                    "sk-both",
                    {"model": "orgate/echo", "input": " ".join(["word"] * 40)},
                ).status_code
                == 200
            )
            res = post(server.url, "sk-both", {"model": "orgate/echo", "input": "hi"})
            error = assert_error(res, 429, "rate_limit_exceeded")
            wait = int(res.headers["Retry-After"])
            # tokens: 2 + 2, then 41 + 40 charged to 30 per minute; repaid at 0.5 tokens per second
            assert wait >= 100, (wait, error)
            assert "30 tokens per minute" in error["message"]


def test_redis_outage_and_restart() -> None:
    """Two processes share one key's rpm through Redis (exactly 10 of 50 concurrent calls). Redis
    killed: requests are served (fail open) and the outage is one warning, not one per request.
    Redis back on the same port (its buckets empty): a burst is held to the limit again."""
    env = server_env({"ORGATE_API_KEY": ""})
    with Redis() as redis:
        config = (
            '[server]\nlog_format = "json"\n'
            + RATE_KEYS
            + f'[ratelimit]\nredis_url = "{redis.url}"\n'
        )
        with (
            OrgateServer(config, api_key="", env=env) as one,
            OrgateServer(config, api_key="", env=env) as two,
        ):
            urls = [one.url, two.url]
            started = time.monotonic()
            statuses = Counter(r.status_code for r in asyncio.run(_burst(urls, "sk-shared", 50)))
            admitted_of(statuses, 10, time.monotonic() - started)
            redis.stop()
            started = time.monotonic()
            assert Counter(
                r.status_code for r in asyncio.run(_burst([one.url], "sk-shared", 20))
            ) == {200: 20}
            # No request waits on the dead Redis. Generous on purpose: the burst takes well under
            # a second on an idle machine, so a loaded one many times slower passes, while a
            # request held by Redis's timeouts (or for ever: the test's timeout) does not.
            assert time.monotonic() - started < 60
            warnings = [
                e
                for e in json_lines(one.output())
                if e["logger"] == "orgate.ratelimit" and "Redis unavailable" in e["msg"]
            ]
            assert len(warnings) == 1, [e["msg"] for e in warnings]
            redis.start()  # on the same port, empty
            started = time.monotonic()
            statuses = Counter(r.status_code for r in asyncio.run(_burst(urls, "sk-shared", 30)))
            admitted_of(statuses, 10, time.monotonic() - started)
            assert any("Redis reachable again" in e["msg"] for e in json_lines(one.output()))


# --- graceful shutdown ----------------------------------------------------------------------------


async def _signal_in_flight(
    server: OrgateServer, signals: list[signal.Signals], streams: int, plain: int, words: str
) -> tuple[list[Any], list[Any], str | None]:
    """``streams`` streams and ``plain`` non-streamed calls to orgate/echo; once every stream has
    its first bytes and the server counts every call in flight, ``signals`` are sent 0.2 s apart,
    then new connections are tried until one is refused. Returns the stream bodies (or errors),
    the answers, and how the connection was refused: ``"refused"`` while the process still ran,
    ``"exited"`` once it had gone (``None``: never)."""
    assert server.proc is not None
    proc = server.proc
    first = asyncio.Event()
    begun = 0

    async def stream(client: httpx.AsyncClient) -> Any:
        nonlocal begun
        body = b""
        try:
            async with client.stream(
                "POST",
                f"{server.url}/v1/responses",
                json={"model": "orgate/echo", "input": words, "stream": True},
                headers=server.headers(),
            ) as res:
                async for chunk in res.aiter_bytes():
                    if not body:
                        begun += 1
                        if begun == streams:
                            first.set()
                    body += chunk
            return body.decode()
        except httpx.HTTPError as exc:
            return exc

    async def one(client: httpx.AsyncClient) -> Any:
        try:
            return await client.post(
                f"{server.url}/v1/responses",
                json={"model": "orgate/echo", "input": words},
                headers=server.headers(),
            )
        except httpx.HTTPError as exc:
            return exc

    async with httpx.AsyncClient(
        timeout=30, limits=httpx.Limits(max_connections=streams + plain + 1)
    ) as client:
        tasks = [asyncio.create_task(stream(client)) for _ in range(streams)] + [
            asyncio.create_task(one(client)) for _ in range(plain)
        ]
        await asyncio.wait_for(first.wait(), PATIENCE)
        # Every call accepted (running at the server, the scrape counting itself, or done): none
        # can be refused by the signals.
        in_flight = ("orgate_http_requests_in_flight", ())

        def accepted() -> bool:
            running = scrape(server.url)[in_flight] - 1
            return running + sum(task.done() for task in tasks) >= streams + plain

        assert await eventually(accepted)
        for sig in signals:
            proc.send_signal(sig)
            await asyncio.sleep(0.2)  # a second signal a moment into the drain: the scenario

        def refuses() -> str | None:
            try:
                httpx.get(f"{server.url}/healthz", timeout=5)
            except httpx.ConnectError:
                # refused by a process still there (draining), or by none (it has exited)
                return "refused" if proc.poll() is None else "exited"
            except httpx.HTTPError:
                pass
            return None

        refused = await eventually(refuses)
        return (
            list(await asyncio.gather(*tasks[:streams])),
            list(await asyncio.gather(*tasks[streams:])),
            refused,
        )


def test_sigterm_drains_fifty_streams_and_requests(tmp_path: Path) -> None:
    """SIGTERM (twice) with 50 streams and 10 non-streamed requests in flight: new connections are
    refused, every in-flight answer completes, the process exits 0 well within ``drain_timeout``,
    and every stored response is ``completed``."""
    # The drain time is long (10 minutes) and the answers short (3 s): an exit within the
    # patience of the wait below is one that came when they were done, not at the drain's end;
    # 3 s leave a loaded machine time to see a connection refused while they run.
    server = OrgateServer(
        '[server]\nlog_format = "json"\ndrain_timeout = 600\n',
        env=server_env(),
        workdir=str(tmp_path),
    ).start()
    try:
        streams, plain, refused = asyncio.run(
            _signal_in_flight(
                server,
                [signal.SIGTERM, signal.SIGTERM],
                50,
                10,
                "a b c d e f g h i j orgate:delay=300",
            )
        )
        assert server.proc is not None and server.proc.wait(PATIENCE) == 0
    finally:
        server.kill()
    assert refused == "refused"  # while the answers still ran
    ids = []
    for body in streams:
        assert isinstance(body, str), body
        events = sse_events(body)
        assert events[-1]["type"] == "response.completed" and body.rstrip().endswith("data: [DONE]")
        ids.append(events[0]["response"]["id"])
    for res in plain:
        assert (
            isinstance(res, httpx.Response)
            and res.status_code == 200
            and res.json()["status"] == "completed"
        )
        ids.append(res.json()["id"])
    with sqlite3.connect(tmp_path / "orgate.db") as db:
        rows = dict(db.execute("SELECT id, status FROM responses").fetchall())
    assert {rows[i] for i in ids} == {"completed"}


def test_forced_exit_leaves_no_response_in_progress_after_restart(tmp_path: Path) -> None:
    """SIGTERM then SIGINT (uvicorn's force quit): the process exits 0 at once; streams are cut or
    end ``response.failed``. What the cut left ``in_progress`` is marked ``failed`` when orgate
    starts again on the same store (operations.md: crash recovery), never served as running."""
    server = OrgateServer(
        '[server]\nlog_format = "json"\ndrain_timeout = 10\n',
        env=server_env(),
        workdir=str(tmp_path),
    ).start()
    try:
        streams, _, refused = asyncio.run(
            _signal_in_flight(
                server,
                [signal.SIGTERM, signal.SIGINT],
                20,
                0,
                "a b c d e f g h i j orgate:delay=300",
            )
        )
        assert server.proc is not None and server.proc.wait(PATIENCE) == 0
        assert refused in ("refused", "exited")  # SIGINT ends it at once: either comes first
    finally:
        server.kill()
    for body in streams:
        if isinstance(body, str):
            assert sse_events(body)[-1]["type"] == "response.failed"
    again = OrgateServer("", env=server_env(), workdir=str(tmp_path)).start()
    again.stop()
    with sqlite3.connect(tmp_path / "orgate.db") as db:
        statuses = Counter(status for (status,) in db.execute("SELECT status FROM responses"))
    assert statuses and set(statuses) == {"failed"}, statuses


# --- overload -------------------------------------------------------------------------------------


def test_beyond_max_concurrency_is_a_clean_429_and_healthz_stays_fast() -> None:
    """A model with ``max_concurrency = 2`` and a slow upstream, flooded with 100 streams: 2 are
    served, 98 get a 429 ``too_many_concurrent_requests`` in the spec's shape with ``Retry-After``
    after ``queue_timeout``; ``/healthz`` answers fast throughout; nothing hangs."""
    with FakeOpenAIChat.start_in_thread() as fake:
        # ~8 s: the two slots stay taken until the last of the 100 calls has had its 429, also
        # on a loaded machine slow to send them
        fake.handler = lambda body: text(" ".join(["w"] * 20), delay=0.4)
        config = '[server]\nlog_format = "json"\n' + model_block(
            "slow",
            "openai-chat",
            fake.base_url,
            "m",
            read_timeout=30,
            extra="max_concurrency = 2\n[models.routing]\nqueue_timeout = 0.3",
        )
        with OrgateServer(config, env=server_env()) as server:

            async def flood() -> tuple[list[float], list[httpx.Response]]:
                async with httpx.AsyncClient(  # a hang fails by this timeout
                    timeout=PATIENCE, limits=httpx.Limits(max_connections=200)
                ) as client:
                    calls = [
                        asyncio.create_task(
                            client.post(
                                f"{server.url}/v1/responses",
                                json={"model": "slow", "input": "x", "stream": True},
                                headers=server.headers(),
                            )
                        )
                        for _ in range(100)
                    ]
                    latencies = []
                    for _ in range(10):
                        started = time.monotonic()
                        assert (await client.get(f"{server.url}/healthz")).status_code == 200
                        latencies.append(time.monotonic() - started)
                        await asyncio.sleep(0.05)
                    return latencies, list(await asyncio.gather(*calls))

            latencies, responses = asyncio.run(flood())
    # Not queued behind the model's two slots: a stream holds one for ~8 s, so a /healthz that
    # waited for a slot would take that long; half of it is far above what a loaded machine adds
    # to a few milliseconds. The median is the claim: no bound on the slowest single call.
    assert sorted(latencies)[len(latencies) // 2] < 4.0, latencies
    assert Counter(res.status_code for res in responses) == {200: 2, 429: 98}
    for res in responses:
        if res.status_code == 429:
            assert_error(res, 429, "too_many_concurrent_requests")
            assert res.headers["Retry-After"] == "1"


def test_metrics_endpoint_is_unauthenticated_as_documented(hardened: OrgateServer) -> None:
    """operations.md and deployment.md: ``/metrics`` has no auth (keep it internal);
    it holds no key."""
    res = httpx.get(f"{hardened.url}/metrics", timeout=10)
    assert res.status_code == 200 and "orgate_http_requests_total" in res.text
    assert hardened.api_key not in res.text and UPSTREAM_KEY not in res.text
    digest = hashlib.sha256(hardened.api_key.encode()).hexdigest()
    assert digest not in res.text
