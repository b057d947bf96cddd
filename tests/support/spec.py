"""Validation against the official Open Responses OpenAPI document, and SSE checks.

- ``validate(schema_name, obj)``: JSON Schema (Draft 2020-12) validation against
  ``#/components/schemas/<schema_name>``, ``$ref``s resolved inside the document.
- ``validate_event(evt)``: the same, with the schema picked from the event ``type``.
- ``parse_sse(raw)`` / ``check_sse(raw)``: SSE framing and the normative stream
  grammar; ``check_events(events)`` is the grammar alone (e.g. for WebSocket tests).

The spec is ``<repo>/../shared/spec/openapi-2026-04-24.json`` (the official copy beside
the repository) unless the ``ORGATE_SPEC_PATH`` environment variable names another file;
a checkout without that directory (a clean clone elsewhere) uses the byte-identical copy
the package ships, ``src/orgate/data/`` (``tests/protocol/test_spec_copy.py`` holds them
equal wherever both exist).
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

SPEC_FILE = "openapi-2026-04-24.json"
_SPEC_URI = "urn:orgate:openapi-2026-04-24"


REPO = Path(__file__).resolve().parents[2]
SHARED_SPEC = REPO.parent / "shared" / "spec" / SPEC_FILE
PACKAGED_SPEC = REPO / "src" / "orgate" / "data" / SPEC_FILE


def spec_path() -> Path:
    """Where the OpenAPI document is: ``$ORGATE_SPEC_PATH``, else ``<repo>/../shared/spec``,
    else the package's copy."""
    override = os.environ.get("ORGATE_SPEC_PATH")
    if override:
        return Path(override)
    return SHARED_SPEC if SHARED_SPEC.is_file() else PACKAGED_SPEC


@cache
def spec() -> dict[str, Any]:
    """The OpenAPI document, parsed once."""
    path = spec_path()
    if not path.is_file():
        raise FileNotFoundError(
            f"Open Responses spec not found at {path}; set ORGATE_SPEC_PATH to its location"
        )
    return json.loads(path.read_text(encoding="utf-8"))


def schema_names() -> list[str]:
    """Names of all component schemas, in document order."""
    return list(spec()["components"]["schemas"])


@cache
def _registry() -> Registry:
    resource = Resource.from_contents(spec(), default_specification=DRAFT202012)
    return Registry().with_resource(_SPEC_URI, resource)


@cache
def validator(schema_name: str) -> Draft202012Validator:
    """A compiled (cached) validator for one component schema."""
    if schema_name not in spec()["components"]["schemas"]:
        raise KeyError(f"no schema named {schema_name!r} in {SPEC_FILE}")
    ref = {"$ref": f"{_SPEC_URI}#/components/schemas/{schema_name}"}
    return Draft202012Validator(ref, registry=_registry())


def _path(error: ValidationError) -> str:
    out = "$"
    for part in error.absolute_path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _describe(error: ValidationError) -> str:
    deepest = best_match([error]) if not error.context else best_match(error.context)
    line = f"{_path(error)}: {error.message[:300]}"
    if deepest is not None and deepest is not error:
        line += f"\n      best match: {_path(deepest)}: {deepest.message[:300]}"
    return line


def errors(schema_name: str, obj: Any) -> list[str]:
    """Readable messages for everything in ``obj`` that breaks the schema (empty if valid)."""
    found = sorted(validator(schema_name).iter_errors(obj), key=lambda e: list(map(str, e.path)))
    return [_describe(e) for e in found]


def validate(schema_name: str, obj: Any) -> None:
    """Assert that ``obj`` is valid against ``#/components/schemas/<schema_name>``."""
    problems = errors(schema_name, obj)
    if problems:
        shown = "\n  ".join(problems[:20])
        more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        raise AssertionError(f"not a valid {schema_name}:\n  {shown}{more}")


@cache
def event_schemas() -> dict[str, str]:
    """Streaming event ``type`` -> the name of its schema, read from the spec."""
    out: dict[str, str] = {}
    for name, schema in spec()["components"]["schemas"].items():
        if name.endswith("StreamingEvent"):
            out[schema["properties"]["type"]["enum"][0]] = name
    return out


def validate_event(evt: dict[str, Any]) -> None:
    """Assert that a streaming event dict is valid against the schema for its ``type``."""
    assert isinstance(evt, dict), f"an event must be a JSON object, got {type(evt).__name__}"
    etype = evt.get("type")
    name = event_schemas().get(etype)  # type: ignore[arg-type]
    assert name is not None, f"unknown streaming event type {etype!r}"
    validate(name, evt)


# --------------------------------------------------------------------------- SSE


def _text(raw: bytes | str) -> str:
    text = raw.decode("utf-8") if isinstance(raw, bytes | bytearray) else raw
    return text.replace("\r\n", "\n").replace("\r", "\n")


def parse_sse(raw: bytes | str) -> list[tuple[str | None, str]]:
    """Split an SSE body into ``(event_name, data)`` frames (comments skipped)."""
    frames: list[tuple[str | None, str]] = []
    event: str | None = None
    data: list[str] = []
    for line in _text(raw).split("\n"):
        if line == "":
            if data or event is not None:
                frames.append((event, "\n".join(data)))
            event, data = None, []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            event = value
        elif field == "data":
            data.append(value)
    if data or event is not None:
        frames.append((event, "\n".join(data)))
    return frames


def encode_sse(events: list[dict[str, Any]], *, done: bool = True) -> str:
    """Frame event dicts the way the spec wants them (``event:`` = ``type``, ``[DONE]``)."""
    out = [f"event: {e['type']}\ndata: {json.dumps(e, separators=(',', ':'))}\n\n" for e in events]
    if done:
        out.append("data: [DONE]\n\n")
    return "".join(out)


def check_sse(raw: bytes | str) -> list[dict[str, Any]]:
    """Assert the normative SSE rules and the event grammar; return the event dicts."""
    text = _text(raw)
    for n, line in enumerate(text.split("\n")):
        field = line.partition(":")[0]
        assert field != "id", f"line {n + 1}: SSE 'id:' lines are not allowed: {line!r}"
    frames = parse_sse(text)
    assert frames, "empty SSE stream"
    assert frames[-1][1] == "[DONE]", (
        f"the stream must end with 'data: [DONE]', last frame: {frames[-1]!r}"
    )
    events: list[dict[str, Any]] = []
    for i, (name, data) in enumerate(frames[:-1]):
        assert data != "[DONE]", f"frame {i}: 'data: [DONE]' before the end of the stream"
        try:
            evt = json.loads(data)
        except json.JSONDecodeError as exc:
            raise AssertionError(f"frame {i}: data is not JSON ({exc}): {data[:200]!r}") from None
        assert isinstance(evt, dict), f"frame {i}: data is not a JSON object"
        assert name == evt.get("type"), (
            f"frame {i}: 'event: {name}' does not match the JSON type {evt.get('type')!r}"
        )
        events.append(evt)
    check_events(events)
    return events


# --------------------------------------------------------------------------- event grammar

_TERMINAL = {
    "response.completed": "completed",
    "response.incomplete": "incomplete",
    "response.failed": "failed",
}
_TEXT_DONE = {
    "output_text": "response.output_text.done",
    "refusal": "response.refusal.done",
    "reasoning_text": "response.reasoning.done",
}
_LIFECYCLE = {"response.created", "response.queued", "response.in_progress", *_TERMINAL}


class _Item:
    """What the grammar tracks of the one open output item."""

    def __init__(self, index: int, item: dict[str, Any]) -> None:
        self.index = index
        self.item = item
        self.id = item.get("id")
        self.kind = item.get("type")
        self.parts: dict[int, str] = {}  # content_index -> final text of done parts
        self.open_part: int | None = None  # content_index of the open part
        self.part_kind: str | None = None  # "output_text" | "refusal" | "reasoning_text"...
        self.part_delta = ""
        self.part_text_done: str | None = None
        self.part_logprobs: list[Any] = []  # the open output_text part's deltas' logprobs, in order
        self.summaries: dict[int, str] = {}
        self.open_summary: int | None = None
        self.summary_delta = ""
        self.summary_text_done: str | None = None
        self.args = ""
        self.args_done: str | None = None


def _part_text(part: dict[str, Any]) -> str | None:
    if part.get("type") == "refusal":
        return part.get("refusal")
    return part.get("text")


def check_events(events: list[dict[str, Any]]) -> None:
    """Assert the stream grammar over a list of event dicts (no SSE framing)."""
    assert events, "no events"
    for i, evt in enumerate(events):
        try:
            validate_event(evt)
        except AssertionError as exc:
            raise AssertionError(f"event {i} ({evt.get('type')}): {exc}") from None

    # sequence numbers
    for i in range(1, len(events)):
        a, b = events[i - 1]["sequence_number"], events[i]["sequence_number"]
        assert b > a, f"event {i}: sequence_number {b} does not increase (previous {a})"

    types = [e["type"] for e in events]
    assert types[0] == "response.created", (
        f"the first event must be response.created, got {types[0]}"
    )
    assert len(types) > 1 and types[1] in ("response.in_progress", "response.queued"), (
        f"the second event must be response.in_progress or response.queued, got {types[1:2]}"
    )
    terminals = [i for i, t in enumerate(types) if t in _TERMINAL]
    assert len(terminals) == 1, (
        f"expected exactly one terminal event, found {[types[i] for i in terminals]}"
    )
    assert terminals[0] == len(events) - 1, (
        f"the terminal event {types[terminals[0]]} must be the last event before [DONE]"
    )
    terminal = events[-1]
    status = _TERMINAL[terminal["type"]]
    assert terminal["response"]["status"] == status, (
        f"{terminal['type']} carries a response with status {terminal['response']['status']!r}"
    )
    response_id = events[0]["response"]["id"]
    for i, evt in enumerate(events):
        if evt["type"] in _LIFECYCLE:
            assert evt["response"]["id"] == response_id, f"event {i}: response id changed"
        if evt["type"] == "error":
            assert i + 1 < len(events) and types[i + 1] == "response.failed", (
                f"event {i}: an error event must be followed by response.failed"
            )

    done_items: list[dict[str, Any]] = []
    open_item: _Item | None = None
    incomplete_seen = False

    for i, evt in enumerate(events):
        t = evt["type"]
        where = f"event {i} ({t})"
        if t in _LIFECYCLE or t == "error":
            continue
        if t == "response.output_item.added":
            assert open_item is None, (
                f"{where}: item {open_item.index} is still open (items must not overlap)"
            )  # type: ignore[union-attr]
            assert not incomplete_seen, f"{where}: no item may follow an incomplete item"
            assert evt["output_index"] == len(done_items), (
                f"{where}: output_index {evt['output_index']}, expected {len(done_items)}"
            )
            item = evt["item"]
            assert item is not None, f"{where}: item is null"
            assert item.get("status", "in_progress") == "in_progress", (
                f"{where}: an added item must have status in_progress, got {item.get('status')!r}"
            )
            open_item = _Item(evt["output_index"], item)
            continue

        assert open_item is not None, f"{where}: no output item is open"
        assert evt["output_index"] == open_item.index, (
            f"{where}: output_index {evt['output_index']} but the open item is {open_item.index}"
        )
        if "item_id" in evt:
            assert evt["item_id"] == open_item.id, (
                f"{where}: item_id {evt['item_id']!r} but the open item is {open_item.id!r}"
            )
        it = open_item

        if t == "response.content_part.added":
            assert it.kind in ("message", "reasoning"), (
                f"{where}: content parts on a {it.kind} item"
            )
            assert it.open_part is None, f"{where}: part {it.open_part} is still open"
            assert evt["content_index"] == len(it.parts), (
                f"{where}: content_index {evt['content_index']}, expected {len(it.parts)}"
            )
            it.open_part = evt["content_index"]
            it.part_kind = evt["part"]["type"]
            it.part_delta, it.part_text_done, it.part_logprobs = "", None, []
        elif t in (
            "response.output_text.delta",
            "response.refusal.delta",
            "response.reasoning.delta",
        ):
            expected = {
                "response.output_text.delta": "output_text",
                "response.refusal.delta": "refusal",
                "response.reasoning.delta": "reasoning_text",
            }[t]
            assert it.open_part == evt["content_index"], (
                f"{where}: content part {evt['content_index']} is not open"
            )
            assert it.part_kind == expected, f"{where}: delta for a {it.part_kind} part"
            assert it.part_text_done is None, f"{where}: delta after the part's text is done"
            it.part_delta += evt["delta"]
            it.part_logprobs += evt.get("logprobs") or []
        elif t in ("response.output_text.done", "response.refusal.done", "response.reasoning.done"):
            assert it.open_part == evt["content_index"], (
                f"{where}: content part {evt['content_index']} is not open"
            )
            assert it.part_text_done is None, f"{where}: text done twice"
            value = evt["refusal"] if t == "response.refusal.done" else evt["text"]
            assert value == it.part_delta, (
                f"{where}: done value {value[:80]!r} != concatenated deltas {it.part_delta[:80]!r}"
            )
            it.part_text_done = value
            if t == "response.output_text.done" and "logprobs" in evt:
                assert evt["logprobs"] == it.part_logprobs, (
                    f"{where}: done logprobs != the deltas' logprobs"
                )
        elif t == "response.output_text.annotation.added":
            assert it.open_part == evt["content_index"], (
                f"{where}: content part {evt['content_index']} is not open"
            )
            assert it.part_kind == "output_text", f"{where}: annotation on a {it.part_kind} part"
        elif t == "response.content_part.done":
            assert it.open_part == evt["content_index"], (
                f"{where}: content part {evt['content_index']} is not open"
            )
            text = _part_text(evt["part"])
            assert evt["part"].get("type") == it.part_kind, (
                f"{where}: part type changed from {it.part_kind}"
            )
            if it.part_kind in _TEXT_DONE:
                assert it.part_text_done is not None, (
                    f"{where}: part done before its {_TEXT_DONE[it.part_kind]} event"
                )
                assert text == it.part_text_done, (
                    f"{where}: part text {str(text)[:80]!r} != done text {it.part_text_done[:80]!r}"
                )
            if it.part_kind == "output_text" and "logprobs" in evt["part"]:
                assert evt["part"]["logprobs"] == it.part_logprobs, (
                    f"{where}: part logprobs != the deltas' logprobs"
                )
            it.parts[it.open_part] = text or ""
            it.open_part = None
        elif t == "response.reasoning_summary_part.added":
            assert it.kind == "reasoning", f"{where}: summary part on a {it.kind} item"
            assert it.open_summary is None, f"{where}: summary part {it.open_summary} is still open"
            assert evt["summary_index"] == len(it.summaries), (
                f"{where}: summary_index {evt['summary_index']}, expected {len(it.summaries)}"
            )
            it.open_summary = evt["summary_index"]
            it.summary_delta, it.summary_text_done = "", None
        elif t == "response.reasoning_summary_text.delta":
            assert it.open_summary == evt["summary_index"], f"{where}: summary part not open"
            assert it.summary_text_done is None, f"{where}: delta after the summary text is done"
            it.summary_delta += evt["delta"]
        elif t == "response.reasoning_summary_text.done":
            assert it.open_summary == evt["summary_index"], f"{where}: summary part not open"
            assert evt["text"] == it.summary_delta, f"{where}: done text != concatenated deltas"
            it.summary_text_done = evt["text"]
        elif t == "response.reasoning_summary_part.done":
            assert it.open_summary == evt["summary_index"], f"{where}: summary part not open"
            assert it.summary_text_done is not None, f"{where}: part done before its text done"
            assert evt["part"].get("text") == it.summary_text_done, (
                f"{where}: part text != done text"
            )
            it.summaries[it.open_summary] = evt["part"].get("text", "")
            it.open_summary = None
        elif t == "response.function_call_arguments.delta":
            assert it.kind == "function_call", f"{where}: arguments delta on a {it.kind} item"
            assert it.args_done is None, f"{where}: arguments delta after arguments done"
            it.args += evt["delta"]
        elif t == "response.function_call_arguments.done":
            assert it.kind == "function_call", f"{where}: arguments done on a {it.kind} item"
            assert it.args_done is None, f"{where}: arguments done twice"
            assert evt["arguments"] == it.args, (
                f"{where}: arguments {evt['arguments'][:80]!r} != concatenated deltas "
                f"{it.args[:80]!r}"
            )
            it.args_done = evt["arguments"]
        elif t == "response.output_item.done":
            item = evt["item"]
            assert item is not None, f"{where}: item is null"
            assert it.open_part is None, f"{where}: content part {it.open_part} is still open"
            assert it.open_summary is None, f"{where}: summary part {it.open_summary} is still open"
            assert item.get("type") == it.kind, f"{where}: item type changed from {it.kind}"
            assert item.get("id") == it.id, f"{where}: item id changed from {it.id!r}"
            item_status = item.get("status")
            assert item_status in (None, "completed", "incomplete"), (
                f"{where}: a done item must be completed or incomplete, got {item_status!r}"
            )
            if it.kind == "message":
                texts = [_part_text(p) for p in item.get("content", [])]
                assert len(texts) == len(it.parts), (
                    f"{where}: {len(texts)} content parts, {len(it.parts)} were streamed"
                )
                for k, text in enumerate(texts):
                    assert text == it.parts[k], (
                        f"{where}: content[{k}] text differs from the streamed part"
                    )
            elif it.kind == "function_call":
                assert it.args_done is not None, f"{where}: item done before arguments done"
                assert item.get("arguments") == it.args_done, (
                    f"{where}: item arguments differ from the streamed arguments"
                )
            elif it.kind == "reasoning":
                summary = [p.get("text") for p in item.get("summary", [])]
                assert summary == [it.summaries[k] for k in range(len(it.summaries))], (
                    f"{where}: summary differs from the streamed summary parts"
                )
            if item_status == "incomplete":
                incomplete_seen = True
            done_items.append(item)
            open_item = None
        else:
            raise AssertionError(f"{where}: unexpected event type")

    output = terminal["response"]["output"]
    if status == "failed":
        assert output[: len(done_items)] == done_items and len(output) <= len(done_items) + 1, (
            "the failed response's output must be the done items (plus at most the open one)"
        )
    else:
        assert open_item is None, f"output item {len(done_items)} was never done"
        assert output == done_items, (
            f"the terminal response's output ({len(output)} items) differs from the "
            f"output_item.done items ({len(done_items)})"
        )
        if incomplete_seen:
            assert status == "incomplete", "an incomplete item requires an incomplete response"
