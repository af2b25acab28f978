"""Fine-tuning that stops at a plateau of the clean validation R@1 (train.yaml ``plateau``), on the tiny benchmark."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.conftest import tiny_overrides
from tta.scenario import Scenario
from tta.synth.zoo import _recipe_key, _train_cfg, ensure_embedded_checkpoint
from tta.utils.config import compose


def _build(cache: Path, *recipe: str) -> dict:
    cfg = compose("run", tiny_overrides(cache))
    scenario = Scenario.from_config(cfg)
    path = ensure_embedded_checkpoint(cfg.model, scenario.train_data, cache,
                                      recipe=[*cfg.embedded_recipe, *recipe])
    return torch.load(path, map_location="cpu", weights_only=False)["metrics"]


@pytest.mark.parametrize("patience,min_gain,bar,steps,stopped_at", [
    (1, 1000.0, True, 4, 4),  # no score beats the first by 1000 points: stop at the second score
    (1000, 0.5, False, 6, None),  # never patient enough to stop: all 6 steps (no score at the last step)
])
def test_plateau_stops_after_patience_scores_without_a_gain(tiny_cache, patience, min_gain, bar, steps, stopped_at):
    # Lightning adds its progress bar to the callbacks: the stop must be found with the bar on too
    metrics = _build(tiny_cache, f"plateau={{every:2,patience:{patience},min_gain:{min_gain}}}",
                     f"progress_bar={str(bar).lower()}")
    assert metrics["steps"] == steps
    assert metrics["plateau"]["stopped_at"] == stopped_at
    assert [s for s, _ in metrics["plateau"]["curve"]] == [2, 4]
    assert all(0 <= r <= 100 for _, r in metrics["plateau"]["curve"])


def test_no_plateau_keeps_the_fixed_budget_key():
    run = compose("run", [])
    cfg = _train_cfg("finetune", run.model, run.data, Path("/cache"), [])
    on = _train_cfg("finetune", run.model, run.data, Path("/cache"), ["plateau={every:50,patience:2,min_gain:0.5}"])
    without = cfg.copy()
    del without["plateau"]
    assert cfg.plateau is None and _recipe_key(cfg) == _recipe_key(without)
    assert _recipe_key(on) != _recipe_key(cfg)
