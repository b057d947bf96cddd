"""Keys (plain, SHA-256, named with allowed models), per-key rate limits
(local and shared via Redis),
and secrets that never reach logs, error bodies or metrics."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.fakes.openai_chat_upstream import FakeOpenAIChat, http_error, text
from tests.hardening.conftest import UPSTREAM_KEY, assert_error, hardened_config, server_env
from tests.server_process import OrgateServer
from tests.support.ports import closed_port, listening_socket, port_of
from tests.support.redis import Redis

ALPHA = "sk-alpha-0123456789"
BETA = "sk-beta-9876543210"
HASHED = "sk-hashed-only-secret"


def _keys_config(upstream_url: str, extra_keys: str = "", extra: str = "") -> str:
    digest = hashlib.sha256(HASHED.encode()).hexdigest()
    keys = (
        "[auth]\napi_keys = [\n"
        f'  {{ name = "alpha", key = "{ALPHA}" }},\n'
        f'  {{ name = "beta", key = "{BETA}", models = ["orgate/echo"] }},\n'
        f'  {{ name = "hashed", sha256 = "{digest}", models = ["fake-chat"] }},\n'
        f"{extra_keys}]\n"
    )
    return keys + extra + hardened_config(upstream_url)


@pytest.fixture(scope="module")
def keyed(upstream: FakeOpenAIChat) -> Iterator[OrgateServer]:
    with OrgateServer(
        _keys_config(upstream.base_url), api_key="", env=server_env({"ORGATE_API_KEY": ""})
    ) as server:
        yield server


def _get(server: OrgateServer, path: str, key: str | None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
    return httpx.get(f"{server.url}{path}", headers=headers, timeout=10)


def _post(server: OrgateServer, key: str, body: dict, **kw: object) -> httpx.Response:
    return httpx.post(
        f"{server.url}/v1/responses",
        json=body,
        headers={"Authorization": f"Bearer {key}"},
        timeout=20,
        **kw,
    )


def test_sha256_configured_key(keyed: OrgateServer) -> None:
    res = _get(keyed, "/v1/models", HASHED)
    assert res.status_code == 200
    assert [m["id"] for m in res.json()["data"]] == ["fake-chat"]
    # the digest itself is not a key
    assert_error(
        _get(keyed, "/v1/models", hashlib.sha256(HASHED.encode()).hexdigest()),
        401,
        "invalid_api_key",
    )


@pytest.mark.parametrize(
    "header",
    [
        None,
        "Bearer",
        "Token " + ALPHA,
        "Basic " + ALPHA,
        "Bearer " + ALPHA[:-1],
        "Bearer " + ALPHA + "x",
        "Bearer " + ALPHA.upper(),
    ],
)
def test_bad_credentials(keyed: OrgateServer, header: str | None) -> None:
    headers = {"Authorization": header} if header is not None else {}
    res = httpx.get(f"{keyed.url}/v1/models", headers=headers, timeout=10)
    error = assert_error(res, 401)
    assert error["type"] == "authentication_error"
    assert ALPHA not in res.text


def test_per_key_models(keyed: OrgateServer, fake: FakeOpenAIChat) -> None:
    alpha = {m["id"] for m in _get(keyed, "/v1/models", ALPHA).json()["data"]}
    assert {"orgate/echo", "fake-chat"} <= alpha
    assert [m["id"] for m in _get(keyed, "/v1/models", BETA).json()["data"]] == ["orgate/echo"]
    assert _post(keyed, BETA, {"model": "orgate/echo", "input": "hi"}).status_code == 200
    error = assert_error(
        _post(keyed, BETA, {"model": "fake-chat", "input": "hi"}), 404, "model_not_found"
    )
    assert error["param"] == "model"
    assert_error(
        _post(keyed, HASHED, {"model": "orgate/echo", "input": "hi"}), 404, "model_not_found"
    )
    assert _post(keyed, HASHED, {"model": "fake-chat", "input": "hi"}).status_code == 200


def test_stored_responses_are_per_key(keyed: OrgateServer) -> None:
    created = _post(keyed, ALPHA, {"model": "orgate/echo", "input": "mine"}).json()
    assert _get(keyed, f"/v1/responses/{created['id']}", ALPHA).status_code == 200
    assert_error(_get(keyed, f"/v1/responses/{created['id']}", BETA), 404)


def test_secrets_never_in_logs_errors_or_metrics(keyed: OrgateServer, fake: FakeOpenAIChat) -> None:
    bodies = []
    fake.enqueue(
        http_error(500, "boom"), http_error(401, "bad upstream key"), http_error(429, "slow down")
    )
    for _ in range(3):
        bodies.append(_post(keyed, ALPHA, {"model": "fake-chat", "input": "hi"}).text)
    bodies.append(_post(keyed, ALPHA, {"model": "fake-chat", "input": "hi", "stream": True}).text)
    bodies.append(_get(keyed, "/v1/models", ALPHA + "-wrong").text)
    bodies.append(
        httpx.post(
            f"{keyed.url}/v1/responses",
            content=b"{bad",
            headers={"Authorization": f"Bearer {ALPHA}", "Content-Type": "application/json"},
        ).text
    )
    metrics = _get(keyed, "/metrics", None).text
    # the upstream got the upstream key, as a bearer token
    assert fake.requests[-1].headers.get("Authorization") == f"Bearer {UPSTREAM_KEY}"
    for secret in (UPSTREAM_KEY, ALPHA, BETA, HASHED):
        for body in bodies:
            assert secret not in body
        assert secret not in metrics
        assert secret not in keyed.output(), f"{secret} leaked into the server log"


# --- rate limits ----------------------------------------------------------------------------------


def _limited_config(upstream_url: str, extra: str = "") -> str:
    limited = (
        '  { name = "limited", key = "sk-limited", rpm = 3 },\n  { name = "tokens", key = '
        '"sk-tokens", tpm = 30 },\n'
    )
    return _keys_config(upstream_url, limited, extra)


def test_requests_per_minute(upstream: FakeOpenAIChat) -> None:
    with OrgateServer(
        _limited_config(upstream.base_url), api_key="", env=server_env({"ORGATE_API_KEY": ""})
    ) as server:
        statuses = [
            _post(server, "sk-limited", {"model": "orgate/echo", "input": "hi"}).status_code
            for _ in range(3)
        ]
        assert statuses == [200, 200, 200]
        res = _post(server, "sk-limited", {"model": "orgate/echo", "input": "hi"})
        error = assert_error(res, 429, "rate_limit_exceeded")
        assert error["type"] == "rate_limit_error" and "3 requests per minute" in error["message"]
        assert 1 <= int(res.headers["Retry-After"]) <= 20
        # other keys and other routes are unaffected
        assert _post(server, ALPHA, {"model": "orgate/echo", "input": "hi"}).status_code == 200
        assert _get(server, "/v1/models", "sk-limited").status_code == 200
        # an unauthenticated request is a 401, not a 429
        assert _post(server, "sk-nope", {"model": "orgate/echo", "input": "hi"}).status_code == 401
        # the bucket refills at rpm/60 per second
        time.sleep(int(res.headers["Retry-After"]) + 0.2)
        assert (
            _post(server, "sk-limited", {"model": "orgate/echo", "input": "hi"}).status_code == 200
        )
        assert 'orgate_rate_limited_total{key="limited"}' in _get(server, "/metrics", None).text


def test_tokens_per_minute(upstream: FakeOpenAIChat) -> None:
    with OrgateServer(
        _limited_config(upstream.base_url), api_key="", env=server_env({"ORGATE_API_KEY": ""})
    ) as server:
        words = " ".join(["word"] * 40)
        assert (
            _post(server, "sk-tokens", {"model": "orgate/echo", "input": words}).status_code == 200
        )  # ~80 tokens: in debt now
        res = _post(server, "sk-tokens", {"model": "orgate/echo", "input": "hi"})
        error = assert_error(res, 429, "rate_limit_exceeded")
        assert "30 tokens per minute" in error["message"]
        assert int(res.headers["Retry-After"]) >= 60  # the debt takes longer than a minute to repay
        stream = _post(server, "sk-tokens", {"model": "orgate/echo", "input": "hi", "stream": True})
        assert_error(stream, 429, "rate_limit_exceeded")  # refused before the stream starts


@pytest.fixture
def redis_url() -> Iterator[str]:
    with Redis() as redis:
        yield redis.url


def test_limits_shared_between_processes_through_redis(
    upstream: FakeOpenAIChat, redis_url: str
) -> None:
    config = _limited_config(upstream.base_url, f'[ratelimit]\nredis_url = "{redis_url}"\n')
    env = server_env({"ORGATE_API_KEY": ""})
    with (
        OrgateServer(config, api_key="", env=env) as one,
        OrgateServer(config, api_key="", env=env) as two,
    ):
        statuses = [
            _post(server, "sk-limited", {"model": "orgate/echo", "input": "hi"}).status_code
            for server in (one, two, one, two, one)
        ]
        assert statuses[:3] == [200, 200, 200] and statuses[3:] == [429, 429], statuses
        res = _post(two, "sk-limited", {"model": "orgate/echo", "input": "hi"})
        assert_error(res, 429, "rate_limit_exceeded")
        assert int(res.headers["Retry-After"]) >= 1
        # tokens charged by one process block the key on the other
        assert (
            _post(
                one, "sk-tokens", {"model": "orgate/echo", "input": " ".join(["w"] * 40)}
            ).status_code
            == 200
        )
        assert_error(
            _post(two, "sk-tokens", {"model": "orgate/echo", "input": "hi"}),
            429,
            "rate_limit_exceeded",
        )


def test_redis_down_fails_open(upstream: FakeOpenAIChat) -> None:
    with closed_port() as port:
        config = _limited_config(
            upstream.base_url, f'[ratelimit]\nredis_url = "redis://127.0.0.1:{port}/0"\n'
        )
        with OrgateServer(config, api_key="", env=server_env({"ORGATE_API_KEY": ""})) as server:
            reply = _post(server, "sk-limited", {"model": "orgate/echo", "input": "hi"})
            assert reply.status_code == 200
            assert "Redis unavailable" in server.output()


def test_no_code_path_fetches_image_urls(keyed: OrgateServer, fake: FakeOpenAIChat) -> None:
    """Image URLs go to the provider as they are: orgate never fetches them
    (a URL to a closed port stays unfetched)."""
    listener = listening_socket()
    url = f"http://127.0.0.1:{port_of(listener)}/cat.png"
    fake.enqueue(text("a cat"))
    res = _post(
        keyed,
        ALPHA,
        {
            "model": "fake-chat",
            "input": [
                {
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "what?"},
                        {"type": "input_image", "image_url": url},
                    ],
                }
            ],
        },
    )
    assert res.status_code == 200, res.text
    assert url in str(fake.requests[-1].body)
    res = _post(
        keyed,
        ALPHA,
        {
            "model": "orgate/echo",
            "input": [{"role": "user", "content": [{"type": "input_image", "image_url": url}]}],
        },
    )
    assert res.status_code in (200, 400)
    # Both answers are in: a fetch made while they were served would be queued by now (the
    # kernel completes a connection before it is accepted), so nothing waiting is the proof.
    listener.setblocking(False)
    with pytest.raises(BlockingIOError):
        listener.accept()
    listener.close()
