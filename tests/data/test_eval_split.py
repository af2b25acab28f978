"""``data.split``: which split a run streams (tta/data/module.py); test runs keep their identity and checkpoints."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from tta.data.module import eval_split
from tta.data.screen import BadInputError
from tta.results import same_identity


def test_split_defaults_to_test_and_accepts_val():
    assert eval_split(OmegaConf.create({"name": "synth"})) == "test"
    assert eval_split(OmegaConf.create({"name": "synth", "split": "val"})) == "val"


def test_an_unknown_split_is_one_clear_line():
    with pytest.raises(BadInputError, match="data.split=train .*data.split=test or data.split=val"):
        eval_split(OmegaConf.create({"name": "synth", "split": "train"}))


def test_a_stored_test_run_without_the_key_is_the_same_run():
    stored = {"seed": 0, "data": {"name": "synth", "subset": None}}
    assert same_identity(stored, OmegaConf.create({"seed": 0, "data": {"name": "synth", "subset": None,
                                                                        "split": "test"}}))
    assert not same_identity(stored, OmegaConf.create({"seed": 0, "data": {"name": "synth", "subset": None,
                                                                            "split": "val"}}))


def test_a_val_run_streams_the_validation_pairs(tiny_cache, tmp_path):
    """The tiny benchmark's 8 validation pairs, not its 40 test pairs; the same source checkpoint as a test run."""
    from tests.conftest import tiny_overrides
    from tta.run import run
    from tta.utils.config import compose

    test = run(compose("run", tiny_overrides(tiny_cache, "hubness.k=5", "adapter=hsm")), tmp_path / "test")
    checkpoints = sorted((tiny_cache / "checkpoints").glob("*.pt"))
    val = run(compose("run", tiny_overrides(tiny_cache, "data.split=val", "hubness.k=5", "adapter=hsm")),
              tmp_path / "val")
    assert val["num_queries"] == 8 and test["num_queries"] == 40
    assert val["config"]["data"]["split"] == "val"
    assert sorted((tiny_cache / "checkpoints").glob("*.pt")) == checkpoints  # no checkpoint trained for the split
