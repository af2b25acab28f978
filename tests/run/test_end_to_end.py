"""End to end on a tiny embedded benchmark: build, pretrain, fine-tune, stream, score, write results."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
import torch

from tests.conftest import tiny_overrides
from tta.run import run
from tta.utils.config import compose

RESULT_KEYS = {"task", "model", "adapter", "shift", "severity", "data", "seed", "num_queries", "num_gallery",
               "retrieval", "hubness", "time_s"}


@pytest.mark.parametrize("model", ["clip4clip", "xpool"])
@pytest.mark.parametrize("task,shift", [("v2t", "clean"), ("v2t", "gaussian"), ("t2v", "clean"), ("t2v", "gaussian")])
def test_run_every_combination(tiny_cache, tmp_path, model, task, shift):
    cfg = compose("run", tiny_overrides(tiny_cache, f"model={model}", f"task={task}", f"shift={shift}"))
    res = run(cfg, tmp_path)
    on_disk = json.loads((tmp_path / "results.json").read_text())
    assert RESULT_KEYS <= set(on_disk)
    assert on_disk["retrieval"] == res["retrieval"]
    assert (res["num_queries"], res["num_gallery"]) == (40, 40)
    assert set(res["retrieval"]) == {"R@1", "R@5", "R@10", "R@50", "MdR", "MnR"}
    assert {"skewness", "trunc_skewness", "atkinson", "robin_hood", "antihub", "hub_occurrence", "k"} <= set(res["hubness"])
    assert res["hubness"]["k"] == 10
    assert 0 <= res["retrieval"]["R@1"] <= res["retrieval"]["R@5"] <= res["retrieval"]["R@10"] <= 100
    assert res["retrieval"]["R@50"] == 100.0  # gallery of 40
    assert all(math.isfinite(v) for v in res["retrieval"].values())
    expected_side = {"clean": "none", "gaussian": "query" if task == "v2t" else "gallery"}[shift]
    assert res["shifted_side"] == expected_side
    impl = res["shift_implementation"]  # the implementation that ran, under its own name
    assert (impl["name"], impl["faithful"]) == (shift, True)
    history = json.loads((tmp_path / "history.json").read_text())
    assert [h["size"] for h in history] == [16, 16, 8]  # batches of 16, last partial batch kept
    t = res["time_s"]  # where the stream's time went: source adapts nothing, its items cost their own decoding
    assert t["adapt"] == 0.0 and t["split"]["forward"] > 0 and t["split"]["decode_perturb"] > 0
    assert sum(v for k, v in t["split"].items() if k != "decode_perturb") <= t["stream"] * 1.01 + 0.01


def test_source_is_deterministic_and_noise_changes_scores(tiny_cache, tmp_path):
    noisy = tiny_overrides(tiny_cache, "shift=gaussian", "shift.severity=5", "save.sims=true")
    a = run(compose("run", noisy), tmp_path / "a")
    b = run(compose("run", noisy), tmp_path / "b")
    assert a["retrieval"] == b["retrieval"] and a["hubness"] == b["hubness"]
    sims_a, sims_b = torch.load(tmp_path / "a" / "sims.pt"), torch.load(tmp_path / "b" / "sims.pt")
    assert torch.equal(sims_a, sims_b)
    run(compose("run", tiny_overrides(tiny_cache, "save.sims=true")), tmp_path / "c")
    clean = torch.load(tmp_path / "c" / "sims.pt")
    assert (clean.float() - sims_a.float()).abs().max() > 1e-3  # the noise reaches the scores


def test_bad_choices_are_clear_errors(tiny_cache, tmp_path):
    with pytest.raises(ValueError, match="severity 9 is out of range"):
        run(compose("run", tiny_overrides(tiny_cache, "shift=gaussian", "shift.severity=9")), tmp_path)


def test_cli(tiny_cache, tmp_path):
    """The README grammar: python -m tta.run group=choice key=value (typos: test_reliability's CLI error test)."""
    args = [sys.executable, "-m", "tta.run", *tiny_overrides(tiny_cache, "model=xpool", "task=t2v", "shift=gaussian",
                                                              "shift.severity=5", f"hydra.run.dir={tmp_path}/run")]
    out = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "R@1" in out.stdout and "skewness" in out.stdout
    assert json.loads((tmp_path / "run" / "results.json").read_text())["model"] == "xpool"
