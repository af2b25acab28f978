"""The first-use set-up display: one overall bar over the embedded build's stages, with their names and an ETA."""

from __future__ import annotations

import logging

import pytest

from tests.conftest import tiny_overrides
from tta.scenario import Scenario
from tta.synth.shipped import TRAIN_ENV
from tta.synth.zoo import setup_stages
from tta.utils.config import compose
from tta.utils.progress import SetupProgress, Stage, format_duration, progress_iter, report_progress, setup_progress

STAGES = [Stage("rendering", 10.0, "rendering"), Stage("training", 30.0, "training"), Stage("decoding", 60.0, "dec")]


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_fraction_follows_the_stage_costs_and_only_moves_forward():
    clock = Clock()
    p = SetupProgress(STAGES, clock)
    assert p.fraction() == 0.0 and p.eta_s() is None
    assert p.report("rendering synth", 5, 10)  # half of a 10 s stage out of 100 s
    assert p.fraction() == pytest.approx(0.05)
    assert not p.report("unrelated bar", 3, 4) and p.fraction() == pytest.approx(0.05)
    assert p.report("training finetune", 15, 30)  # stage 2 half done: 10 + 15
    assert p.fraction() == pytest.approx(0.25)
    p.report("rendering synth", 10, 10)  # a later report of an earlier stage does not move the bar back
    assert p.fraction() == pytest.approx(0.25)
    p.report("decoding", 60, 60)
    assert p.fraction() == 1.0


def test_eta_rescales_the_expected_costs_by_the_measured_speed():
    clock = Clock()
    p = SetupProgress(STAGES, clock)
    p.report("training", 30, 30)  # 40 % of the expected cost done ...
    clock.t = 80.0  # ... in 80 s: this machine is 2x slower than the reference, so 60 expected s take 120
    assert p.eta_s() == pytest.approx(120.0)
    assert p.line() == "set-up 40 % · stage 2/3: training · about 2 min left"


@pytest.mark.parametrize("seconds,text", [(0.4, "0 s"), (45, "45 s"), (89, "89 s"), (150, "2 min"),
                                          (3599, "1 h"), (3900, "1 h 5 min")])
def test_format_duration(seconds, text):
    assert format_duration(seconds) == text


def test_progress_iter_and_steps_advance_the_overall_bar(caplog):
    caplog.set_level(logging.INFO, logger="tta.progress")
    with setup_progress(STAGES, log_every_s=0.0) as setup:
        assert list(progress_iter(range(4), 4, "rendering synth")) == [0, 1, 2, 3]
        assert setup.fraction() == pytest.approx(0.10)
        for step in range(1, 4):
            report_progress("training finetune", step, 3)
        assert setup.fraction() == pytest.approx(0.40)
        with setup_progress([Stage("other", 1.0, "other")]) as inner:  # one display at a time
            assert inner is None
    text = caplog.text
    assert "first use: 3 set-up stages (rendering, training, decoding)" in text
    assert "stage 1/3: rendering" in text and "stage 2/3: training" in text
    assert "set-up done in" in text
    report_progress("training finetune", 1, 3)  # outside a display: nothing happens, nothing fails
    with setup_progress([]) as none:
        assert none is None


def _stages(cache, *overrides: str):
    cfg = compose("run", ["paths.cache_dir=" + str(cache), *overrides])
    scenario = Scenario.from_config(cfg)
    return setup_stages(cfg.model, scenario.checkpoint, scenario.train_data, cfg.data, cache,
                        list(cfg.get("embedded_recipe") or []))


def test_a_fresh_cache_plans_every_stage_in_build_order(tmp_path, monkeypatch):
    monkeypatch.setenv(TRAIN_ENV, "1")  # the weights that ship with the repository are ignored
    stages = _stages(tmp_path)
    assert [s.name for s in stages] == [
        "rendering the pretraining corpus", "encoding the pretraining captions", "pretraining the embedded CLIP",
        "rendering synth", "decoding the synth train videos", "encoding the fine-tuning captions",
        "fine-tuning clip4clip on synth"]
    costs = {s.name: s.cost_s for s in stages}
    # the reference machine's measured stages (docs/results/first-run-time.md): pretraining 65 s, rendering 25 s,
    # fine-tuning 124 s
    assert costs["pretraining the embedded CLIP"] == pytest.approx(65)
    assert costs["rendering synth"] == pytest.approx(25)
    assert costs["fine-tuning clip4clip on synth"] == pytest.approx(124)


@pytest.mark.parametrize("checkpoint,names", [
    ("pretrained", ["rendering the pretraining corpus", "encoding the pretraining captions",
                    "pretraining the embedded CLIP", "rendering synth"]),  # zero-shot: no fine-tuning
    ("none", ["rendering synth"]),  # untrained towers: only the run's data is built
])
def test_other_checkpoints_plan_fewer_stages(tmp_path, monkeypatch, checkpoint, names):
    monkeypatch.setenv(TRAIN_ENV, "1")
    assert [s.name for s in _stages(tmp_path, f"model.checkpoint={checkpoint}")] == names


@pytest.mark.parametrize("overrides", [[], ["model=xpool"], ["model.checkpoint=pretrained"]])
def test_shipped_weights_leave_only_the_run_data_to_render(tmp_path, overrides):
    assert [s.name for s in _stages(tmp_path, *overrides)] == ["rendering synth"]


def test_a_recipe_of_its_own_trains_from_the_shipped_pretrained_model(tmp_path):
    names = [s.name for s in _stages(tmp_path, "embedded_recipe=['steps=7']")]  # fine-tuning steps only
    assert "fine-tuning clip4clip on synth" in names and "pretraining the embedded CLIP" not in names
    names = [s.name for s in _stages(tmp_path, "embedded_recipe=['pretrain_overrides.steps=7']")]
    assert "pretraining the embedded CLIP" in names and "fine-tuning clip4clip on synth" in names


@pytest.mark.slow
def test_the_tiny_run_builds_exactly_the_planned_stages(tmp_path, caplog):
    """A tiny run in an empty cache: the plan names the files the build writes (after it, nothing is left to do),
    and the log shows every planned stage on the overall line."""
    from tta.run import run

    caplog.set_level(logging.INFO, logger="tta.progress")
    overrides = tiny_overrides(tmp_path / "cache")
    planned = _stages(tmp_path / "cache", *overrides[:1])
    assert len(planned) == 7
    run(compose("run", overrides), tmp_path / "run")
    for i, stage in enumerate(planned, 1):
        assert f"stage {i}/7: {stage.name}" in caplog.text
    assert _stages(tmp_path / "cache", *overrides[:1]) == []
