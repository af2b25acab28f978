"""The VideoComp probe end to end on the tiny benchmark: task=comp, the probe after a stream, CompLoss training."""

from __future__ import annotations

import json

import pytest
import torch

from tests.conftest import tiny_overrides
from tta.comp.disrupt import DISRUPTIONS
from tta.run import run
from tta.utils.config import compose

TINY_RECIPE = ("steps=6", "batch_size=8", "warmup=2", "pretrain_overrides.steps=6", "pretrain_overrides.batch_size=16",
               "pretrain_corpus.n_images=48", "workers=1", "progress_bar=false", "eval_subset=8")


def check_probe(scores: dict) -> None:
    assert set(scores["accuracy"]) == set(DISRUPTIONS)
    assert scores["triplets"]["seg_mismatch"] == 2 * scores["triplets"]["temp_reorder"] == 2 * scores["n_videos"]
    product = 1.0
    for value in scores["accuracy"].values():
        assert 0 <= value <= 100
        product *= value / 100
    assert scores["comprehensive"] == pytest.approx(100 * product)
    assert scores["chance_comprehensive"] == 12.5


def test_probe_after_a_stream_scores_adapted_and_source(tiny_cache, tmp_path):
    record = run(compose("run", tiny_overrides(tiny_cache, "adapter=tcr", "comp_probe.enabled=true")), tmp_path)
    comp = json.loads((tmp_path / "results.json").read_text())["comp"]
    assert comp == json.loads(json.dumps(record["comp"]))
    assert comp["data"] == "synth_comp" and comp["adapted"]["n_videos"] == 12
    for role in ("adapted", "source"):
        check_probe(comp[role])
    # TCR updated the video tower's LayerNorms, so the adapted model's scores moved
    assert comp["adapted"]["margin"] != comp["source"]["margin"]


def test_comp_task_with_a_comploss_source(tiny_cache, tmp_path):
    recipe = "embedded_recipe=[" + ",".join(f"'{r}'" for r in (*TINY_RECIPE, "comp_loss.weight=1")) + "]"
    record = run(compose("run", tiny_overrides(tiny_cache, "task=comp", "data=synth_comp", recipe)), tmp_path)
    check_probe(record["comp"]["source"])
    # the report pairs the task=comp probe with the streams' source block by these
    assert record["model"] == "clip4clip" and record["data"] == "synth_comp" and len(record["source_weights"]) == 16
    ckpt = sorted(tiny_cache.glob("checkpoints/clip4clip-synth_comp-*.pt"))
    trained = [torch.load(p, weights_only=False)["train_config"]["comp_loss"]["weight"] for p in ckpt]
    assert 1 in trained


def test_comp_task_refuses_an_adapter(tiny_cache, tmp_path):
    with pytest.raises(ValueError, match="task=comp scores the source model alone"):
        run(compose("run", tiny_overrides(tiny_cache, "task=comp", "adapter=tcr")), tmp_path)
