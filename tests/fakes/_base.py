"""What the loopback fakes of upstreams share: recording, scripting queue, lifecycle,
writing helpers.

``LoopbackFake`` serves an aiohttp app on 127.0.0.1 (random port), as an
``async with`` context manager or in a background thread
(``start_in_thread()`` / ``stop_thread()``). Subclasses give the routes
(``_app``), the default answer (``_default``) and ``default_model``. Every
request is recorded as a ``RecordedRequest``; ``Raw`` replies send exact bytes.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Self

import orjson
from aiohttp import web

from tests.support.waiting import PATIENCE, eventually


@dataclass
class Raw:
    """Exact bytes to send, in these network chunks, with an optional pause between them."""

    chunks: list[bytes]
    status: int = 200
    content_type: str = "text/event-stream"
    delay: float = 0.0


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    peer: Any = None  # the client's (host, port): same port = same kept-alive connection
    disconnected: bool = False  # the client went away before the reply was complete
    completed: bool = False  # the whole reply was written
    # every event of a streamed reply was written, ``[DONE]`` aside (a client that has the answer
    # may close before it, or before the end of the body)
    answered: bool = False


def words(content: str) -> list[str]:
    return re.findall(r"\s*\S+", content) or ([content] if content else [])


def token_logprobs(pieces: list[str], top: int) -> list[dict[str, Any]]:
    """What OpenAI gives for the tokens ``pieces`` (``logprobs``; ``top`` alternatives each):
    made-up but deterministic values, the chosen token the likeliest of its alternatives."""
    out = []
    for i, piece in enumerate(pieces):
        logprob = -round(0.01 * (i + 1), 4)
        alternatives = [{"token": piece, "logprob": logprob, "bytes": list(piece.encode())}]
        alternatives += [
            {"token": f" alt{k}", "logprob": logprob - k, "bytes": list(f" alt{k}".encode())}
            for k in range(1, top)
        ]
        out.append(
            {
                "token": piece,
                "logprob": logprob,
                "bytes": list(piece.encode()),
                "top_logprobs": alternatives[:top],
            }
        )
    return out


def split_evenly(s: str, n: int) -> list[str]:
    if n <= 1 or len(s) <= 1:
        return [s]
    size = max(1, -(-len(s) // n))
    return [s[i : i + size] for i in range(0, len(s), size)]


class ClientGone(Exception):
    """The client closed the connection while the fake was writing or waiting."""


class LoopbackFake:
    """Lifecycle of a fake upstream on 127.0.0.1 (random port): async context manager or thread."""

    thread_name = "fake-upstream"
    default_model = "fake-model"

    def __init__(
        self,
        *replies: Any,
        handler: Callable[[dict[str, Any]], Any] | None = None,
        model: str | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        self.host = host  # the address it listens on (another host's tests reach it there)
        self.replies: deque[Any] = deque(replies)
        self.handler = handler
        self.model = model if model is not None else self.default_model
        self.requests: list[RecordedRequest] = []
        # token-count requests (``serve_count``), apart from the model requests above
        self.counts: list[RecordedRequest] = []
        self.count_status = 200  # what the count endpoint answers (404: as if it had none)
        self.active = 0  # model requests being handled now (an upstream call still running)
        self.port = 0
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- to override -----------------------------------------------------------------

    def _app(self) -> web.Application:
        raise NotImplementedError

    def _default(self, body: dict[str, Any]) -> Any:
        raise NotImplementedError

    not_json_error: ClassVar[dict[str, Any]] = {
        "message": "body is not JSON",
        "type": "invalid_request_error",
    }

    def error_response(
        self, status: int, error: dict[str, Any], headers: dict[str, str]
    ) -> web.Response:
        """An HTTP error reply in the upstream's error body shape."""
        raise NotImplementedError

    def refuse(self, request: web.Request, body: dict[str, Any]) -> web.Response | None:
        """An error reply for a request the real upstream would refuse, before any script runs."""
        return None

    async def stream_reply(
        self, request: web.Request, body: dict[str, Any], reply: Any, record: RecordedRequest
    ) -> web.StreamResponse:
        """Send a scripted reply as the upstream's stream."""
        raise NotImplementedError

    def json_reply(self, body: dict[str, Any], reply: Any) -> Any:
        """A scripted reply as the upstream's non-streaming JSON body."""
        raise NotImplementedError

    # -- scripting -------------------------------------------------------------------

    def enqueue(self, *replies: Any) -> None:
        self.replies.extend(replies)

    def reset(self) -> None:
        """Forget the script, the handler and what was received (between tests)."""
        self.replies.clear()
        self.handler = None
        self.requests.clear()
        self.counts.clear()
        self.count_status = 200

    def _next(self, body: dict[str, Any]) -> Any:
        if self.replies:
            return self.replies.popleft()
        if self.handler is not None:
            return self.handler(body)
        return self._default(body)

    @property
    def bodies(self) -> list[Any]:
        """The JSON bodies of the POST requests received, in order."""
        return [r.body for r in self.requests if r.method == "POST"]

    async def wait_disconnected(self, index: int = -1, timeout: float = PATIENCE) -> bool:
        """Wait until request ``index`` is marked disconnected (True) or the timeout passes (a
        generous one: a request never cut ends ``completed`` instead, and the wait fails then)."""
        return await eventually(
            lambda: bool(self.requests) and self.requests[index].disconnected, timeout
        )

    async def _record(self, request: web.Request) -> tuple[RecordedRequest, Any]:
        raw = await request.read()
        try:
            body: Any = orjson.loads(raw)
        except orjson.JSONDecodeError:
            body = raw
        transport = request.transport
        peer = transport.get_extra_info("peername") if transport is not None else None
        record = RecordedRequest(request.method, request.path, dict(request.headers), body, peer)
        self.requests.append(record)
        return record, body

    async def serve(self, request: web.Request) -> web.StreamResponse:
        """The handler of the model endpoint: record, pick the next reply,
        send it with its knobs."""
        self.active += 1
        try:
            return await self._serve(request)
        finally:
            self.active -= 1

    async def _serve(self, request: web.Request) -> web.StreamResponse:
        record, body = await self._record(request)
        if not isinstance(body, dict):
            return self.error_response(400, dict(self.not_json_error), {})
        refused = self.refuse(request, body)
        if refused is not None:
            return refused
        reply = self._next(body)
        try:
            if isinstance(reply, Raw):
                return await self.send_raw(request, reply, record)
            if reply.stall_before_headers:
                await self.sleep_watching(request, record, reply.stall_before_headers)
            if reply.status != 200:
                record.completed = True
                return self.error_response(reply.status, reply.error or {}, reply.headers)
            if body.get("stream"):
                return await self.stream_reply(request, body, reply, record)
            record.completed = True
            return web.Response(
                body=orjson.dumps(self.json_reply(body, reply)),
                content_type="application/json",
                headers=reply.headers,
            )
        except ClientGone:
            return web.Response(status=499)

    async def serve_count(self, request: web.Request) -> web.Response:
        """A token-count endpoint (OpenAI's ``/responses/input_tokens``, Anthropic's
        ``/v1/messages/count_tokens``): ``{"input_tokens": counted_tokens(body)}``, recorded in
        ``counts``; ``count_status`` other than 200 answers that status instead."""
        raw = await request.read()
        body = orjson.loads(raw) if raw else None
        self.counts.append(
            RecordedRequest(request.method, request.path, dict(request.headers), body)
        )
        if self.count_status != 200:
            return self.error_response(self.count_status, {"message": "no such endpoint"}, {})
        return web.json_response({"input_tokens": counted_tokens(body)})

    # -- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        self._runner = web.AppRunner(
            self._app(), handle_signals=False, access_log=None, shutdown_timeout=0.1
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, 0)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @classmethod
    def start_in_thread(
        cls,
        *replies: Any,
        handler: Callable[[dict[str, Any]], Any] | None = None,
        model: str | None = None,
        host: str = "127.0.0.1",
    ) -> Self:
        """Run a fake in a background thread with its own loop; stop it with ``stop_thread()``."""
        fake = cls(*replies, handler=handler, model=model, host=host)
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            fake._loop = loop
            try:
                loop.run_until_complete(fake.start())
            except BaseException as exc:  # noqa: BLE001 - reported to the starting thread
                failure.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(fake.stop())
            loop.close()

        fake._thread = threading.Thread(target=run, name=cls.thread_name, daemon=True)
        fake._thread.start()
        ready.wait(10)
        if failure:
            raise failure[0]
        return fake

    def stop_thread(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._thread = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_thread()

    # -- writing helpers -------------------------------------------------------------

    @staticmethod
    async def sleep_watching(request: web.Request, record: RecordedRequest, seconds: float) -> None:
        """Sleep, but notice (and record) a client that goes away meanwhile."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            transport = request.transport
            if transport is None or transport.is_closing():
                record.disconnected = True
                raise ClientGone
            await asyncio.sleep(0.01)

    @staticmethod
    async def send_head(
        response: web.StreamResponse, request: web.Request, record: RecordedRequest
    ) -> bool:
        """Send the reply's head; False, the client recorded gone, when it closed the connection
        first (orgate cancelled the call before the fake got to answer, as on a loaded machine)."""
        try:
            await response.prepare(request)
        except (ConnectionError, RuntimeError):
            record.disconnected = True
            return False
        return True

    @staticmethod
    async def write(response: web.StreamResponse, record: RecordedRequest, data: bytes) -> None:
        try:
            await response.write(data)
        except (ConnectionError, RuntimeError) as exc:
            record.disconnected = True
            raise ClientGone from exc

    async def send_raw(
        self, request: web.Request, reply: Raw, record: RecordedRequest
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            status=reply.status, headers={"Content-Type": reply.content_type}
        )
        if not await self.send_head(response, request, record):
            return response
        try:
            for i, chunk in enumerate(reply.chunks):
                if i and reply.delay:
                    await self.sleep_watching(request, record, reply.delay)
                await self.write(response, record, chunk)
            await response.write_eof()
        except ClientGone:
            return response
        record.completed = True
        return response

    async def send_script(
        self, request: web.Request, record: RecordedRequest, frames: list[bytes], reply: Any
    ) -> web.StreamResponse:
        """``send_events`` with the failure knobs of a fake's ``Script`` (``delay``,
        ``cut_after``, ...)."""
        return await self.send_events(
            request,
            record,
            frames,
            delay=reply.delay,
            cut_after=reply.cut_after,
            stall_after=reply.stall_after,
            stall_seconds=reply.stall_seconds,
            headers=reply.headers,
        )

    async def send_events(
        self,
        request: web.Request,
        record: RecordedRequest,
        frames: list[bytes],
        *,
        delay: float = 0.0,
        cut_after: int | None = None,
        stall_after: int | None = None,
        stall_seconds: float = 30.0,
        headers: dict[str, str] | None = None,
    ) -> web.StreamResponse:
        """Stream SSE ``frames`` with the failure knobs (counted in frames already sent)."""
        response = web.StreamResponse(
            status=200,
            headers={
                "Content-Type": "text/event-stream; charset=utf-8",
                "Cache-Control": "no-cache",
                **(headers or {}),
            },
        )
        if not await self.send_head(response, request, record):
            return response
        last = len(frames) - (2 if frames and frames[-1] == b"data: [DONE]\n\n" else 1)
        try:
            for n, frame in enumerate(frames):
                if n and delay:
                    await self.sleep_watching(request, record, delay)
                if cut_after is not None and n >= cut_after:
                    if request.transport is not None:
                        request.transport.abort()
                    return response
                if stall_after is not None and n == stall_after:
                    await self.sleep_watching(request, record, stall_seconds)
                await self.write(response, record, frame)
                record.answered = record.answered or n >= last
            transport = request.transport
            if transport is None or transport.is_closing():
                record.disconnected = True
                return response
            await response.write_eof()
        except ClientGone:
            return response
        record.completed = True
        return response


def counted_tokens(body: Any) -> int:
    """What the fakes' count endpoints answer: one token per 7 bytes of the body's JSON, plus 3
    (deterministic, and unlike the built-in model's and orgate's own counts)."""
    return len(orjson.dumps(body)) // 7 + 3


def sse_frame(event: dict[str, Any], *, named: bool = True) -> bytes:
    """One SSE frame; ``named`` adds the ``event:`` line (Anthropic and OpenAI both send it)."""
    head = b"event: " + str(event["type"]).encode() + b"\n" if named else b""
    return head + b"data: " + orjson.dumps(event) + b"\n\n"


__all__ = [
    "ClientGone",
    "counted_tokens",
    "LoopbackFake",
    "Raw",
    "RecordedRequest",
    "split_evenly",
    "sse_frame",
    "words",
]
