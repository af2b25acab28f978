"""The import graph of ``tta``: no circle between its packages (``tta.data``, ``tta.shifts``, ... and the top-level
modules such as ``tta.run``) nor between its modules, so every package and file can be read and tested on top of the
ones below it. Imports inside functions count: deferring an import hides a circle, it does not remove it."""

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


def _module_name(file: Path, root: Path) -> str:
    parts = list(file.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """{module: modules of the same tree it imports}; ``from package import name`` points at the submodule
    ``package.name`` when there is one, else at the package's ``__init__``."""
    files = {_module_name(f, root): f for f in root.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for module, file in files.items():
        deps = graph.setdefault(module, set())
        package = module.split(".") if file.name == "__init__.py" else module.split(".")[:-1]
        for node in ast.walk(ast.parse(file.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            deps.update(n for n in names if n in files and n != module)
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


def test_module_graph_sees_a_constructed_circle(tmp_path):
    pkg = tmp_path / "tta"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "a.py").write_text("def f():\n    from tta.sub.b import g\n")
    (pkg / "sub" / "b.py").write_text("from . import a\n")
    (pkg / "c.py").write_text("from tta.sub import a\n")
    graph = module_graph(pkg)
    assert graph["tta.c"] == {"tta.sub.a"}
    assert cycles(graph) == [["tta.sub.a", "tta.sub.b"]]


def test_modules_import_each_other_in_one_direction_only():
    graph = module_graph()
    assert {"tta.shifts.registry", "tta.data.gallery", "tta.data.module"} <= set(graph)
    assert cycles(graph) == [], "import circle between modules of tta"


def test_shift_registry_imports_no_shift():
    assert not {m for m in module_graph()["tta.shifts.registry"] if m.startswith("tta.shifts")}
