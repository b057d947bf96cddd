"""``orgate schema check|strictify`` and ``orgate review`` through ``register``."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import pytest

from orgate.store import open_store
from orgate.structured.cli import register
from orgate.structured.review import NewReview, ReviewQueue
from orgate.structured.review_store import StoreReviews, import_review_file


def run(argv: list[str], hook: object = None) -> int:
    parser = argparse.ArgumentParser(prog="orgate")
    register(parser.add_subparsers(dest="command", required=True), review_db=hook)  # type: ignore[arg-type]
    args = parser.parse_args(argv)
    return int(args.func(args))


def write(tmp_path: Path, schema: object) -> str:
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(schema))
    return str(path)


def test_schema_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    loose = {"type": "object", "properties": {"a": {"type": "string"}}}
    assert run(["schema", "check", write(tmp_path, loose)]) == 1
    out = capsys.readouterr().out
    assert "/additionalProperties: additionalProperties must be false" in out
    assert "/properties/a: optional property 'a' made required and nullable" in out
    strict = {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "required": ["a"],
        "additionalProperties": False,
    }
    assert run(["schema", "check", write(tmp_path, strict)]) == 0
    capsys.readouterr()
    assert run(["schema", "check", "--json", write(tmp_path, loose)]) == 1
    found = json.loads(capsys.readouterr().out)
    assert {
        "path": "/properties/a",
        "rule": "required",
        "message": "optional property 'a' made required and nullable",
        "fixable": True,
    } in found


def test_schema_check_text_format_wrapper(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fmt = {
        "type": "json_schema",
        "name": "x",
        "schema": {"type": "object", "properties": {}, "additionalProperties": False},
    }
    assert run(["schema", "check", "--json", write(tmp_path, fmt)]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_schema_strictify(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        run(
            [
                "schema",
                "strictify",
                write(tmp_path, {"type": "object", "properties": {"a": {"type": "string"}}}),
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out == {
        "type": "object",
        "properties": {"a": {"type": ["string", "null"]}},
        "additionalProperties": False,
        "required": ["a"],
    }
    assert (
        run(
            [
                "schema",
                "strictify",
                write(tmp_path, {"type": "object", "patternProperties": {"x": {}}}),
            ]
        )
        == 1
    )
    captured = capsys.readouterr()
    # what could be fixed is written (a redirect never leaves an empty file), the rest reported
    partial = json.loads(captured.out)
    assert partial["patternProperties"] == {"x": {}}
    assert captured.err.startswith("orgate: error: fixed 0 violation(s); 2 cannot be fixed")
    assert "/patternProperties" in captured.err


def test_review_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "review.db"
    q = ReviewQueue(db)
    rid = q.add(
        NewReview(
            "m",
            "product",
            "json_schema",
            "schema",
            ["missing required key sku"],
            {"type": "object", "required": ["sku"]},
            {},
            [],
        )
    )
    assert run(["review", "list", "--db", str(db)]) == 0
    assert rid in capsys.readouterr().out
    assert run(["review", "show", rid], hook=lambda args: ("file", str(db))) == 0
    assert json.loads(capsys.readouterr().out)["errors"] == ["missing required key sku"]
    assert run(["review", "resolve", rid, "--db", str(db), "--value", "{}"]) == 1
    assert "missing required key sku" in capsys.readouterr().err
    assert run(["review", "resolve", rid, "--db", str(db), "--value", '{"sku": "A"}']) == 0
    assert f"{rid}: resolved" in capsys.readouterr().out
    assert run(["review", "list", "--db", str(db)]) == 0
    assert "no entries" in capsys.readouterr().err
    assert run(["review", "list", "--all", "--json", "--db", str(db)]) == 0
    assert json.loads(capsys.readouterr().out)[0]["resolution"] == {"sku": "A"}
    assert run(["review", "show", "rev_missing", "--db", str(db)]) == 1


def test_review_commands_show_and_filter_the_tenant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "review.db"
    q = ReviewQueue(db)
    schema = {"type": "object"}
    a = q.add(
        NewReview("m", "product", "json_schema", "schema", ["bad"], schema, {}, [], tenant="team-a")
    )
    b = q.add(
        NewReview("m", "product", "json_schema", "schema", ["bad"], schema, {}, [], tenant="team-b")
    )
    assert run(["review", "list", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert a in out and b in out and "team-a" in out and "team-b" in out
    assert run(["review", "list", "--db", str(db), "--tenant", "team-b"]) == 0
    out = capsys.readouterr().out
    assert b in out and a not in out
    assert run(["review", "show", a, "--db", str(db), "--tenant", "team-b"]) == 1
    assert run(["review", "resolve", a, "--db", str(db), "--tenant", "team-b", "--discard"]) == 1
    assert f"no review entry {a}" in capsys.readouterr().err
    assert run(["review", "show", a, "--db", str(db)]) == 0
    assert json.loads(capsys.readouterr().out)["tenant"] == "team-a"


def test_review_commands_read_the_configured_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The queue ``orgate serve`` keeps in its response store, and an earlier review file
    imported into it once (renamed ``.imported``: an import again finds nothing to do)."""
    old = tmp_path / "review.db"
    kept = ReviewQueue(old).add(
        NewReview("m", "product", "json_schema", "schema", ["bad"], {"type": "object"}, {}, [])
    )
    url = f"sqlite:///{tmp_path / 'orgate.db'}"
    hook = lambda args: ("store", url)  # noqa: E731
    assert run(["review", "list"], hook=hook) == 0  # no store yet: no entries, nothing created
    assert "no entries" in capsys.readouterr().err and not (tmp_path / "orgate.db").exists()

    async def seed() -> str:
        store = await open_store(url, heartbeat_interval=0)
        try:
            assert await import_review_file(old, store) == 1
            assert await import_review_file(old, store) is None  # renamed: done once
            return await StoreReviews(store).add(
                NewReview("m", "person", "json_schema", "schema", ["x"], {"type": "object"}, {}, [])
            )
        finally:
            await store.close()

    added = asyncio.run(seed())
    assert not old.exists() and (tmp_path / "review.db.imported").exists()
    assert run(["review", "list"], hook=hook) == 0
    out = capsys.readouterr().out
    assert kept in out and added in out
    assert run(["review", "resolve", kept, "--value", '{"a": 1}'], hook=hook) == 0
    assert f"{kept}: resolved" in capsys.readouterr().out
    assert run(["review", "resolve", kept, "--discard"], hook=hook) == 1
    assert "already resolved" in capsys.readouterr().err
