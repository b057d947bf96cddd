"""Background responses: the work runs on after the request returns, and survives the client leaving.

``BackgroundRunner.start(stream, encode)`` drains a ``ResponseStream`` in its
own task (the stream persists the final response itself). A streaming client
``subscribe``s to the frames; when it disconnects only its subscription ends.
``cancel(id)`` stops the upstream call and the response is stored as
``cancelled``; a cancel requested through another process is seen by polling
the store's flag. On shutdown, ``drain(seconds)`` lets the running jobs finish
for the rest of the drain time, then ``aclose()`` stops the others: each ends
with ``error`` + ``response.failed`` (code ``server_shutdown``), stored so.
Crashes are handled by the store's ``recover_interrupted`` (at start-up and by
the processes sharing the store: responses of a dead process become ``failed``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from orgate.engine.service import ResponseStream, shutdown_error
from orgate.store.base import ResponseStore, StoredResponse, StoreError

log = logging.getLogger("orgate.background")

_END = object()


class _Job:
    def __init__(self, stream: ResponseStream) -> None:
        self.stream = stream
        self.frames: list[bytes] = []
        self.subscribers: set[asyncio.Queue[Any]] = set()
        self.task: asyncio.Task[None] | None = None
        self.done = False


class BackgroundRunner:
    """Runs background responses of this process."""

    def __init__(self, cancel_poll_seconds: float = 1.0) -> None:
        self.jobs: dict[str, _Job] = {}
        self.cancel_poll_seconds = cancel_poll_seconds

    def start(self, stream: ResponseStream, encode: Callable[[dict[str, Any]], bytes]) -> None:
        job = _Job(stream)
        self.jobs[stream.response_id] = job
        job.task = asyncio.create_task(
            self._run(job, encode), name=f"background {stream.response_id}"
        )

    async def _run(self, job: _Job, encode: Callable[[dict[str, Any]], bytes]) -> None:
        watcher = asyncio.create_task(self._watch_cancel(job))
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

    async def _watch_cancel(self, job: _Job) -> None:
        store = job.stream.service.store
        if store is None:
            return
        while True:
            await asyncio.sleep(self.cancel_poll_seconds)
            try:
                if await store.cancel_requested(job.stream.response_id, job.stream.caller.tenant):
                    self.cancel(job.stream.response_id)
                    return
            except StoreError:
                log.debug("cancel poll failed", exc_info=True)

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
        try:
            while True:
                frame = await queue.get()
                if frame is _END:
                    return
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
        if tasks:
            await asyncio.wait(
                tasks
            )  # not ``await task``: a cancelled caller would cancel them again
