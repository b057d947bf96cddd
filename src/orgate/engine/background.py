"""Background responses: the work runs on after the request returns, survives the client leaving,
and (leased in the store) survives the process running it.

``BackgroundRunner.start(stream, encode)`` drains a ``ResponseStream`` in its
own task (the stream persists the final response itself). A streaming client
``subscribe``s to the frames; when it disconnects only its subscription ends.
``cancel(id)`` stops the upstream call and the response is stored as
``cancelled``; a cancel requested through another process is seen by polling
the store's flag. On shutdown, ``drain(seconds)`` lets the running jobs finish
for the rest of the drain time, then ``aclose()`` stops the others: each ends
with ``error`` + ``response.failed`` (code ``server_shutdown``), stored so.

A leased response (``stream.lease``: docs/store.md#background-responses) keeps its lease
while it runs (renewed every third of its length), and says in the store, before it
happens, that its output is about to reach a client (``delivered``) or that a tool with
side effects is about to run (``effects``): a process that takes the lease over after this
one died runs the response again only when neither happened (``takeover_error``). Its
events so far are written to the store twice a second for followers on other nodes. If the
lease is lost (this process was silent past it and another took it over), the job stops here
and saves nothing. Responses that are not leased (made by an older orgate, or without a
store) are marked failed by the store's ``recover_interrupted`` once their process is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from orgate.engine.service import ResponseStream, shutdown_error, store_failure
from orgate.neutral import McpCallStart, ModelEvent, aclose_quietly
from orgate.protocol.error_codes import ErrorCode
from orgate.store.base import BackgroundJob, ResponseStore, StoredResponse, StoreError

log = logging.getLogger("orgate.background")

_END = object()
#: Attempts after which a response interrupted each time is failed rather than run again (a
#: request that brings its node down must not bring them all down, one after the other).
MAX_ATTEMPTS = 3


def takeover_error(job: BackgroundJob) -> dict[str, str] | None:
    """Why a background response taken over from a dead process must not run again (the
    ``error`` it is stored ``failed`` with), or None: it runs again."""
    reason = None
    if job.effects:
        reason = "a tool with side effects (an MCP call) had started"
    elif job.delivered:
        reason = "some of its output had reached a client"
    elif job.session_lost:
        reason = "its session went on without it"
    elif job.attempts > MAX_ATTEMPTS:
        reason = f"it was interrupted {job.attempts - 1} times"
    if reason is None:
        return None
    return {
        "code": ErrorCode.SERVER_ERROR.value,
        "message": f"the orgate process running this background response stopped after {reason}; "
        "it was not run again",
    }


class _Job:
    def __init__(self, stream: ResponseStream) -> None:
        self.stream = stream
        self.frames: list[bytes] = []
        self.subscribers: set[asyncio.Queue[Any]] = set()
        self.task: asyncio.Task[None] | None = None
        self.done = False
        self.written = 0  # frames kept in the store for followers elsewhere
        # the mark before output first reaches anyone (one for every subscriber)
        self.delivered: asyncio.Future[bool] | None = None


async def _fenced_calls(
    upstream: AsyncIterator[list[ModelEvent]], mark: Callable[[], Awaitable[None]]
) -> AsyncIterator[list[ModelEvent]]:
    """The upstream batches; after a batch that starts an MCP call, ``mark`` before the next is
    asked for (the call runs when the MCP loop is resumed)."""
    try:
        async for batch in upstream:
            yield batch
            if any(type(event) is McpCallStart for event in batch):
                await mark()
    finally:
        await aclose_quietly(upstream)


class BackgroundRunner:
    """Runs background responses of this process."""

    def __init__(self, cancel_poll_seconds: float = 0.5) -> None:
        self.jobs: dict[str, _Job] = {}
        self.cancel_poll_seconds = cancel_poll_seconds
        self._renewal: asyncio.Task[None] | None = None

    def start(self, stream: ResponseStream, encode: Callable[[dict[str, Any]], bytes]) -> None:
        job = _Job(stream)
        self.jobs[stream.response_id] = job
        if stream.lease is not None:
            if stream.turn.mcp is not None:
                stream.guard_upstream(lambda upstream: _fenced_calls(upstream, self._effects(job)))
            if self._renewal is None or self._renewal.done():
                self._renewal = asyncio.create_task(self._renew(), name="background leases")
        job.task = asyncio.create_task(
            self._run(job, encode), name=f"background {stream.response_id}"
        )

    async def _run(self, job: _Job, encode: Callable[[dict[str, Any]], bytes]) -> None:
        watcher = asyncio.create_task(self._watch(job))
        try:
            async for frame in job.stream.frames(encode):
                job.frames.append(frame)
                for queue in list(job.subscribers):
                    queue.put_nowait(frame)
        except asyncio.CancelledError:
            pass
        except Exception:  # noqa: BLE001 - a background failure must not kill the server
            log.exception("background response %s failed", job.stream.response_id)
        finally:
            watcher.cancel()
            job.done = True
            for queue in list(job.subscribers):
                queue.put_nowait(_END)
            self.jobs.pop(job.stream.response_id, None)

    async def _watch(self, job: _Job) -> None:
        """Poll the store's cancel flag; keep a leased response's events there for followers."""
        stream = job.stream
        store = stream.service.store
        if store is None:
            return
        while True:
            await asyncio.sleep(self.cancel_poll_seconds)
            try:
                if stream.lease is not None and len(job.frames) > job.written:
                    count = len(job.frames)
                    kept = await store.write_background_events(
                        stream.response_id, stream.lease.token, b"".join(job.frames[:count])
                    )
                    if not kept and not stream.builder.finished:
                        self._lost(job)
                        return
                    job.written = count
                if await store.cancel_requested(stream.response_id, stream.caller.tenant):
                    self.cancel(stream.response_id)
                    return
            except StoreError:
                log.debug("background poll failed", exc_info=True)

    async def _renew(self) -> None:
        """While leased jobs run: their leases renewed every third of their length; a job whose
        lease another process took (this one was silent past it) stops, saving nothing."""
        while leased := [job for job in self.jobs.values() if job.stream.lease is not None]:
            stream = leased[0].stream
            seconds = stream.service.background_lease_seconds
            await asyncio.sleep(seconds / 3)
            store = stream.service.store
            if store is None:
                return
            try:
                held = await store.renew_background(lease_seconds=seconds)
            except StoreError as exc:
                log.warning("could not renew the leases of background responses: %s", exc)
                continue
            for job in list(self.jobs.values()):
                lost = job.stream.lease is not None and job.stream.response_id not in held
                if lost and not job.done and not job.stream.builder.finished:
                    self._lost(job)

    def _lost(self, job: _Job) -> None:
        stream = job.stream
        assert stream.lease is not None
        if stream.lease.lost:
            return
        log.warning(
            "background response %s: another process took its lease over; stopping it here",
            stream.response_id,
        )
        stream.lease.lost = True
        if job.task is not None and not job.done:
            job.task.cancel()

    def _effects(self, job: _Job) -> Callable[[], Awaitable[None]]:
        async def mark() -> None:
            stream = job.stream
            store, lease = stream.service.store, stream.lease
            assert store is not None and lease is not None
            try:
                held = await store.mark_background(stream.response_id, "effects", token=lease.token)
            except StoreError as exc:
                # Not recorded: the call does not run (a takeover could run it a second time).
                raise store_failure(exc) from None
            if not held:
                self._lost(job)
                raise asyncio.CancelledError("the lease was taken over")

        return mark

    async def _mark_delivered(self, job: _Job) -> bool:
        """Before output first reaches a client: recorded in the store (once per job, whoever
        asks first). False when this process lost the lease (the subscriber is not served)."""
        if job.delivered is None:
            job.delivered = asyncio.ensure_future(self._record_delivery(job))
        return await asyncio.shield(job.delivered)

    async def _record_delivery(self, job: _Job) -> bool:
        stream = job.stream
        store, lease = stream.service.store, stream.lease
        if store is None or lease is None:
            return True
        try:
            held = await store.mark_background(stream.response_id, "delivered", token=lease.token)
        except StoreError as exc:
            # Served all the same: a client waiting on a stream matters more than the rare
            # takeover that would then run a response whose start someone saw.
            log.warning("could not record that %s was delivered: %s", stream.response_id, exc)
            return True
        if held or stream.builder.finished:  # finished: saved, and the job row ended with it
            return True
        self._lost(job)
        return False

    def cancel(self, response_id: str) -> bool:
        job = self.jobs.get(response_id)
        if job is None or job.task is None or job.done:
            return False
        job.stream.cancel_requested = True
        job.task.cancel()
        return True

    async def subscribe(self, response_id: str) -> AsyncIterator[bytes]:
        """The frames of a running job from its start, then live; ends with the job."""
        job = self.jobs.get(response_id)
        if job is None:
            return
        queue: asyncio.Queue[Any] = asyncio.Queue()
        for frame in job.frames:
            queue.put_nowait(frame)
        if job.done:
            queue.put_nowait(_END)
        job.subscribers.add(queue)
        sent = 0
        try:
            while True:
                frame = await queue.get()
                if frame is _END:
                    return
                if sent == 1 and not await self._mark_delivered(job):
                    return  # the first frame after the lifecycle events is output
                sent += 1
                yield frame
        finally:
            job.subscribers.discard(queue)

    async def wait_stored(
        self, store: ResponseStore, response_id: str, tenant: str, timeout: float = 5.0
    ) -> StoredResponse | None:
        """Wait (briefly) until the stored response leaves queued/in_progress."""
        job = self.jobs.get(response_id)
        if job is not None and job.task is not None:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(job.task), timeout)
        return await store.get(response_id, tenant)

    async def drain(self, seconds: float) -> None:
        """Wait up to ``seconds`` for the running jobs to finish (a shutdown's drain time)."""
        tasks = [job.task for job in self.jobs.values() if job.task is not None]
        if tasks and seconds > 0:
            log.info("waiting up to %.3g s for %d background response(s)", seconds, len(tasks))
            await asyncio.wait(tasks, timeout=seconds)

    async def aclose(self) -> None:
        """Stop every running job and wait for it: stored ``failed`` with code ``server_shutdown``,
        its subscribers told. Idempotent: a job is cancelled once, so that it can end cleanly."""
        tasks: list[asyncio.Task[None]] = []
        for job in list(self.jobs.values()):
            if job.task is None or job.done:
                continue
            if (
                job.stream.interrupted is None and not job.stream.cancel_requested
            ):  # cancelled once only
                log.warning(
                    "background response %s interrupted by the shutdown", job.stream.response_id
                )
                job.stream.interrupted = shutdown_error()
                job.task.cancel()
            tasks.append(job.task)
        renewal, self._renewal = self._renewal, None
        if renewal is not None:
            renewal.cancel()
        if tasks:
            await asyncio.wait(
                tasks
            )  # not ``await task``: a cancelled caller would cancel them again
