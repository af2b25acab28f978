"""Shared fixtures: a tiny embedded benchmark and tiny source checkpoints, built once per test session."""

from __future__ import annotations

import functools
import inspect
import os
import re
from pathlib import Path

import pytest
import torch

# tiny sizes that go through every real code path (MP4 writing/decoding, pretraining, fine-tuning, online run)
TINY_DATA = ["data.synth.n_train=24", "data.synth.n_val=8", "data.synth.n_test=40", "data.workers=1"]
TINY_RECIPE = ["steps=6", "batch_size=8", "warmup=2", "pretrain_overrides.steps=6", "pretrain_overrides.batch_size=16",
               "pretrain_corpus.n_images=48", "workers=1", "progress_bar=false", "eval_subset=8"]


@pytest.fixture(scope="session")
def tiny_cache(tmp_path_factory) -> Path:
    path = Path(os.environ.get("TTA_TEST_CACHE") or tmp_path_factory.mktemp("tta-cache"))
    return path


def tiny_overrides(cache: Path, *extra: str) -> list[str]:
    recipe = "[" + ",".join(f"'{r}'" for r in TINY_RECIPE) + "]"
    return [f"paths.cache_dir={cache}", f"embedded_recipe={recipe}", "trainer.progress_bar=false",
            "trainer.accelerator=cpu", *TINY_DATA, *extra]


@pytest.fixture(scope="module")
def single_thread_torch():
    """The tiny embedded towers run fastest on one thread (thread barriers dominate, worse on a loaded machine)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# ------------------------------------------------------------------------------------------------- test tiers
# Two tiers (docs/testing.md): ``full`` = everything CI runs; ``fast`` = the developer loop (`make test-fast`).
# A test is ``full`` when it needs the rendered tiny benchmark (one of BENCHMARK_FIXTURES, directly or through
# another fixture), is marked ``slow``, or starts a subprocess (found in its source, its fixtures' sources and the
# module-level helpers they call; such tests also get the ``subprocess`` marker). Everything else is ``fast``.
# Nothing is listed by hand, so a new test lands in the right tier by itself; tests/test_tiers.py checks the result.
BENCHMARK_FIXTURES = frozenset({"tiny_cache"})
BENCHMARK_MARKERS = frozenset({"slow", "benchmark"})
_SUBPROCESS = re.compile(r"\bsubprocess\b|\bsys\.executable\b|\bPopen\b|\bos\.system\b")


def _source(obj) -> str:
    try:
        return inspect.getsource(obj)
    except (OSError, TypeError):
        return ""


@functools.lru_cache(maxsize=None)
def _spawning_helpers(module) -> frozenset[str]:
    """Names of the module-level functions of ``module`` that start a subprocess, directly or via each other."""
    funcs = {n: _source(f) for n, f in vars(module).items()
             if inspect.isfunction(f) and getattr(f, "__module__", None) == module.__name__}
    found = {n for n, src in funcs.items() if _SUBPROCESS.search(src)}
    grew = True
    while grew:
        grew = False
        for n, src in funcs.items():
            if n not in found and any(re.search(rf"\b{re.escape(h)}\b", src) for h in found):
                found.add(n)
                grew = True
    return frozenset(found)


def _starts_subprocess(item: pytest.Item) -> bool:
    funcs = [getattr(item, "function", None)]
    info = getattr(item, "_fixtureinfo", None)
    for defs in (info.name2fixturedefs.values() if info is not None else ()):
        funcs.extend(d.func for d in defs)
    for func in funcs:
        if func is None:
            continue
        src = _source(func)
        if _SUBPROCESS.search(src):
            return True
        module = inspect.getmodule(func)
        if module is not None and any(re.search(rf"\b{re.escape(h)}\b", src) for h in _spawning_helpers(module)):
            return True
    return False


def tier_reasons(item: pytest.Item) -> list[str]:
    """Why ``item`` belongs to the full tier (empty: it is fast)."""
    reasons = [f"fixture {f}" for f in sorted(BENCHMARK_FIXTURES & set(getattr(item, "fixturenames", ())))]
    reasons += [f"marker {m}" for m in sorted(BENCHMARK_MARKERS) if item.get_closest_marker(m) is not None]
    if item.get_closest_marker("subprocess") is not None or _starts_subprocess(item):
        reasons.append("subprocess")
    return reasons


def pytest_collection_modifyitems(config, items):
    for item in items:
        reasons = tier_reasons(item)
        if "subprocess" in reasons and item.get_closest_marker("subprocess") is None:
            item.add_marker(pytest.mark.subprocess)
        item.add_marker(pytest.mark.full if reasons else pytest.mark.fast)
