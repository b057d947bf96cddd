"""How a stream ends, the same for every HTTP provider (``providers/upstream.py``), against a
loopback upstream that writes exact bytes on a raw socket.

The final batch (the one with the ``Finish``) comes once the body was read to its end, so a
consumer that stops there leaves the connection in the pool for the next request; a trailer
that never comes does not turn a complete answer into a timeout; a connection closed after
the terminal event still gives the complete answer; one closed before it is truncated.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import orjson
import pytest

from orgate.neutral import Deployment, Finish, ModelEvent, ModelRequest, TextDelta
from orgate.protocol import UserMessageItemParam
from orgate.protocol.errors import ApiError
from orgate.providers import upstream
from orgate.providers.anthropic import AnthropicProvider
from orgate.providers.http import HttpPool
from orgate.providers.openai_chat import OpenAIChatProvider
from orgate.providers.openai_responses.provider import OpenAIResponsesProvider


def _data(obj: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def _event(obj: dict[str, Any]) -> bytes:
    return b"event: " + obj["type"].encode() + b"\n" + _data(obj)


@dataclass(frozen=True)
class Wire:
    """One provider's answer "Hi": what comes before its terminal event, the terminal event,
    and what may follow it before the end of the body."""

    provider: str
    cls: Any
    suffix: str  # what follows the upstream's origin in the base URL
    opening: bytes
    terminal: bytes
    trailer: bytes

    def __str__(self) -> str:
        return self.provider


_CHAT = Wire(
    "openai-chat",
    OpenAIChatProvider,
    "/v1",
    _data({"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hi"}}]}),
    _data({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
    _data({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1}})
    + b"data: [DONE]\n\n",
)
_RESPONSE = {
    "id": "resp_1",
    "object": "response",
    "status": "completed",
    "output": [],
    "usage": {"input_tokens": 3, "output_tokens": 1},
}
_RESPONSES = Wire(
    "openai-responses",
    OpenAIResponsesProvider,
    "/v1",
    _event({"type": "response.created", "response": {**_RESPONSE, "status": "in_progress"}})
    + _event({"type": "response.output_text.delta", "output_index": 0, "delta": "Hi"}),
    _event({"type": "response.completed", "response": _RESPONSE}),
    b"data: [DONE]\n\n",  # what some servers add
)
_ANTHROPIC = Wire(
    "anthropic",
    AnthropicProvider,
    "",
    _event({"type": "message_start", "message": {"usage": {"input_tokens": 3}}})
    + _event(
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
    )
    + _event(
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}}
    )
    + _event({"type": "content_block_stop", "index": 0})
    + _event(
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 1},
        }
    ),
    _event({"type": "message_stop"}),
    b"",  # nothing follows message_stop but the end of the body
)
WIRES = [_CHAT, _RESPONSES, _ANTHROPIC]


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n" if data else b""


class RawUpstream:
    """A keep-alive HTTP/1.1 server on 127.0.0.1 answering every POST with a chunked event
    stream: ``before`` in one chunk, then, after ``pause`` seconds, ``after`` and the body's
    end — or, by ``end``, nothing more with the connection held open (``"hold"``) or closed
    (``"close"``). Counts the connections it accepted and the bodies it ended."""

    def __init__(
        self, before: bytes, after: bytes = b"", *, end: str = "body", pause: float = 0.0
    ) -> None:
        self.before, self.after, self.end, self.pause = before, after, end, pause
        self.connections = 0
        self.bodies_ended = 0
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

    async def __aenter__(self) -> RawUpstream:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.append(writer)
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while await self._answer(reader, writer):
                pass
        writer.close()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; False once the connection is done with."""
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.lower().split(b"\r\n")
            if line.startswith(b"content-length:")
        )
        await reader.readexactly(length)
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: "
            b"chunked\r\n\r\n" + _chunk(self.before)
        )
        await writer.drain()
        if self.pause:
            await asyncio.sleep(self.pause)
        if self.end == "hold":
            await reader.read()  # until the client gives the connection up
            return False
        if self.end == "close":
            return False
        writer.write(_chunk(self.after) + b"0\r\n\r\n")
        await writer.drain()
        self.bodies_ended += 1
        return True


@pytest.fixture
async def pool() -> AsyncIterator[HttpPool]:
    pool = HttpPool()
    yield pool
    await pool.aclose()


def provider(wire: Wire, port: int, pool: HttpPool) -> Any:
    deployment = Deployment(
        name="m",
        provider=wire.provider,
        upstream_model="x",
        base_url=f"http://127.0.0.1:{port}{wire.suffix}",
        read_timeout=60.0,  # far above the trailer's bound: only that bound can end a held stream
    )
    return wire.cls(deployment, pool)


def request() -> ModelRequest:
    return ModelRequest(model="x", input=[UserMessageItemParam(content="hello")])


def text_of(events: list[ModelEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


async def until_finish(
    stream: AsyncIterator[list[ModelEvent]], at_finish: Any = None
) -> list[ModelEvent]:
    """The events up to the first batch holding a ``Finish``, then the stream is closed (as the
    engine does); ``at_finish()`` runs when that batch arrives."""
    events: list[ModelEvent] = []
    try:
        async for batch in stream:
            events += batch
            if any(isinstance(e, Finish) for e in batch):
                if at_finish is not None:
                    at_finish()
                break
    finally:
        await stream.aclose()  # type: ignore[attr-defined]
    return events


@pytest.mark.parametrize("wire", WIRES, ids=str)
async def test_the_final_batch_comes_once_the_connection_is_back_in_the_pool(
    wire: Wire, pool: HttpPool
) -> None:
    # The terminal event, then a pause before the trailer and the body's end: a final batch
    # handed on at the terminal event would come before the body ended.
    async with RawUpstream(wire.opening + wire.terminal, wire.trailer, pause=0.2) as up:
        p = provider(wire, up.port, pool)
        ended_at_finish: list[int] = []  # bodies ended when each final batch came
        for _ in range(2):
            events = await until_finish(
                p.stream_batches(request()), lambda: ended_at_finish.append(up.bodies_ended)
            )
            finish = events[-1]
            assert text_of(events) == "Hi" and isinstance(finish, Finish)
            assert (
                finish.usage is not None and finish.usage.output_tokens == 1
            )  # chat: the trailer's
    assert ended_at_finish == [1, 2]  # each body had ended when its final batch came
    assert up.connections == 1  # the second request went over the first one's connection


@pytest.mark.parametrize("wire", WIRES, ids=str)
async def test_a_trailer_that_never_comes_leaves_the_answer_complete(
    wire: Wire, pool: HttpPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(upstream, "TRAILER_TIMEOUT", 0.2)
    async with RawUpstream(wire.opening + wire.terminal, end="hold") as up:
        events = [e async for e in provider(wire, up.port, pool).stream(request())]
    assert text_of(events) == "Hi"
    assert isinstance(events[-1], Finish) and events[-1].reason == "stop"


@pytest.mark.parametrize("wire", WIRES, ids=str)
async def test_a_connection_closed_after_the_terminal_event_is_a_complete_answer(
    wire: Wire, pool: HttpPool
) -> None:
    async with RawUpstream(wire.opening + wire.terminal, end="close") as up:
        events = [e async for e in provider(wire, up.port, pool).stream(request())]
    assert text_of(events) == "Hi"
    assert isinstance(events[-1], Finish) and events[-1].reason == "stop"


@pytest.mark.parametrize("wire", WIRES, ids=str)
async def test_a_connection_closed_before_the_terminal_event_is_truncated(
    wire: Wire, pool: HttpPool
) -> None:
    async with RawUpstream(wire.opening, end="close") as up:
        events: list[ModelEvent] = []
        with pytest.raises(ApiError) as caught:
            async for event in provider(wire, up.port, pool).stream(request()):
                events.append(event)
    assert (caught.value.status, caught.value.code) == (502, "upstream_stream_truncated")
    assert "ended the stream early: the connection was closed mid-stream" in caught.value.message
    assert text_of(events) == "Hi"  # what came before the cut was handed on


# What each provider says of a body that ends cleanly too early, and of one in another format.
_CUT_SHORT = {
    "openai-chat": "upstream 'm' ended the stream before the answer was complete",
    "openai-responses": "ended the stream early: no response.completed event",
    "anthropic": "ended the stream early: no message_stop event",
}
_NOT_THIS_FORMAT = {
    "openai-chat": "a 200 without any chat.completion.chunk",
    "openai-responses": "a 200 without any Responses API stream event",
    "anthropic": "a 200 without any Messages API stream event",
}


@pytest.mark.parametrize("wire", WIRES, ids=str)
async def test_a_body_that_ends_before_the_terminal_event_is_truncated(
    wire: Wire, pool: HttpPool
) -> None:
    async with RawUpstream(wire.opening) as up:  # the body ends properly, the answer does not
        with pytest.raises(ApiError) as caught:
            await until_finish(provider(wire, up.port, pool).stream_batches(request()))
    assert (caught.value.status, caught.value.code) == (502, "upstream_stream_truncated")
    assert _CUT_SHORT[wire.provider] in caught.value.message
    assert up.connections == 1


@pytest.mark.parametrize("wire", WIRES, ids=str)
async def test_a_body_without_one_event_of_the_wire_format_is_invalid(
    wire: Wire, pool: HttpPool
) -> None:
    async with RawUpstream(b'data: {"status": "ok"}\n\n') as up:
        with pytest.raises(ApiError) as caught:
            await until_finish(provider(wire, up.port, pool).stream_batches(request()))
    assert (caught.value.status, caught.value.code) == (502, "upstream_invalid_response")
    assert _NOT_THIS_FORMAT[wire.provider] in caught.value.message
    assert "closed mid-stream" not in caught.value.message


# --- what the exchange reads of a decoder ---------------------------------------------------


@pytest.mark.parametrize("wire", WIRES, ids=str)
async def test_a_decoder_is_complete_at_the_terminal_event_and_ended_after_its_trailer(
    wire: Wire, pool: HttpPool
) -> None:
    decoder = provider(wire, 1, pool).decoder(request())
    events = decoder.feed(wire.opening)
    assert not decoder.complete and not decoder.ended and decoder.recognized
    events += decoder.feed(wire.terminal)
    assert decoder.complete
    # openai-chat: its usage chunk and [DONE] may follow; the others: nothing but the body's end
    assert decoder.ended is (wire is not _CHAT)
    events += decoder.feed(wire.trailer)
    assert decoder.ended and not decoder.failed
    events += decoder.close()  # openai-chat's Finish comes here, the others' with the terminal
    finish = events[-1]
    assert (
        isinstance(finish, Finish) and finish.usage is not None and finish.usage.output_tokens == 1
    )
    assert [e for e in events if isinstance(e, Finish)] == [finish]
