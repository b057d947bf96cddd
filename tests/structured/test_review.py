"""The SQLite review queue: add, list, show, resolve, discard; survives reopening."""

from __future__ import annotations

from pathlib import Path

import pytest

from orgate.structured.review import NewReview, ReviewError, ReviewQueue

SCHEMA = {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}


def entry(**kw: object) -> NewReview:
    base = dict(
        model="m",
        format_name="product",
        mode="json_schema_strict",
        stage="schema",
        errors=["missing required key sku"],
        schema=SCHEMA,
        request={"input": [{"role": "user", "content": "hi"}]},
        attempts=[{"number": 1, "text": "{}"}],
    )
    base.update(kw)
    return NewReview(**base)  # type: ignore[arg-type]


def test_queue_survives_restart(tmp_path: Path) -> None:
    db = tmp_path / "sub" / "review.db"
    first = ReviewQueue(db)
    a = first.add(entry())
    b = first.add(entry(format_name="invoice"))
    del first
    again = ReviewQueue(db)  # a restart: a new process would do exactly this
    assert [i.id for i in again.list()] == [a, b]
    item = again.get(a)
    assert (
        item is not None and item.errors == ["missing required key sku"] and item.schema == SCHEMA
    )
    assert item.request["input"][0]["content"] == "hi" and item.status == "pending"
    assert again.count() == 2


def test_resolve_validates_against_the_schema(tmp_path: Path) -> None:
    q = ReviewQueue(tmp_path / "r.db")
    rid = q.add(entry())
    with pytest.raises(ReviewError, match="missing required key sku"):
        q.resolve(rid, {})
    done = q.resolve(rid, {"sku": "A1"}, note="fixed by hand")
    assert (
        done.status == "resolved"
        and done.resolution == {"sku": "A1"}
        and done.note == "fixed by hand"
    )
    assert ReviewQueue(tmp_path / "r.db").get(rid).resolution == {"sku": "A1"}  # type: ignore[union-attr]
    with pytest.raises(ReviewError, match="already resolved"):
        q.discard(rid)
    assert q.list() == [] and len(q.list(None)) == 1 and len(q.list("resolved")) == 1


def test_discard_and_unknown(tmp_path: Path) -> None:
    q = ReviewQueue(tmp_path / "r.db")
    rid = q.add(entry())
    assert q.discard(rid).status == "discarded"
    with pytest.raises(ReviewError, match="no review entry"):
        q.resolve("rev_nope", {})
    with pytest.raises(ReviewError, match="no review entry"):
        q.discard("rev_nope")
    assert q.get("rev_nope") is None


def test_force_accepts_any_value(tmp_path: Path) -> None:
    q = ReviewQueue(tmp_path / "r.db")
    rid = q.add(entry())
    assert q.resolve(rid, [1, 2], force=True).resolution == [1, 2]
