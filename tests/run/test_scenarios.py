"""Scenarios (HAT-VTR Sec. 4.1, spec/hatvtr.md §9): query shift, cross-dataset, zero-shot, and shift streams."""

from __future__ import annotations

import json

import pytest
import torch

from tests.conftest import TINY_DATA, tiny_overrides
from tta.data.segments import SegmentBatchSampler, SegmentCollate, SegmentedStream
from tta.run import run
from tta.utils.config import compose


def test_segment_batches_never_straddle_and_keep_partial_batches():
    sampler = SegmentBatchSampler([40, 8, 17], 16)
    batches = list(sampler)
    assert [len(b) for b in batches] == [16, 16, 8, 8, 16, 1]
    assert len(sampler) == 6
    assert batches[2] == list(range(32, 40)) and batches[3] == list(range(40, 48))
    stream = SegmentedStream([[{"index": i} for i in range(n)] for n in (40, 8, 17)])
    assert [stream[i]["segment"] for i in (0, 39, 40, 47, 48, 64)] == [0, 0, 1, 1, 2, 2]
    assert stream[41]["index"] == 1
    collate = SegmentCollate(lambda items: {"index": torch.tensor([it["index"] for it in items])})
    assert collate([stream[40], stream[41]])["segment"] == 1
    with pytest.raises(ValueError, match="straddles"):
        collate([stream[39], stream[40]])


def _run(cache, tmp_path, name, *extra):
    return run(compose("run", tiny_overrides(cache, "save.sims=true", *extra)), tmp_path / name)


@pytest.mark.parametrize("model", ["clip4clip", "xpool"])
@pytest.mark.parametrize("task", ["v2t", "t2v"])
def test_cross_dataset_uses_a_model_fine_tuned_on_the_other_domain(tiny_cache, tmp_path, model, task):
    train_over = "scenario.train_data_overrides=[" + ",".join(f"'{o}'" for o in TINY_DATA) + "]"
    res = _run(tiny_cache, tmp_path, "cross", "scenario=cross", "data=synth", f"model={model}", f"task={task}",
               train_over)
    assert (res["scenario"], res["data"], res["train_data"]) == ("cross", "synth", "synth_b")
    ckpt = res["config"]["model"]["checkpoint"]
    assert ckpt == "auto"
    qs = _run(tiny_cache, tmp_path, "qs", "data=synth", f"model={model}", f"task={task}")
    assert qs["train_data"] == "synth"
    cross_sims = torch.load(tmp_path / "cross" / "sims.pt")
    qs_sims = torch.load(tmp_path / "qs" / "sims.pt")
    assert cross_sims.shape == qs_sims.shape
    assert (cross_sims.float() - qs_sims.float()).abs().max() > 1e-3  # another source model scored the stream


@pytest.mark.parametrize("model", ["clip4clip", "xpool"])
def test_zeroshot_uses_the_pretrained_towers(tiny_cache, tmp_path, model):
    res = _run(tiny_cache, tmp_path, "zs", "scenario=zeroshot", f"model={model}")
    assert res["scenario"] == "zeroshot" and res["checkpoint"] == "pretrained"
    clip = _run(tiny_cache, tmp_path, "clip", "model=clip")  # model=clip is the zero-shot meanP model
    tuned = _run(tiny_cache, tmp_path, "tuned", f"model={model}")  # the fine-tuned source model (qs)
    zs_sims, clip_sims = (torch.load(tmp_path / d / "sims.pt").float() for d in ("zs", "clip"))
    tuned_sims = torch.load(tmp_path / "tuned" / "sims.pt").float()
    assert (zs_sims - tuned_sims).abs().max() > 2e-2  # not the fine-tuned weights
    if model == "clip4clip":  # the same towers and head as model=clip (float reductions may differ in the last bits)
        assert (zs_sims - clip_sims).abs().max() < 2e-3
    assert res["num_queries"] == clip["num_queries"] == tuned["num_queries"] == 40


def test_stream_per_shift_reset_equals_independent_runs_and_never_carries_over(tiny_cache, tmp_path):
    stream = ["scenario=continual", "scenario.stream=[gaussian:1,gaussian:5]", "adapter=tent",
              "adapter.method.lr=0.01"]
    per_shift = _run(tiny_cache, tmp_path, "per_shift", *stream, "scenario.reset=per_shift")
    never = _run(tiny_cache, tmp_path, "never", *stream)  # continual default: reset never
    alone = _run(tiny_cache, tmp_path, "alone", "adapter=tent", "adapter.method.lr=0.01", "shift=gaussian",
                 "shift.severity=5")
    assert per_shift["shift"] == "stream" and [s["shift"] for s in per_shift["segments"]] == ["gaussian"] * 2
    assert [s["severity"] for s in per_shift["segments"]] == [1, 5]
    assert never["reset_policy"] == "never" and per_shift["reset_policy"] == "per_shift"
    s_per, s_never = torch.load(tmp_path / "per_shift" / "sims.pt"), torch.load(tmp_path / "never" / "sims.pt")
    s_alone = torch.load(tmp_path / "alone" / "sims.pt")
    assert s_per.shape == (80, 40) and s_alone.shape == (40, 40)
    assert torch.equal(s_per[40:], s_alone)  # a reset at the boundary = a fresh run of the second shift
    assert torch.equal(s_per[:40], s_never[:40])  # same first shift
    assert not torch.equal(s_never[40:], s_alone)  # no reset: the adapted LayerNorms carry into the next shift
    assert per_shift["segments"][1]["retrieval"] == alone["retrieval"]
    r1 = [s["retrieval"]["R@1"] for s in per_shift["segments"]]
    assert per_shift["retrieval"]["R@1"] == pytest.approx(sum(r1) / 2)
    history = json.loads((tmp_path / "never" / "history.json").read_text())
    assert [h["segment"] for h in history] == [0, 0, 0, 1, 1, 1]
    assert per_shift["counters"]["resets"] == 1 and never["counters"]["resets"] == 0
    occ = json.loads((tmp_path / "never" / "k_occurrence.json").read_text())
    assert len(occ["per_segment"]) == 2 and sum(occ["per_segment"][0]) == 40 * 15


def test_stream_errors_are_clear(tiny_cache, tmp_path):
    with pytest.raises(ValueError, match="is a video shift, but the queries of task=t2v are texts"):
        _run(tiny_cache, tmp_path, "bad", "scenario=continual", "task=t2v", "scenario.stream=[gaussian:1]")
    with pytest.raises(ValueError, match="unknown shift 'nosuch'"):
        _run(tiny_cache, tmp_path, "bad1", "scenario=continual", "scenario.stream=[gaussian:1,nosuch:2]")
    with pytest.raises(ValueError, match="severity 9 is out of range"):
        _run(tiny_cache, tmp_path, "bad2", "scenario=continual", "scenario.stream=[gaussian:9]")
    with pytest.raises(ValueError, match="must be an integer"):
        _run(tiny_cache, tmp_path, "bad3", "scenario=continual", "scenario.stream=[gaussian:high]")
    with pytest.raises(ValueError, match="scenario.reset must be one of"):
        _run(tiny_cache, tmp_path, "bad4", "scenario=continual", "scenario.reset=sometimes")
    with pytest.raises(ValueError, match="not a dataset of conf/data"):
        _run(tiny_cache, tmp_path, "bad5", "scenario=cross", "scenario.train_data=nosuchdata")
