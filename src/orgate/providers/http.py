"""Shared HTTP client plumbing for the providers: one pool of aiohttp sessions, one error mapping.

``HttpPool`` hands out one ``aiohttp.ClientSession`` per upstream origin and
connection limit (keep-alive pooling, DNS cache, no cookie jar, transparent
decompression). Sessions are created lazily inside the running event loop and
closed together by ``await pool.aclose()``. ``open_reply`` is every provider's
first look at a reply: HTTP errors, redirects, web pages, capped JSON bodies, or
a stream.

``post`` is every provider's request: aiohttp's own redirect following is off
(it would resend the prompt, the API key and the configured headers to wherever
a ``Location`` points). A deployment with ``redirects = "same-origin"`` follows
a 307 / 308 (the redirects that keep the method and body) to the same scheme,
host and port, at most ``MAX_REDIRECTS`` times; every other redirect reaches
``open_reply``, which answers 502 ``upstream_redirect``.

``client_error`` translates aiohttp / asyncio exceptions into ``ApiError`` at
the boundary: refused or reset connections become 502 ``upstream_unavailable``,
timeouts 504 ``upstream_timeout``. Messages name the deployment and the host,
never the API key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urljoin, urlsplit

import aiohttp
import orjson

from orgate.neutral import Deployment
from orgate.protocol.errors import ApiError, ErrorCode, upstream_invalid_response

DEFAULT_TTL_DNS_CACHE = 300
DEFAULT_KEEPALIVE_TIMEOUT = 30.0
# What is read of an upstream body that is not a stream: an error reply only needs its message,
# a non-streamed answer is bounded like one SSE line (see ``providers.sse.MAX_LINE``).
MAX_ERROR_BODY = 64 * 1024
MAX_JSON_BODY = 32 * 1024 * 1024

PoolKey = tuple[str, int]

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
# The redirects that keep the method and the body: the only ones a POST may follow.
METHOD_KEEPING = frozenset({307, 308})
MAX_REDIRECTS = 5


def origin(base_url: str) -> str:
    """``scheme://host:port`` of a base URL (the pool key's first half)."""
    parts = urlsplit(base_url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.scheme}://{parts.hostname}:{port}"


def host_of(base_url: str) -> str:
    """The host (and explicit port) of a base URL, for error messages."""
    parts = urlsplit(base_url)
    return parts.netloc.rpartition("@")[2] or base_url


def timeout_for(deployment: Deployment) -> aiohttp.ClientTimeout:
    """Per-request timeouts from the deployment.

    ``connect_timeout`` bounds opening the socket (not the wait for a free
    pooled connection), ``read_timeout`` is the longest silence between two
    upstream reads, ``total_timeout`` (if set) bounds the whole exchange.
    """
    return aiohttp.ClientTimeout(
        total=deployment.total_timeout,
        sock_connect=deployment.connect_timeout,
        sock_read=deployment.read_timeout,
    )


class HttpPool:
    """Pooled aiohttp sessions, keyed by upstream origin and connection limit.

    Deployments on the same origin with the same ``max_connections`` share one
    session (and so one connection pool with that limit).
    """

    def __init__(
        self,
        *,
        ttl_dns_cache: int = DEFAULT_TTL_DNS_CACHE,
        keepalive_timeout: float = DEFAULT_KEEPALIVE_TIMEOUT,
    ) -> None:
        self._ttl_dns_cache = ttl_dns_cache
        self._keepalive_timeout = keepalive_timeout
        self._sessions: dict[PoolKey, aiohttp.ClientSession] = {}
        self._origins: dict[str, str] = {}  # base_url → origin: parsed once, not per request

    def session(self, deployment: Deployment) -> aiohttp.ClientSession:
        """The session for ``deployment``; must be called inside the running loop."""
        base_url = deployment.base_url
        source = self._origins.get(base_url)
        if source is None:
            source = self._origins[base_url] = origin(base_url)
        key = (source, deployment.max_connections)
        session = self._sessions.get(key)
        if session is None or session.closed:
            connector = aiohttp.TCPConnector(
                limit=deployment.max_connections,
                limit_per_host=0,
                ttl_dns_cache=self._ttl_dns_cache,
                keepalive_timeout=self._keepalive_timeout,
            )
            session = aiohttp.ClientSession(
                connector=connector,
                cookie_jar=aiohttp.DummyCookieJar(),
                auto_decompress=True,
                raise_for_status=False,
                timeout=timeout_for(deployment),
            )
            self._sessions[key] = session
        return session

    async def aclose(self) -> None:
        """Close every session (and its pooled connections)."""
        sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            await session.close()


async def post(
    session: aiohttp.ClientSession,
    deployment: Deployment,
    url: str,
    *,
    data: bytes,
    headers: Mapping[str, str],
    timeout: aiohttp.ClientTimeout,
) -> aiohttp.ClientResponse:
    """POST ``data`` to ``url``; a redirect is followed only as the deployment allows.

    Returns the first reply that is not a redirect to follow (use it as ``async with``):
    a redirect that is not followed is left for ``open_reply`` to report.
    """
    hops = 0
    while True:
        resp = await session.post(
            url, data=data, headers=headers, timeout=timeout, allow_redirects=False
        )
        target = _followed(resp, deployment, url) if hops < MAX_REDIRECTS else None
        if target is None:
            return resp
        resp.release()
        url = target
        hops += 1


def _location(resp: aiohttp.ClientResponse, url: str) -> str | None:
    """The absolute URL a redirect points to (None without a usable ``Location``)."""
    location = resp.headers.get("Location")
    if not location:
        return None
    try:
        return urljoin(url, location)
    except ValueError:
        return None


def _followed(resp: aiohttp.ClientResponse, deployment: Deployment, url: str) -> str | None:
    """Where to POST again after ``resp``, or None when it is the reply to read."""
    if deployment.redirects != "same-origin" or resp.status not in METHOD_KEEPING:
        return None
    target = _location(resp, url)
    if target is None or not target.startswith(("http://", "https://")):
        return None
    return target if origin(target) == origin(url) else None


def redirected(resp: aiohttp.ClientResponse, deployment: Deployment) -> ApiError:
    """502 ``upstream_redirect`` for a redirect that was not followed: where it pointed (its
    origin only: a path or query may hold a token) and why it was not followed."""
    target = _location(resp, str(resp.url))
    where = origin(target) if target and target.startswith(("http://", "https://")) else None
    if where is None:
        why = "without a usable Location"
    elif where != origin(str(resp.url)):
        why = f"to another origin ({where}), which is never followed"
    elif deployment.redirects != "same-origin":
        why = f"to {where}; redirects are not followed (the model's `redirects` setting)"
    elif resp.status not in METHOD_KEEPING:
        why = f"to {where}; only 307 and 308 keep the POST and its body"
    else:
        why = f"to {where} more than {MAX_REDIRECTS} times"
    return _upstream_error(
        deployment,
        ErrorCode.UPSTREAM_REDIRECT,
        f"answered with a redirect (HTTP {resp.status}) {why}",
    )


async def read_capped(resp: aiohttp.ClientResponse, limit: int) -> tuple[bytes, bool]:
    """At most ``limit`` bytes of the body, and whether that was all of it.

    The rest of an oversized body is not read: the response's connection is
    then closed rather than pooled (aiohttp does not reuse an unfinished one).
    """
    length = resp.content_length
    if length is not None and length <= limit:
        return await resp.read(), True  # the usual case: the parser stops at the declared length
    parts: list[bytes] = []
    size = 0
    async for chunk in resp.content.iter_any():
        parts.append(chunk)
        size += len(chunk)
        if size > limit:
            return b"".join(parts)[:limit], False
    return b"".join(parts), True


async def read_error_body(resp: aiohttp.ClientResponse) -> bytes:
    """The start of an HTTP error reply (enough for its message);
    a huge one is not held in memory."""
    return (await read_capped(resp, MAX_ERROR_BODY))[0]


NOT_A_STREAM = frozenset({"text/html", "application/xhtml+xml", "text/xml", "application/xml"})

#: What ``open_reply`` returns for a reply that is an event stream (to be read by the caller).
STREAM: Any = object()


async def open_reply(
    resp: aiohttp.ClientResponse,
    deployment: Deployment,
    http_error: Callable[[int, bytes, Mapping[str, str], str], ApiError],
    bad_json: Callable[[str, str], ApiError],
) -> Any:
    """The first look at an upstream's reply, shared by the providers.

    Raises ``http_error(...)`` for an HTTP error status (its body read to
    ``MAX_ERROR_BODY``), 502 ``upstream_redirect`` for a redirect (``post`` followed
    those it may), 502 ``upstream_invalid_response`` for a web page or a
    JSON body over ``MAX_JSON_BODY``, ``bad_json(...)`` for a JSON body that does
    not parse. Returns the parsed body of a JSON (non-streamed) reply, else ``STREAM``.
    """
    if resp.status >= 400:
        raise http_error(resp.status, await read_error_body(resp), resp.headers, deployment.name)
    if resp.status in REDIRECT_STATUSES:
        raise redirected(resp, deployment)
    content_type = resp.headers.get("Content-Type", "")
    if content_type.startswith("text/event-stream"):
        return STREAM  # what upstreams send
    media = content_type.split(";", 1)[0].strip().lower()
    if media in NOT_A_STREAM:  # a proxy's or a captive portal's page, not an answer
        raise invalid(deployment, f"a {media} page instead of an event stream")
    if "json" not in content_type or "event-stream" in content_type:
        return STREAM
    raw, whole = await read_capped(resp, MAX_JSON_BODY)
    if not whole:
        raise invalid(deployment, f"a body larger than {MAX_JSON_BODY} bytes")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise bad_json(deployment.name, "the body is not JSON") from None


def _who(deployment: Deployment) -> str:
    return f"upstream '{deployment.name}' at {host_of(deployment.base_url)}"


def _upstream_error(
    deployment: Deployment, code: ErrorCode, what: str, *, status: int | None = None
) -> ApiError:
    return ApiError.of(code, f"{_who(deployment)} {what}", status=status)


def invalid(deployment: Deployment, detail: str) -> ApiError:
    return upstream_invalid_response(_who(deployment), detail)


def unavailable(deployment: Deployment, detail: str) -> ApiError:
    # 502, not the catalogue's 503: this deployment could not be reached; a fallback may be.
    return _upstream_error(
        deployment, ErrorCode.UPSTREAM_UNAVAILABLE, f"is unavailable: {detail}", status=502
    )


def timed_out(deployment: Deployment, detail: str) -> ApiError:
    return _upstream_error(deployment, ErrorCode.UPSTREAM_TIMEOUT, f"timed out: {detail}")


def truncated(deployment: Deployment, detail: str) -> ApiError:
    return _upstream_error(
        deployment, ErrorCode.UPSTREAM_STREAM_TRUNCATED, f"ended the stream early: {detail}"
    )


def client_error(exc: BaseException, deployment: Deployment) -> ApiError:
    """Translate an aiohttp / asyncio / OS exception into an ``ApiError``.

    Order matters: aiohttp's timeout errors are also connection errors.
    """
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return timed_out(deployment, f"no connection within {deployment.connect_timeout:g}s")
    if isinstance(exc, aiohttp.SocketTimeoutError):
        return timed_out(deployment, f"no data for {deployment.read_timeout:g}s")
    if isinstance(exc, TimeoutError):
        total = deployment.total_timeout
        return timed_out(
            deployment, f"no complete answer within {total:g}s" if total else "timeout"
        )
    if isinstance(exc, aiohttp.ClientPayloadError):
        return truncated(deployment, "the connection was closed mid-body")
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return unavailable(deployment, "the server closed the connection")
    if isinstance(exc, aiohttp.ClientConnectorError):
        reason = exc.os_error.strerror or type(exc.os_error).__name__
        return unavailable(deployment, f"cannot connect ({reason})")
    if isinstance(exc, (aiohttp.ClientOSError, ConnectionError)):
        return unavailable(deployment, "connection reset")
    if isinstance(exc, aiohttp.InvalidURL):
        return unavailable(deployment, "invalid base_url")
    if isinstance(exc, aiohttp.ClientError):
        return unavailable(deployment, type(exc).__name__)
    return unavailable(deployment, type(exc).__name__)
