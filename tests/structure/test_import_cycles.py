"""No import cycle inside ``orgate``: between modules, and between the children of any package.

The graph is grimp's (the one import-linter checks the contracts on): it reads every import of a
module, those inside functions included. Imports under ``if TYPE_CHECKING:`` are left out: they
never run, and they are how a protocol names the types of the code that calls it.

Two checks: no strongly connected component of more than one module; and, for every package, no
cycle between its children, each child standing for itself and everything under it (a module of
``a`` importing ``b`` while a module of ``b`` imports ``a`` is a cycle between ``a`` and ``b``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import grimp
import pytest

Edges = Mapping[str, set[str]]


def strongly_connected(nodes: Iterable[str], edges: Edges) -> list[list[str]]:
    """The components of more than one node (Tarjan's algorithm, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(nodes):
        if root in index:
            continue
        work: list[tuple[str, list[str]]] = [(root, sorted(edges.get(root, ())))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, todo = work[-1]
            if todo:
                nxt = todo.pop(0)
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(edges.get(nxt, ()))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def module_edges(graph: grimp.ImportGraph) -> dict[str, set[str]]:
    return {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}


def sibling_edges(graph: grimp.ImportGraph, package: str) -> dict[str, set[str]]:
    """Child → children it imports, each child standing for its whole subtree."""
    children = graph.find_children(package)

    def child_of(module: str) -> str | None:
        for child in children:
            if module == child or module.startswith(child + "."):
                return child
        return None

    edges: dict[str, set[str]] = {child: set() for child in children}
    for module in graph.find_descendants(package):
        source = child_of(module)
        for imported in graph.find_modules_directly_imported_by(module):
            target = child_of(imported)
            if source and target and source != target:
                edges[source].add(target)
    return edges


def describe(graph: grimp.ImportGraph, component: list[str], owner: Callable[[str], str]) -> str:
    """The component and every import inside it, with its line, for the failure message."""
    members = set(component)
    lines = [" <-> ".join(component)]
    for module in sorted(graph.modules):
        if owner(module) not in members:
            continue
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            target = owner(imported)
            if target in members and target != owner(module):
                for detail in graph.get_import_details(importer=module, imported=imported):
                    lines.append(f"    {module}:{detail['line_number']} imports {imported}")
    return "\n".join(lines)


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("orgate", cache_dir=None, exclude_type_checking_imports=True)


def test_no_cycle_between_modules(graph: grimp.ImportGraph) -> None:
    cycles = strongly_connected(graph.modules, module_edges(graph))
    report = "\n".join(describe(graph, c, lambda m: m) for c in cycles)
    assert not cycles, f"import cycles between modules:\n{report}"


def test_no_cycle_between_the_children_of_a_package(graph: grimp.ImportGraph) -> None:
    reports: list[str] = []
    for package in sorted(m for m in graph.modules if graph.find_children(m)):
        edges = sibling_edges(graph, package)
        children = graph.find_children(package)

        def owner(module: str, children: set[str] = children) -> str:
            return next((c for c in children if module == c or module.startswith(c + ".")), "")

        for component in strongly_connected(edges, edges):
            reports.append(f"in {package}: " + describe(graph, component, owner))
    assert not reports, "import cycles between packages:\n" + "\n".join(reports)


def test_the_checks_find_the_cycles_of_a_made_up_graph() -> None:
    """A graph with the shape the checks must refuse: each finds its cycle."""
    graph = grimp.ImportGraph()
    for module in ("pkg", "pkg.a", "pkg.a.x", "pkg.b", "pkg.c"):
        graph.add_module(module)
    graph.add_import(importer="pkg.a.x", imported="pkg.b", line_number=3, line_contents="")
    graph.add_import(importer="pkg.b", imported="pkg.a", line_number=9, line_contents="")
    graph.add_import(importer="pkg.c", imported="pkg.b", line_number=1, line_contents="")
    assert strongly_connected(graph.modules, module_edges(graph)) == []
    assert strongly_connected(["pkg.a", "pkg.b", "pkg.c"], sibling_edges(graph, "pkg")) == [
        ["pkg.a", "pkg.b"]
    ]
    graph.add_import(importer="pkg.a", imported="pkg.c", line_number=5, line_contents="")
    assert strongly_connected(graph.modules, module_edges(graph)) == [["pkg.a", "pkg.b", "pkg.c"]]
