"""The import graph of ``tta``: no circle between its packages (``tta.data``, ``tta.shifts``, ... and the top-level
modules such as ``tta.run``), so every package can be read and tested on top of the ones below it."""

from __future__ import annotations

import ast
from pathlib import Path

import tta

ROOT = Path(tta.__file__).resolve().parent


def _unit(module: str) -> str:
    """The package (``tta.data``) or top-level module (``tta.run``) a module belongs to."""
    return ".".join(module.split(".")[:2])


def _exists(unit: str) -> bool:
    path = ROOT.parent / unit.replace(".", "/")
    return path.is_dir() or path.with_suffix(".py").is_file()


def package_graph() -> dict[str, set[str]]:
    """{unit: units it imports}, from every import statement, including those inside functions."""
    graph: dict[str, set[str]] = {}
    for file in ROOT.rglob("*.py"):
        parts = file.relative_to(ROOT.parent).with_suffix("").parts
        unit = _unit(".".join(parts))
        deps = graph.setdefault(unit, set())
        for node in ast.walk(ast.parse(file.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            deps.update(_unit(n) for n in names if n.startswith("tta.") and _exists(_unit(n)) and _unit(n) != unit)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_cycle_finder_finds_a_constructed_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_packages_import_each_other_in_one_direction_only():
    graph = package_graph()
    assert {"tta.data", "tta.shifts", "tta.models", "tta.adapters", "tta.run"} <= set(graph)
    assert cycles(graph) == [], "import circle between packages of tta"
