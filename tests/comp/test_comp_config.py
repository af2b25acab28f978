"""The VideoComp options: rules of the new numbers, and CompLoss off keeps the checkpoint keys."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from tta.synth.zoo import _recipe_key, _train_cfg
from tta.utils.config import compose
from tta.utils.config_rules import ConfigValueError, validate_config


def test_comploss_off_keeps_the_infonce_key_and_on_changes_it():
    run = compose("run", [])

    def train_cfg(*recipe: str, stage: str = "finetune"):
        return _train_cfg(stage, run.model, run.data, Path("/cache"), list(recipe))

    base = _recipe_key(train_cfg())
    without = OmegaConf.to_container(train_cfg())
    without.pop("comp_loss")
    assert _recipe_key(OmegaConf.create(without)) == base  # the node at weight 0 is not part of the key
    assert _recipe_key(train_cfg("comp_loss.weight=0", "comp_loss.tau=0.2")) == base
    assert _recipe_key(train_cfg("comp_loss.weight=1")) != base
    # pretraining has no CompLoss term: a CompLoss recipe starts from the same pretrained model
    assert _recipe_key(train_cfg("comp_loss.weight=1", stage="pretrain")) == _recipe_key(train_cfg(stage="pretrain"))


@pytest.mark.parametrize("override,message", [
    ("data.synth.max_events=2", "data.synth.max_events=2"),
    ("comp_probe.subset=1", "comp_probe.subset=1"),
])
def test_bad_probe_numbers_are_one_line(override, message):
    with pytest.raises(ConfigValueError, match=message):
        validate_config(compose("run", ["data=synth_comp", override]))


def test_events_range_relation():
    with pytest.raises(ConfigValueError, match="below data.synth.min_events"):
        validate_config(compose("run", ["data=synth_comp", "data.synth.min_events=4", "data.synth.max_events=3"]))


def test_comploss_rules():
    with pytest.raises(ConfigValueError, match="comp_loss.tau"):
        validate_config(compose("train", ["comp_loss.tau=0"]))
    with pytest.raises(ConfigValueError, match="comp_loss.weight"):
        validate_config(compose("train", ["comp_loss.weight=-1"]))


def test_the_probe_of_the_runs_own_dataset_keeps_its_options_and_applies_its_own_overrides():
    from tta.comp.probe import probe_data_config

    cfg = compose("run", ["data=synth_comp", "data.synth.recolour_events=true", "data.synth.n_test=50",
                          "comp_probe.data_overrides=['data.split=val','data.synth.n_val=20']"])
    probe = probe_data_config(cfg)
    assert probe.synth.recolour_events is True and probe.synth.n_test == 50  # the run's options
    assert probe.split == "val" and probe.synth.n_val == 20  # the probe's own
    assert cfg.data.split == "test" and cfg.data.synth.n_val == 100  # the run's config is left alone
    other = probe_data_config(compose("run", ["data=synth", "comp_probe.data=synth_comp"]))
    assert other.name == "synth_comp" and other.synth.recolour_events is False and other.split == "test"
