"""The scripted model of the in-process tests: the one test double of ``neutral.Provider``.

A test writes what the model answers, call by call, and reads back what it was asked, in
the spirit of httpx's ``MockTransport`` and pydantic-ai's ``FunctionModel``:

- each call takes the next answer of the script: a ``Turn`` (its steps: batches of events,
  an exception raised where it stands, a ``Pause``), a plain list of events (``per_batch``
  events a batch, one by default), or a function of the request returning either. Once the
  script is used up, ``otherwise`` answers every call; without it an unscripted call fails
  the test (``AssertionError``).
- every call is recorded as a ``Call``: its request, when it came, the batches handed out,
  the error raised, whether its stream ended and whether the consumer closed it, and whether
  it was read in batches (``stream_batches``, what the engine does) or one event at a time.
- ``delay`` spaces every batch (a slow upstream: the scenario, not a wait for something to
  happen); ``on_batch`` sees each batch as it leaves, to interleave it with what a consumer
  took. Closing the provider (``aclose``) sets ``closed``.

A call starts on its stream's first read, as an upstream call does: a stream never read is
no call. The stream is an iterator with its own ``aclose`` (not a generator), so a call's
``closed`` says the consumer closed it and ``ended`` that it is over, however it ended.

This stands in for the provider object. The wire-level fakes of real upstreams (loopback
HTTP servers speaking the OpenAI and Anthropic protocols) are in tests/fakes/.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from orgate.neutral import ModelEvent, ModelRequest, Provider
from orgate.neutral.batches import one_by_one


@dataclass(frozen=True)
class Pause:
    """A step that waits: until ``until`` is set, for ``seconds``, or (neither given) until
    the call is cancelled or closed."""

    until: asyncio.Event | None = None
    seconds: float | None = None

    async def wait(self) -> None:
        if self.until is not None:
            await self.until.wait()
        elif self.seconds is not None:
            await asyncio.sleep(self.seconds)  # the upstream is slow: this is the scenario
        else:
            await asyncio.Event().wait()


#: A step that waits until the call is cancelled or closed (an upstream that went silent).
HANG = Pause()


def wait_for(release: asyncio.Event) -> Pause:
    """A step that waits until the test sets ``release``."""
    return Pause(until=release)


def pause(seconds: float) -> Pause:
    """A step that takes ``seconds`` (an upstream slow to go on)."""
    return Pause(seconds=seconds)


Step: TypeAlias = Sequence[ModelEvent] | BaseException | type[BaseException] | Pause


class Turn:
    """One call's answer, step by step: a batch of events (handed out as one read), an
    exception (raised there), or a ``Pause``."""

    def __init__(self, *steps: Step) -> None:
        self.steps: tuple[Step, ...] = steps

    @classmethod
    def events(cls, events: Iterable[ModelEvent], *, per_batch: int = 1) -> Turn:
        """``events`` handed out ``per_batch`` at a time."""
        flat = list(events)
        return cls(*(flat[i : i + per_batch] for i in range(0, len(flat), per_batch)))

    def __repr__(self) -> str:
        return f"Turn{self.steps!r}"


Reply: TypeAlias = Turn | Sequence[ModelEvent]
Answer: TypeAlias = Reply | Callable[[ModelRequest], Reply]


@dataclass(eq=False)
class Call:
    """One call of the model, as it went."""

    request: ModelRequest
    at: float  # time.monotonic() when it started (its stream's first read)
    read_as: Literal["batches", "events"] = "batches"
    batches: list[list[ModelEvent]] = field(default_factory=list)  # handed out, in order
    error: BaseException | None = None  # what it raised, if it failed
    waiting: bool = False  # in a ``Pause`` step now (the consumer is waiting for it)
    ended: bool = False  # its stream is over: answered, failed, cancelled or closed
    closed: bool = False  # the consumer called ``aclose()`` on its stream

    @property
    def model(self) -> str:
        return self.request.model

    @property
    def events(self) -> list[ModelEvent]:
        return [event for batch in self.batches for event in batch]


class ScriptedProvider(Provider):
    """A model answering from a script; see the module's docstring."""

    def __init__(
        self,
        *answers: Answer,
        otherwise: Answer | None = None,
        per_batch: int = 1,
        delay: float = 0.0,
        on_batch: Callable[[list[ModelEvent]], object] | None = None,
        name: str = "scripted",
    ) -> None:
        self.script: deque[Answer] = deque(answers)
        self.otherwise = otherwise
        self.per_batch = per_batch
        self.delay = delay
        self.on_batch = on_batch
        self.name = name
        self.calls: list[Call] = []
        self.closed = False

    @property
    def requests(self) -> list[ModelRequest]:
        """What each call was asked, in order."""
        return [call.request for call in self.calls]

    def enqueue(self, *answers: Answer) -> None:
        """More answers, after those still in the script."""
        self.script.extend(answers)

    def stream_batches(self, request: ModelRequest) -> AsyncIterator[list[ModelEvent]]:
        return _CallStream(self, request, "batches")

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        return one_by_one(_CallStream(self, request, "events"))

    async def aclose(self) -> None:
        self.closed = True

    # -- playing a call ----------------------------------------------------------------

    def _begin(self, request: ModelRequest, read_as: Literal["batches", "events"]) -> Call:
        call = Call(request, time.monotonic(), read_as)
        self.calls.append(call)
        return call

    def _turn(self, request: ModelRequest) -> Turn:
        if self.script:
            answer = self.script.popleft()
        elif self.otherwise is not None:
            answer = self.otherwise
        else:
            raise AssertionError(f"call {len(self.calls)} was not scripted")
        reply = answer(request) if callable(answer) else answer
        return reply if isinstance(reply, Turn) else Turn.events(reply, per_batch=self.per_batch)

    async def _play(self, call: Call) -> AsyncGenerator[list[ModelEvent], None]:
        try:
            for step in self._turn(call.request).steps:
                if isinstance(step, Pause):
                    call.waiting = True
                    await step.wait()
                    call.waiting = False
                elif isinstance(step, BaseException | type):
                    raise step
                else:
                    # a read is an await: other tasks run between batches, as with an upstream
                    await asyncio.sleep(self.delay)
                    batch = list(step)
                    call.batches.append(batch)
                    if self.on_batch is not None:
                        self.on_batch(batch)
                    yield batch
        except (GeneratorExit, asyncio.CancelledError):
            raise
        except BaseException as exc:
            call.error = exc
            raise
        finally:
            call.waiting = False
            call.ended = True


class _CallStream:
    """One call's batches: an iterator with its own ``aclose``, which it records."""

    def __init__(
        self,
        provider: ScriptedProvider,
        request: ModelRequest,
        read_as: Literal["batches", "events"],
    ) -> None:
        self._provider = provider
        self._request = request
        self._read_as = read_as
        self._batches: AsyncGenerator[list[ModelEvent], None] | None = None
        self._call: Call | None = None
        self._closed = False

    def __aiter__(self) -> _CallStream:
        return self

    async def __anext__(self) -> list[ModelEvent]:
        if self._closed:
            raise StopAsyncIteration
        if self._batches is None:
            self._call = self._provider._begin(self._request, self._read_as)
            self._batches = self._provider._play(self._call)
        return await self._batches.__anext__()

    async def aclose(self) -> None:
        self._closed = True
        if self._call is not None:
            self._call.closed = True
        if self._batches is not None:
            await self._batches.aclose()


__all__ = [
    "HANG",
    "Answer",
    "Call",
    "Pause",
    "ScriptedProvider",
    "Step",
    "Turn",
    "pause",
    "wait_for",
]
