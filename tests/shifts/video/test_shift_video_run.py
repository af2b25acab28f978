"""MLVP shifts through ``tta.run`` on the tiny embedded benchmark: metadata, donor pool, mixed streams."""

from __future__ import annotations

import pytest

from tests.conftest import tiny_overrides
from tta.run import run
from tta.utils.config import compose


@pytest.mark.parametrize("shift", ["main_object_occlusion", "event_insertion", "h264_compression"])
def test_run_shift(tiny_cache, tmp_path, single_thread_torch, shift):
    res = run(compose("run", tiny_overrides(tiny_cache, f"shift={shift}", "shift.severity=5")), tmp_path)
    assert res["shift"] == shift and res["shifted_side"] == "query" and res["num_queries"] == 40
    if shift == "event_insertion":
        pool = res["donor_pool"]
        assert pool["size"] == 24 and len(pool["donors"]) == 40  # the tiny train split is the pool
        test_ids = {f"video{i}" for i in range(32, 72)}
        assert not set(pool["donors"].values()) & test_ids


def test_mixed_types_records_the_plan(tiny_cache, tmp_path, single_thread_torch):
    res = run(compose("run", tiny_overrides(tiny_cache, "shift=mixed_types", "shift.options.ratio=0.5",
                                            "shift.options.types=[gaussian,fog,temporal_scrambling,event_insertion]")),
              tmp_path)
    plan = res["shift_plan"]
    assert plan["summary"]["num_items"] == 40 and len(plan["items"]) == 40
    assert set(plan["summary"]["by_shift"]) <= {"clean", "gaussian", "fog", "temporal_scrambling", "event_insertion"}
    assert 0.2 < plan["summary"]["corrupted_fraction"] < 0.8
    assert res["shift_options"]["ratio"] == 0.5


def test_mixed_severity_t2v_shifts_the_gallery(tiny_cache, tmp_path, single_thread_torch):
    res = run(compose("run", tiny_overrides(tiny_cache, "shift=mixed_severity", "shift.options.base=fog",
                                            "task=t2v")), tmp_path)
    assert res["shifted_side"] == "gallery"
    assert set(res["shift_plan"]["summary"]["by_severity"]) == {"1", "2", "3", "4", "5"}
