"""Pure decoders: Responses API replies (SSE events or one JSON response) → neutral model events.

``StreamDecoder`` is fed the SSE bytes in chunks split anywhere;
``decode_response`` turns a non-streaming response object into the same
events. Both end with exactly one ``Finish``. The upstream's ids, indexes and
sequence numbers are not forwarded (orgate's builder makes its own), except
``call_id``.

upstream event → neutral:

- ``response.output_text.delta`` → ``TextDelta``
- ``response.refusal.delta`` → ``RefusalDelta``
- ``response.reasoning_summary_text.delta`` → ``ReasoningDelta(part="summary")``; an item's summary
  parts are joined by a blank line
- ``response.reasoning_text.delta`` (spec: ``response.reasoning.delta``) →
  ``ReasoningDelta(part="content")``
- ``response.output_item.added`` (function_call) → ``ToolCallStart(index, call_id, name)``
- ``response.output_item.added`` (custom_tool_call, OpenAI's free-form tool call) →
  ``ToolCallStart(index, call_id, name, custom=True)``
- ``response.output_item.added`` (reasoning), or its ``done`` when no ``added`` came →
  ``ReasoningStart`` (each upstream reasoning item stays one item)
- ``response.function_call_arguments.delta`` → ``ToolCallDelta`` (by ``output_index``)
- ``response.custom_tool_call_input.delta`` → ``ToolCallDelta`` (a piece of the call's ``input``)
- ``response.output_item.done`` → the rest of what the item holds and no delta carried (arguments,
  text, summary); reasoning ``encrypted_content`` → ``ReasoningEncrypted``; an item of a type the
  spec's output union lacks → ``ExtensionItem(item, origin)``
- ``response.completed`` → ``Finish("tool_calls" if a function call was made else "stop")``; its
  ``output`` is read when no item event came before it
- ``response.incomplete`` → ``Finish("content_filter" if reason is content_filter else "length")``
- ``response.failed`` / ``error`` → ``ApiError`` raised

Usage comes from the final response (``input_tokens_details.cached_tokens``,
``output_tokens_details.reasoning_tokens``). Function calls reach the neutral
stream one after another: a call whose events interleave with an earlier open
call is buffered until that one is done. A function call that ends without any arguments (a
tool without parameters) gets ``{}``; a custom tool call's ``input`` may be empty.

Output items whose type the Open Responses output union does not know
(``web_search_call``, ``file_search_call``, ``mcp_call``, ``openai:...``) are
passed on whole, from their ``response.output_item.done``, as
``ExtensionItem(item, origin)`` at their place among the other items (one that
completes while a function call is still streaming follows that call).
``origin`` is the deployment's (``orgate.neutral.items.origin_of``). Items the
spec knows but no neutral event carries (``function_call_output``,
``compaction`` in an output) and items without a type are skipped and counted
in ``skipped``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from orgate.neutral import (
    ExtensionItem,
    Finish,
    FinishReason,
    Ledger,
    ModelEvent,
    ReasoningDelta,
    ReasoningEncrypted,
    ReasoningStart,
    RefusalDelta,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    Translation,
    Usage,
    token_count,
)
from orgate.neutral.logprobs import logprob_list
from orgate.protocol.errors import ApiError, upstream_invalid_response
from orgate.providers.openai_responses.errors import failed_error, stream_error
from orgate.providers.sse_decoder import SseStreamDecoder

# Types of the spec's output item union (ItemField); any other typed item is the upstream's own.
_SPEC_OUTPUT = frozenset(
    {"message", "function_call", "function_call_output", "reasoning", "compaction"}
)
# Call items, and the field their text is in: OpenAI's custom tools take free-form ``input``.
_CALLS = {"function_call": "arguments", "custom_tool_call": "input"}
_TERMINAL = ("response.completed", "response.incomplete", "response.failed")
# Between the summary parts of one reasoning item (the neutral stream has one summary text per
# item).
SUMMARY_GAP = "\n\n"


def bad_stream(name: str, detail: str) -> ApiError:
    return upstream_invalid_response(f"upstream '{name}' (openai-responses)", detail, what="stream")


def usage_of(response: Any) -> Usage | None:
    usage = response.get("usage") if isinstance(response, dict) else None
    if not isinstance(usage, dict):
        return None

    return Usage(
        input_tokens=token_count(usage, "input_tokens"),
        output_tokens=token_count(usage, "output_tokens"),
        cached_tokens=token_count(usage.get("input_tokens_details"), "cached_tokens"),
        reasoning_tokens=token_count(usage.get("output_tokens_details"), "reasoning_tokens"),
    )


@dataclass(slots=True)
class _OrderedCall:
    """One function (or custom tool) call, passed on in order: its events are buffered until
    the calls before it are closed."""

    index: int
    sent: str = ""  # the arguments passed on so far (emitted or buffered)
    buffer: list[ModelEvent] = field(default_factory=list)
    state: str = "pending"  # pending (buffered) → active (streams live) → closed
    done: bool = False
    custom: bool = False  # a custom_tool_call: ``input`` (free-form text) instead of ``arguments``


def _texts(parts: Any, *kinds: str) -> list[str]:
    out: list[str] = []
    for part in parts or ():
        if isinstance(part, dict) and part.get("type") in kinds:
            text = part.get("refusal") if part.get("type") == "refusal" else part.get("text")
            if text:
                out.append(str(text))
    return out


class StreamDecoder(SseStreamDecoder):
    """Incremental decoder of one Responses SSE stream. ``name``
    (the deployment) goes into error messages.

    ``feed`` returns the events decoded so far and raises ``ApiError`` on an
    ``error`` event, ``response.failed`` or invalid JSON (when events precede
    the error in the same chunk, they are returned and the error is raised by
    the next call to ``feed`` or ``close``). ``finished`` turns
    true with the ``Finish``; after ``close`` a stream that is not finished was
    cut short — the caller raises that (it knows the host).
    """

    def __init__(
        self, name: str = "openai-responses", origin: str = "", ledger: Ledger | None = None
    ) -> None:
        super().__init__(name)
        self.origin = origin  # put on ExtensionItem events: the deployment's origin_of
        self.ledger = ledger  # notes each extension item kept from the client
        self._calls: dict[int, _OrderedCall] = {}
        self._order: list[int] = []  # output indexes of calls, in neutral order
        self._active: int | None = None
        self._streamed: set[int] = set()  # output indexes whose content came as deltas
        self._others: set[int] = set()  # output indexes of other items already passed on or skipped
        self._held: list[ModelEvent] = []  # extension items waiting for the open calls to close
        self._summary: tuple[Any, Any] | None = None  # (output, summary) index of the last summary
        self._items = False  # item events were seen (else the final response's output is read)
        self._reasoning: set[int] = set()  # output indexes of reasoning items started

    # --- bytes -------------------------------------------------------------------------------

    def _event(self, name: str, data: str, out: list[ModelEvent]) -> None:
        if self.finished or data.strip() == "[DONE]":
            return
        try:
            payload = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise bad_stream(self.name, f"event '{name}' is not JSON") from exc
        if not isinstance(payload, dict):
            raise bad_stream(self.name, f"event '{name}' is not a JSON object")
        self.handle(payload, out)

    # --- events ------------------------------------------------------------------------------

    def handle(self, event: dict[str, Any], out: list[ModelEvent]) -> None:
        """Decode one upstream event (a parsed JSON object) into ``out``."""
        kind = event.get("type")
        if isinstance(kind, str) and kind.startswith("response."):
            self.recognized = True
        # as the upstream sent it: an int when the event is well-formed, not checked per event
        output_index: Any = event.get("output_index")
        if output_index is not None:
            self._items = True
        if kind == "response.output_text.delta":
            if event.get("delta"):
                self._streamed.add(output_index)
                out.append(
                    TextDelta(str(event["delta"]), logprob_list(event.get("logprobs")) or None)
                )
        elif kind == "response.refusal.delta":
            if event.get("delta"):
                self._streamed.add(output_index)
                out.append(RefusalDelta(str(event["delta"])))
        elif kind == "response.reasoning_summary_text.delta":
            if event.get("delta"):
                self._streamed.add(output_index)
                key = (output_index, event.get("summary_index"))
                last, self._summary = self._summary, key
                same_item = last is not None and last[0] == output_index
                gap = SUMMARY_GAP if same_item and last != key else ""
                out.append(ReasoningDelta(gap + str(event["delta"]), "summary"))
        elif kind in ("response.reasoning_text.delta", "response.reasoning.delta"):
            if event.get("delta"):
                self._streamed.add(output_index)
                out.append(ReasoningDelta(str(event["delta"]), "content"))
        elif kind == "response.output_item.added":
            self._item_added(output_index, event.get("item"), out)
        elif kind in (
            "response.function_call_arguments.delta",
            "response.custom_tool_call_input.delta",
        ):
            call = self._calls.get(output_index)
            if call is not None and event.get("delta"):
                self._args(call, str(event["delta"]), out)
        elif kind == "response.function_call_arguments.done":
            call = self._calls.get(output_index)
            if call is not None and isinstance(event.get("arguments"), str):
                self._complete(call, event["arguments"], out)
        elif kind == "response.custom_tool_call_input.done":
            call = self._calls.get(output_index)
            if call is not None and isinstance(event.get("input"), str):
                self._complete(call, event["input"], out)
        elif kind == "response.output_item.done":
            self._item_done(output_index, event.get("item"), out)
        elif kind in _TERMINAL:
            self._terminal(str(kind), event.get("response"), out)
        elif kind == "error":
            raise stream_error(event, self.name)
        # lifecycle events (created, in_progress, content_part.*, *.done...) carry nothing new.

    def _item_added(self, output_index: Any, item: Any, out: list[ModelEvent]) -> None:
        if not isinstance(item, dict) or not isinstance(output_index, int):
            raise bad_stream(self.name, "response.output_item.added without item or output_index")
        if item.get("type") in _CALLS:
            self._open_call(output_index, item, out)
        elif item.get("type") == "reasoning":
            self._start_reasoning(output_index, out)
        # anything else is passed on (or skipped) when it is done

    def _start_reasoning(self, output_index: int, out: list[ModelEvent]) -> None:
        """Each upstream reasoning item is one item here too (its own encrypted_content)."""
        if output_index not in self._reasoning:
            self._reasoning.add(output_index)
            out.append(ReasoningStart())

    def _open_call(
        self, output_index: int, item: dict[str, Any], out: list[ModelEvent]
    ) -> _OrderedCall:
        custom = item.get("type") == "custom_tool_call"
        call = _OrderedCall(index=len(self._order), custom=custom)
        self._calls[output_index] = call
        self._order.append(output_index)
        namespace = item.get("namespace")
        start = ToolCallStart(
            call.index,
            str(item.get("call_id") or ""),
            str(item.get("name") or ""),
            custom,
            namespace if isinstance(namespace, str) and namespace else None,
        )
        if self._active is None and all(self._calls[o].state == "closed" for o in self._order[:-1]):
            call.state = "active"
            self._active = output_index
            out.append(start)
        else:
            call.buffer.append(start)
        text = item.get(_CALLS[item["type"]])
        if text:
            self._args(call, str(text), out)
        return call

    def _args(self, call: _OrderedCall, text: str, out: list[ModelEvent]) -> None:
        call.sent += text
        event = ToolCallDelta(call.index, text)
        if call.state == "active":
            out.append(event)
        else:
            call.buffer.append(event)

    def _complete(self, call: _OrderedCall, full: str, out: list[ModelEvent]) -> None:
        """Pass on what the final ``arguments`` hold beyond the deltas seen
        (servers that send none).

        A call without any arguments (a tool without parameters) gets ``{}``.
        """
        if full.startswith(call.sent) and len(full) > len(call.sent):
            self._args(call, full[len(call.sent) :], out)
        elif not call.custom and not full.strip() and not call.sent.strip():
            self._args(call, "{}", out)

    def _item_done(self, output_index: Any, item: Any, out: list[ModelEvent]) -> None:
        if not isinstance(item, dict) or not isinstance(output_index, int):
            raise bad_stream(self.name, "response.output_item.done without item or output_index")
        kind = item.get("type")
        if kind in _CALLS:
            call = self._calls.get(output_index) or self._open_call(output_index, item, out)
            if isinstance(item.get(_CALLS[kind]), str):
                self._complete(call, item[_CALLS[kind]], out)
            call.done = True
            if self._active == output_index:
                self._advance(out)
        elif kind == "message":
            if output_index not in self._streamed:
                for part in item.get("content") or ():
                    if not isinstance(part, dict):
                        continue
                    if part.get("type") == "output_text" and part.get("text"):
                        out.append(
                            TextDelta(str(part["text"]), logprob_list(part.get("logprobs")) or None)
                        )
                    elif part.get("type") == "refusal" and part.get("refusal"):
                        out.append(RefusalDelta(str(part["refusal"])))
        elif kind == "reasoning":
            self._start_reasoning(output_index, out)
            if output_index not in self._streamed:
                summary = _texts(item.get("summary"), "summary_text")
                if summary:
                    out.append(ReasoningDelta(SUMMARY_GAP.join(summary), "summary"))
                for text in _texts(item.get("content"), "reasoning_text"):
                    out.append(ReasoningDelta(text, "content"))
            if item.get("encrypted_content"):
                out.append(ReasoningEncrypted(str(item["encrypted_content"])))
        elif output_index not in self._others:
            self._others.add(output_index)
            if isinstance(kind, str) and kind not in _SPEC_OUTPUT:
                self._extension(ExtensionItem(item, self.origin), out)
                if self.ledger is not None:
                    self.ledger.note(Translation.UPSTREAM_ITEM_WITHHELD, "output", kind)
            else:
                self.skipped[str(kind)] += 1

    def _extension(self, event: ExtensionItem, out: list[ModelEvent]) -> None:
        """Pass an extension item on, after the function calls still open (never inside one)."""
        if self._active is None and all(self._calls[o].state == "closed" for o in self._order):
            out.append(event)
        else:
            self._held.append(event)

    def _advance(self, out: list[ModelEvent]) -> None:
        """Close the active call and let the next calls in order through
        (flushing their buffers)."""
        if self._active is not None:
            self._calls[self._active].state = "closed"
            self._active = None
        for output_index in self._order:
            call = self._calls[output_index]
            if call.state == "closed":
                continue
            out.extend(call.buffer)
            call.buffer.clear()
            if call.done:
                call.state = "closed"
                continue
            call.state = "active"
            self._active = output_index
            return
        out.extend(self._held)  # every call is closed: the extension items that waited follow
        self._held.clear()

    def _terminal(self, kind: str, response: Any, out: list[ModelEvent]) -> None:
        if kind == "response.failed":
            raise failed_error(response, self.name)
        if not isinstance(response, dict):  # the spec's terminal events carry the response
            raise bad_stream(self.name, f"{kind} without its response object")
        if not self._items:
            # a server that streams no item events: the output is only in the final response
            for output_index, item in enumerate(response.get("output") or ()):
                self._item_done(output_index, item, out)
        # calls never marked done: pass on what they have, in order
        for output_index in self._order:
            self._calls[output_index].done = True
        self._advance(out)
        if kind == "response.incomplete":
            details = response.get("incomplete_details")
            reason = details.get("reason") if isinstance(details, dict) else None
            finish: FinishReason = "content_filter" if reason == "content_filter" else "length"
        else:
            finish = "tool_calls" if self._order else "stop"
        self.finished = True
        out.append(Finish(finish, usage_of(response)))


def decode_response(
    body: Any, name: str = "openai-responses", origin: str = ""
) -> list[ModelEvent]:
    """The events of a non-streaming response object (``{"object": "response", "output":
    [...]}``)."""
    if not isinstance(body, dict):
        raise bad_stream(name, "the reply is not a JSON object")
    if isinstance(body.get("error"), dict) and body.get("object") != "response":
        raise stream_error(body, name)
    if body.get("object") != "response" or not isinstance(body.get("output"), list):
        # a 200 that is not a response (a proxy's status object, another API's answer): no answer
        raise bad_stream(name, "a JSON reply that is not a response object (object and output)")
    decoder = StreamDecoder(name, origin)
    out: list[ModelEvent] = []
    for output_index, item in enumerate(body["output"]):
        event = {"type": "response.output_item.done", "output_index": output_index, "item": item}
        decoder.handle(event, out)
    status = body.get("status")
    if status == "failed":
        kind = "response.failed"
    elif status == "incomplete":
        kind = "response.incomplete"
    elif status in ("completed", None):
        kind = "response.completed"
    else:
        raise bad_stream(name, f"a non-streaming response with status '{status}'")
    decoder.handle({"type": kind, "response": body}, out)
    return out
