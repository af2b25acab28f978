"""The test tiers are checked, not assumed (docs/testing.md): every collected test is in exactly one of ``fast`` and
``full``; no fast test reaches the rendered tiny benchmark, a subprocess or a slow/heavy marker; HEAVY_TESTS names
only tests that exist. Runs in both tiers, on whatever the session collected."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from tests import conftest

ROOT = Path(__file__).resolve().parents[1]
# what builds or reads the rendered benchmark besides the tiny_cache fixture itself
BENCHMARK_CODE = re.compile(r"\btiny_cache\b|\btiny_overrides\(|\bbuild_env\(|\bensure_embedded_checkpoint\(")


def _sources(item) -> list[str]:
    funcs = [getattr(item, "function", None)]
    info = getattr(item, "_fixtureinfo", None)
    if info is not None:
        funcs += [d.func for defs in info.name2fixturedefs.values() for d in defs]
    out = []
    for f in funcs:
        try:
            out.append(inspect.getsource(f))
        except (OSError, TypeError):
            pass
    return out


def test_every_test_is_in_exactly_one_tier(request):
    items = request.session.items
    assert items
    for item in items:
        tiers = {m for m in ("fast", "full") if item.get_closest_marker(m) is not None}
        assert len(tiers) == 1, f"{item.nodeid} is in tiers {tiers or 'none'}"


def test_no_fast_test_uses_the_rendered_benchmark(request):
    bad = []
    for item in request.session.items:
        if item.get_closest_marker("fast") is None:
            continue
        if "tiny_cache" in item.fixturenames:
            bad.append(f"{item.nodeid}: uses tiny_cache")
        for m in ("slow", "subprocess", "heavy", "benchmark"):
            if item.get_closest_marker(m) is not None:
                bad.append(f"{item.nodeid}: marked {m}")
        if Path(item.path) != Path(__file__) and any(BENCHMARK_CODE.search(s) for s in _sources(item)):
            bad.append(f"{item.nodeid}: its code builds the rendered benchmark")
    assert not bad, "fast tests that belong to the full tier:\n" + "\n".join(bad)


def test_the_classification_rules_on_known_tests(request):
    """The rules themselves: a tiny_cache user, a subprocess spawner and a slow test are full; pure ones are fast."""
    by_id = {it.nodeid: it for it in request.session.items}
    assert conftest.tier_reasons(request.node) == []
    known = {
        "tests/adapters/test_adapter_contract.py::test_adapters_are_discovered": [],
        "tests/test_lint.py::test_ruff_check_is_clean": ["subprocess"],
        "tests/utils/test_io.py::test_file_lock_serialises_processes": ["subprocess"],
    }
    for nodeid, expected in known.items():
        if nodeid in by_id:
            assert conftest.tier_reasons(by_id[nodeid]) == expected, nodeid
    for item in request.session.items:
        if "tiny_cache" in item.fixturenames:
            assert "fixture tiny_cache" in conftest.tier_reasons(item)


def test_heavy_tests_exist():
    for key in conftest.HEAVY_TESTS:
        file, name = key.split("::")
        path = ROOT / file
        assert path.is_file(), f"HEAVY_TESTS names a missing file: {key}"
        assert re.search(rf"^def {re.escape(name)}\(", path.read_text(), re.M), f"HEAVY_TESTS is stale: {key}"
