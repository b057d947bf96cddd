"""Rewrite the catalogue table of docs/translation.md from ``orgate.neutral.ledger``.

Run after changing the catalogue: ``python scripts/translation_doc.py`` (a test fails until
the table and the enum agree).
"""

from __future__ import annotations

import pathlib
import sys

from orgate.neutral.ledger import markdown_table

START = "<!-- translation-catalogue:start -->\n"
END = "<!-- translation-catalogue:end -->"
DOC = pathlib.Path(__file__).resolve().parent.parent / "docs" / "translation.md"


def render(text: str) -> str:
    """``text`` with the table between the markers replaced by the catalogue's."""
    head, _, rest = text.partition(START)
    _, _, tail = rest.partition(END)
    return f"{head}{START}{markdown_table()}{END}{tail}"


def main() -> int:
    text = DOC.read_text(encoding="utf-8")
    if START not in text or END not in text:
        print(f"{DOC}: the catalogue markers are missing", file=sys.stderr)
        return 1
    DOC.write_text(render(text), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
