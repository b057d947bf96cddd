"""docs/architecture.md's package table and layers say what the code imports.

The "imports of ours" column of the package table must list, for each top-level package of
``orgate``, exactly the other top-level packages it imports (grimp's graph: imports inside
functions and under ``TYPE_CHECKING`` included), and the table must name every top-level
package. The layers block must put each package above everything it imports.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import grimp
import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"
TABLE_HEADING = "## Packages and what they import"
NAME = re.compile(r"`([a-z_]+)(?:/|\.py)?`")

Imports = Mapping[str, frozenset[str]]


def top_level_imports(graph: grimp.ImportGraph, root: str = "orgate") -> dict[str, frozenset[str]]:
    """Each top-level package or module of ``root`` → the other top-level ones it imports."""
    tops = graph.find_children(root)

    def top(module: str) -> str | None:
        parts = module.split(".")
        return parts[1] if len(parts) > 1 and parts[0] == root else None

    found: dict[str, set[str]] = {name.split(".")[1]: set() for name in tops}
    for module in graph.modules:
        source = top(module)
        if source is None:
            continue
        for imported in graph.find_modules_directly_imported_by(module):
            target = top(imported)
            if target is not None and target != source:
                found[source].add(target)
    return {name: frozenset(targets) for name, targets in found.items()}


def documented_imports(text: str) -> dict[str, frozenset[str]]:
    """The package table's rows: package → the names in its "imports of ours" cell."""
    section = text.split(TABLE_HEADING, 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    table: dict[str, frozenset[str]] = {}
    for row in rows:
        cells = [cell.strip() for cell in row.strip().strip("|").split(" | ")]
        assert len(cells) == 3, f"a package row has three cells: {row[:80]}"
        package = NAME.fullmatch(cells[0])
        assert package, f"the first cell names one package: {cells[0]}"
        imports = cells[2]
        names = frozenset() if imports == "none" else frozenset(NAME.findall(imports))
        assert imports == "none" or ", ".join(f"`{n}`" for n in sorted(names)) == imports, (
            f"{package[1]}: the imports cell is `a`, `b`, … in order, or none: {imports}"
        )
        assert package[1] not in table, f"{package[1]} has two rows"
        table[package[1]] = names
    return table


def documented_layers(text: str) -> dict[str, int]:
    """The layers block (the code block whose lines start with a row number): package → row."""
    for block in re.findall(r"```\n(.*?)```", text, flags=re.S):
        lines = [line.split() for line in block.splitlines() if line.strip()]
        if lines and all(line[0].isdigit() for line in lines):
            rows = [(int(line[0]), name) for line in lines for name in line[1:]]
            names = [name for _, name in rows]
            assert len(names) == len(set(names)), f"a package on two rows: {sorted(names)}"
            return {name: row for row, name in rows}
    raise AssertionError("docs/architecture.md has no layers block")


def layer_violations(level: Mapping[str, int], imports: Imports) -> list[str]:
    return [
        f"{source} (row {level[source]}) imports {target} (row {level[target]})"
        for source, targets in sorted(imports.items())
        for target in sorted(targets)
        if level[target] >= level[source]
    ]


def differences(documented: Imports, actual: Imports) -> list[str]:
    problems = [f"{name}: no row in the table" for name in sorted(actual.keys() - documented)]
    problems += [f"{name}: a row for no package" for name in sorted(documented.keys() - actual)]
    for name in sorted(documented.keys() & actual.keys()):
        if missing := actual[name] - documented[name]:
            problems.append(f"{name} imports {sorted(missing)}, which the table leaves out")
        if extra := documented[name] - actual[name]:
            problems.append(f"{name} does not import {sorted(extra)}, which the table lists")
    return problems


@pytest.fixture(scope="module")
def actual() -> dict[str, frozenset[str]]:
    graph = grimp.build_graph("orgate", cache_dir=None, exclude_type_checking_imports=False)
    return top_level_imports(graph)


def test_the_table_lists_exactly_what_each_package_imports(actual: Imports) -> None:
    problems = differences(documented_imports(DOC.read_text()), actual)
    assert not problems, "docs/architecture.md's package table is out of date:\n" + "\n".join(
        problems
    )


def test_the_layers_put_each_package_above_what_it_imports(actual: Imports) -> None:
    layers = documented_layers(DOC.read_text())
    missing, extra = sorted(set(actual) - set(layers)), sorted(set(layers) - set(actual))
    assert not missing and not extra, f"layers block: missing {missing}, extra {extra}"
    problems = layer_violations(layers, actual)
    assert not problems, "docs/architecture.md's layers:\n" + "\n".join(problems)


def test_a_new_import_between_packages_is_found() -> None:
    """A made-up package graph: the table and the layers that held fail once an import is added."""
    graph = grimp.ImportGraph()
    for module in ("orgate", "orgate.a", "orgate.a.x", "orgate.b", "orgate.c"):
        graph.add_module(module)
    graph.add_import(importer="orgate.a.x", imported="orgate.b", line_number=1, line_contents="")
    text = (
        f"{TABLE_HEADING}\n\n| package | owns | imports of ours |\n|---|---|---|\n"
        "| `a/` | x | `b` |\n| `b.py` | y | none |\n| `c.py` | z | none |\n\n"
        "```\n1  a\n0  b  c\n```\n"
    )
    documented = documented_imports(text)
    layers = documented_layers(text)
    assert differences(documented, top_level_imports(graph)) == []
    assert layer_violations(layers, top_level_imports(graph)) == []
    graph.add_import(importer="orgate.b", imported="orgate.c", line_number=2, line_contents="")
    assert differences(documented, top_level_imports(graph)) == [
        "b imports ['c'], which the table leaves out"
    ]
    assert layer_violations(layers, top_level_imports(graph)) == ["b (row 0) imports c (row 0)"]
