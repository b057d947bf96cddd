"""The SQLite review queue: add, list, show, resolve, discard; survives reopening."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from orgate.structured.review import UNASSIGNED, NewReview, ReviewError, ReviewNotFound, ReviewQueue

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


def test_each_tenant_sees_only_its_own_entries(tmp_path: Path) -> None:
    q = ReviewQueue(tmp_path / "r.db")
    a = q.add(entry(tenant="a"))
    b = q.add(entry(tenant="b"))
    assert [i.id for i in q.list(tenant="b")] == [b] and q.count(tenant="b") == 1
    assert [i.id for i in q.list()] == [a, b]  # tenant None: an admin key, the CLI
    assert q.get(a, tenant="b") is None and q.get(a, tenant="a") is not None
    for act in (lambda: q.discard(a, tenant="b"), lambda: q.resolve(a, {"sku": "X"}, tenant="b")):
        with pytest.raises(ReviewNotFound):  # another tenant's entry is a missing one
            act()
    item = q.get(a)
    assert item is not None and item.status == "pending" and item.tenant == "a"
    assert q.discard(a, tenant="a").status == "discarded"
    with pytest.raises(ReviewError, match="already discarded"):
        q.discard(a, tenant="a")
    assert q.resolve(b, {"sku": "B"}).tenant == "b"  # tenant None resolves any


def test_a_queue_from_before_tenants_gets_the_column(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:  # the table as older versions made it
        db.executescript(
            """CREATE TABLE structured_review (id TEXT PRIMARY KEY, created_at REAL NOT NULL,
            status TEXT NOT NULL DEFAULT 'pending', model TEXT NOT NULL, format_name TEXT NOT NULL,
            mode TEXT NOT NULL, stage TEXT NOT NULL, errors TEXT NOT NULL, schema TEXT,
            request TEXT NOT NULL, attempts TEXT NOT NULL, response_id TEXT, resolution TEXT,
            resolved_at REAL, note TEXT);
            INSERT INTO structured_review
            (id, created_at, model, format_name, mode, stage, errors, request, attempts)
            VALUES ('rev_old', 1.0, 'm', 'f', 'json_schema', 'schema', '[]', '{}', '[]');"""
        )
    db.close()
    q = ReviewQueue(path)
    old = q.get("rev_old")
    assert old is not None and old.tenant == UNASSIGNED == ""
    assert q.list(tenant="default") == [] and q.get("rev_old", tenant="default") is None
    new = q.add(entry(tenant="default"))
    assert [i.id for i in q.list(tenant="default")] == [new]
    assert [i.id for i in ReviewQueue(path).list(tenant=UNASSIGNED)] == [
        "rev_old"
    ]  # reopening is a no-op
