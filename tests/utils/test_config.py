"""Composing configs from Python: the kept composition a warm run reads is the one Hydra composes."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from tta.utils import config


def test_a_kept_composition_is_what_composing_gives_and_is_read_back(tmp_path, monkeypatch):
    monkeypatch.setenv("TTA_CACHE", str(tmp_path))
    overrides = ["stage=finetune", "steps=7"]
    composed = config.compose("train", overrides)
    first = config.compose_kept("train", overrides)
    kept = list((tmp_path / "configs").glob("train-*.yaml"))
    assert len(kept) == 1
    monkeypatch.setattr(config, "compose", lambda *a, **k: pytest.fail("composed again instead of read"))
    read = config.compose_kept("train", overrides)
    for cfg in (first, read):
        assert OmegaConf.to_container(cfg) == OmegaConf.to_container(composed)  # interpolations unresolved alike
        assert OmegaConf.is_struct(cfg) and cfg.steps == 7
    assert OmegaConf.to_container(read, resolve=True) == OmegaConf.to_container(composed, resolve=True)


def test_other_overrides_a_changed_config_file_or_a_damaged_entry_compose_again(tmp_path, monkeypatch):
    monkeypatch.setenv("TTA_CACHE", str(tmp_path))
    config.compose_kept("train", ["steps=7"])
    assert config.compose_kept("train", ["steps=8"]).steps == 8
    assert len(list((tmp_path / "configs").glob("train-*.yaml"))) == 2
    for entry in (tmp_path / "configs").glob("train-*.yaml"):
        entry.write_text("steps: [unclosed")
    assert config.compose_kept("train", ["steps=8"]).steps == 8  # rewritten from a fresh composition
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "small.yaml").write_text("a: 1\n")
    monkeypatch.setattr(config, "CONF_DIR", conf)
    assert config.compose_kept("small").a == 1
    (conf / "small.yaml").write_text("a: 2\n")
    assert config.compose_kept("small").a == 2
