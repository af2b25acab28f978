"""``adapter=noregret`` through the runner on the tiny embedded benchmark: every backbone, direction and scenario
gives finite scores over every query, and the guard's counters reach results.json."""

from __future__ import annotations

import math

import pytest

from tests.conftest import TINY_DATA, tiny_overrides
from tta.run import run
from tta.utils.config import compose

SCENARIOS = {
    "qs": ["shift=gaussian", "shift.severity=5"],
    "cross": ["scenario=cross", "scenario.train_data_overrides=[" + ",".join(f"'{o}'" for o in TINY_DATA) + "]"],
    "zeroshot": ["scenario=zeroshot"],
    "continual": ["scenario=continual", "scenario.streams.v2t=[gaussian:1,gaussian:5]",
                  "scenario.streams.t2v=[char_swap:7,synonym_replace:2]"],
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
@pytest.mark.parametrize("task", ["v2t", "t2v"])
@pytest.mark.parametrize("model", ["clip4clip", "xpool"])
def test_noregret_runs_everywhere(tiny_cache, tmp_path, model, task, scenario):
    res = run(compose("run", tiny_overrides(tiny_cache, "adapter=noregret", f"model={model}", f"task={task}",
                                            "adapter.method.guard.warmup=1", *SCENARIOS[scenario])), tmp_path)
    assert res["adapter"] == "noregret" and res["scenario"] == scenario
    assert res["num_queries"] == 40 and math.isfinite(res["retrieval"]["R@1"])
    counters = res["counters"]
    assert {"rollbacks", "adapted_batches", "frozen"} <= set(counters)
    assert counters["updates"] > 0 or counters["frozen"]
