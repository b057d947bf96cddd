"""Ready-made spec-valid wire objects for tests (a response body, whole event streams),
and ``output_text``."""

from __future__ import annotations

import copy
from typing import Any


def response(**overrides: Any) -> dict[str, Any]:
    """A complete, spec-valid ``ResponseResource`` dict (status ``completed``, no output)."""
    body: dict[str, Any] = {
        "id": "resp_test",
        "object": "response",
        "created_at": 1_700_000_000,
        "completed_at": 1_700_000_001,
        "status": "completed",
        "incomplete_details": None,
        "model": "test-model",
        "previous_response_id": None,
        "instructions": None,
        "output": [],
        "error": None,
        "tools": [],
        "tool_choice": "auto",
        "truncation": "disabled",
        "parallel_tool_calls": True,
        "text": {"format": {"type": "text"}},
        "top_p": 1.0,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "top_logprobs": 0,
        "temperature": 1.0,
        "reasoning": None,
        "usage": {
            "input_tokens": 3,
            "output_tokens": 2,
            "total_tokens": 5,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
        "max_output_tokens": None,
        "max_tool_calls": None,
        "store": True,
        "background": False,
        "service_tier": "default",
        "metadata": {},
        "safety_identifier": None,
        "prompt_cache_key": None,
    }
    body.update(overrides)
    return body


class StreamBuilder:
    """Builds a spec-correct event list; each method appends the events of one item."""

    def __init__(self, response_id: str = "resp_test") -> None:
        self.events: list[dict[str, Any]] = []
        self.items: list[dict[str, Any]] = []
        self.response_id = response_id
        self._emit("response.created", response=self._resp("in_progress"))
        self._emit("response.in_progress", response=self._resp("in_progress"))

    def _resp(self, status: str) -> dict[str, Any]:
        return response(
            id=self.response_id,
            status=status,
            output=copy.deepcopy(self.items) if status != "in_progress" else [],
            completed_at=None if status == "in_progress" else 1_700_000_001,
            usage=None if status == "in_progress" else response()["usage"],
        )

    def _emit(self, type_: str, **fields: Any) -> dict[str, Any]:
        evt = copy.deepcopy({"type": type_, "sequence_number": len(self.events), **fields})
        self.events.append(evt)
        return evt

    def message(self, *deltas: str, status: str = "completed") -> StreamBuilder:
        idx, item_id = len(self.items), f"msg_{len(self.items)}"
        base = {"type": "message", "id": item_id, "role": "assistant"}
        self._emit(
            "response.output_item.added",
            output_index=idx,
            item={**base, "status": "in_progress", "content": []},
        )
        loc = {"item_id": item_id, "output_index": idx, "content_index": 0}
        self._emit(
            "response.content_part.added",
            **loc,
            part={"type": "output_text", "text": "", "annotations": []},
        )
        for d in deltas:
            self._emit("response.output_text.delta", **loc, delta=d)
        text = "".join(deltas)
        part = {"type": "output_text", "text": text, "annotations": []}
        self._emit("response.output_text.done", **loc, text=text)
        self._emit("response.content_part.done", **loc, part=part)
        item = {**base, "status": status, "content": [part]}
        self._emit("response.output_item.done", output_index=idx, item=item)
        self.items.append(item)
        return self

    def function_call(self, name: str, *deltas: str, call_id: str = "call_1") -> StreamBuilder:
        idx, item_id = len(self.items), f"fc_{len(self.items)}"
        base = {"type": "function_call", "id": item_id, "call_id": call_id, "name": name}
        self._emit(
            "response.output_item.added",
            output_index=idx,
            item={**base, "arguments": "", "status": "in_progress"},
        )
        for d in deltas:
            self._emit(
                "response.function_call_arguments.delta", item_id=item_id, output_index=idx, delta=d
            )
        args = "".join(deltas)
        self._emit(
            "response.function_call_arguments.done",
            item_id=item_id,
            output_index=idx,
            arguments=args,
        )
        item = {**base, "arguments": args, "status": "completed"}
        self._emit("response.output_item.done", output_index=idx, item=item)
        self.items.append(item)
        return self

    def reasoning(self, *summary_deltas: str) -> StreamBuilder:
        idx, item_id = len(self.items), f"rs_{len(self.items)}"
        self._emit(
            "response.output_item.added",
            output_index=idx,
            item={"type": "reasoning", "id": item_id, "summary": []},
        )
        loc = {"item_id": item_id, "output_index": idx, "summary_index": 0}
        self._emit(
            "response.reasoning_summary_part.added",
            **loc,
            part={"type": "summary_text", "text": ""},
        )
        for d in summary_deltas:
            self._emit("response.reasoning_summary_text.delta", **loc, delta=d)
        text = "".join(summary_deltas)
        part = {"type": "summary_text", "text": text}
        self._emit("response.reasoning_summary_text.done", **loc, text=text)
        self._emit("response.reasoning_summary_part.done", **loc, part=part)
        item = {"type": "reasoning", "id": item_id, "summary": [part]}
        self._emit("response.output_item.done", output_index=idx, item=item)
        self.items.append(item)
        return self

    def completed(self) -> list[dict[str, Any]]:
        self._emit("response.completed", response=self._resp("completed"))
        return self.events

    def incomplete(self) -> list[dict[str, Any]]:
        resp = self._resp("incomplete")
        resp["incomplete_details"] = {"reason": "max_output_tokens"}
        self._emit("response.incomplete", response=resp)
        return self.events

    def failed(self, message: str = "upstream failed") -> list[dict[str, Any]]:
        self._emit(
            "error",
            error={
                "type": "server_error",
                "code": "upstream_error",
                "message": message,
                "param": None,
            },
        )
        resp = self._resp("failed")
        resp["error"] = {"code": "upstream_error", "message": message}
        self._emit("response.failed", response=resp)
        return self.events


def output_text(response: dict[str, Any]) -> str:
    """The text of a response's ``output_text`` parts, in order."""
    return "".join(
        part.get("text", "")
        for item in response["output"]
        if item.get("type") == "message"
        for part in item.get("content", [])
        if part.get("type") == "output_text"
    )
