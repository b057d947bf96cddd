"""Responses streaming events → ``chat.completion.chunk`` SSE lines.

``ChunkTranslator`` is a pure state machine: feed it the spec event dicts the
responses handler yields, in order, and it returns the chat payloads to send
(chunk dicts, error envelopes, and finally ``DONE``). ``encode`` turns a
payload into one SSE line (``data: ...\\n\\n``; chat streams have no ``event:``).

The chunk grammar it guarantees: the role first, once, as OpenAI sends it: a
``{"role": "assistant", "content": ""}`` chunk before text (or an empty answer),
``{"role": "assistant", "content": null, "refusal": ""}`` before a refusal, and
``role`` + ``content: null`` inside the first tool-call delta when a call comes
first (so SDKs accumulate ``content: null``, as in the non-streamed message); content / refusal /
tool-call deltas (a call's first delta carries ``id``, ``type``,
``function.name`` and ``arguments: ""``, later ones only ``function.arguments``);
exactly one finish chunk (empty delta + ``finish_reason``); an optional usage
chunk (``choices: []``); ``[DONE]`` last. A failure yields one
``{"error": {...}}`` payload instead of the finish chunk, then ``[DONE]``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from orgate.engine.padding import padding
from orgate.legacy_chat import translate, wire

DONE: Final = "[DONE]"

Payload = dict[str, Any] | str


def encode(payload: Payload) -> bytes:
    """One SSE line: ``data: <json>\\n\\n`` or ``data: [DONE]\\n\\n``."""
    data = payload.encode() if isinstance(payload, str) else orjson.dumps(payload)
    return b"data: " + data + b"\n\n"


@dataclass(slots=True)
class _ChatToolCall:
    """A tool call as the chat stream numbers it, with the arguments sent so far."""

    index: int  # the chat tool-call index
    arguments: str = ""


@dataclass(slots=True)
class ChunkTranslator:
    include_usage: bool = False
    logprobs: bool = False  # ``logprobs: true``: each content chunk carries its tokens'
    # ``stream_options.include_obfuscation`` (default true): chunks carry ``obfuscation``, random
    # characters rounding what they add up to a multiple of 32 bytes (engine.padding).
    obfuscation: bool = False
    # Maps a /v1/responses error param back to the chat field (translate.ParamMap.to_chat).
    param_map: Callable[[str | None], str | None] | None = None
    id: str = "chatcmpl-pending"
    created: int = 0
    model: str = ""
    service_tier: str | None = None
    _role_sent: bool = False
    _calls: dict[int, _ChatToolCall] = field(default_factory=dict)  # by Responses output_index
    _errored: bool = False
    _done: bool = False

    @property
    def done(self) -> bool:
        return self._done

    def feed(self, event: dict[str, Any]) -> list[Payload]:
        """The chat payloads for one Responses event (possibly none)."""
        if self._done:
            return []
        # Every event without a handler (content parts, *.done, reasoning, annotations,
        # provider-specific slugs) has no chat counterpart.
        handler = _HANDLERS.get(event.get("type"))
        return handler(self, event) if handler is not None else []

    # ------------------------------------------------------------------ one per event type

    def _on_started(self, event: dict[str, Any]) -> list[Payload]:
        # The role chunk waits for the first output: its ``content`` is ``""`` before
        # text and ``null`` before a refusal or a tool call, as OpenAI sends it.
        self._adopt(event.get("response") or {})
        return []

    def _on_text_delta(self, event: dict[str, Any]) -> list[Payload]:
        out: list[Payload] = []
        tokens = event.get("logprobs") if self.logprobs else None
        if event.get("delta") or tokens:  # tokens without text (a piece of a character) too
            self._role(out)
            logprobs = translate.choice_logprobs(tokens or []) if self.logprobs else None
            out.append(self._chunk(wire.Delta(content=event["delta"]), logprobs=logprobs))
        return out

    def _on_refusal_delta(self, event: dict[str, Any]) -> list[Payload]:
        out: list[Payload] = []
        if event.get("delta"):
            self._role(out, content=None)
            out.append(self._chunk(wire.Delta(refusal=event["delta"])))
        return out

    def _on_item_added(self, event: dict[str, Any]) -> list[Payload]:
        item = event.get("item") or {}
        if item.get("type") != "function_call":
            return []
        return [self._start_call(event.get("output_index", -1), item)]

    def _on_arguments_delta(self, event: dict[str, Any]) -> list[Payload]:
        call = self._calls.get(event.get("output_index", -1))
        if call is None or not event.get("delta"):
            return []
        return [self._args(call, event["delta"])]

    def _on_item_done(self, event: dict[str, Any]) -> list[Payload]:
        item = event.get("item") or {}
        if item.get("type") != "function_call":
            return []
        return self._finish_call(event.get("output_index", -1), item)

    def _on_finished(self, event: dict[str, Any]) -> list[Payload]:
        """``response.completed`` / ``response.incomplete``: the finish chunk, usage, ``[DONE]``."""
        out: list[Payload] = []
        response = event.get("response") or {}
        self._adopt(response)
        self._role(out)
        reason = translate.finish_reason(response, saw_tool_call=bool(self._calls))
        out.append(self._chunk(wire.Delta(), finish_reason=reason))
        if self.include_usage:
            out.append(self._usage_chunk(response))
        out.append(self._end())
        return out

    def _on_error(self, event: dict[str, Any]) -> list[Payload]:
        self._errored = True
        return [self._error(translate.error_from_payload(event.get("error") or {}))]

    def _on_failed(self, event: dict[str, Any]) -> list[Payload]:
        out: list[Payload] = []
        if not self._errored:
            response = event.get("response") or {}
            out.append(self._error(translate.error_from_payload(response.get("error") or {})))
        out.append(self._end())
        return out

    def close(self) -> list[Payload]:
        """Called when the event stream ends; closes a stream that had no terminal event."""
        if self._done:
            return []
        out: list[Payload] = []
        if not self._errored:
            err = translate.error_from_payload(
                {"type": "server_error", "message": "The response stream ended unexpectedly."}
            )
            out.append(self._error(err))
        out.append(self._end())
        return out

    def fail(self, err: Any) -> list[Payload]:
        """An ``ApiError`` raised by the event stream itself: error line, then ``[DONE]``."""
        if self._done:
            return []
        self._errored = True
        return [self._error(err), self._end()]

    # ------------------------------------------------------------------ helpers

    def _error(self, err: Any) -> Payload:
        if self.param_map is not None:
            err.param = self.param_map(err.param)
        return translate.error_envelope(err)

    def _adopt(self, response: dict[str, Any]) -> None:
        if response.get("id") and self.id == "chatcmpl-pending":
            self.id = translate.completion_id(response["id"])
        if response.get("created_at") and not self.created:
            self.created = int(response["created_at"])
        if response.get("model") and not self.model:
            self.model = response["model"]
        if response.get("service_tier") and self.service_tier is None:
            self.service_tier = response["service_tier"]

    def _role(self, out: list[Payload], *, content: str | None = "") -> None:
        """The role chunk, once: ``{"role", "content": ""}`` before text (or nothing),
        ``{"role", "content": null, "refusal": ""}`` before a refusal."""
        if not self._role_sent:
            self._role_sent = True
            if content is not None:
                out.append(self._chunk(wire.Delta(role="assistant", content=content)))
            else:
                out.append(self._with_role(self._chunk(wire.Delta(refusal=""))))

    def _with_role(self, chunk: Payload) -> Payload:
        """``chunk`` with ``role`` and ``content: null`` first in its delta (the OpenAI
        shape of a first chunk that carries no text, which SDKs accumulate to ``null``)."""
        assert isinstance(chunk, dict)
        choice = chunk["choices"][0]
        choice["delta"] = {"role": "assistant", "content": None, **choice["delta"]}
        return chunk

    def _start_call(self, output_index: int, item: dict[str, Any]) -> Payload:
        """A call's first delta; when nothing came before it, it carries the role too."""
        call = _ChatToolCall(index=len(self._calls), arguments=item.get("arguments") or "")
        self._calls[output_index] = call
        chunk = self._chunk(
            wire.Delta(
                tool_calls=[
                    wire.DeltaToolCall(
                        index=call.index,
                        id=item.get("call_id") or "",
                        type="function",
                        function=wire.DeltaFunction(
                            name=item.get("name", ""), arguments=call.arguments
                        ),
                    )
                ]
            )
        )
        if self._role_sent:
            return chunk
        self._role_sent = True
        return self._with_role(chunk)

    def _args(self, call: _ChatToolCall, delta: str) -> Payload:
        call.arguments += delta
        return self._chunk(
            wire.Delta(
                tool_calls=[
                    wire.DeltaToolCall(
                        index=call.index, function=wire.DeltaFunction(arguments=delta)
                    )
                ]
            )
        )

    def _finish_call(self, output_index: int, item: dict[str, Any]) -> list[Payload]:
        """Make the concatenated deltas equal the final arguments (normally a no-op)."""
        out: list[Payload] = []
        call = self._calls.get(output_index)
        final = item.get("arguments") or ""
        if call is None:
            out.append(self._start_call(output_index, {**item, "arguments": ""}))
            call = self._calls[output_index]
        if final != call.arguments and final.startswith(call.arguments):
            out.append(self._args(call, final[len(call.arguments) :]))
        return out

    def _chunk(
        self,
        delta: wire.Delta,
        *,
        finish_reason: wire.FinishReason | None = None,
        logprobs: wire.ChoiceLogprobs | None = None,
    ) -> Payload:
        chunk = wire.ChatCompletionChunk(
            id=self.id,
            created=self.created,
            model=self.model,
            choices=[wire.ChunkChoice(delta=delta, finish_reason=finish_reason, logprobs=logprobs)],
            service_tier=self.service_tier,
        ).model_dump(mode="json")
        if not self.include_usage:
            del chunk["usage"]
        if self.obfuscation:
            chunk["obfuscation"] = padding(_text_of(delta))
        return chunk

    def _usage_chunk(self, response: dict[str, Any]) -> Payload:
        u = translate.usage(response) or wire.CompletionUsage(
            prompt_tokens=0, completion_tokens=0, total_tokens=0
        )
        return wire.ChatCompletionChunk(
            id=self.id,
            created=self.created,
            model=self.model,
            choices=[],
            usage=u,
            service_tier=self.service_tier,
        ).model_dump(mode="json")

    def _end(self) -> Payload:
        self._done = True
        return DONE


_Handler = Callable[[ChunkTranslator, dict[str, Any]], list[Payload]]

# The Responses events that have a chat counterpart, and what becomes of each.
_HANDLERS: dict[Any, _Handler] = {
    "response.created": ChunkTranslator._on_started,
    "response.queued": ChunkTranslator._on_started,
    "response.in_progress": ChunkTranslator._on_started,
    "response.output_text.delta": ChunkTranslator._on_text_delta,
    "response.refusal.delta": ChunkTranslator._on_refusal_delta,
    "response.output_item.added": ChunkTranslator._on_item_added,
    "response.function_call_arguments.delta": ChunkTranslator._on_arguments_delta,
    "response.output_item.done": ChunkTranslator._on_item_done,
    "response.completed": ChunkTranslator._on_finished,
    "response.incomplete": ChunkTranslator._on_finished,
    "error": ChunkTranslator._on_error,
    "response.failed": ChunkTranslator._on_failed,
}


def _text_of(delta: wire.Delta) -> str:
    """What a delta adds to the answer: its content, refusal or tool-call arguments."""
    return (
        delta.content
        or delta.refusal
        or "".join(call.function.arguments or "" for call in delta.tool_calls or ())
    )
