"""Schema work in worker processes (``orgate.gate.work``): answered, killed past its time
limit, killed when the request awaiting it is cancelled, killed at a stop, bounded in memory.

Every job here is a real function run by a real worker process; the jobs that never end
prove that the worker is killed (its pid gone), not left to finish.
"""

from __future__ import annotations

import asyncio
import os

import pytest
import uvloop

from orgate.gate.cost import schema_cost
from orgate.gate.work import (
    SMALL_CALL_CHECK,
    SMALL_CHECK,
    SchemaWork,
    SchemaWorkFailed,
    SchemaWorkTimeout,
    small_call_check,
    small_check,
    small_generation,
)
from tests.hostile.shapes import GIGABYTE, doubled_branches, obj, optional
from tests.support.waiting import eventually, wait_until

WAIT = 60.0  # seconds: generous, for a loaded machine


def pid() -> int:
    return os.getpid()


def forever() -> None:
    while True:
        pass


def fail() -> None:
    raise ValueError("the job's own error")


def echo(value: str) -> str:
    return value


def allocate(megabytes: int) -> int:
    return len(bytearray(megabytes * 1024 * 1024))


def _alive(process_id: int) -> bool:
    try:
        with open(f"/proc/{process_id}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):  # gone before the open, or before the read
        return False


def _gone(process_id: int) -> bool:
    return wait_until(lambda: not _alive(process_id), WAIT)


@pytest.fixture
async def work() -> SchemaWork:
    work = SchemaWork(processes=1, seconds=WAIT)
    yield work
    work.stop()


async def test_a_job_runs_in_another_process_and_its_worker_is_reused(work: SchemaWork) -> None:
    first = await work.in_process(pid)
    assert first != os.getpid()
    assert await work.in_process(pid) == first
    assert work.started == 1 and work.answered == 2


async def test_a_jobs_own_error_reaches_the_caller_and_the_worker_stays(work: SchemaWork) -> None:
    worker = await work.in_process(pid)
    with pytest.raises(ValueError, match="the job's own error"):
        await work.in_process(fail)
    assert await work.in_process(pid) == worker


async def test_a_job_past_its_time_limit_is_killed_and_the_next_job_gets_a_new_worker(
    work: SchemaWork,
) -> None:
    worker = await work.in_process(pid)
    work.seconds = 0.5
    with pytest.raises(SchemaWorkTimeout):
        await work.in_process(forever)
    assert _gone(worker)
    work.seconds = WAIT
    assert await work.in_process(pid) != worker


async def test_a_cancelled_request_kills_the_work_it_awaited(work: SchemaWork) -> None:
    worker = await work.in_process(pid)
    running = asyncio.ensure_future(work.in_process(forever))
    assert await eventually(lambda: work._busy, WAIT)  # the job was handed over
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert _gone(worker) and work.killed == 1


async def test_stop_kills_busy_and_idle_workers(work: SchemaWork) -> None:
    work.processes = 2
    busy = asyncio.ensure_future(work.in_process(forever))
    assert await eventually(lambda: work._busy, WAIT)
    idle = await work.in_process(pid)
    (running,) = list(work._busy)
    assert running.process.pid is not None
    work.stop()
    with pytest.raises(SchemaWorkFailed):
        await busy
    assert _gone(idle) and _gone(running.process.pid)


async def test_a_job_past_its_memory_limit_fails_instead_of_growing() -> None:
    work = SchemaWork(processes=1, seconds=WAIT, memory=192 * 1024 * 1024)
    try:
        assert await work.in_process(allocate, 8) == 8 * 1024 * 1024
        with pytest.raises(SchemaWorkFailed, match="more than 192 MB"):
            await work.in_process(allocate, 512)
    finally:
        work.stop()


def test_a_large_job_and_its_large_answer_cross_under_the_servers_event_loop() -> None:
    """uvloop (the server's loop) makes a watched pipe non-blocking: a message larger than the
    pipe's buffer still crosses whole, both ways."""

    async def main() -> str:
        work = SchemaWork(processes=1, seconds=WAIT)
        try:
            return await work.in_process(echo, "x" * 1_000_000)
        finally:
            work.stop()

    assert uvloop.run(main()) == "x" * 1_000_000


async def test_small_work_runs_in_a_thread_of_this_process(work: SchemaWork) -> None:
    assert await work.run(pid, small=True) == os.getpid()
    assert work.started == 0


def test_what_is_small_work_follows_the_schemas_cost() -> None:
    plain = schema_cost(obj(sku={"type": "string"}))
    branching = schema_cost(doubled_branches(8, {"type": "string"}))
    assert small_check(plain, 4_000) and not small_check(plain, SMALL_CHECK + 1)
    assert not small_check(branching, 4_000)
    assert small_call_check(plain, 400) and not small_call_check(plain, SMALL_CALL_CHECK + 1)
    assert small_generation(plain, 100)
    assert not small_generation(plain, 100_000)  # the prompt its strings are drawn from
    assert not small_generation(schema_cost(optional(a=GIGABYTE)), 100)
    assert not small_generation(branching, 100)
