"""The store's body rewrite (``store/codec.py``), as recovery uses it to mark a response failed."""

from __future__ import annotations

import orjson
import pytest

from orgate.store.codec import rewrite_status


def test_the_status_and_error_are_rewritten_in_the_body() -> None:
    body = orjson.dumps({"id": "resp_bg", "status": "in_progress", "error": None, "output": []})
    cancelled = orjson.loads(rewrite_status(body, "cancelled", None))
    assert cancelled == {"id": "resp_bg", "status": "cancelled", "error": None, "output": []}
    error = {"code": "server_error", "message": "boom"}
    failed = orjson.loads(rewrite_status(body, "failed", error))
    assert failed["status"] == "failed" and failed["error"] == error


def test_an_unknown_status_is_refused() -> None:
    with pytest.raises(ValueError):
        rewrite_status(b'{"status": "in_progress"}', "exploded", None)
