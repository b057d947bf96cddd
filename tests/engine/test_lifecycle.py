"""The response lifecycle in process: a scripted provider, a real SQLite store, every way a
response ends (``engine/lifecycle.py``), with its stored state and the session lease checked."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from orgate.engine import lifecycle
from orgate.engine.lifecycle import Ending, ResponseStream, shutdown_error
from orgate.engine.request_body import parse_body
from orgate.engine.service import Caller, ResponsesService
from orgate.neutral import Deployment, Finish, TextDelta
from orgate.protocol.errors import ApiError, ErrorCode
from orgate.store import open_store
from orgate.store.base import ResponseStore, SessionBusy, StoreUnavailable
from tests.support.scripted import HANG, ScriptedProvider, Step, Turn
from tests.support.waiting import eventually

MODEL = Deployment(
    name="m", provider="openai-chat", upstream_model="m", base_url="http://upstream.invalid/v1"
)
CALLER = Caller("k", "t")
SESSION = "s1"
DONE = b"data: [DONE]\n\n"


def encode(event: dict[str, Any]) -> bytes:
    return b"event: " + event["type"].encode() + b"\ndata: " + orjson.dumps(event) + b"\n\n"


#: The providers a test made: the autouse check reads their calls after the test.
MADE: list[ScriptedProvider] = []


def scripted(*steps: Step) -> ScriptedProvider:
    """A provider answering one call with ``steps`` (batches, an exception raised there,
    ``HANG``: silent until cancelled)."""
    provider = ScriptedProvider(Turn(*steps))
    MADE.append(provider)
    return provider


@pytest.fixture(autouse=True)
def read_in_batches() -> Iterator[None]:
    """The service reads its model in batches (one write per upstream read), never one event
    at a time."""
    MADE.clear()
    yield
    read_as = {call.read_as for provider in MADE for call in provider.calls}
    assert read_as <= {"batches"}, read_as


class FlakyStore:
    """The real store, with ``save`` failing while ``fail`` says so (a store outage)."""

    def __init__(self, store: ResponseStore, fail: Callable[[dict[str, Any]], bool]) -> None:
        self._store = store
        self.fail = fail
        self.attempts: list[str] = []

    async def save(self, response: dict[str, Any], **kwargs: Any) -> None:
        self.attempts.append(response["status"])
        if self.fail(response):
            raise StoreUnavailable("the database is down")
        await self._store.save(response, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


ANSWER = [[TextDelta("Hel")], [TextDelta("lo"), TextDelta("!")], [Finish("stop")]]
UPSTREAM_DOWN = ApiError(502, "upstream 'm' failed", type="server_error", code="upstream_error")


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[ResponseStore]:
    opened = await open_store(f"sqlite://{tmp_path}/orgate.db", heartbeat_interval=0)
    yield opened
    await opened.close()


def service_with(store: Any, provider: ScriptedProvider) -> ResponsesService:
    return ResponsesService({"m": MODEL}, lambda deployment: provider, store=store)


async def start(service: ResponsesService, **body: Any) -> ResponseStream:
    return await service.create(
        parse_body({"model": "m", "input": "hi", **body}), CALLER, [], session_id=SESSION
    )


async def assert_session_free(store: ResponseStore) -> None:
    """The session's lease was released: the next turn can take it."""
    try:
        lease = await store.begin_session_turn("t", SESSION)
    except SessionBusy:
        pytest.fail("the session lease was not released")
    await store.end_session_turn(lease)


def event_types(chunks: list[bytes]) -> list[str]:
    return [
        line[7:] for line in b"".join(chunks).decode().splitlines() if line.startswith("event: ")
    ]


async def collect(frames: AsyncIterator[bytes], into: list[bytes]) -> None:
    async for chunk in frames:
        into.append(chunk)


async def cancel_when_hanging(
    provider: ScriptedProvider, task: asyncio.Task[Any], chunks: list[bytes], count: int
) -> None:
    """Cancel ``task`` once ``count`` chunks left and the upstream hangs (where a client leaves)."""
    # waiting: the call is in its HANG step, so the stream is waiting for the upstream
    assert await eventually(lambda: len(chunks) >= count and provider.calls[-1].waiting)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


# --- normal completion --------------------------------------------------------------------


async def test_a_drained_response_is_completed_stored_and_its_session_released(
    store: ResponseStore,
) -> None:
    provider = scripted(*ANSWER)
    stream = await start(service_with(store, provider))
    answer = await stream.final()
    assert answer["status"] == "completed"
    assert answer["output"][0]["content"][0]["text"] == "Hello!"
    assert stream.ending is Ending.COMPLETED and stream.error is None
    stored = await store.get(answer["id"], "t")
    assert (
        stored is not None
        and stored.status == "completed"
        and stored.response["output"] == answer["output"]
    )
    assert stream.headers["X-Session-Id"] == SESSION
    assert provider.calls[0].ended
    await assert_session_free(store)


async def test_a_streamed_response_leaves_one_chunk_per_batch_and_is_kept_for_replay(
    store: ResponseStore,
) -> None:
    stream = await start(service_with(store, scripted(*ANSWER)), stream=True)
    chunks: list[bytes] = []
    frames = stream.frames(encode, DONE)
    async for chunk in frames:
        if not chunks:  # saved in_progress before response.created left
            stored = await store.get(stream.response_id, "t")
            assert stored is not None and stored.status == "in_progress"
        chunks.append(chunk)
    assert (
        len(chunks) == 3
    )  # created + in_progress ride with the first batch; the last one ends with [DONE]
    assert event_types(chunks[:1])[:2] == ["response.created", "response.in_progress"]
    assert event_types(chunks)[-1] == "response.completed" and chunks[-1].endswith(DONE)
    assert (
        await store.events(stream.response_id, "t") == b"".join(chunks)[: -len(DONE)]
    )  # the replay, without [DONE]
    assert stream.ending is Ending.COMPLETED
    await assert_session_free(store)


async def test_an_answer_cut_short_by_its_token_limit_ends_incomplete(store: ResponseStore) -> None:
    stream = await start(service_with(store, scripted([TextDelta("Hel")], [Finish("length")])))
    answer = await stream.final()
    assert answer["status"] == "incomplete" and stream.ending is Ending.INCOMPLETE
    stored = await store.get(answer["id"], "t")
    assert stored is not None and stored.status == "incomplete"


async def test_events_are_dicts_numbered_in_order(store: ResponseStore) -> None:
    stream = await start(service_with(store, scripted(*ANSWER)))
    events = [event async for event in stream]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert events[-1]["type"] == "response.completed"


# --- failures ------------------------------------------------------------------------------


async def test_an_upstream_error_mid_stream_ends_failed_and_stored_so(store: ResponseStore) -> None:
    provider = scripted([TextDelta("Hel")], UPSTREAM_DOWN)
    stream = await start(service_with(store, provider), stream=True)
    chunks = [chunk async for chunk in stream.frames(encode, DONE)]
    assert event_types(chunks)[-2:] == ["error", "response.failed"] and chunks[-1].endswith(DONE)
    assert stream.ending is Ending.FAILED and stream.error is UPSTREAM_DOWN
    stored = await store.get(stream.response_id, "t")
    assert (
        stored is not None
        and stored.status == "failed"
        and stored.response["error"]["code"] == "upstream_error"
    )
    assert stored.response["output"][0]["status"] == "incomplete"  # what was produced is kept
    assert provider.calls[0].ended
    await assert_session_free(store)


async def test_an_upstream_error_before_any_output_is_raised_by_create(
    store: ResponseStore,
) -> None:
    provider = scripted(UPSTREAM_DOWN)
    with pytest.raises(ApiError) as raised:
        await start(service_with(store, provider))
    assert raised.value is UPSTREAM_DOWN
    assert provider.calls[0].ended
    await assert_session_free(store)


SPENT = ApiError.of(ErrorCode.STRUCTURED_OUTPUT_INVALID, "the output never matched the schema")


@pytest.mark.parametrize("stream", [False, True])
async def test_a_call_that_fails_before_any_event_is_closed(
    store: ResponseStore, stream: bool
) -> None:
    provider = scripted(UPSTREAM_DOWN if not stream else SPENT)
    with pytest.raises(ApiError):
        await start(service_with(store, provider), stream=stream)
    assert provider.calls[0].closed
    await assert_session_free(store)


async def test_an_answer_without_events_is_an_upstream_error(store: ResponseStore) -> None:
    with pytest.raises(ApiError) as raised:
        await start(service_with(store, scripted()))
    assert raised.value.code == "upstream_invalid_response"
    await assert_session_free(store)


async def test_a_streamed_answer_that_never_validates_is_an_http_error_before_the_stream(
    store: ResponseStore,
) -> None:
    """A spent budget is no ``response.failed`` in a 200 stream, which Codex sends again on its
    own: the error (a 400 with ``x-should-retry: false``) comes before any event."""
    with pytest.raises(ApiError) as raised:
        await start(service_with(store, scripted(SPENT)), stream=True)
    assert raised.value is SPENT and raised.value.status == 400


async def test_an_answer_that_stops_without_finishing_is_truncated(store: ResponseStore) -> None:
    provider = scripted([TextDelta("Hel")], [TextDelta("lo")])
    answer = await (await start(service_with(store, provider))).final()
    assert answer["status"] == "failed" and answer["error"]["code"] == "upstream_stream_truncated"


async def test_a_bug_ends_the_response_with_a_server_error(store: ResponseStore) -> None:
    stream = await start(service_with(store, scripted([TextDelta("Hel")], RuntimeError("a bug"))))
    answer = await stream.final()
    assert answer["status"] == "failed" and answer["error"]["code"] == "server_error"
    assert (
        stream.ending is Ending.SERVER_ERROR
        and stream.error is not None
        and stream.error.status == 500
    )
    await assert_session_free(store)


# --- a client that leaves, a server that stops -----------------------------------------------


async def test_a_client_that_leaves_mid_stream_leaves_the_response_stored_failed(
    store: ResponseStore,
) -> None:
    provider = scripted([TextDelta("Hel")], HANG)
    stream = await start(service_with(store, provider), stream=True)
    chunks: list[bytes] = []
    task = asyncio.create_task(collect(stream.frames(encode, DONE), chunks))
    await cancel_when_hanging(provider, task, chunks, 1)
    assert stream.ending is Ending.CLIENT_GONE
    assert event_types(chunks)[-1] == "response.output_text.delta"  # nothing more was sent
    stored = await store.get(stream.response_id, "t")
    assert (
        stored is not None
        and stored.status == "failed"
        and stored.response["error"]["code"] == "client_disconnected"
    )
    assert stored.response["output"][0]["content"][0]["text"] == "Hel"
    replay = await store.events(stream.response_id, "t")
    assert (
        replay is not None and event_types([replay])[-1] == "response.failed"
    )  # the replay ends as stored
    assert provider.calls[0].ended
    await assert_session_free(store)


async def test_a_consumer_that_closes_the_stream_ends_the_turn_at_once(
    store: ResponseStore,
) -> None:
    provider = scripted([TextDelta("Hel")], HANG)
    stream = await start(service_with(store, provider), stream=True)
    frames = stream.frames(encode, DONE)
    await anext(frames)
    await frames.aclose()  # type: ignore[attr-defined]
    assert stream.ending is Ending.CLIENT_GONE and provider.calls[0].ended
    stored = await store.get(stream.response_id, "t")
    assert stored is not None and stored.status == "failed"
    await assert_session_free(store)


@pytest.mark.parametrize("how", ["client_still_there", "interrupted"])
async def test_a_response_the_server_stops_tells_its_client_and_is_stored_failed(
    store: ResponseStore, how: str
) -> None:
    provider = scripted([TextDelta("Hel")], HANG)
    stream = await start(service_with(store, provider), stream=True)
    if how == "client_still_there":
        stream.client_gone = False  # a shutdown past the drain time cancels it
    else:
        stream.interrupted = shutdown_error()
    chunks: list[bytes] = []
    task = asyncio.create_task(collect(stream.frames(encode, DONE), chunks))
    await cancel_when_hanging(provider, task, chunks, 1)
    assert stream.ending is Ending.SHUTDOWN
    assert event_types(chunks)[-2:] == ["error", "response.failed"] and chunks[-1].endswith(DONE)
    stored = await store.get(stream.response_id, "t")
    assert (
        stored is not None
        and stored.status == "failed"
        and stored.response["error"]["code"] == "server_shutdown"
    )
    assert provider.calls[0].ended
    await assert_session_free(store)


# --- background responses -------------------------------------------------------------------


async def test_a_background_response_is_stored_queued_then_runs_to_its_end(
    store: ResponseStore,
) -> None:
    provider = scripted(*ANSWER)
    stream = await start(service_with(store, provider), background=True)
    stored = await store.get(stream.response_id, "t")
    assert stored is not None and stored.status == "queued"
    assert not provider.calls  # nothing was asked of the model yet
    chunks = [chunk async for chunk in stream.frames(encode)]
    assert event_types(chunks[:1]) == [
        "response.created",
        "response.queued",
        "response.in_progress",
    ]
    assert event_types(chunks)[-1] == "response.completed"
    stored = await store.get(stream.response_id, "t")
    assert stored is not None and stored.status == "completed"
    assert stream.ending is Ending.COMPLETED
    await assert_session_free(store)


async def test_a_cancelled_background_response_is_stored_cancelled(store: ResponseStore) -> None:
    provider = scripted([TextDelta("Hel")], HANG)
    stream = await start(service_with(store, provider), background=True)
    chunks: list[bytes] = []
    task = asyncio.create_task(collect(stream.frames(encode), chunks))
    stream.cancel_requested = True  # what the background runner sets before it cancels
    await cancel_when_hanging(provider, task, chunks, 2)
    assert stream.ending is Ending.CANCELLED
    stored = await store.get(stream.response_id, "t")
    assert stored is not None and stored.status == "cancelled"
    assert provider.calls[0].ended
    await assert_session_free(store)


async def test_a_background_upstream_failure_is_stored_not_raised(store: ResponseStore) -> None:
    stream = await start(service_with(store, scripted(UPSTREAM_DOWN)), background=True)
    answer = await stream.final()
    assert answer["status"] == "failed" and stream.ending is Ending.FAILED
    stored = await store.get(stream.response_id, "t")
    assert stored is not None and stored.status == "failed"
    await assert_session_free(store)


# --- a failing store --------------------------------------------------------------------------


async def test_a_background_response_that_cannot_be_stored_is_refused(store: ResponseStore) -> None:
    provider = scripted(*ANSWER)
    with pytest.raises(ApiError) as raised:
        await start(
            service_with(FlakyStore(store, lambda response: True), provider), background=True
        )
    assert raised.value.status == 503 and raised.value.code == "store_unavailable"
    assert not provider.calls
    await assert_session_free(store)


async def test_a_failed_in_progress_save_does_not_stop_the_stream(store: ResponseStore) -> None:
    flaky = FlakyStore(store, lambda response: response["status"] == "in_progress")
    stream = await start(service_with(flaky, scripted(*ANSWER)), stream=True)
    chunks = [chunk async for chunk in stream.frames(encode, DONE)]
    assert event_types(chunks)[-1] == "response.completed"
    assert flaky.attempts == ["in_progress", "completed"]  # no retry before the first event
    stored = await store.get(stream.response_id, "t")
    assert stored is not None and stored.status == "completed"
    assert lifecycle.STORE_ERROR_HEADER not in stream.headers


async def test_the_terminal_save_is_retried_while_the_store_recovers(store: ResponseStore) -> None:
    failures = iter([True, True])
    flaky = FlakyStore(store, lambda response: next(failures, False))
    stream = await start(service_with(flaky, scripted(*ANSWER)))
    answer = await stream.final()
    assert flaky.attempts == ["completed"] * 3
    assert answer["store"] is True and lifecycle.STORE_ERROR_HEADER not in stream.headers
    stored = await store.get(answer["id"], "t")
    assert stored is not None and stored.status == "completed"
    await assert_session_free(store)


async def test_an_answer_the_store_never_takes_goes_out_marked_not_stored(
    store: ResponseStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lifecycle, "FOREGROUND_SAVE_GRACE", 0.3)
    flaky = FlakyStore(store, lambda response: True)
    stream = await start(service_with(flaky, scripted(*ANSWER)), stream=True)
    chunks = [chunk async for chunk in stream.frames(encode, DONE)]
    terminal = [
        orjson.loads(line[6:])
        for line in b"".join(chunks).split(b"\n")
        if line.startswith(b"data: {")
    ][-1]
    assert terminal["type"] == "response.completed" and terminal["response"]["store"] is False
    assert stream.headers[lifecycle.STORE_ERROR_HEADER] == "store_unavailable"
    assert stream.ending is Ending.COMPLETED
    assert len(flaky.attempts) > 2  # retried during the grace
    assert await store.get(stream.response_id, "t") is None
    await assert_session_free(store)
